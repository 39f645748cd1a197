"""Plan-and-solve mode: one tool-less planning turn, then react turns; no second plan on resume."""

from __future__ import annotations

from pathlib import Path

from journeyman import Agent, AgentConfig, FinishReason
from journeyman.core.errors import ProviderError
from journeyman.core.messages import Role, ToolCall, Usage
from journeyman.loop.config import ModeName
from journeyman.loop.modes.plan_solve import PLAN_REQUEST
from journeyman.providers.base import ModelResponse
from journeyman.providers.resilient import RetryPolicy
from journeyman.providers.scripted import ScriptedProvider

NO_WAIT = RetryPolicy(max_retries=0, base_delay_s=0.0, jitter=0.0, max_retry_after_s=0.0)
PLAN = ModelResponse(text="1. read notes.txt\n2. finish", usage=Usage(10, 5))
READ = ModelResponse(
    text="", tool_calls=(ToolCall("r", "read_file", {"path": "notes.txt"}),), usage=Usage(10, 5)
)
FINISH = ModelResponse(
    text="", tool_calls=(ToolCall("f", "finish", {"summary": "read it"}),), usage=Usage(10, 5)
)


def agent(tmp_path: Path, script: list[object]) -> tuple[Agent, ScriptedProvider]:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    (workspace / "notes.txt").write_text("hello\n")
    provider = ScriptedProvider(script)
    config = AgentConfig(session_dir=tmp_path / "s", mode=ModeName.PLAN_SOLVE)
    return Agent(provider, workspace=workspace, config=config, retry_policy=NO_WAIT), provider


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
