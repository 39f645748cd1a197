"""The agent kernel calls MCP tools: a scripted model uses the fixture server's tools."""

from __future__ import annotations

from pathlib import Path

import pytest

from journeyman import Agent, AgentConfig, FinishReason
from journeyman.core.messages import Role
from journeyman.integrations.mcp import McpManager, McpServerConfig
from journeyman.providers.scripted import ScriptedProvider
from journeyman.tools.builtin import default_tools
from tests.fakes.agents import call, turn

from .conftest import stdio_server


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_scripted_model_calls_mcp_tools_through_the_kernel(
    tmp_path: Path, transport: str, request: pytest.FixtureRequest
) -> None:
    config: McpServerConfig = (
        stdio_server()
        if transport == "stdio"
        else McpServerConfig(url=request.getfixturevalue("http_url"))
    )
    workspace = tmp_path / "ws"
    workspace.mkdir()
    script = [
        # two read-only calls in one turn (they may run concurrently), then a writing one
        turn(call("calc_add", "c1", a=2, b=40), call("calc_add", "c2", a=1, b=1)),
        turn(call("calc_write_note", "c3", text="remember"), call("calc_fail", "c4")),
        turn(call("finish", "c5", summary="added and noted")),
    ]
    provider = ScriptedProvider(script)
    async with McpManager(workspace, {"calc": config}) as manager:
        agent = Agent(
            provider,
            workspace=workspace,
            tools=default_tools() + manager.tools(),
            config=AgentConfig(session_dir=tmp_path / "s"),
        )
        result = await agent.run("add some numbers with the calculator server")

    assert result.finish_reason is FinishReason.COMPLETED, result.error
    assert result.final_text == "added and noted"

    offered = {spec.name: spec for spec in provider.requests[0].tools}
    assert {"read_file", "finish", "calc_add", "calc_write_note"} <= set(offered)
    assert offered["calc_add"].parameters["properties"]["b"]["type"] == "integer"

    seen = provider.requests[-1].messages
    results = {m.tool_result.call_id: m.tool_result for m in seen if m.tool_result is not None}
    assert results["c1"].content == "42" and not results["c1"].is_error
    assert results["c2"].content == "2"
    assert "remember" in results["c3"].content and not results["c3"].is_error
    assert results["c4"].is_error and "told to fail" in results["c4"].content
    assert [m.role for m in seen][:2] == [Role.USER, Role.ASSISTANT]
