"""Plan-and-solve mode: one tool-less planning turn, then react turns; no second plan on resume."""

from __future__ import annotations

from pathlib import Path

from journeyman import Agent, FinishReason
from journeyman.core.errors import ProviderError
from journeyman.core.messages import Role
from journeyman.loop.config import ModeName
from journeyman.loop.modes.plan_solve import PLAN_REQUEST
from journeyman.providers.scripted import ScriptedProvider
from tests.fakes.agents import NO_RETRY, call, finish, make_agent, turn

PLAN = turn(text="1. read notes.txt\n2. finish")
READ = turn(call("read_file", "r", path="notes.txt"))
FINISH = finish("read it", cid="f")


def agent(tmp_path: Path, script: list[object]) -> tuple[Agent, ScriptedProvider]:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    (workspace / "notes.txt").write_text("hello\n")
    return make_agent(
        tmp_path, script, sessions="s", retry_policy=NO_RETRY, mode=ModeName.PLAN_SOLVE
    )


async def test_the_first_turn_plans_without_tools(tmp_path: Path) -> None:
    runner, provider = agent(tmp_path, [PLAN, READ, FINISH])
    result = await runner.run("read the notes")
    assert result.finish_reason is FinishReason.COMPLETED
    assert result.iterations == 3
    first, second = provider.requests[:2]
    assert first.tools == () and first.messages[-1].content == PLAN_REQUEST
    assert second.tools and second.messages[-1].role is Role.ASSISTANT
    assert second.messages[-1].content == PLAN.text


async def test_resume_after_the_plan_does_not_plan_again(tmp_path: Path) -> None:
    down = ProviderError("down", provider="scripted", status_code=500)
    runner, _ = agent(tmp_path, [PLAN, down])
    first = await runner.run("read the notes")
    assert first.finish_reason is FinishReason.PROVIDER_UNAVAILABLE
    again, provider = agent(tmp_path, [READ, FINISH])
    result = await again.resume(first.session_id)
    assert result.finish_reason is FinishReason.COMPLETED
    assert all(r.tools for r in provider.requests)
    plans = [m for m in provider.requests[0].messages if m.content == PLAN_REQUEST]
    assert len(plans) == 1
