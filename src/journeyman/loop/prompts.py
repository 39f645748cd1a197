"""The system prompt and the corrective messages the loop sends to the model.

The built-in system prompt is assembled from the names of the tools the run offers, so that
every tool it names is one the model can call: the edit tool is whichever of edit_file,
apply_patch and write_file the provider was given, and a sentence about a tool that is not
offered (run_command in a question, the language-server tools, spawn_agent) is left out.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from pathlib import Path

from journeyman.tools.edit import EditFileTool
from journeyman.tools.finish import FinishTool
from journeyman.tools.listing import GlobTool, ListFilesTool
from journeyman.tools.patch import ApplyPatchTool
from journeyman.tools.read import ReadFileTool
from journeyman.tools.search import GrepTool
from journeyman.tools.shell import RunCommandTool
from journeyman.tools.skill import SKILL_TOOL
from journeyman.tools.write import WriteFileTool

EDIT_FILE = EditFileTool.name
APPLY_PATCH = ApplyPatchTool.name
WRITE_FILE = WriteFileTool.name
RUN_COMMAND = RunCommandTool.name
FINISH = FinishTool.name
LOOKING_TOOLS = (ListFilesTool.name, GlobTool.name, GrepTool.name, ReadFileTool.name)
"""The tools that find, read and search files, in the order the prompt names them."""
SPAWN_TOOL = "spawn_agent"
"""`swarm.spawn`'s tool (the swarm layer sits below this one)."""
LSP_PREFIX = "lsp_"
"""The language-server tools of `integrations.lsp` all start with it."""

_UNWORDLY = (EDIT_FILE, APPLY_PATCH, WRITE_FILE, RUN_COMMAND, *LOOKING_TOOLS)
_BUILTIN_NAME = re.compile(rf"\b({'|'.join(_UNWORDLY)}|{LSP_PREFIX}\w+)\b")
"""Tool names of the built-in prompt that read as no English word (finish does)."""

OPENING = """\
You are journeyman, a careful software engineer working inside one repository.
Your workspace is {workspace}; every path you pass to a tool is relative to it.

How to work:
"""

FORMAT_ERROR = """\
Your last reply tried to call a tool, but it could not be understood: {error}
Nothing was run. Send the tool call again in the expected format."""


def system_prompt(
    workspace: Path,
    tools: Collection[str],
    override: str | None = None,
    rules: str = "",
    skills: str = "",
) -> str:
    """The built-in prompt for a run offered `tools` (by name), or `override`, followed by
    the rules section and the skills section (only when the skill tool is offered), each when
    there is one."""
    base = override if override is not None else builtin_prompt(workspace, tools)
    sections = [rules, skills if SKILL_TOOL in tools else ""]
    return "\n\n".join([base.rstrip(), *filter(None, sections)]) if any(sections) else base


def names_unoffered(prompt: str, tools: Collection[str]) -> bool:
    """Whether `prompt` names a built-in tool that is not in `tools` (a stored session's
    prompt, written for another provider's edit tool)."""
    return any(name not in tools for name in _BUILTIN_NAME.findall(prompt))


def builtin_prompt(workspace: Path, tools: Collection[str]) -> str:
    """journeyman's own system prompt, naming only the tools in `tools`."""
    lines = _guidance(list(tools))
    return OPENING.format(workspace=workspace) + "".join(f"- {line}\n" for line in lines)


