"""Serving the tools: over stdio (the default), or streamable HTTP on 127.0.0.1 only."""

from __future__ import annotations

import socket
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

import anyio
from mcp.server.mcpserver import MCPServer

from journeyman.protocols.mcp_server.policy import ServerPolicy
from journeyman.protocols.mcp_server.server import JourneymanTools, build_server

if TYPE_CHECKING:
    from journeyman.integrations.otel.tracing import AgentTracing

LOOPBACK = "127.0.0.1"
"""The only address the HTTP transport listens on: the server runs code in the user's folders
and has no authentication, so it is never offered to the network."""
HTTP_PATH = "/mcp"

Transport = Literal["stdio", "http"]


def serve(
    policy: ServerPolicy,
    provider_factory: Callable[[], Any],
    *,
    transport: Transport = "stdio",
    port: int = 0,
    on_listening: Callable[[str], None] | None = None,
    tracing: AgentTracing | None = None,
) -> None:
    """Serve until the client closes stdin (stdio) or the process is interrupted (HTTP).

    With HTTP, `port` 0 takes a free port; `on_listening` gets the URL once the socket listens.
    Runs still going when the server stops are cancelled (their sessions stay resumable).
    With `tracing`, every run is traced (closing it is the caller's, once this returns).
    """
    server, tools = build_server(policy, provider_factory, tracing)
    if transport == "stdio":
        anyio.run(_stdio, server, tools)
    else:
        sock = _listen(port)
        url = f"http://{LOOPBACK}:{sock.getsockname()[1]}{HTTP_PATH}"
        if on_listening is not None:
            on_listening(url)
        anyio.run(_http, server, tools, sock)


def _listen(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((LOOPBACK, port))
    except OSError as error:
        sock.close()
        raise OSError(f"cannot listen on {LOOPBACK}:{port}: {error.strerror or error}") from None
    sock.listen(64)
    return sock


async def _stdio(server: MCPServer, tools: JourneymanTools) -> None:
    try:
        await server.run_stdio_async()
    finally:
        await tools.registry.aclose()


async def _http(server: MCPServer, tools: JourneymanTools, sock: socket.socket) -> None:
    import uvicorn

    app = server.streamable_http_app(host=LOOPBACK, streamable_http_path=HTTP_PATH)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    try:
        await uvicorn.Server(config).serve(sockets=[sock])
    finally:
        await tools.registry.aclose()
        sock.close()


def note(text: str) -> None:
    """A line for the person who started the server (stderr: stdout may be the protocol)."""
    sys.stderr.write(f"journeyman: {text}\n")
    sys.stderr.flush()
