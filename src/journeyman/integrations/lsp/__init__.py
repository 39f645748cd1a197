"""Language servers as agent tools: an LSP client, a manager that survives crashes, the tools.

- `framing.py`    Content-Length framing of JSON-RPC messages (encoder, incremental decoder)
- `positions.py`  file URIs; 1-based character columns versus 0-based UTF-16 offsets
- `client.py`     `LspClient`: one server process, requests with timeouts, diagnostics cache
- `servers.py`    `ServerConfig`, the built-in servers, `LspConfig`, the lsp.toml files
- `results.py`    typed answers (`Location`, `Diagnostic`, `Hover`, `LspSymbol`, `LspReply`)
- `manager.py`    `LspManager`: routing by file, lazy start, one restart, never raises
- `tools.py`      `lsp_definition` ... `lsp_symbols`, and diagnostics appended to edits

May import `journeyman.core` and `journeyman.tools` only.
"""

from journeyman.integrations.lsp.client import (
    LspClient,
    LspError,
    LspResponseError,
    LspServerExitedError,
    LspTimeoutError,
)
from journeyman.integrations.lsp.manager import LspManager
from journeyman.integrations.lsp.results import (
    Diagnostic,
    Hover,
    Location,
    LspReply,
    LspSymbol,
    ServerStatus,
)
from journeyman.integrations.lsp.servers import (
    BUILTIN_SERVERS,
    CONFIG_FILE,
    ENV_SWITCH,
    LoadedLspConfig,
    LspConfig,
    ServerConfig,
    load_lsp_config,
)
from journeyman.integrations.lsp.tools import EditDiagnostics, lsp_tools, with_lsp

__all__ = [
    "BUILTIN_SERVERS",
    "CONFIG_FILE",
    "ENV_SWITCH",
    "Diagnostic",
    "EditDiagnostics",
    "Hover",
    "LoadedLspConfig",
    "Location",
    "LspClient",
    "LspConfig",
    "LspError",
    "LspManager",
    "LspReply",
    "LspResponseError",
    "LspServerExitedError",
    "LspSymbol",
    "LspTimeoutError",
    "ServerConfig",
    "ServerStatus",
    "load_lsp_config",
    "lsp_tools",
    "with_lsp",
]
