"""The built-in tool set every run starts with."""

from __future__ import annotations

from journeyman.tools.base import Tool
from journeyman.tools.files import (
    EditFileTool,
    GlobTool,
    ListFilesTool,
    ReadFileTool,
    WriteFileTool,
)
from journeyman.tools.finish import FinishTool
from journeyman.tools.search import GrepTool
from journeyman.tools.shell import RunCommandTool


def default_tools() -> list[Tool]:
    """Fresh instances of the built-in tools: looking around first, then changing, then done."""
    return [
        ReadFileTool(),
        ListFilesTool(),
        GlobTool(),
        GrepTool(),
        EditFileTool(),
        WriteFileTool(),
        RunCommandTool(),
        FinishTool(),
    ]
