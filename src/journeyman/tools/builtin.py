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
from journeyman.tools.sandbox import Sandbox
from journeyman.tools.search import GrepTool
from journeyman.tools.shell import RunCommandTool


def default_tools(sandbox: Sandbox | None = None) -> list[Tool]:
    """Fresh instances of the built-in tools: looking around first, then changing, then done.

    Commands run in `sandbox`; None runs them locally.
    """
    return [
        ReadFileTool(),
        ListFilesTool(),
        GlobTool(),
        GrepTool(),
        EditFileTool(),
        WriteFileTool(),
        RunCommandTool(sandbox=sandbox),
        FinishTool(),
    ]
