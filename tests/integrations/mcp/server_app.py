"""A small, real MCP server built on the SDK's `MCPServer` (the 1.x `FastMCP`) for the MCP tests.

    python server_app.py          serve over stdio
    python server_app.py --http   serve streamable HTTP on 127.0.0.1; the first stdout line is
                                  `PORT <n>`, printed once the socket is listening

Tools: `add` (read-only), `write_note`, `fail` (raises), `picture` (text and an image),
`slow` (sleeps), `header` (echoes an HTTP request header), `reach` (tries a local port and a
file outside its folder: what a sandbox would stop) and `exit_now` (the process dies mid-call).
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys

from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations

server = MCPServer("fixture", version="1.0", log_level="CRITICAL")
notes: list[str] = []


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def add(a: int, b: int) -> int:
    """Add two integers and return the sum."""
    return a + b


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
def write_note(text: str) -> str:
    """Store a note on the server."""
    notes.append(text)
    return f"stored note {len(notes)}: {text}"


@server.tool()
def fail() -> str:
    """Always fails, on purpose (the message reaches the client)."""
    raise ToolError("the fixture server was told to fail")


@server.tool(annotations=ToolAnnotations(read_only_hint=True), structured_output=False)
def picture() -> list[object]:
    """A caption followed by a tiny PNG."""
    return ["a red dot", Image(data=b"\x89PNG\r\n\x1a\n" + bytes(40), format="png")]


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def slow(seconds: float) -> str:
    """Sleep, then answer."""
    await asyncio.sleep(seconds)
    return "woke up"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def header(name: str, ctx: Context) -> str:
    """The value of one HTTP request header ("(none)" over stdio or when absent)."""
    headers = ctx.headers or {}
    return headers.get(name.lower()) or headers.get(name) or "(none)"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def reach(port: int, path: str) -> str:
    """Try to connect to 127.0.0.1:`port` and to create the file `path`; say what worked."""
    said = []
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
        said.append("connect ok")
    except OSError as error:
        said.append(f"connect failed ({type(error).__name__})")
    try:
        with open(path, "x") as written:
            written.write("from the server")
        said.append("write ok")
    except OSError as error:
        said.append(f"write failed ({type(error).__name__})")
    return "; ".join(said)


@server.tool()
def exit_now() -> str:
    """Kill the server process without answering."""
    os._exit(3)


def serve_http() -> None:
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    app = server.streamable_http_app(host="127.0.0.1")
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    asyncio.run(uvicorn.Server(config).serve(sockets=[sock]))


if __name__ == "__main__":
    if "--http" in sys.argv[1:]:
        serve_http()
    else:
        server.run("stdio")
