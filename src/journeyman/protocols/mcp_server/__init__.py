"""journeyman as an MCP server (`journeyman mcp serve`): other programs start runs, continue
sessions, read their status and diff, and undo, over stdio or streamable HTTP on 127.0.0.1.

`policy` holds what only the user who started the server decides and how a client's request
is tightened to it; `runs` the runs going on and their progress; `server` the tools; `serve`
the transports.
"""

from journeyman.protocols.mcp_server.policy import ClientLimits, ServerPolicy
from journeyman.protocols.mcp_server.serve import serve
from journeyman.protocols.mcp_server.server import build_server

__all__ = ["ClientLimits", "ServerPolicy", "build_server", "serve"]
