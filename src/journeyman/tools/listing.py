"""list_files and glob: what is in the workspace, minus what .gitignore leaves out."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from pathlib import Path

from pydantic import Field

from journeyman.core.messages import ToolResult
from journeyman.tools.base import BaseTool, ToolArgs, ToolKind, fail, ok
from journeyman.tools.context import ToolContext, echo, printable
from journeyman.tools.fileio import missing_path_message
from journeyman.tools.globbing import glob_regex
from journeyman.tools.walk import IgnoreRules, walk

MAX_LIST_ENTRIES = 5000
"""Upper bound for list_files' and glob's result caps."""


class ListFilesArgs(ToolArgs):
    path: str = Field(default=".", description="Directory to list, relative to the workspace root.")
    """Directory to list, relative to the workspace root."""
    recursive: bool = Field(
        default=False, description="Also list the contents of subdirectories, at any depth."
    )
    """Descend into subdirectories."""
    max_entries: int = Field(
        default=1000,
        ge=1,
        le=MAX_LIST_ENTRIES,
        description=f"Stop after this many entries (at most {MAX_LIST_ENTRIES}).",
    )
    """Stop after this many entries."""


class ListFilesTool(BaseTool):
    name = "list_files"
    description = (
        "List a directory of the workspace (sorted; directories end in '/', symlinks in '@'). "
        "Files matched by .gitignore and the .git directory are left out."
    )
    args_model = ListFilesArgs
    parallel_safe = True
    kind = ToolKind.READ
    permission_arg = "path"

    async def execute(self, args: ListFilesArgs, ctx: ToolContext) -> ToolResult:
        path = ctx.resolve(args.path, tool=self.name)
        rel = ctx.relative(path)
        if not path.exists():
            return fail(
                self.name, await asyncio.to_thread(missing_path_message, self.name, path, ctx)
            )
        if not path.is_dir():
            return fail(self.name, f"{self.name}: {rel} is a file, not a directory; use read_file")
        left_out = ctx.left_out()
        entries, more = await asyncio.to_thread(
            _list_dir, ctx.workspace, path, args.recursive, args.max_entries, left_out
        )
        note = left_out.note()
        if not entries:
            empty = f"[{rel} is empty, or everything in it is ignored]"
            return ok(self.name, f"{empty}\n{note}" if note else empty, path=rel, count=0)
        body = "\n".join(entries)
        if more:
            body += (
                f"\n[stopped after {args.max_entries} entries; list a subdirectory or use glob "
                "to narrow down]"
            )
        if note:
            body += f"\n{note}"
        return ok(self.name, body, path=rel, count=len(entries), truncated=more)


def _list_dir(
    root: Path, start: Path, recursive: bool, cap: int, hidden: Callable[[str], bool]
) -> tuple[list[str], bool]:
    rules = IgnoreRules.for_start(root, start)
    entries: list[str] = []

    def skip_dir(path: Path) -> bool:
        return rules.ignored(path, True) or hidden(_rel(root, path))

    for entry in walk(start, recursive=recursive, skip_dir=skip_dir):
        if entry.kind != "dir" and rules.ignored(entry.path, False):
            continue
        rel = _rel(root, entry.path)
        if hidden(rel):
            continue
        if len(entries) >= cap:
            return entries, True
        entries.append(rel + {"dir": "/", "link": "@"}.get(entry.kind, ""))
    return entries, False


def _rel(root: Path, path: Path) -> str:
    return printable(path.relative_to(root).as_posix())


# --------------------------------------------------------------------------------------------
# glob


class GlobArgs(ToolArgs):
    pattern: str = Field(
        description="Glob pattern relative to `path`: '*' and '?' stay within one directory, "
        "'**' spans any number of directories, '{a,b}' gives alternatives, e.g. '**/*.py' or "
        "'src/**/test_*.{py,pyi}'."
    )
    """Glob pattern relative to `path`."""
    path: str = Field(
        default=".", description="Directory the pattern is matched from, relative to the workspace."
    )
    """Directory the pattern is matched from."""
    max_results: int = Field(
        default=500,
        ge=1,
        le=MAX_LIST_ENTRIES,
        description=f"Stop after this many matching files (at most {MAX_LIST_ENTRIES}).",
    )
    """Stop after this many matches."""


class GlobTool(BaseTool):
    name = "glob"
    description = (
        "Find files by name pattern, e.g. '**/*.py'. Returns workspace-relative paths, sorted; "
        "files matched by .gitignore and the .git directory are left out."
    )
    args_model = GlobArgs
    parallel_safe = True
    kind = ToolKind.READ
    permission_arg = "path"

    async def execute(self, args: GlobArgs, ctx: ToolContext) -> ToolResult:
        pattern = args.pattern.strip()
        if not pattern or pattern.startswith("/") or ".." in pattern.split("/"):
            return fail(
                self.name,
                f"{self.name}: pattern {echo(args.pattern)} must be relative and stay inside "
                "`path` (no leading '/' or '..'); pass the directory in `path` instead",
            )
        base = ctx.resolve(args.path, tool=self.name)
        if not base.is_dir():
            if not base.exists():
                message = await asyncio.to_thread(missing_path_message, self.name, base, ctx)
                return fail(self.name, message)
            return fail(self.name, f"{self.name}: {ctx.relative(base)} is not a directory")
        regex = glob_regex(pattern.removeprefix("./"))
        left_out = ctx.left_out()
        found, more = await asyncio.to_thread(
            _glob_files, ctx.workspace, base, regex, args.max_results, left_out
        )
        where = ctx.relative(base)
        note = left_out.note()
        if not found:
            hint = ""
            if "/" not in pattern and "**" not in pattern:
                hint = f"; '*' does not cross directories, try '**/{pattern}'"
            empty = f"no files match {echo(pattern)} under {where}{hint}"
            return ok(self.name, f"{empty}\n{note}" if note else empty, count=0)
        body = "\n".join(found)
        if more:
            body += f"\n[stopped after {args.max_results} files; use a narrower pattern or path]"
        if note:
            body += f"\n{note}"
        return ok(self.name, body, count=len(found), truncated=more)


def _glob_files(
    root: Path, base: Path, regex: re.Pattern[str], cap: int, hidden: Callable[[str], bool]
) -> tuple[list[str], bool]:
    rules = IgnoreRules.for_start(root, base)
    found: list[str] = []
    for entry in walk(base, recursive=True, skip_dir=lambda p: rules.ignored(p, True)):
        if entry.kind == "dir" or rules.ignored(entry.path, False):
            continue
        if regex.match(entry.path.relative_to(base).as_posix()):
            rel = _rel(root, entry.path)
            if hidden(rel):
                continue
            if len(found) >= cap:
                return sorted(found), True
            found.append(rel)
    return sorted(found), False
