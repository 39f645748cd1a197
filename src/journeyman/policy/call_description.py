"""A tool call as a person approving it must see it: a command whole and escaped, an edit as a
diff against the file as it is now, anything else as its arguments. Shared by every surface that
asks (the command line's prompt, the terminal app's dialog, the MCP server's elicitation).

Never cut: a patch that changes 600 lines and adds a file at its end is described in full, and
each surface decides how to page it (none may answer "allow" on a part). Names and contents go
through `core.display`: `printable` for text (control characters, CR included, and bidi
overrides shown as escapes), `printable_name` for paths (newlines too), so the ACP server's
diffs, which pass through the same two functions, read the same."""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from journeyman.core.display import command_for_approval, printable, printable_name
from journeyman.core.errors import AgentError, ToolError
from journeyman.tools.context import ToolContext
from journeyman.tools.edit_match import apply_edit
from journeyman.tools.patch import preview_patch


def describe_call(tool_name: str, args: Mapping[str, Any], workspace: str = "") -> str:
    """What the user approves, in full: a command whole and escaped, an edit as a diff, any
    other call as its arguments in JSON. Nothing from the model reaches the terminal raw."""
    if isinstance(args.get("command"), str):
        return _indent("$ " + command_for_approval(args["command"]))
    path = args.get("path")
    if isinstance(path, str) and isinstance(args.get("old_string"), str):
        every = " (every occurrence)" if args.get("replace_all") else ""
        old_text, new_text, note = _edited(workspace, path, args)
        diff = _diff(path, old_text, new_text)
        return _indent(f"edit {printable_name(path)}{every}{note}:\n{diff}")
    if isinstance(path, str) and isinstance(args.get("content"), str):
        exists, before = _current_text(workspace, path)
        verb = "overwrite" if exists else "create"
        unseen = " (its current content cannot be shown)" if exists and before is None else ""
        diff = _diff(path, before or "", args["content"])
        return _indent(f"{verb} {printable_name(path)}{unseen}:\n{diff}")
    if isinstance(args.get("patch"), str):
        return _indent(_patch(workspace, args["patch"]))
    return _indent(describe_arguments(args))


def describe_arguments(args: Mapping[str, Any]) -> str:
    """A call's arguments as indented JSON, escaped: how a call that is neither a command nor
    an edit is shown for approval."""
    return printable(json.dumps(dict(args), indent=2, ensure_ascii=False, default=str))


def _patch(workspace: str, patch: str) -> str:
    """A patch as the diff of every file it would change (computed as the tool computes it,
    so a file the patch adds or deletes is shown too); the patch itself, escaped, when it
    would not apply."""
    try:
        changes = preview_patch(patch, ToolContext(Path(workspace or ".").resolve()))
    except AgentError:
        return "patch (it does not apply as it stands):\n" + printable(patch)
    parts = [f"patch changing {len(changes)} file(s):"]
    for change in changes:
        verb = "create" if change.before is None else "delete" if change.after is None else "edit"
        diff = _diff(change.path, change.before or "", change.after or "")
        parts.append(f"{verb} {printable_name(change.path)}:\n{diff}")
    return "\n".join(parts)


def _edited(workspace: str, path: str, args: Mapping[str, Any]) -> tuple[str, str, str]:
    """The file before and after an edit_file call, found as the tool finds it, so the diff
    has the file's own line numbers; when the file cannot be read or the quoted text does not
    match one place, the quoted text and its replacement, with a note saying so."""
    old, new = args["old_string"], str(args.get("new_string", ""))
    exists, text = _current_text(workspace, path)
    if text is not None:
        try:
            outcome = apply_edit(text, old, new, replace_all=bool(args.get("replace_all")))
        except ToolError:
            return old, new, " (the quoted text does not match one place in the file; shown alone)"
        return text, outcome.text, ""
    if not exists:
        if old == "":
            return "", new, ""  # a new file
        return old, new, " (no such file; the quoted text is shown alone)"
    return old, new, " (the file cannot be read; the quoted text is shown alone)"


def _diff(path: str, before: str, after: str) -> str:
    """A unified diff of every line, escaped. Lines end at a newline only: a lone CR, a form
    feed or a Unicode line separator inside a line is shown as an escape where it stands
    (`str.splitlines` would break the line there and hide it)."""
    shown = printable_name(path)
    lines = difflib.unified_diff(
        _lines(before), _lines(after), f"a/{shown}", f"b/{shown}", lineterm="", n=2
    )
    return "\n".join(printable(line) for line in lines) or "(no change)"


def _lines(text: str) -> list[str]:
    lines = text.split("\n")
    return lines[:-1] if lines[-1] == "" else lines


def _current_text(workspace: str, path: str) -> tuple[bool, str | None]:
    """Whether the file exists, and its text when it is a small readable text file inside the
    workspace."""
    root = Path(workspace or ".").resolve()
    target = (root / path).resolve()
    if not target.is_relative_to(root) or not target.exists():
        return False, None
    try:
        if not target.is_file() or target.stat().st_size > 2_000_000:
            return True, None
        return True, target.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return True, None


def _indent(text: str) -> str:
    return "\n".join("  │ " + line for line in text.split("\n"))
