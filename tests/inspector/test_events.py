"""Each kind of stored event becomes a line of the timeline; sessions with nothing to show
still make a page. The steps are written straight to a store, as the kernel writes them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from journeyman.core import events as ev
from journeyman.core.events import event_to_dict
from journeyman.core.messages import Message, ToolCall, ToolResult, Usage
from journeyman.economics.usage_log import UsageRow
from journeyman.inspector import load_report, render_html
from journeyman.session.store import SessionStore, StepRecord
from tests.fakes.store import new_session


def tool_events(call_id: str, name: str, **result: Any) -> list[dict[str, Any]]:
    call = ToolCall(call_id, name, {"command": "rm -rf build"})
    return [
        event_to_dict(ev.ToolCallStarted(1, call)),
        event_to_dict(ev.ToolResultReceived(1, ToolResult(call_id, name, "no", **result), 0.0)),
    ]


EVENTS: list[dict[str, Any]] = [
    event_to_dict(e)
    for e in (
        ev.BudgetUpdated("none", "none", 0.1, None, 100, 100, 0.01),
        ev.BudgetUpdated("warning", "none", 0.8, "usd", 100, 200, 0.8),
        ev.NudgeInjected("hook", "Not done yet, says a Stop hook: run lint"),
        ev.NudgeInjected("budget_warning", "80% of the budget is spent"),
        ev.ExtensionRequested(5_000, 0.5, "tests still fail", 0, 2),
        ev.ExtensionDecided(False, 5_000, 0.5, "no more extensions"),
        ev.ErrorOccurred("provider", "429 from the server", retryable=True),
        ev.StateChanged("running", "paused"),
        ev.StateChanged("idle", "running"),
    )
] + [
    *tool_events("c1", "run_command", is_error=True, metadata={"error": "permission"}),
    *tool_events("c2", "run_command", is_error=True, metadata={"error": "hook"}),
]


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
        event_to_dict(
            ev.ApprovalDecided(
                1, "c1", "run_command", True, "user_always",
                "commands and other tools that change things need approval in default mode",
            )
        ),
        granted[1],
        refused[0],
        event_to_dict(
            ev.ApprovalDecided(
                1, "c2", "write_file", False, "plan_mode", "plan mode does not change files"
            )
        ),
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


OLD_SHAPE: list[dict[str, Any]] = [
    {"type": "run_started", "session_id": "s1", "task": "fix the bug", "provider": "scripted",
     "model": "m", "workspace": "/ws", "parent_session_id": None, "timestamp": 1_000.0},
    {"type": "model_request", "iteration": 1, "message_count": 2, "tool_count": 5,
     "timestamp": 1_000.5},
    {"type": "model_response", "iteration": 1, "text": "Reading it.",
     "tool_calls": [{"id": "c1", "name": "read_file", "arguments": {"path": "a.py"}}],
     "usage": {"input_tokens": 10, "output_tokens": 5}, "cost_usd": None,
     "stop_reason": "tool_use", "latency_s": 1, "timestamp": 1_001.0},
    {"type": "tool_call", "iteration": 1,
     "call": {"id": "c1", "name": "read_file", "arguments": {"path": "a.py"}}},
    {"type": "tool_result", "iteration": 1,
     "result": {"call_id": "c1", "name": "read_file", "content": "x = 1"}, "duration_s": 0.01},
    {"type": "run_finished", "timestamp": 1_002.0, "result": {
        "success": True, "final_text": "done", "finish_reason": "completed",
        "finish_category": "success", "iterations": 1, "tool_calls_made": 1,
        "usage": {"input_tokens": 10, "output_tokens": 5, "cache_read_tokens": 0,
                  "cache_write_tokens": 0},
        "cost_usd": None, "duration_s": 2.0, "session_id": "s1", "parent_session_id": None,
        "error": None, "no_progress_snapshot": None}},
    {"type": "follow_up", "text": "now add a test", "timestamp": 1_003.0},
]  # fmt: skip
"""Events as an early version stored them: fields added since (a run's tool mode, a reply's
model, the result's receipt and refused calls, an event's time) are absent."""


def test_a_session_stored_by_an_older_version_still_reads(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "sessions")
    sid = new_session(store)
    store.record_step(sid, StepRecord(1, [], OLD_SHAPE, {}, []))
    try:
        report = load_report(store, sid)
    finally:
        store.close()
    (step,) = report.steps
    assert [n.kind for n in step.notes] == ["run"]  # nothing skipped
    assert [t.text for t in step.turns] == ["Reading it."]
    (call,) = step.calls
    assert (call.name, call.result, call.is_error) == ("read_file", "x = 1", False)
    assert report.outcome is not None and report.outcome.verification is None
    assert report.totals.duration_s == 2.0 and report.totals.runs == 1
    page = render_html(report)
    assert "run finished: completed" in page and 'class="outcome' in page


HOSTILE_EVENTS: list[Any] = [
    {"type": "from_the_future", "what": "a newer version's event"},
    {"type": "budget", "level": "warning"},  # its other fields missing
    {"type": "tool_call", "iteration": 1, "call": {"id": ["c9"], "name": "x"}},
    {"type": "run_finished", "result": {"finish_reason": "completed"}},
    {"no": "type"},
    ["not", "an", "object"],
    "text",
    *tool_events("c1", "run_command"),
]


def test_unreadable_events_are_skipped_with_a_note(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "sessions")
    sid = new_session(store)
    store.record_step(sid, StepRecord(1, [], HOSTILE_EVENTS, {}, []))
    try:
        report = load_report(store, sid)
    finally:
        store.close()
    (step,) = report.steps
    skipped = [n for n in step.notes if n.kind == "skipped"]
    assert len(skipped) == 7
    assert "unknown type 'from_the_future'" in skipped[0].detail
    assert skipped[1].detail == "budget event: 'previous_level' is missing"
    assert "'call.id' is a list, not text" in skipped[2].detail
    assert [c.call_id for c in step.calls] == ["c1"]  # the readable ones still count
    assert report.outcome is None and report.totals.runs == 0
    page = render_html(report)
    assert "a stored event this version cannot read was skipped" in page


def test_a_model_call_named_like_the_check_is_not_labelled_as_the_check(tmp_path: Path) -> None:
    posing = ToolCall("verify-1", "run_command", {"command": "echo all tests passed"})
    events = [
        event_to_dict(ev.RunStarted("s", "t", "p", "m", "/ws")),
        event_to_dict(ev.ModelResponseReceived(1, "", (posing,), Usage(1, 1), None, None, 0.1)),
        event_to_dict(ev.ToolCallStarted(1, posing)),
        event_to_dict(ev.ToolResultReceived(1, ToolResult("verify-1", "run_command", "ok"), 0.0)),
        *tool_events("verify-2", "run_command", metadata={"exit_code": 0}),  # the harness's
        # a later run: the harness may reuse an id the model gave in the run before
        event_to_dict(ev.RunStarted("s", "t", "p", "m", "/ws", resumed_at_step=1)),
        *tool_events("verify-1", "run_command", metadata={"exit_code": 0}),
    ]
    store = SessionStore(tmp_path / "sessions")
    sid = new_session(store)
    store.record_step(sid, StepRecord(1, [], events, {}, []))
    try:
        report = load_report(store, sid)
    finally:
        store.close()
    calls = report.steps[0].calls
    assert [(c.call_id, c.by_harness) for c in calls] == [
        ("verify-1", False),
        ("verify-2", True),
        ("verify-1", True),
    ]
    page = render_html(report)
    assert page.count("check run by journeyman") == 2
