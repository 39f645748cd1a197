"""The lifecycle as a run drives it, observed through transition listeners."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from journeyman.core.errors import AgentClosedError, ProviderError
from journeyman.core.lifecycle import AgentState
from journeyman.core.messages import Usage
from journeyman.core.result import FinishReason
from journeyman.economics.approval import ExtensionRequest
from journeyman.policy.permissions import ApprovalAnswer, ApprovalRequest, PermissionMode
from journeyman.providers.base import ModelRequest, ModelResponse
from tests.fakes.agents import FINISH, WRITE, make_agent, spend_turn, turn
from tests.fakes.agents import budget_agent as make
from tests.fakes.agents import policy_agent as agent_for

S = AgentState


def watch(lifecycle: Any) -> list[tuple[AgentState, AgentState]]:
    seen: list[tuple[AgentState, AgentState]] = []
    lifecycle.on_transition(lambda a, b, _meta: seen.append((a, b)))
    return seen


async def test_a_run_goes_through_completing_back_to_idle(tmp_path: Path) -> None:
    agent, _ = make(tmp_path, [ModelResponse(text="done", usage=Usage(1, 1))], [])
    seen = watch(agent.lifecycle)
    await agent.run("x")
    assert seen == [
        (S.IDLE, S.INITIALIZING),
        (S.INITIALIZING, S.RUNNING),
        (S.RUNNING, S.COMPLETING),
        (S.COMPLETING, S.IDLE),
    ]


async def test_the_closing_report_is_written_while_completing(tmp_path: Path) -> None:
    during: list[AgentState] = []

    def report(_request: ModelRequest) -> ModelResponse:
        during.append(agent.lifecycle.state)
        return ModelResponse(text="Closing report", usage=Usage(0, 1))

    script = [spend_turn(("echo", "a"), tokens=0), spend_turn(("echo", "b"), tokens=19_000), report]
    # 95 % spent leaves 1,000 tokens: room for the closing call's prompt and a short reply
    agent, _ = make(tmp_path, script, [], max_total_tokens=20_000, max_output_tokens=20_000)
    seen = watch(agent.lifecycle)
    result = await agent.run("x")
    assert result.finish_reason is FinishReason.MAX_TOKENS
    assert during == [S.COMPLETING]
    assert seen[-2:] == [(S.RUNNING, S.COMPLETING), (S.COMPLETING, S.IDLE)]


async def test_waiting_for_an_extension_decision_is_paused(tmp_path: Path) -> None:
    during: list[AgentState] = []

    async def approver(_request: ExtensionRequest) -> bool:
        during.append(agent.lifecycle.state)
        return False

    script = [spend_turn(("echo", "a"), tokens=0), spend_turn(("echo", "b"), tokens=9_900)]
    script.append(ModelResponse(text="report", usage=Usage(0, 1)))
    limits = {"max_total_tokens": 10_000, "max_output_tokens": 10_000}
    agent, _ = make(tmp_path, script, [], approver=approver, **limits)
    seen = watch(agent.lifecycle)
    await agent.run("x")
    assert during == [S.PAUSED]
    assert (S.RUNNING, S.PAUSED) in seen and (S.PAUSED, S.RUNNING) in seen


async def test_waiting_for_a_permission_answer_is_paused(tmp_path: Path) -> None:
    during: list[AgentState] = []

    async def approve(_request: ApprovalRequest) -> ApprovalAnswer:
        during.append(agent.lifecycle.state)
        return ApprovalAnswer.ALLOW

    agent, _, _ = agent_for(
        tmp_path,
        [turn(WRITE), turn(FINISH)],
        mode=PermissionMode.DEFAULT,
        permission_approver=approve,
    )
    seen = watch(agent.lifecycle)
    result = await agent.run("write it")
    assert result.success and during == [S.PAUSED]
    assert seen.index((S.RUNNING, S.PAUSED)) < seen.index((S.PAUSED, S.RUNNING))


async def test_a_failed_run_ends_in_error_and_the_next_run_starts_from_idle(
    tmp_path: Path,
) -> None:
    fatal = ProviderError("bad key", provider="scripted", retryable=False)
    agent, _ = make(tmp_path, [fatal, ModelResponse(text="ok", usage=Usage(1, 1))], [])
    seen = watch(agent.lifecycle)
    first = await agent.run("x")
    assert first.finish_reason is FinishReason.PROVIDER_ERROR
    assert agent.lifecycle.state is S.ERROR
    second = await agent.run("y")
    assert second.success
    assert seen[3:5] == [(S.ERROR, S.IDLE), (S.IDLE, S.INITIALIZING)]


async def test_a_closed_agent_is_disposed_and_refuses_to_run(tmp_path: Path) -> None:
    agent, provider = make(tmp_path, [ModelResponse(text="never", usage=Usage(1, 1))], [])
    seen = watch(agent.lifecycle)
    agent.close()
    assert seen == [(S.IDLE, S.DISPOSED)]
    with pytest.raises(AgentClosedError, match="closed"):
        await agent.run("x")
    assert provider.requests == []


async def test_the_check_is_fixed_and_run_while_initializing(tmp_path: Path) -> None:
    from journeyman.core.events import CheckFixed

    states_when: list[tuple[str, AgentState]] = []

    def first_call(_request: ModelRequest) -> ModelResponse:
        states_when.append(("first model call", agent.lifecycle.state))
        return ModelResponse(text="done", usage=Usage(1, 1))

    events: list[Any] = []
    agent, _ = make_agent(
        tmp_path, [first_call], events=events, verify_command="python -c 'print(1)'"
    )
    agent.add_listener(
        lambda event: states_when.append(("check fixed", agent.lifecycle.state))
        if isinstance(event, CheckFixed)
        else None
    )
    await agent.run("x")
    assert states_when[0] == ("check fixed", S.INITIALIZING)
    assert ("first model call", S.RUNNING) in states_when
