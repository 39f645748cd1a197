"""MCP client on the official `mcp` SDK: servers from `.journeyman/mcp.json`, tools as agent tools.

- `config.py`      the `mcpServers` file shape and `McpServerConfig`
- `connection.py`  one server held open by its own task; states; tool calls with timeouts
- `bridge.py`      an MCP tool as a journeyman `Tool` (name, JSON Schema, result text)
- `manager.py`     `McpManager`: start all, `tools()`, `status()`, `aclose()`

May import `journeyman.core` and `journeyman.tools` only.
"""

from journeyman.integrations.mcp.bridge import McpArgs, McpCallError, McpTool, bridged_name
from journeyman.integrations.mcp.config import (
    CONFIG_FILE,
    McpConfig,
    McpServerConfig,
    load_mcp_config,
    parse_mcp_config,
)
from journeyman.integrations.mcp.connection import McpConnection, ServerState
from journeyman.integrations.mcp.manager import McpManager, McpServerStatus

__all__ = [
    "CONFIG_FILE",
    "McpArgs",
    "McpCallError",
    "McpConfig",
    "McpConnection",
    "McpManager",
    "McpServerConfig",
    "McpServerStatus",
    "McpTool",
    "ServerState",
    "bridged_name",
    "load_mcp_config",
    "parse_mcp_config",
]
