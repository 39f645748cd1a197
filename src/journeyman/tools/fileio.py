"""Reading and writing workspace files safely: text checks, atomic writes, helpful misses.

Used by every tool that reads or changes files (read_file, write_file, edit_file, apply_patch,
grep) and by undo and fork, which restore files the same way the tools write them.
"""

from __future__ import annotations

import difflib
import os
import stat
import uuid
from pathlib import Path
from typing import Any

from journeyman.core.errors import ToolError
from journeyman.tools.context import ToolContext, printable
from journeyman.tools.walk import IgnoreRules, walk

SNIFF_BYTES = 8192
"""A NUL byte in this many leading bytes marks a file as binary."""
MAX_EDIT_BYTES = 10 * 1024 * 1024
"""Largest file (before or after the change) the editing tools will change; bigger files are
left to run_command, so that no tool holds several copies of a huge file in memory and the
undo journal never stores one."""
PROTECTED_DIRS = (".git",)
"""Directory names the editing tools never write below, at any depth: git runs programs named
in `.git/config` and `.git/hooks/`, so a planted file there would run on the user's machine."""


def count_lines(text: str) -> int:
    """Number of lines as an editor shows them (a final line without a break counts)."""
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def change_metadata(rel: str, before: str | None, after: str | None) -> dict[str, Any]:
    """The small facts about a change a writing tool puts in its result metadata.

    The texts themselves are kept once, by the undo journal (`ToolContext.record_change`);
    results end up in messages and events, which must not hold a second copy.
    """
    if before is None:
        change = "created"
    elif after is None:
        change = "deleted"
    else:
        change = "modified"
    return {
        "path": rel,
        "change": change,
        "lines_before": 0 if before is None else count_lines(before),
        "lines_after": 0 if after is None else count_lines(after),
    }


def refuse_protected(rel: str, tool: str) -> None:
    """Raise a ToolError when `rel` (workspace-relative, symlinks resolved) lies in a protected
    directory such as `.git`."""
    parts = rel.split("/")
    for depth, part in enumerate(parts):
        if part.lower() in PROTECTED_DIRS:
            where = "/".join(parts[: depth + 1])
            raise ToolError(
                f"{tool}: {rel} is inside {where}/, which file tools never change (git runs "
                f"programs named in its config and hooks); change git settings with run_command "
                "and git itself if the task really needs it"
            )


def refuse_own_python(workspace: Path, path: Path, tool: str) -> None:
    """Raise a ToolError when `path` lies in a folder the Python running journeyman loads code
    from (its virtualenv, site-packages, its own source; `sandbox.bubblewrap.own_python`) inside
    the workspace: a `.pth` file or module written there would run on the host the next time
    journeyman starts. Folders that hold the whole workspace do not count."""
    from journeyman.tools.sandbox.bubblewrap import own_python

    for folder in own_python():
        if workspace.is_relative_to(folder) or not path.is_relative_to(folder):
            continue
        raise ToolError(
            f"{tool}: {path} is inside {folder}, where the Python running journeyman loads its "
            "code from, which file tools never change; install journeyman apart from the "
            "project (pipx, uv tool) to let the model change that environment"
        )


def check_edit_size(size: int, tool: str, rel: str, *, what: str = "the file") -> None:
    """Raise a ToolError when `size` bytes is over MAX_EDIT_BYTES."""
    if size > MAX_EDIT_BYTES:
        raise ToolError(
            f"{tool}: {rel} is too large to change with this tool ({what} is {size:,} bytes, the "
            f"limit is {MAX_EDIT_BYTES:,}); use run_command with sed, or a short python script, "
            "to change such a file in place"
        )


def not_a_regular_file(path: Path, tool: str, rel: str) -> str | None:
    """Why `path` cannot be read or written as a file (a directory, FIFO, device), if so."""
    if path.is_dir():
        return f"{tool}: {rel} is a directory, not a file"
    if path.exists() and not path.is_file():
        return f"{tool}: {rel} is not a regular file (a FIFO, socket or device); leave it alone"
    return None


def is_binary(data: bytes) -> bool:
    """Whether bytes read from the start of a file look binary (contain a NUL byte)."""
    return b"\0" in data[:SNIFF_BYTES]


def read_text_for_change(path: Path, tool: str, rel: str) -> str | None:
    """The current text of a file about to be changed, None if it does not exist.

    Only UTF-8 text can be changed, so that `before` in the change record restores the file
    exactly; anything else raises a ToolError.
    """
    try:
        with path.open("rb") as fh:
            check_edit_size(os.fstat(fh.fileno()).st_size, tool, rel)
            data = fh.read(MAX_EDIT_BYTES + 1)
    except FileNotFoundError:
        return None
    check_edit_size(len(data), tool, rel)  # grew since the stat
    if is_binary(data):
        raise ToolError(
            f"{tool}: {rel} is a binary file; this tool only changes text files (use "
            "run_command if you really mean to replace it)"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ToolError(
            f"{tool}: {rel} is not valid UTF-8 (bad byte at offset {exc.start}); it cannot be "
            "changed safely with this tool, use run_command instead"
        ) from None


def write_text(path: Path, text: str) -> None:
    """Write `text` atomically (temporary file + rename), creating missing parent directories.

    An existing file keeps its permission bits.
    """
    parent = path.parent
    parent.mkdir(parents=True, exist_ok=True)
    tmp = parent / f".{path.name}.{uuid.uuid4().hex[:8]}.tmp"
    try:
        with tmp.open("w", encoding="utf-8", newline="") as fh:
            fh.write(text)
        try:
            mode = stat.S_IMODE(path.stat().st_mode)
        except FileNotFoundError:
            pass
        else:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def missing_path_message(tool: str, path: Path, ctx: ToolContext) -> str:
    """Explain that `path` does not exist and suggest close names nearby."""
    rel = ctx.relative(path)
    parent = path.parent
    while not parent.is_dir() and parent != ctx.workspace:
        parent = parent.parent
    if parent == path.parent:
        try:
            names = sorted(os.listdir(parent))
        except OSError:
            names = []
        close = difflib.get_close_matches(path.name, names, n=5, cutoff=0.6)
        if close:
            shown = ", ".join(ctx.relative(parent / name) for name in close)
            return f"{tool}: {rel} does not exist; similar names nearby: {shown}"
    else:
        missing_dir = ctx.relative(path.parent)
        message = f"{tool}: {rel} does not exist (there is no directory {missing_dir})"
        same = _same_name_elsewhere(ctx.workspace, path.name)
        if same:
            return f"{message}; files with that name: {', '.join(same)}"
        return f"{message}; use list_files or glob to find the right path"
    same = _same_name_elsewhere(ctx.workspace, path.name)
    if same:
        return f"{tool}: {rel} does not exist; files with that name: {', '.join(same)}"
    return f"{tool}: {rel} does not exist; use list_files or glob to find the right path"


def _same_name_elsewhere(root: Path, name: str, *, most: int = 5, scan: int = 20000) -> list[str]:
    rules = IgnoreRules(root)
    found: list[str] = []
    for seen, entry in enumerate(walk(root, skip_dir=lambda p: rules.ignored(p, True))):
        if seen >= scan or len(found) >= most:
            break
        if entry.path.name == name and entry.kind != "dir":
            found.append(printable(entry.path.relative_to(root).as_posix()))
    return found
