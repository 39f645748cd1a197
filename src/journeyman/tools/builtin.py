"""The built-in tool set every run starts with, and which edit tool the model is offered."""

from __future__ import annotations

from journeyman.tools.base import Tool, ToolKind
from journeyman.tools.choices import EditToolChoice as EditToolChoice
from journeyman.tools.edit import EditFileTool
from journeyman.tools.finish import FinishTool
from journeyman.tools.listing import GlobTool, ListFilesTool
from journeyman.tools.patch import ApplyPatchTool
from journeyman.tools.read import ReadFileTool
from journeyman.tools.sandbox import Sandbox
from journeyman.tools.search import GrepTool
from journeyman.tools.shell import RunCommandTool
from journeyman.tools.write import WriteFileTool

PATCH_PROVIDERS = frozenset({"openai"})
"""Providers (by `Provider.name`) whose models get `apply_patch` under ``auto``: the
OpenAI-compatible adapter, whatever server it talks to."""


def edit_tools(
    choice: EditToolChoice | str = EditToolChoice.AUTO, provider: str | None = None
) -> list[Tool]:
    """The edit tools to offer for `choice` and the run's provider name; ValueError names the
    choices when `choice` is none of them."""
    try:
        chosen = EditToolChoice(choice)
    except ValueError:
        options = ", ".join(repr(c.value) for c in EditToolChoice)
        raise ValueError(f"edit_tool = {choice!r} is not one of {options}") from None
    if chosen is EditToolChoice.AUTO:
        chosen = (
            EditToolChoice.APPLY_PATCH if provider in PATCH_PROVIDERS else EditToolChoice.EDIT_FILE
        )
    tools: list[Tool] = []
    if chosen in (EditToolChoice.EDIT_FILE, EditToolChoice.BOTH):
        tools.append(EditFileTool())
    if chosen in (EditToolChoice.APPLY_PATCH, EditToolChoice.BOTH):
        tools.append(ApplyPatchTool())
    return tools


def default_tools(
    sandbox: Sandbox | None = None,
    *,
    journal_commands: bool = True,
    edit_tool: EditToolChoice | str = EditToolChoice.AUTO,
    provider: str | None = None,
) -> list[Tool]:
    """Fresh instances of the built-in tools: looking around first, then changing, then done.

    Commands run in `sandbox`; None runs them locally. With `journal_commands` the files a
    command changes are journaled for undo (see `tools.snapshot`). `edit_tool` and the run's
    `provider` name choose the edit tool (`edit_tools`); with no provider, ``auto`` is
    `edit_file`.
    """
    return [
        ReadFileTool(),
        ListFilesTool(),
        GlobTool(),
        GrepTool(),
        *edit_tools(edit_tool, provider),
        WriteFileTool(),
        RunCommandTool(sandbox=sandbox, journal_changes=journal_commands),
        FinishTool(),
    ]


MINIMAL_KINDS = frozenset({ToolKind.EDIT, ToolKind.COMMAND, ToolKind.FINISH})
"""Kinds of the built-in tools the minimal tool set keeps, with `read_file` (the one way of
looking it needs: `run_command` lists and searches)."""


def minimal_tools(tools: list[Tool]) -> list[Tool]:
    """The minimal tool set out of `tools`: `read_file` and the edit, command and finish tools."""
    return [t for t in tools if t.kind in MINIMAL_KINDS or t.name == ReadFileTool.name]
