"""The phased mode on a real tiny package: scripted model, real tools, a real test command."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from journeyman import Agent, AgentConfig, FinishReason
from journeyman.core import events as ev
from journeyman.core.errors import (
    AgentError,
    BudgetExhaustedError,
    CancellationError,
    ConfigurationError,
    LLMError,
    PermissionDeniedError,
    ProviderError,
    ToolError,
    ToolTimeoutError,
)
from journeyman.core.messages import Message, Role, ToolCall
from journeyman.core.result import FinishCategory
from journeyman.loop.config import ModeName
from journeyman.loop.modes.phased import (
    AGAIN_HEADER,
    ANSWER_REFUSED,
    FINISH_REFUSED,
    FIRST_HEADER,
    FRESH_HEADER,
    SAME_CHECK_FAILURE,
    WorkflowPhase,
)
from journeyman.loop.modes.phased.interventions import Intervention, InterventionLadder
from journeyman.loop.modes.phased.recovery import Severity, classify
from journeyman.providers.scripted import ScriptedProvider
from journeyman.session.store import SessionStore
from journeyman.tools.sandbox import SandboxKind
from tests.fakes import agents
from tests.fakes.agents import turn, user_texts
from tests.fakes.projects import (
    BUGGY_ADD,
    CALC_TEST_COMMAND,
    calc_finish,
    calc_package,
    fix_add,
    phased_calc_agent,
)

TEST_COMMAND = CALC_TEST_COMMAND
BUGGY = BUGGY_ADD
edit = fix_add
finish = calc_finish
make_agent = phased_calc_agent


def phases(tmp_path: Path, session_id: str, steps: int) -> list[str]:
    store = SessionStore(tmp_path / "sessions")
    try:
        return [
            store.checkpoint(session_id, step)[1]["mode"]["agent_state"]["phase"]
            for step in range(1, steps + 1)
        ]
    finally:
        store.close()


# --- the happy path ------------------------------------------------------------------------


async def test_edit_fails_verification_then_fix_passes_and_is_done(tmp_path: Path) -> None:
    script = [
        edit("a - b", "a * b", "e1"),  # a wrong fix: the test still fails
        edit("a * b", "a + b", "e2"),
        finish(),
    ]
    agent, provider = make_agent(tmp_path, script)
    result = await agent.run("make add() add its arguments")

    assert result.finish_reason is FinishReason.COMPLETED, result.error
    assert result.final_text == "fixed add"
    assert (tmp_path / "ws" / "calc" / "__init__.py").read_text().endswith("return a + b\n")
    assert phases(tmp_path, result.session_id, result.iterations) == [
        "act",  # discover + plan: the edit is waiting to run
        "verify",  # act changed the workspace
        "plan",  # verification failed
        "act",
        "verify",
        "discover",  # verification passed: a fresh picture next
        "done",
    ]
    first, second, third = provider.requests
    # DISCOVER gave the model the context pack: goal, project files, verification status
    pack = user_texts(first)[-1]
    assert FIRST_HEADER in pack and "make add() add its arguments" in pack
    assert "calc/__init__.py" in pack and "not run yet" in pack
    # the failing check went back to the model with the test output
    failed = user_texts(second)[-1]
    assert TEST_COMMAND in failed and "exit code 1" in failed and "AssertionError" in failed
    # after the passing check, a new discovery says so
    assert AGAIN_HEADER in user_texts(third)[-1] and "passed" in user_texts(third)[-1]
    # ... and shows the change made so far, from the undo journal
    rediscovery = user_texts(third)[-1]
    assert "Current diff" in rediscovery
    assert "-    return a - b" in rediscovery and "+    return a + b" in rediscovery


# --- a done claim is checked, never taken on trust -----------------------------------------


async def test_finish_with_a_failing_test_is_not_done(tmp_path: Path) -> None:
    script = [finish("all good", cid=f"f{i}") for i in range(10)]
    agent, provider = make_agent(tmp_path, script, max_iterations=6)
    result = await agent.run("make add() add its arguments")

    assert not result.success
    assert result.finish_reason is FinishReason.MAX_ITERATIONS
    assert phases(tmp_path, result.session_id, 6) == ["verify", "plan"] * 3
    refusals = [t for t in user_texts(provider.requests[-1]) if FINISH_REFUSED in t]
    assert len(refusals) == 2  # the third refusal came after the last model call
    assert (tmp_path / "ws" / "calc" / "__init__.py").read_text() == BUGGY


async def test_a_repeated_check_failure_is_told_as_the_harness_check(tmp_path: Path) -> None:
    script = [finish("all good", cid=f"f{i}") for i in range(10)]
    agent, provider = make_agent(tmp_path, script, max_iterations=8)
    await agent.run("make add() add its arguments")

    # the third identical failure is a loop; the harness ran those checks, and says so
    told = "\n".join(user_texts(provider.requests[-1]))
    assert SAME_CHECK_FAILURE.split("`")[0] in told and "failed 3 times" in told
    assert "`verify` ran" not in told


async def test_a_plain_answer_is_a_done_claim_that_is_verified_too(tmp_path: Path) -> None:
    script = [turn(text="It works now."), edit("a - b", "a + b", "e1"), turn(text="Fixed.")]
    agent, provider = make_agent(tmp_path, script)
    result = await agent.run("make add() add its arguments")

    assert result.finish_reason is FinishReason.ANSWERED
    assert result.final_text == "Fixed."
    # the first answer was refused by the failing check; the second came after a passing one
    told = user_texts(provider.requests[1])
    assert any(ANSWER_REFUSED in t for t in told)
    assert not any("finish" in t and "not accepted" in t for t in told)  # it never called finish
    assert phases(tmp_path, result.session_id, result.iterations)[-2:] == ["discover", "done"]


async def test_done_without_any_change_still_runs_the_check_first(tmp_path: Path) -> None:
    root = calc_package(tmp_path)
    (root / "calc" / "__init__.py").write_text("def add(a, b):\n    return a + b\n")
    agent, provider = make_agent(tmp_path, [finish("nothing to do")])
    result = await agent.run("make sure add() works")

    assert result.finish_reason is FinishReason.COMPLETED
    assert phases(tmp_path, result.session_id, 2) == ["verify", "done"]
    assert len(provider.requests) == 1


# --- errors: recoverable goes back to PLAN, fatal ends in FAIL -----------------------------


@pytest.mark.parametrize(
    ("error", "severity"),
    [
        (ToolError("x"), Severity.RECOVERABLE),
        (ToolTimeoutError("x"), Severity.RECOVERABLE),
        (LLMError("garbled"), Severity.RECOVERABLE),
        (LLMError("never parses", retryable=False), Severity.FATAL),
        (ProviderError("overloaded", provider="p", status_code=529), Severity.TRANSIENT),
        (
            ProviderError("gave up", provider="p", retryable=False, details={"exhausted": True}),
            Severity.TRANSIENT,
        ),
        (ProviderError("bad key", provider="p", status_code=401, retryable=False), Severity.FATAL),
        (BudgetExhaustedError("spent"), Severity.TRANSIENT),
        (ConfigurationError("x"), Severity.FATAL),
        (PermissionDeniedError("x", tool_name="run_command"), Severity.FATAL),
        (CancellationError("x"), Severity.FATAL),
    ],
)
def test_errors_are_classified_by_type(error: AgentError, severity: Severity) -> None:
    assert classify(error) is severity


async def test_a_timed_out_check_is_recoverable(tmp_path: Path) -> None:
    slow = f"{sys.executable} -c 'import time; time.sleep(30)'"
    script = [finish(cid="f1"), turn(text="I will look again.")]
    agent, provider = make_agent(
        tmp_path, script, verify=slow, verify_timeout_s=0.5, max_iterations=3
    )
    result = await agent.run("make add() add its arguments")

    assert result.finish_reason is FinishReason.MAX_ITERATIONS
    assert phases(tmp_path, result.session_id, 3) == ["verify", "plan", "verify"]
    told = user_texts(provider.requests[1])[-1]
    assert "after 0.5 s, its time limit" in told


async def test_a_check_that_cannot_run_is_fatal(tmp_path: Path) -> None:
    agent, _ = make_agent(tmp_path, [finish()], verify="no-such-command-here --x")
    result = await agent.run("make add() add its arguments")

    assert result.finish_reason is FinishReason.CONFIGURATION_ERROR
    assert result.finish_reason.category is FinishCategory.FATAL
    assert "exit code 127" in (result.error or "")
    assert phases(tmp_path, result.session_id, 2) == ["verify", "fail"]


async def test_no_verification_command_fails_before_any_model_call(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "notes.txt").write_text("nothing to test here\n")
    agent, provider = make_agent(tmp_path, [finish()], verify=None)
    result = await agent.run("do something")

    assert result.finish_reason is FinishReason.CONFIGURATION_ERROR
    assert "verification command" in (result.error or "")
    assert provider.requests == []


async def test_a_refusing_provider_is_fatal_and_a_flaky_one_is_not(tmp_path: Path) -> None:
    refused = ProviderError("invalid key", provider="scripted", status_code=401, retryable=False)
    agent, _ = make_agent(tmp_path, [refused])
    result = await agent.run("make add() add its arguments")
    assert result.finish_reason is FinishReason.PROVIDER_ERROR
    assert result.finish_reason.category is FinishCategory.FATAL
    assert phases(tmp_path, result.session_id, 1) == ["fail"]

    flaky = ProviderError("overloaded", provider="scripted", status_code=529)
    again, _ = make_agent(tmp_path, [flaky])
    second = await again.run("make add() add its arguments")
    assert second.finish_reason is FinishReason.PROVIDER_UNAVAILABLE
    assert second.finish_reason.category is FinishCategory.RETRYABLE


async def test_a_failed_tool_call_goes_back_to_plan(tmp_path: Path) -> None:
    missing = turn(ToolCall("r1", "read_file", {"path": "calc/missing.py"}))
    script = [missing, edit("a - b", "a + b", "e1"), finish()]
    agent, provider = make_agent(tmp_path, script)
    result = await agent.run("make add() add its arguments")

    assert result.finish_reason is FinishReason.COMPLETED
    assert phases(tmp_path, result.session_id, 3) == ["act", "plan", "act"]
    tool_results = [m for m in provider.requests[1].messages if m.role is Role.TOOL]
    assert tool_results[-1].tool_result is not None and tool_results[-1].tool_result.is_error


# --- loop interventions --------------------------------------------------------------------


def test_the_ladder_climbs_one_rung_per_loop_and_stops_at_abort() -> None:
    ladder = InterventionLadder()
    rungs = [ladder.escalate() for _ in range(5)]
    assert rungs == [
        Intervention.WARNING,
        Intervention.STRONG_WARNING,
        Intervention.REDISCOVER,
        Intervention.ABORT,
        Intervention.ABORT,
    ]
    assert "Second warning" in ladder.message(Intervention.STRONG_WARNING, "same call.")
    assert ladder.message(Intervention.ABORT, "same call.") == ""


async def test_repeated_actions_escalate_to_rediscovery_then_abort(tmp_path: Path) -> None:
    events: list[ev.Event] = []
    read = ToolCall("r", "read_file", {"path": "calc/__init__.py"})
    script = [turn(read, text=f"reading it again ({i})") for i in range(20)]
    agent, provider = make_agent(
        tmp_path, script, events=events, max_unproductive_iterations=100, max_iterations=100
    )
    result = await agent.run("make add() add its arguments")

    assert result.finish_reason is FinishReason.NO_PROGRESS
    assert "after every intervention" in (result.error or "")
    nudges = [e.message for e in events if isinstance(e, ev.NudgeInjected)]
    ladder = [n for n in nudges if "warning" in n.lower() or "Repeating" in n]
    assert len(ladder) == 3
    assert "Repeating the same action" in ladder[0]
    assert ladder[1].startswith("Second warning") and ladder[2].startswith("Third warning")
    # reads 3, 4 and 5 loop (warning, strong warning, re-discovery); the detector then starts
    # afresh, and reads 6, 7 and 8 make the loop that aborts
    assert len(provider.requests) == 8
    discoveries = [t for t in user_texts(provider.requests[5]) if FRESH_HEADER in t]
    assert len(discoveries) == 1
    final_phase = phases(tmp_path, result.session_id, result.iterations)[-1]
    assert final_phase == WorkflowPhase.FAIL.value


# --- resume mid-phase ----------------------------------------------------------------------


def cancel_after(agent_box: list[Agent], predicate: Any) -> Any:
    def on_event(event: ev.Event) -> None:
        if predicate(event):
            agent_box[0].cancel()

    return on_event


async def test_resume_continues_in_the_phase_it_stopped_in(tmp_path: Path) -> None:
    calc_package(tmp_path)
    box: list[Agent] = []
    provider = ScriptedProvider([edit("a - b", "a + b", "e1")])
    config = AgentConfig(
        session_dir=tmp_path / "sessions",
        mode=ModeName.PHASED,
        verify_command=TEST_COMMAND,
        sandbox=SandboxKind.LOCAL,
    )
    stopping = Agent(
        provider,
        workspace=tmp_path / "ws",
        config=config,
        retry_policy=agents.NO_RETRY,
        on_event=cancel_after(
            box,
            lambda e: (
                isinstance(e, ev.ToolResultReceived) and not e.result.call_id.startswith("verify-")
            ),
        ),
    )
    box.append(stopping)
    first = await stopping.run("make add() add its arguments")
    assert first.finish_reason is FinishReason.CANCELLED
    # stopped after ACT: the check of the edit has not run yet
    assert phases(tmp_path, first.session_id, first.iterations) == ["act", "verify"]

    events: list[ev.Event] = []
    again, resumed_provider = make_agent(tmp_path, [finish("fixed")], events=events)
    result = await again.resume(first.session_id)

    assert result.finish_reason is FinishReason.COMPLETED
    steps = phases(tmp_path, result.session_id, result.iterations)
    assert steps == ["act", "verify", "discover", "done"]
    # the first resumed step ran the check without asking the model
    order = [
        e.call.arguments.get("command") if isinstance(e, ev.ToolCallStarted) else "model"
        for e in events
        if isinstance(e, ev.ToolCallStarted | ev.ModelRequestSent)
    ]
    assert order[:2] == [TEST_COMMAND, "model"]
    assert len(resumed_provider.requests) == 1
    assert AGAIN_HEADER in user_texts(resumed_provider.requests[0])[-1]
    # the memory came back with the phase: the step count goes on from the checkpoint
    store = SessionStore(tmp_path / "sessions")
    try:
        state = store.checkpoint(result.session_id)[1]["mode"]["agent_state"]
    finally:
        store.close()
    assert state["step"] == result.iterations
    assert any(
        "calc/__init__.py" in r["arguments"] for r in state["memory"]["facts"]["tool_results"]
    )


async def test_resume_after_plan_runs_the_planned_calls_without_asking_again(
    tmp_path: Path,
) -> None:
    calc_package(tmp_path)
    box: list[Agent] = []
    config = AgentConfig(
        session_dir=tmp_path / "sessions",
        mode=ModeName.PHASED,
        verify_command=TEST_COMMAND,
        sandbox=SandboxKind.LOCAL,
    )
    stopping = Agent(
        ScriptedProvider([edit("a - b", "a + b", "e1")]),
        workspace=tmp_path / "ws",
        config=config,
        retry_policy=agents.NO_RETRY,
        on_event=cancel_after(box, lambda e: isinstance(e, ev.ModelResponseReceived)),
    )
    box.append(stopping)
    first = await stopping.run("make add() add its arguments")
    assert first.finish_reason is FinishReason.CANCELLED
    assert phases(tmp_path, first.session_id, first.iterations) == ["act"]
    assert (tmp_path / "ws" / "calc" / "__init__.py").read_text() == BUGGY

    again, provider = make_agent(tmp_path, [finish("fixed")])
    result = await again.resume(first.session_id)

    assert result.finish_reason is FinishReason.COMPLETED
    assert (tmp_path / "ws" / "calc" / "__init__.py").read_text().endswith("a + b\n")
    assert len(provider.requests) == 1
    tool_messages: list[Message] = [m for m in provider.requests[0].messages if m.tool_result]
    assert [m.tool_result.call_id for m in tool_messages if m.tool_result] == ["e1"]
