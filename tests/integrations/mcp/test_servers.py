"""A real MCP server (server_app.py) over stdio and streamable HTTP, through `McpManager`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from journeyman.core.messages import ToolCall, ToolResult
from journeyman.integrations.mcp import McpManager, McpServerConfig, McpTool, ServerState
from journeyman.tools.context import ToolContext
from journeyman.tools.registry import ToolRegistry

from .conftest import HANG_SCRIPT, stdio_server

READ_ONLY = {"add", "picture", "slow", "header", "reach"}


async def call(manager: McpManager, tmp_path: Path, tool: str, /, **arguments: Any) -> ToolResult:
    registry = ToolRegistry(manager.tools())
    return await registry.execute(
        ToolCall(f"id-{tool}", tool, arguments), ToolContext(tmp_path), 30
    )


def check_listing(manager: McpManager, server: str) -> None:
    tools = {t.name: t for t in manager.tools()}
    assert set(tools) == {
        f"{server}_{n}"
        for n in ("add", "write_note", "fail", "picture", "slow", "header", "reach", "exit_now")
    }
    for tool in tools.values():
        assert isinstance(tool, McpTool)
        expected = tool.remote_name in READ_ONLY
        assert (tool.read_only, tool.parallel_safe) == (expected, expected), tool.name
    add = ToolRegistry(manager.tools()).specs()[0]
    assert add.name == f"{server}_add"
    assert add.description == "Add two integers and return the sum."
    assert add.parameters["required"] == ["a", "b"]
    assert add.parameters["properties"]["a"]["type"] == "integer"
    (status,) = manager.status()
    assert status.state is ServerState.RUNNING and status.healthy
    assert status.server_info == "fixture 1.0"
    assert [t.name for t in status.tools] == list(tools)


async def check_calls(manager: McpManager, tmp_path: Path, server: str) -> None:
    added = await call(manager, tmp_path, f"{server}_add", a=2, b=40)
    assert (added.content, added.is_error) == ("42", False)
    assert added.call_id == f"id-{server}_add"
    note = await call(manager, tmp_path, f"{server}_write_note", text="hello")
    assert not note.is_error and "hello" in note.content
    failed = await call(manager, tmp_path, f"{server}_fail")
    assert failed.is_error and "the fixture server was told to fail" in failed.content
    assert failed.metadata["error"] == "mcp_tool_error"
    picture = await call(manager, tmp_path, f"{server}_picture")
    assert picture.content.splitlines() == ["a red dot", "[image: image/png, 48 bytes — not shown]"]
    wrong = await call(manager, tmp_path, f"{server}_add", a="two")
    assert wrong.is_error and wrong.metadata["error"] == "invalid"
    assert "'b' is a required property" in wrong.content and "'two'" in wrong.content


async def test_stdio_server_tools_and_calls(tmp_path: Path, fixture_stdio: McpServerConfig) -> None:
    async with McpManager(tmp_path, {"fx": fixture_stdio}) as manager:
        check_listing(manager, "fx")
        await check_calls(manager, tmp_path, "fx")
    assert manager.status()[0].state is ServerState.CLOSED
    after = await call(manager, tmp_path, "fx_add", a=1, b=1)
    assert after.is_error and "unavailable" in after.content


async def test_http_server_tools_and_calls(tmp_path: Path, http_url: str) -> None:
    config = McpServerConfig(type="http", url=http_url, headers={"X-Test": "configured"})
    async with McpManager(tmp_path, {"web": config}) as manager:
        check_listing(manager, "web")
        await check_calls(manager, tmp_path, "web")
        sent = await call(manager, tmp_path, "web_header", name="X-Test")
        assert sent.content == "configured"  # headers from the config reach the server
        assert manager.status()[0].transport == "http"


async def test_tool_timeout_and_a_server_that_dies(tmp_path: Path) -> None:
    async with McpManager(tmp_path, {"fx": stdio_server(tool_timeout_s=0.5)}) as manager:
        slow = await call(manager, tmp_path, "fx_slow", seconds=5)
        assert slow.is_error and slow.metadata["error"] == "timeout"
        assert "did not answer within 0.5 s" in slow.content
        assert not (await call(manager, tmp_path, "fx_add", a=1, b=2)).is_error  # still usable

        died = await call(manager, tmp_path, "fx_exit_now")
        assert died.is_error and died.metadata["error"] == "unavailable"
        assert "MCP server 'fx' is unavailable (crashed" in died.content
        later = await call(manager, tmp_path, "fx_add", a=1, b=2)
        assert later.is_error and "cannot be used in this run" in later.content
        (status,) = manager.status()
        assert status.state is ServerState.CRASHED and not status.healthy


async def test_start_failures_are_reported_not_raised(tmp_path: Path, http_url: str) -> None:
    servers = {
        "fx": stdio_server(),
        "missing": McpServerConfig(command="journeyman-no-such-mcp-server"),
        "exits": McpServerConfig(
            command=sys.executable, args=["-c", "import sys; sys.exit('broken install')"]
        ),
        "hangs": McpServerConfig(
            command=sys.executable, args=["-c", HANG_SCRIPT], startup_timeout_s=1.0
        ),
        "refused": McpServerConfig(url="http://127.0.0.1:9/mcp"),
        "nowhere": McpServerConfig(command=sys.executable, cwd="does/not/exist"),
        "off": McpServerConfig(command="journeyman-no-such-mcp-server", disabled=True),
    }
    manager = McpManager(tmp_path, servers)
    try:
        statuses = {s.name: s for s in await manager.start()}
        assert statuses["fx"].state is ServerState.RUNNING
        assert [t.name for t in manager.tools()] == [t.name for t in statuses["fx"].tools]
        assert len(manager.tools()) == 8

        missing = statuses["missing"]
        assert missing.state is ServerState.FAILED
        assert "cannot run 'journeyman-no-such-mcp-server'" in (missing.error or "")
        exits = statuses["exits"]
        assert exits.state is ServerState.FAILED
        assert "closed the connection" in (exits.error or "")
        assert "broken install" in (exits.error or "")  # the server's stderr is quoted
        hangs = statuses["hangs"]
        assert hangs.state is ServerState.TIMED_OUT
        assert "within 1 s" in (hangs.error or "") and "warming up" in (hangs.error or "")
        assert statuses["refused"].state is ServerState.FAILED
        assert "cannot connect" in (statuses["refused"].error or "")
        assert "does not exist" in (statuses["nowhere"].error or "")
        assert statuses["off"].state is ServerState.DISABLED and statuses["off"].healthy
    finally:
        await manager.aclose()
    assert {s.name: s.state for s in manager.status()}["hangs"] is ServerState.TIMED_OUT


async def test_server_names_are_sanitised_into_tool_names(tmp_path: Path) -> None:
    async with McpManager(tmp_path, {"git hub.v2": stdio_server()}) as manager:
        assert "git_hub_v2_add" in {t.name for t in manager.tools()}
        moved = {t.name for t in manager.tools(avoid={"git_hub_v2_add", "read_file"})}
        assert "git_hub_v2_add" not in moved and "git_hub_v2_add_2" in moved
        result = await call(manager, tmp_path, "git_hub_v2_add", a=1, b=1)
        assert result.content == "2"
