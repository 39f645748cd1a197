"""The built-in tool set every run starts with."""

from __future__ import annotations

from journeyman.tools.base import Tool
from journeyman.tools.edit import EditFileTool
from journeyman.tools.finish import FinishTool
from journeyman.tools.listing import GlobTool, ListFilesTool
from journeyman.tools.read import ReadFileTool
from journeyman.tools.sandbox import Sandbox
from journeyman.tools.search import GrepTool
from journeyman.tools.shell import RunCommandTool
from journeyman.tools.write import WriteFileTool


def default_tools(sandbox: Sandbox | None = None, *, journal_commands: bool = True) -> list[Tool]:
    """Fresh instances of the built-in tools: looking around first, then changing, then done.

    Commands run in `sandbox`; None runs them locally. With `journal_commands` the files a
    command changes are journaled for undo (see `tools.snapshot`).
    """
    return [
        ReadFileTool(),
        ListFilesTool(),
        GlobTool(),
        GrepTool(),
        EditFileTool(),
        WriteFileTool(),
        RunCommandTool(sandbox=sandbox, journal_changes=journal_commands),
        FinishTool(),
    ]
