"""`journeyman mcp list`; the MCP servers a run starts are chosen by `loop.servers.mcp_for_run`."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from journeyman.core.errors import ConfigurationError
from journeyman.integrations.mcp import (
    CONFIG_FILE,
    McpManager,
    McpServerStatus,
    ServerState,
)
from journeyman.loop.config_file import user_mcp_file

EXIT_OK = 0
EXIT_SERVER_FAILED = 1
EXIT_CONFIG = 2

_STATE_STYLE = {
    ServerState.RUNNING: "green",
    ServerState.CLOSED: "green",
    ServerState.DISABLED: "dim",
}


def mcp_list(
    workspace: Path, *, include_workspace: bool = False, console: Console | None = None
) -> int:
    """Start the user's servers (and the workspace's with `include_workspace`: the user's
    explicit opt-in, as for `run --mcp`), print servers, status and tools, then shut them down.

    A workspace's `.journeyman/mcp.json` names programs to run; a cloned repository must not get
    them started by a listing, so without the opt-in they are only named, not started.
    Exit code 0 when every enabled server started, 1 when one did not, 2 for an unreadable
    config file.
    """
    out = console or Console(highlight=False, soft_wrap=True)
    try:
        manager = McpManager.from_workspace(
            workspace, user_file=user_mcp_file(), include_workspace=include_workspace
        )
    except ConfigurationError as exc:
        out.print(f"[red]{escape(exc.message)}[/]")
        return EXIT_CONFIG
    statuses = asyncio.run(_start_and_stop(manager, workspace))
    workspace_file = workspace / CONFIG_FILE
    if not include_workspace and workspace_file.is_file():
        out.print(
            f"Not started: the servers of {escape(str(workspace_file))} (a workspace's servers "
            "are programs chosen by the repository; pass --mcp to start and list them)."
        )
    if not statuses:
        out.print(
            f"No MCP servers configured. Declare them in {escape(str(user_mcp_file()))} (yours, "
            f"started by every run) or {escape(str(workspace_file))} (the workspace's, "
            "started with --mcp) "
            '(`{"mcpServers": {"name": {"command": ..., "args": [...]}}}` or `{"url": ...}`).'
        )
        return EXIT_OK
    out.print(_servers_table(statuses))
    for status in statuses:
        if status.tools:
            out.print(_tools_table(status))
    return EXIT_OK if all(s.healthy for s in statuses) else EXIT_SERVER_FAILED


async def _start_and_stop(manager: McpManager, workspace: Path) -> list[McpServerStatus]:
    """Start the servers as a run with the default settings would (those asking for the sandbox
    inside bubblewrap, when this machine has it), then stop them."""
    confine = None
    if manager.server_names(sandboxed=True):
        from journeyman.loop.agent import sandbox_for, servers_confined_in
        from journeyman.loop.config import AgentConfig

        try:
            confine = servers_confined_in(sandbox_for(AgentConfig(), workspace))
        except ConfigurationError:  # no usable sandbox here: such servers say they did not start
            confine = None
    try:
        return await manager.start(confine=confine)
    finally:
        await manager.aclose()


def warn_unstarted(statuses: Sequence[McpServerStatus]) -> None:
    """Say on stderr which MCP servers did not start; the run goes on without their tools."""
    for status in statuses:
        if not status.healthy:
            sys.stderr.write(
                f"journeyman: warning: MCP server {status.name!r} is {status.state.value}"
                f"{': ' + status.error if status.error else ''}; its tools are left out\n"
            )


def _servers_table(statuses: list[McpServerStatus]) -> Table:
    table = Table(title="MCP servers", title_justify="left")
    for column in ("server", "transport", "target", "status", "tools"):
        table.add_column(column, overflow="fold")
    for s in statuses:
        style = _STATE_STYLE.get(s.state, "red")
        state = f"[{style}]{s.state.value}[/]"
        if s.error:
            state += f"\n[dim]{escape(s.error)}[/]"
        elif s.server_info:
            state += f"\n[dim]{escape(s.server_info)}[/]"
        table.add_row(
            escape(s.name), s.transport or "-", escape(s.target) or "-", state, str(len(s.tools))
        )
    return table


def _tools_table(status: McpServerStatus) -> Table:
    table = Table(title=f"tools of {escape(status.name)}", title_justify="left")
    table.add_column("tool", no_wrap=True)
    table.add_column("access")
    table.add_column("description", overflow="fold")
    for tool in status.tools:
        lines = tool.description.strip().splitlines()
        access = "read-only" if tool.read_only else "[yellow]may change things[/]"
        table.add_row(escape(tool.name), access, escape(lines[0] if lines else ""))
    return table
