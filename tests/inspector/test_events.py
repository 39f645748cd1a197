"""Each kind of stored event becomes a line of the timeline; sessions with nothing to show
still make a page. The steps are written straight to a store, as the kernel writes them."""

from __future__ import annotations

from pathlib import Path

from journeyman.core.messages import Message, ToolCall, ToolResult, Usage
from journeyman.economics.usage_log import UsageRow
from journeyman.inspector import load_report, render_html
from journeyman.session.store import SessionStore, StepRecord
from tests.fakes.store import new_session


def tool_events(call_id: str, name: str, **result: object) -> list[dict[str, object]]:
    call = {"id": call_id, "name": name, "arguments": {"command": "rm -rf build"}}
    return [
        {"type": "tool_call", "iteration": 1, "call": call},
        {
            "type": "tool_result",
            "iteration": 1,
            "result": {"call_id": call_id, "name": name, "content": "no", **result},
            "duration_s": 0.0,
        },
    ]


EVENTS: list[dict[str, object]] = [
    {"type": "budget", "level": "none", "previous_level": "none", "fraction": 0.1},
    {"type": "budget", "level": "warning", "previous_level": "none", "fraction": 0.8,
     "driver": "usd"},
    {"type": "nudge", "kind": "hook", "message": "Not done yet, says a Stop hook: run lint"},
    {"type": "nudge", "kind": "budget_warning", "message": "80% of the budget is spent"},
    {"type": "extension_requested", "additional_tokens": 5_000, "additional_usd": 0.5,
     "reason": "tests still fail", "extensions_granted": 0, "max_extensions": 2},
    {"type": "extension_decided", "granted": False, "additional_tokens": 5_000,
     "additional_usd": 0.5, "reason": "no more extensions"},
    {"type": "error", "category": "provider", "message": "429 from the server",
     "retryable": True},
    {"type": "state_change", "from_state": "running", "to_state": "paused"},
    {"type": "state_change", "from_state": "idle", "to_state": "running"},
    *tool_events("c1", "run_command", is_error=True, metadata={"error": "permission"}),
    *tool_events("c2", "run_command", is_error=True, metadata={"error": "hook"}),
]  # fmt: skip


def test_every_kind_of_event_is_shown_in_its_step(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "sessions")
    sid = new_session(store)
    store.record_step(
        sid,
        StepRecord(
            1,
            [],
            EVENTS,
            {"budget_gate": {"last_level": "warning"}},
            [UsageRow(sid, 1, "p", "m", Usage(100, 10, 900, 0), 0.25, 0.1)],
        ),
    )
    try:
        report = load_report(store, sid)
    finally:
        store.close()
    (step,) = report.steps
    titles = [(n.kind, n.title) for n in step.notes]
    assert titles == [
        ("budget", "budget level none → warning"),
        ("hook", "hook says"),
        ("nudge", "nudge: budget warning"),
        ("extension", "budget extension asked for"),
        ("extension", "budget extension refused"),
        ("error", "error (provider)"),
        ("state", "agent running → paused"),
    ]
    assert [c.refused_by for c in step.calls] == ["permission", "hook"]
    assert step.usage == Usage(100, 10, 900, 0) and step.cost_usd == 0.25
    page = render_html(report)
    assert "refused (permission)" in page and "refused (hook)" in page
    assert "80% of the usd limit used" in page
    assert "Not done yet, says a Stop hook: run lint" in page
    assert 'class="outcome unfinished"' in page  # no run of it ended
    highlights = page[page.index('class="highlights"') :]
    assert highlights.index("budget level none → warning") < highlights.index("refused (hook)")


def test_a_session_without_steps_still_makes_a_page(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "sessions")
    sid = new_session(store)
    try:
        report = load_report(store, sid)
    finally:
        store.close()
    page = render_html(report)
    assert report.steps == [] and report.totals.cost_usd == 0
    assert "No model call of this session was recorded" in page
    assert "No step was stored for this session." in page
    assert "This session changed no file" in page


def test_a_session_without_events_shows_its_conversation(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "sessions")
    sid = new_session(store)
    call = ToolCall("c1", "run_command", {"command": "pytest -q"})
    messages = [
        Message.user("fix <b>the</b> bug"),
        Message.assistant("Running the tests first.", [call]),
        Message.tool(ToolResult("c1", "run_command", "1 failed", is_error=True)),
    ]
    store.record_step(sid, StepRecord(1, messages, [], {}))  # as an import stores a run
    try:
        report = load_report(store, sid)
    finally:
        store.close()
    assert [m.role.value for m in report.conversation] == ["user", "assistant", "tool"]
    page = render_html(report)
    assert "here is its conversation" in page
    assert "fix &lt;b&gt;the&lt;/b&gt; bug" in page
    assert "<code>pytest -q</code>" in page and "1 failed" in page
    assert 'class="res bad">error' in page


def test_approval_decisions_are_shown_granted_or_refused(tmp_path: Path) -> None:
    granted, refused = tool_events("c1", "run_command"), tool_events("c2", "write_file")
    events = [
        granted[0],
        {"type": "approval", "iteration": 1, "call_id": "c1", "tool_name": "run_command",
         "granted": True, "decided_by": "user_always",
         "reason": "commands and other tools that change things need approval in default mode"},
        granted[1],
        refused[0],
        {"type": "approval", "iteration": 1, "call_id": "c2", "tool_name": "write_file",
         "granted": False, "decided_by": "plan_mode", "reason": "plan mode does not change files"},
        refused[1],
    ]  # fmt: skip
    store = SessionStore(tmp_path / "sessions")
    sid = new_session(store)
    store.record_step(sid, StepRecord(1, [], events, {}, []))
    try:
        report = load_report(store, sid)
    finally:
        store.close()
    (step,) = report.steps
    assert [(n.kind, n.title) for n in step.notes] == [
        ("approval", "run_command approved by the user, always"),
        ("approval", "write_file refused: plan mode changes nothing"),
    ]
    assert [c.approval for c in step.calls] == [
        "approved by the user, always",
        "refused: plan mode changes nothing",
    ]
    page = render_html(report)
    assert "run_command approved by the user, always" in page
    assert "need approval in default mode" in page


def test_a_compaction_summary_call_shows_its_tokens(tmp_path: Path) -> None:
    summary = {
        "type": "summary_call", "iteration": 3, "latency_s": 0.5, "max_output_tokens": 2_048,
        "usage": {"input_tokens": 1_200, "output_tokens": 80, "cache_read_tokens": 300,
                  "cache_write_tokens": 0},
        "cost_usd": 0.0125, "model": "claude-test", "provider": "anthropic",
    }  # fmt: skip
    store = SessionStore(tmp_path / "sessions")
    sid = new_session(store)
    store.record_step(sid, StepRecord(1, [], [summary], {}, []))
    try:
        report = load_report(store, sid)
    finally:
        store.close()
    (step,) = report.steps
    assert [(n.kind, n.title, n.detail) for n in step.notes] == [
        (
            "summary",
            "compaction summary call",
            "1,500 tokens in, 80 out, $0.0125 (claude-test)",
        )
    ]
    assert report.totals.compactions == 0  # the compaction event counts, not its call
    assert "compaction summary call" in render_html(report)
