"""The agent kernel calls MCP tools: a scripted model uses the fixture server's tools."""

from __future__ import annotations

from pathlib import Path

import pytest

from journeyman import Agent, AgentConfig, FinishReason
from journeyman.core.messages import Role
from journeyman.integrations.mcp import McpManager, McpServerConfig, ServerState
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
            config=AgentConfig(session_dir=tmp_path / "s", verify=False),
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


async def test_an_agent_given_mcp_servers_starts_them_for_its_runs(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    script = [
        turn(call("calc_add", "c1", a=2, b=40)),
        turn(call("finish", "c2", summary="first")),
        turn(call("calc_add", "c3", a=1, b=1)),
        turn(call("finish", "c4", summary="second")),
    ]
    provider = ScriptedProvider(script)
    agent = Agent(
        provider,
        workspace=workspace,
        config=AgentConfig(session_dir=tmp_path / "s", verify=False),
        mcp={"calc": stdio_server(), "broken": McpServerConfig(command="no-such-program-jm")},
    )
    assert "calc_add" not in agent.registry.names  # the servers run only while connected

    async with agent.connected() as statuses:
        assert {s.name: s.healthy for s in statuses} == {"calc": True, "broken": False}
        first = await agent.run("add with the calculator")
        second = await agent.run("add again, same servers")

    assert first.finish_reason is FinishReason.COMPLETED, first.error
    assert second.finish_reason is FinishReason.COMPLETED, second.error
    results = {
        m.tool_result.call_id: m.tool_result.content
        for m in provider.requests[-1].messages
        if m.tool_result is not None
    }
    assert results["c3"] == "2"
    assert "calc_add" in {spec.name for spec in provider.requests[0].tools}


async def test_a_run_outside_connected_starts_and_stops_the_servers_itself(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    provider = ScriptedProvider(
        [turn(call("calc_add", "c1", a=20, b=22)), turn(call("finish", "c2", summary="ok"))]
    )
    manager = McpManager(workspace, {"calc": stdio_server()})
    agent = Agent(
        provider,
        workspace=workspace,
        config=AgentConfig(session_dir=tmp_path / "s", verify=False),
        mcp=manager,
    )
    result = await agent.run("add")
    assert result.finish_reason is FinishReason.COMPLETED, result.error
    seen = provider.requests[-1].messages
    assert next(m.tool_result.content for m in seen if m.tool_result is not None) == "42"
    assert [s.state for s in manager.status()] == [ServerState.CLOSED]  # stopped after the run
