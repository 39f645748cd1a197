"""One MCP server connection, held open by a task of its own.

The SDK's transports and sessions live in anyio task groups and cancel scopes, which must be
entered and left by the same task. So each server gets a holder task that connects, lists the
tools, then waits until it is asked to close and unwinds everything itself. Tool calls come
from other tasks (the agent's), which the session allows: only entering and leaving are tied to
the holder. A start that takes too long is abandoned by cancelling the holder's scope; the
holder then cleans up in the background (a stdio server is stopped: stdin closed, then
SIGTERM, then SIGKILL, all bounded by the SDK).
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from collections.abc import Callable
from contextlib import AsyncExitStack, suppress
from enum import StrEnum
from importlib import metadata
from pathlib import Path
from typing import IO, Any, TextIO

import anyio
import httpx2
import mcp_types as mt
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from journeyman.core.text import clip_start
from journeyman.integrations.mcp.bridge import McpCallError
from journeyman.integrations.mcp.config import McpServerConfig

MAX_TOOL_PAGES = 100
"""Stop following `tools/list` cursors after this many pages (a server that never ends)."""
CLOSE_TIMEOUT_S = 10.0
"""Seconds a server may take to shut down before its holder task is cancelled."""
STDERR_TAIL_CHARS = 600
"""How much of a stdio server's stderr is quoted when it fails."""


class ServerState(StrEnum):
    PENDING = "pending"
    """Configured, not started yet."""
    DISABLED = "disabled"
    """`disabled: true` in the config; never started."""
    INVALID = "invalid"
    """The config entry could not be used."""
    STARTING = "starting"
    RUNNING = "running"
    FAILED = "failed"
    """The start failed: no such command, connection refused, handshake error..."""
    TIMED_OUT = "timed_out"
    """The start did not finish within `startup_timeout_s`."""
    CRASHED = "crashed"
    """It was running, then the connection was lost."""
    CLOSED = "closed"
    """Shut down on request."""


Confine = Callable[[list[str], Path], list[str]]
"""The command line that runs a server's command line (`argv`, started in `cwd`) inside the
run's sandbox."""


class SandboxUnavailableError(Exception):
    """A server asks to run inside the sandbox and the run has none that can hold it."""