def _guidance(tools: Sequence[str]) -> list[str]:
    offered = set(tools)
    looking = [name for name in LOOKING_TOOLS if name in offered]
    changes = _edit_guidance(offered)
    lines = []
    if looking and changes:
        lines.append(
            "Look before you change anything: find and read the relevant files and search for "
            f"the names involved ({_listed(looking)}), and find out how the project runs its "
            "tests."
        )
    elif looking:
        lines.append(
            "Find and read the files the question is about and search for the names involved "
            f"({_listed(looking)})."
        )
    lsp = [name for name in tools if name.startswith(LSP_PREFIX)]
    if lsp:
        lines.append(
            f"{_listed(lsp)} ask a language server about the code (definitions, references, "
            "types, diagnostics): use them where a text search would be ambiguous."
        )
    if changes:
        lines.append(changes)
    lines.append(_checking(offered, can_change=bool(changes)))
    if looking:
        lines.append("Several independent reads or searches may be requested in one turn.")
    if SPAWN_TOOL in offered:
        lines.append(
            f"{SPAWN_TOOL} hands a self-contained subtask to a child agent with a budget of its "
            "own: use it for independent pieces of work, not for single steps."
        )
    lines.append(_ending(offered, can_change=bool(changes)))
    return lines


def _edit_guidance(offered: set[str]) -> str:
    """How to change files with the edit tools offered; "" when none is."""
    edit, patch, write = (name in offered for name in (EDIT_FILE, APPLY_PATCH, WRITE_FILE))
    exact = "copying each hunk's context and '-' lines exactly from the file, indentation included"
    if edit and patch:
        text = (
            f"Make small, precise edits: {EDIT_FILE} for one change, quoting enough surrounding "
            f"lines to match exactly once; {APPLY_PATCH} for changes in several places or "
            f"files, {exact}"
        )
    elif edit:
        text = (
            f"Make small, precise edits. Prefer {EDIT_FILE} with enough surrounding lines to "
            "match exactly once"
        )
    elif patch:
        text = f"Make small, precise edits with {APPLY_PATCH}, {exact}"
    elif write:
        return f"Change files with {WRITE_FILE}, giving each file's complete new text."
    else:
        return ""
    if write:
        return f"{text}; use {WRITE_FILE} for new files or complete rewrites."
    return f"{text}."


def _checking(offered: set[str], *, can_change: bool) -> str:
    """How to check the work, by whether commands can be run and files changed."""
    if RUN_COMMAND in offered and can_change:
        return (
            "After changing code, run the project's tests or the command that shows the change "
            f"works with {RUN_COMMAND}, and read the output. If something fails, find out why "
            "before editing again."
        )
    if RUN_COMMAND in offered:
        return f"{RUN_COMMAND} runs commands in the workspace; read their output."
    if can_change:
        return "No command can be run here: check each change by reading the code it touches."
    return (
        "This run is for looking only: no tool here changes files or runs commands, so answer "
        "from what you read."
    )


def _ending(offered: set[str], *, can_change: bool) -> str:
    """How the model says it is done: the finish call when offered, else a plain reply."""
    if not can_change:
        if FINISH in offered:
            return (
                f"When you have the answer, call {FINISH} with it. If you cannot find it, say why."
            )
        return "When you have the answer, reply with it without calling a tool."
    report = "a short summary of what you changed and how you verified it"
    if FINISH in offered:
        return (
            f"When the task is done and you have checked it, call {FINISH} with {report}. If "
            "you cannot complete it, say what blocks you."
        )
    return (
        f"When the task is done and you have checked it, reply without calling a tool, with "
        f"{report}. If you cannot complete it, say what blocks you."
    )


def _listed(names: Sequence[str]) -> str:
    """`a`, `a and b`, `a, b and c`."""
    if len(names) == 1:
        return names[0]
    return f"{', '.join(names[:-1])} and {names[-1]}"


def empty_reply(can_finish: bool) -> str:
    """What the model is told after an empty reply; `can_finish`: finish is offered."""
    if can_finish:
        return (
            "Your last reply was empty. Call a tool to continue the task, or call "
            f"{FINISH} if it is done."
        )
    return (
        "Your last reply was empty. Call a tool to continue the task, or, if it is done, reply "
        "with a short summary of what you did."
    )


TEXT_ONLY = """\
Tools are no longer available in this run because its budget is nearly spent. Reply with a \
short closing report: what you changed, what you verified, and what is left to do."""
