"""`ToolKind`: what a tool does, as the tool itself declares it.

It lives in `core` so that every layer can read a declaration without importing `tools`:
phases (economics) receive a call's kind from the loop, permissions and the LSP layer ask the
tool. No layer keeps its own lists of tool names.
"""

from __future__ import annotations

from enum import StrEnum


class ToolKind(StrEnum):
    """What a tool does; phases, permissions and post-edit diagnostics act on this."""

    READ = "read"
    """Looks at the workspace or the outside world without changing anything."""
    EDIT = "edit"
    """Changes files in the workspace (allowed by accept_edits, refused by plan mode)."""
    COMMAND = "command"
    """Runs programs (anything may change)."""
    FINISH = "finish"
    """Signals that the task is done."""
    OTHER = "other"
    """Anything else that may change something (most MCP tools); asked about by default."""