class McpConnection:
    """Connects to one server, keeps its tool list and forwards tool calls to it."""

    def __init__(self, name: str, config: McpServerConfig, workspace: Path) -> None:
        self.name = name
        self.config = config
        self.workspace = workspace
        self.confine: Confine | None = None
        """How to start the server inside the run's sandbox (None: the run has none that can
        hold it); only used for a server whose config asks for `sandbox`."""
        self.state = ServerState.DISABLED if config.disabled else ServerState.PENDING
        self.error: str | None = None
        self.tools: tuple[mt.Tool, ...] = ()
        self.server_info: str | None = None
        self._client: Client | None = None
        self._task: asyncio.Task[None] | None = None
        self._scope: anyio.CancelScope | None = None
        """The holder's scope; cancelling it abandons the start or forces the shutdown."""
        self._ready = asyncio.Event()
        self._closing = asyncio.Event()
        self._stderr: TextIO | None = None

    async def start(self) -> None:
        """Connect and list tools, within `startup_timeout_s`. Never raises: see `state`."""
        if self.state is not ServerState.PENDING:
            return
        self.state = ServerState.STARTING
        self._scope = anyio.CancelScope()
        self._task = asyncio.create_task(self._hold(), name=f"mcp-server:{self.name}")
        timeout = self.config.startup_timeout_s
        try:
            await asyncio.wait_for(self._ready.wait(), timeout)
        except TimeoutError:
            if self.state is ServerState.STARTING:
                self.state = ServerState.TIMED_OUT
                self.error = f"did not finish starting within {timeout:g} s{self._stderr_note()}"
                self._cancel()
        except asyncio.CancelledError:
            self._cancel()
            raise

    async def call_tool(self, tool: str, arguments: dict[str, Any]) -> mt.CallToolResult:
        """Call `tool` on the server within `tool_timeout_s`; raises `McpCallError` on failure."""
        client = self._client
        if self.state is not ServerState.RUNNING or client is None:
            raise McpCallError(self._unavailable(), "unavailable")
        timeout = self.config.tool_timeout_s
        try:
            return await client.call_tool(tool, arguments, read_timeout_seconds=timeout)
        except MCPError as exc:
            if exc.code == mt.REQUEST_TIMEOUT:
                raise McpCallError(
                    f"{tool!r} on MCP server {self.name!r} did not answer within {timeout:g} s",
                    "timeout",
                ) from exc
            if exc.code == mt.CONNECTION_CLOSED:
                self._lost("the server closed the connection")
                raise McpCallError(self._unavailable(), "unavailable") from exc
            raise McpCallError(
                f"MCP server {self.name!r} refused the call to {tool!r}: {exc.message} "
                f"(error {exc.code})",
                "protocol",
            ) from exc
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream) as exc:
            self._lost(describe_exception(exc))
            raise McpCallError(self._unavailable(), "unavailable") from exc
        except RuntimeError as exc:  # the session is gone (closed under us)
            if self._client is None:
                raise McpCallError(self._unavailable(), "unavailable") from exc
            raise McpCallError(f"calling {tool!r} failed: {exc}", "protocol") from exc
        except Exception as exc:
            raise McpCallError(
                f"calling {tool!r} on MCP server {self.name!r} failed: {describe_exception(exc)}",
                "protocol",
            ) from exc

    async def aclose(self) -> None:
        """Shut the server down (waits for it, bounded); safe to call more than once."""
        task = self._task
        if task is None:
            return
        self._closing.set()
        if self.state is ServerState.STARTING:
            self._cancel()
        done, _ = await asyncio.wait({task}, timeout=CLOSE_TIMEOUT_S)
        if not done:
            self._cancel()
            done, _ = await asyncio.wait({task}, timeout=CLOSE_TIMEOUT_S)
        if not done:
            task.cancel()
            with suppress(asyncio.CancelledError):
                await task

    def _cancel(self) -> None:
        if self._scope is not None:
            self._scope.cancel()

    async def _hold(self) -> None:
        assert self._scope is not None
        stderr = self._stderr = self._open_stderr()
        try:
            with self._scope:
                async with AsyncExitStack() as stack:
                    client = await self._connect(stack)
                    self.tools = await _list_tools(client)
                    info = client.server_info
                    if info is not None:
                        self.server_info = f"{info.name} {info.version}".strip()
                    self._client = client
                    if self.state is ServerState.STARTING:
                        self.state = ServerState.RUNNING
                    self._ready.set()
                    await self._closing.wait()
        except Exception as exc:
            reason = describe_exception(exc, command=self.config.command)
            if self.state is ServerState.STARTING:
                self.state = ServerState.FAILED
                self.error = f"could not start: {reason}{self._stderr_note()}"
            elif self.state is ServerState.RUNNING:
                self._lost(reason)
        finally:
            self._client = None
            if self.state in (ServerState.RUNNING, ServerState.STARTING):
                self.state = ServerState.CLOSED
            self._ready.set()
            self._stderr = None
            if stderr is not None:
                stderr.close()

    async def _connect(self, stack: AsyncExitStack) -> Client:
        cfg = self.config
        if cfg.transport == "stdio":
            cwd = self.workspace / cfg.cwd if cfg.cwd else self.workspace
            if not cwd.is_dir():
                raise NotADirectoryError(f"working directory {cwd} does not exist")
            argv = [cfg.command or "", *cfg.args]
            if cfg.sandbox:
                if self.confine is None:
                    raise SandboxUnavailableError(
                        "its entry asks for the sandbox and no bubblewrap sandbox is in use "
                        "to start it in, so it was not started"
                    )
                argv = self.confine(argv, cwd)
            params = StdioServerParameters(
                command=argv[0], args=argv[1:], env=dict(cfg.env) or None, cwd=cwd
            )
            errlog = self._stderr if self._stderr is not None else sys.stderr
            transport: Any = stdio_client(params, errlog=errlog)
        else:
            http = await stack.enter_async_context(
                httpx2.AsyncClient(headers=dict(cfg.headers), timeout=_HTTP_TIMEOUT)
            )
            transport = streamable_http_client(cfg.url or "", http_client=http)
        client = Client(transport, cache=None, client_info=_CLIENT_INFO)
        return await stack.enter_async_context(client)

    def _open_stderr(self) -> TextIO | None:
        if self.config.transport != "stdio":
            return None
        return tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")

    def _stderr_note(self) -> str:
        tail = _tail(self._stderr)
        return f"; server stderr: {tail}" if tail else ""

    def _lost(self, reason: str) -> None:
        if self.state is ServerState.RUNNING:
            self.state = ServerState.CRASHED
            self.error = f"connection lost: {reason}{self._stderr_note()}"
            self._closing.set()  # let the holder release the transport now

    def _unavailable(self) -> str:
        why = f": {self.error}" if self.error else ""
        return (
            f"MCP server {self.name!r} is unavailable ({self.state.value}{why}); "
            "its tools cannot be used in this run — carry on without them"
        )


def describe_exception(exc: BaseException, *, command: str | None = None) -> str:
    """One line for an exception, looking inside exception groups for the real cause."""
    while isinstance(exc, BaseExceptionGroup):
        inner = [e for e in exc.exceptions if not isinstance(e, asyncio.CancelledError)]
        if not inner:
            break
        exc = inner[0]
    if isinstance(exc, SandboxUnavailableError):
        return str(exc)
    if isinstance(exc, FileNotFoundError) and command and exc.filename in (command, None):
        return f"cannot run {command!r}: no such file or command (is it installed and on PATH?)"
    if isinstance(exc, MCPError):
        if exc.code == mt.CONNECTION_CLOSED:
            return "the server closed the connection (did its process exit?)"
        return f"{exc.message} (MCP error {exc.code})"
    if isinstance(exc, httpx2.ConnectError):
        return f"cannot connect: {exc}"
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


async def _list_tools(client: Client) -> tuple[mt.Tool, ...]:
    tools: list[mt.Tool] = []
    cursor: str | None = None
    for _ in range(MAX_TOOL_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tuple(tools)


def _tail(stream: IO[str] | None) -> str:
    if stream is None or stream.closed:
        return ""
    try:  # pread leaves the offset the server process shares with us alone
        fd = stream.fileno()
        size = os.fstat(fd).st_size
        start = max(0, size - 4 * STDERR_TAIL_CHARS)
        text = os.pread(fd, size - start, start).decode("utf-8", "replace")
    except (OSError, ValueError):
        return ""
    flat = " | ".join(line.strip() for line in text.strip().splitlines() if line.strip())
    return clip_start(flat, STDERR_TAIL_CHARS)


def _version() -> str:
    try:
        return metadata.version("journeyman")
    except metadata.PackageNotFoundError:
        return "0.0.0"


_HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)
"""The SDK's defaults: 30 s to connect or send; 300 s of silence on a response stream."""
_CLIENT_INFO = mt.Implementation(name="journeyman", version=_version())
