"""The language servers and MCP servers a run starts, as every surface that starts runs chooses
them (`run`, `resume`, `fork`, `chat`, `acp`, `mcp serve`).

Both are read from the user's settings and the workspace's; a settings file that cannot be read
turns that kind of server off with a warning on stderr, and the run goes on without its tools.
The machinery of either kind is imported only when it is used.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from journeyman.core.errors import ConfigurationError
from journeyman.loop.config_file import user_config_file, user_mcp_file

if TYPE_CHECKING:
    from journeyman.integrations.lsp import LoadedLspConfig, LspManager
    from journeyman.integrations.mcp import McpManager

MCP_SETTINGS_FILE = ".journeyman/mcp.json"
"""`integrations.mcp.CONFIG_FILE`, repeated so that the MCP SDK loads only when it is used."""


def user_lsp_file() -> Path:
    """The user's `lsp.toml`, beside the user's `config.toml`."""
    return user_config_file().parent / "lsp.toml"


def load_lsp_settings(workspace: Path) -> LoadedLspConfig:
    """The user's and the workspace's LSP settings, and `JOURNEYMAN_LSP`."""
    from journeyman.integrations.lsp import load_lsp_config

    return load_lsp_config(workspace, user_file=user_lsp_file())


def _stderr(text: str) -> None:
    sys.stderr.write(f"journeyman: {text}\n")


def lsp_for_run(
    workspace: Path, *, enabled: bool = True, say: Callable[[str], None] = _stderr
) -> LspManager | None:
    """The language servers for a run in `workspace` (for `Agent(lsp=...)`); None when off.

    LSP stays off when `enabled` is False, when the settings turn it off or cannot be read
    (a warning goes to `say`; the run goes on), and when no language server is installed.
    """
    from journeyman.integrations.lsp import LspManager

    if not enabled:
        return None
    try:
        loaded = load_lsp_settings(workspace)
    except ConfigurationError as exc:
        say(f"warning: language servers off: {exc.message}")
        return None
    for warning in loaded.warnings:
        say(f"warning: {warning}")
    manager = LspManager(workspace, loaded.config)
    return manager if manager.usable() else None


def mcp_for_run(
    workspace: Path, mcp: bool | None, *, say: Callable[[str], None] = _stderr
) -> McpManager | None:
    """The MCP servers of a run (for `Agent(mcp=...)`): the user's, and the workspace's only
    when `mcp` is True (the user's explicit opt-in: a cloned repository must not get to start
    programs). None when there are none or a settings file cannot be read (with a warning)."""
    workspace_file = workspace / MCP_SETTINGS_FILE
    if mcp is None and workspace_file.is_file():
        say(f"note: {workspace_file} declares MCP servers; pass --mcp to start them")
    if not (mcp or (mcp is None and user_mcp_file().is_file())):
        return None
    from journeyman.integrations.mcp import McpManager

    try:
        return McpManager.from_workspace(
            workspace, user_file=user_mcp_file(), include_workspace=bool(mcp)
        )
    except ConfigurationError as exc:
        say(f"warning: MCP servers off: {exc.message}")
        return None
