"""The phased mode's structured memory in real runs: the plan, notes, the debug-only record,
the model-written summary, and a pack that never asks for a plan already written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from journeyman import FinishReason
from journeyman.context.memory import MemorySettings, PhasedState
from journeyman.context.memory.compression import SUMMARY_REQUEST
from journeyman.core.messages import Role, ToolCall, Usage
from journeyman.loop.config import PhasedSettings
from journeyman.loop.modes.phased.knowledge import plan_from_reply
from journeyman.loop.modes.phased.mode import NOTE_HINT, PLAN_REQUEST
from journeyman.providers.base import ModelRequest, ModelResponse
from journeyman.session.store import SessionStore
from tests.fakes.agents import turn, user_texts
from tests.fakes.projects import calc_finish as finish
from tests.fakes.projects import fix_add as edit
from tests.fakes.projects import phased_calc_agent as make_agent

PLAN_REPLY = """\
The task: add() must return the sum of its arguments.

1. Read calc/__init__.py
2. Replace the subtraction with an addition
3. Run the tests
"""
UNWRITTEN_PLAN = "Write a short plan"


def memory_at(tmp_path: Path, session_id: str, step: int) -> PhasedState:
    store = SessionStore(tmp_path / "sessions")
    try:
        return PhasedState.from_dict(store.checkpoint(session_id, step)[1]["mode"]["agent_state"])
    finally:
        store.close()


def all_text(request: ModelRequest, *roles: Role) -> str:
    """Every text the provider was sent in messages of `roles` (all roles when none given)."""
    parts = [] if roles else [request.system or ""]
    for message in request.messages:
        if not roles or message.role in roles:
            parts.append(message.content or "")
            parts += [r.content for r in ([message.tool_result] if message.tool_result else [])]
    return "\n".join(parts)


def test_a_plan_reply_gives_the_steps_and_the_words_before_them() -> None:
    steps, summary = plan_from_reply(PLAN_REPLY)
    assert steps == [
        "Read calc/__init__.py",
        "Replace the subtraction with an addition",
        "Run the tests",
    ]
    assert summary == "The task: add() must return the sum of its arguments."
    assert plan_from_reply("I will look at calc first.\n- only one bullet") == ([], "")


async def test_the_plan_reply_is_recorded_and_never_asked_for_again(tmp_path: Path) -> None:
    read = ToolCall("r1", "read_file", {"path": "calc/__init__.py"})
    script = [
        turn(read, text=PLAN_REPLY),
        edit("a - b", "a + b", "e1"),
        turn(ToolCall("r2", "read_file", {"path": "calc/__init__.py"})),
        finish(),
    ]
    agent, provider = make_agent(tmp_path, script)
    result = await agent.run("make add() add its arguments")

    assert result.finish_reason is FinishReason.COMPLETED, result.error
    memory = memory_at(tmp_path, result.session_id, 1).memory.long_term
    assert memory.plan == (
        "Read calc/__init__.py",
        "Replace the subtraction with an addition",
        "Run the tests",
    )
    assert memory.task_summary == "The task: add() must return the sum of its arguments."
    first, *later = provider.requests
    assert PLAN_REQUEST in user_texts(first)[-1]
    assert NOTE_HINT in user_texts(first)[-1]
    # the discovery after the passing check shows the plan and does not ask for one again
    rediscovery = user_texts(later[-1])[-1]
    assert "Replace the subtraction with an addition" in rediscovery
    assert PLAN_REQUEST not in rediscovery
    assert UNWRITTEN_PLAN not in rediscovery


async def test_notes_are_kept_in_the_long_term_memory_and_shown_again(tmp_path: Path) -> None:
    notes = [
        ToolCall("n1", "note", {"kind": "decision", "text": "keep the signature", "reason": "API"}),
        ToolCall("n2", "note", {"kind": "learning", "text": "tests use unittest"}),
        ToolCall("n3", "note", {"kind": "plan", "text": "fix add\nrun tests"}),
        ToolCall("n4", "note", {"kind": "task", "text": "add() must add"}),
        ToolCall("n5", "note", {"kind": "milestone", "text": "cause found"}),
    ]
    script = [turn(*notes), edit("a - b", "a + b", "e1"), finish()]
    agent, provider = make_agent(tmp_path, script)
    result = await agent.run("make add() add its arguments")

    assert result.finish_reason is FinishReason.COMPLETED, result.error
    long_term = memory_at(tmp_path, result.session_id, 2).memory.long_term  # after ACT
    assert [(d.text, d.reason) for d in long_term.decisions] == [("keep the signature", "API")]
    assert long_term.learnings == ("tests use unittest",)
    assert long_term.plan == ("fix add", "run tests")
    assert long_term.task_summary == "add() must add"
    assert [m.text for m in long_term.milestones] == ["cause found"]
    assert "note" in [spec.name for spec in provider.requests[0].tools]
    rediscovery = user_texts(provider.requests[-1])[-1]
    assert "decision (step 2): keep the signature because API" in rediscovery
    assert "learned: tests use unittest" in rediscovery
    assert PLAN_REQUEST not in rediscovery and UNWRITTEN_PLAN not in rediscovery


async def test_the_debug_record_never_reaches_the_provider(tmp_path: Path) -> None:
    marker = "ZEBRA-RAW-REPLY-7431"
    script = [
        edit("a - b", "a * b", "e1"),
        turn(
            ToolCall(
                "e2",
                "edit_file",
                {
                    "path": "calc/__init__.py",
                    "old_string": "a * b",
                    "new_string": "a + b",
                },
            ),
            text=marker,
        ),
        finish(),
    ]
    agent, provider = make_agent(tmp_path, script)
    result = await agent.run("make add() add its arguments")

    assert result.finish_reason is FinishReason.COMPLETED, result.error
    state = memory_at(tmp_path, result.session_id, result.iterations)
    debug = state.memory.debug
    assert any(marker in r.text for r in debug.model_responses)
    assert debug.decisions, "the workflow's decisions are logged"
    logged = [d.text for d in debug.decisions]
    assert "plan -> act (next)" in logged and "verify -> plan (recover)" in logged
    for request in provider.requests:
        # the reply is in the conversation as the model's own turn, never in what journeyman
        # writes (packs, check reports, tool results, the system prompt)
        written = all_text(request, Role.USER, Role.TOOL, Role.SYSTEM) + (request.system or "")
        assert marker not in written
        everything = all_text(request)
        assert not any(text in everything for text in logged)


async def test_a_long_run_gets_a_model_written_summary_booked_in_usage(tmp_path: Path) -> None:
    summary = "EARLIER: add() subtracted; several edits tried."
    script: list[Any] = [
        edit("a - b", "a * b", "e1"),
        edit("a * b", "a // b", "e2"),
        edit("a // b", "a + b", "e3"),
        finish(),
    ]
    summary_calls: list[ModelRequest] = []

    def respond(request: ModelRequest) -> ModelResponse:
        if any(SUMMARY_REQUEST in (m.content or "") for m in request.messages):
            summary_calls.append(request)
            return ModelResponse(text=summary, usage=Usage(1000, 100))
        return script.pop(0)

    tight = MemorySettings(
        keep_attempts=1,
        keep_tool_results=1,
        keep_modified_files=1,
        compress_above_chars=0,
        summarise_above_chars=0,
    )
    agent, provider = make_agent(tmp_path, [respond] * 20, phased=PhasedSettings(memory=tight))
    result = await agent.run("make add() add its arguments")

    assert result.finish_reason is FinishReason.COMPLETED, result.error
    assert summary_calls, "the summarising stage asked the run's provider"
    state = memory_at(tmp_path, result.session_id, result.iterations)
    assert state.memory.long_term.earlier_summary == summary
    # the summary calls are booked like any other model call
    assert result.usage.input_tokens == 10 * 4 + 1000 * len(summary_calls)
    assert result.usage.output_tokens == 5 * 4 + 100 * len(summary_calls)
    assert len(provider.requests) == 4 + len(summary_calls)
    # and the next pack shows the summary to the model
    assert any(summary in user_texts(r)[-1] for r in provider.requests if r not in summary_calls)
