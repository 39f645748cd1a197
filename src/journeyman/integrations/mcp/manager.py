"""`McpManager`: starts the configured MCP servers, bridges their tools, reports, shuts down.

    async with McpManager.from_workspace(workspace) as mcp:   # starts every server
        agent = Agent(provider, workspace=workspace, tools=default_tools() + mcp.tools())
        await agent.run("...")

Servers start concurrently, each within its own `startup_timeout_s`. A server that fails or
times out is reported by `status()` and contributes no tools; nothing is raised. Tool lists
are read once at start (later `list_changed` notifications are not followed).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from journeyman.integrations.mcp.bridge import McpTool, bridged_name
from journeyman.integrations.mcp.config import McpServerConfig, load_mcp_config
from journeyman.integrations.mcp.connection import Confine, McpConnection, ServerState
from journeyman.tools.base import Tool


@dataclass(frozen=True)
class McpServerStatus:
    """Where one configured server stands, for `journeyman mcp list` and logs."""

    name: str
    state: ServerState
    transport: str
    """"stdio" or "http"; "" for an entry that could not be read."""
    target: str
    """The command line or URL (never env values or headers)."""
    error: str | None = None
    tools: tuple[McpTool, ...] = ()
    """The bridged tools this server contributes."""
    server_info: str | None = None
    """Name and version the server reported."""

    @property
    def healthy(self) -> bool:
        """Running, or deliberately off; everything else deserves a look."""
        return self.state in (ServerState.RUNNING, ServerState.DISABLED, ServerState.CLOSED)


class McpManager:
    """The MCP servers of one run and the tools they lend the agent."""

    def __init__(
        self,
        workspace: str | Path,
        servers: Mapping[str, McpServerConfig] | None = None,
        *,
        problems: Mapping[str, str] | None = None,
    ) -> None:
        """`problems` are entries that could not be used (name -> reason), shown as invalid."""
        self.workspace = Path(workspace).resolve()
        self._problems = dict(problems or {})
        self._connections: dict[str, McpConnection] = {}
        for name, config in (servers or {}).items():
            if not name.strip():
                self._problems["(empty name)"] = "a server needs a non-empty name"
                continue
            self._connections[name] = McpConnection(name, config, self.workspace)
        self._tools: list[McpTool] = []
        self._started = False

    @classmethod
    def from_workspace(
        cls,
        workspace: str | Path,
        servers: Mapping[str, McpServerConfig] | None = None,
        *,
        user_file: Path | None = None,
        include_workspace: bool = True,
    ) -> McpManager:
        """Servers from the user's `mcp.json` and `.journeyman/mcp.json` (see
        `load_mcp_config`), plus `servers` (which win on a name clash).

        Raises `ConfigurationError` if a file exists but is not valid JSON of the right shape.
        """
        config = load_mcp_config(
            Path(workspace), user_file=user_file, include_workspace=include_workspace
        )
        merged = {**config.servers, **(servers or {})}
        problems = {k: v for k, v in config.problems.items() if k not in merged}
        return cls(workspace, merged, problems=problems)

    async def start(self, *, confine: Confine | None = None) -> list[McpServerStatus]:
        """Start every enabled server concurrently and return `status()`; a failure never raises.

        `confine` starts the servers whose config asks for the sandbox inside it; without it
        those servers are not started (their status says why)."""
        if not self._started:
            self._started = True
            for connection in self._connections.values():
                connection.confine = confine
            await asyncio.gather(*(c.start() for c in self._connections.values()))
            self._tools = self._bridge()
        return self.status()

    def tools(self, *, avoid: Iterable[str] = ()) -> list[Tool]:
        """The bridged tools of every server that started, named `<server>_<tool>`.

        A name in `avoid` (say, the built-in tools' names) gets a numbered suffix instead.
        """
        reserved = set(avoid)
        taken = reserved | {t.name for t in self._tools}
        tools: list[Tool] = []
        for t in self._tools:
            if t.name in reserved:
                t = t.renamed(bridged_name(t.server, t.remote_name, taken))
                taken.add(t.name)
            tools.append(t)
        return tools

    def server_names(self, *, sandboxed: bool | None = None) -> list[str]:
        """The servers `start` starts (all but those disabled in the config), in config order;
        only those whose config asks for the sandbox (`sandboxed=True`) or not (False)."""
        return [
            name
            for name, conn in self._connections.items()
            if conn.state is not ServerState.DISABLED
            and sandboxed in (None, conn.config.sandbox)
        ]

    def status(self) -> list[McpServerStatus]:
        """Unusable config entries first, then each server in config order."""
        rows = [
            McpServerStatus(name, ServerState.INVALID, "", "", error=reason)
            for name, reason in self._problems.items()
        ]
        for name, conn in self._connections.items():
            rows.append(
                McpServerStatus(
                    name=name,
                    state=conn.state,
                    transport=conn.config.transport,
                    target=conn.config.target(),
                    error=conn.error,
                    tools=tuple(t for t in self._tools if t.server == name),
                    server_info=conn.server_info,
                )
            )
        return rows

    async def aclose(self) -> None:
        """Shut every server down cleanly; the bridged tools then answer with an error."""
        await asyncio.gather(*(c.aclose() for c in self._connections.values()))

    async def __aenter__(self) -> McpManager:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def _bridge(self) -> list[McpTool]:
        taken: set[str] = set()
        tools: list[McpTool] = []
        for conn in self._connections.values():
            if conn.state is not ServerState.RUNNING:
                continue
            for definition in conn.tools:
                name = bridged_name(conn.name, definition.name, taken)
                taken.add(name)
                tools.append(McpTool(conn, definition, name))
        return tools
