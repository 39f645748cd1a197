"""A hook that halts stops the run at once, wherever it runs, with the hook's reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from journeyman import FinishReason
from journeyman.policy.hooks import HookEvent, HookOutcome
from tests.fakes.agents import FINISH, WRITE, turn
from tests.fakes.agents import policy_agent as agent_for


@pytest.mark.parametrize(
    "event",
    [HookEvent.SESSION_START, HookEvent.PRE_TOOL_USE, HookEvent.POST_TOOL_USE, HookEvent.STOP],
)
async def test_a_halt_ends_the_run_as_halted(tmp_path: Path, event: HookEvent) -> None:
    agent, provider, workspace = agent_for(tmp_path, [turn(WRITE), turn(FINISH), turn(FINISH)])
    agent.hooks.add(event, lambda _e, _p: HookOutcome.halt("red button"))
    result = await agent.run("write it")
    assert result.finish_reason is FinishReason.HALTED
    assert result.error == f"stopped by a {event} hook: red button"
    ran = (workspace / "out.txt").exists()
    assert ran is (event in (HookEvent.POST_TOOL_USE, HookEvent.STOP))
    asked = {HookEvent.SESSION_START: 0, HookEvent.PRE_TOOL_USE: 1}
    assert len(provider.requests) == asked.get(event, 1 if event is HookEvent.POST_TOOL_USE else 2)
