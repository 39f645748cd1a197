"""File tools confined to the workspace: read_file, write_file, edit_file, list_files and glob.

Tools that change a file report it in `ToolResult.metadata` with the same keys, so the undo
tracker can record every change without knowing which tool made it:

- `path`: workspace-relative path of the file (after symlinks inside the workspace are followed)
- `change`: "created" or "modified" (absent when nothing was written)
- `before`: the previous text, or None when the file did not exist
- `after`: the new text

The walking helpers at the bottom (`IgnoreRules`, `walk`, `glob_regex`, ...) are shared with
`search.py`, whose Python fallback must skip exactly what these tools skip.
"""

from __future__ import annotations

import asyncio
import difflib
import os
import re
import stat
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pathspec
from pydantic import Field

from journeyman.core.errors import ToolError
from journeyman.core.messages import ToolResult
from journeyman.tools.base import BaseTool, ToolArgs, ToolKind, fail, ok
from journeyman.tools.context import ToolContext

MAX_READ_LINES = 2000
"""Most lines one read_file call returns."""
MAX_READ_BYTES = 256 * 1024
"""Most bytes of file text one read_file call returns."""
MAX_LINE_CHARS = 2000
"""Longer lines are cut in read_file output."""
SNIFF_BYTES = 8192
"""A NUL byte in this many leading bytes marks a file as binary."""
MAX_LIST_ENTRIES = 5000
"""Upper bound for list_files' and glob's result caps."""
SNIPPET_CONTEXT = 3
"""Unchanged lines shown around an edit in edit_file's reply."""


# --------------------------------------------------------------------------------------------
# read_file


class ReadFileArgs(ToolArgs):
    path: str = Field(description="File to read, relative to the workspace root.")
    """File to read, relative to the workspace root."""
    offset: int = Field(
        default=1,
        ge=1,
        description="1-based number of the first line to return; use it to page through "
        "long files.",
    )
    """1-based number of the first line to return."""
    limit: int = Field(
        default=MAX_READ_LINES,
        ge=1,
        le=MAX_READ_LINES,
        description=f"Most lines to return (at most {MAX_READ_LINES}).",
    )
    """Most lines to return."""


class ReadFileTool(BaseTool):
    name = "read_file"
    description = (
        "Read a text file of the workspace. Lines come back numbered (number, tab, text); the "
        "numbers are not part of the file, so leave them out of edit_file's old_string. Long "
        f"files are returned {MAX_READ_LINES} lines (or {MAX_READ_BYTES // 1024} KB) at a time; "
        "the reply says which offset to pass to read on."
    )
    args_model = ReadFileArgs
    read_only = True
    parallel_safe = True
    kind = ToolKind.READ
    kind = ToolKind.READ
    permission_arg = "path"

    async def execute(self, args: ReadFileArgs, ctx: ToolContext) -> ToolResult:
        path = ctx.resolve(args.path, tool=self.name)
        rel = ctx.relative(path)
        if not path.exists():
            return fail(
                self.name, await asyncio.to_thread(missing_path_message, self.name, path, ctx)
            )
        if path.is_dir():
            return fail(
                self.name, f"{self.name}: {rel} is a directory; use list_files to see what it holds"
            )
        if problem := _not_a_regular_file(path, self.name, rel):
            return fail(self.name, problem)
        page = await asyncio.to_thread(_read_page, path, args.offset, args.limit)
        meta: dict[str, Any] = {"path": rel, "total_lines": page.total_lines}
        if page.binary:
            return fail(
                self.name,
                f"{self.name}: {rel} is a binary file ({page.size} bytes) and is not shown; "
                "inspect it with run_command (e.g. `file` or `xxd | head`) if you need to",
                **meta,
            )
        if page.total_lines == 0:
            return ok(self.name, f"[{rel} is empty]", **meta)
        if args.offset > page.total_lines:
            return fail(
                self.name,
                f"{self.name}: offset {args.offset} is past the end of {rel}, which has "
                f"{page.total_lines} lines; pass an offset between 1 and {page.total_lines}",
                **meta,
            )
        last = args.offset + len(page.lines) - 1
        body = "\n".join(f"{n:>6}\t{text}" for n, text in enumerate(page.lines, args.offset))
        if last < page.total_lines:
            body += (
                f"\n[showing lines {args.offset}-{last} of {page.total_lines}; call read_file "
                f"with offset={last + 1} to read on]"
            )
        return ok(self.name, body, start_line=args.offset, end_line=last, **meta)


@dataclass
class _Page:
    lines: list[str]
    total_lines: int
    size: int
    binary: bool = False


def _read_page(path: Path, offset: int, limit: int) -> _Page:
    size = path.stat().st_size
    lines: list[str] = []
    budget = MAX_READ_BYTES
    total = 0
    with path.open("rb") as fh:
        if b"\0" in fh.read(SNIFF_BYTES):
            return _Page([], 0, size, binary=True)
        fh.seek(0)
        collecting = True
        for total, raw in enumerate(fh, 1):
            if not collecting or total < offset:
                continue
            if len(lines) >= limit or (len(raw) > budget and lines):
                collecting = False
                continue
            budget -= len(raw)
            text = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            if len(text) > MAX_LINE_CHARS:
                cut = len(text) - MAX_LINE_CHARS
                text = f"{text[:MAX_LINE_CHARS]} [... line cut, {cut} more characters]"
            lines.append(text)
    return _Page(lines, total, size)


# --------------------------------------------------------------------------------------------
# write_file


class WriteFileArgs(ToolArgs):
    path: str = Field(
        description="File to write, relative to the workspace root; missing parent "
        "directories are created."
    )
    """File to write, relative to the workspace root."""
    content: str = Field(description="The complete new text of the file.")
    """The complete new text of the file."""


class WriteFileTool(BaseTool):
    name = "write_file"
    kind = ToolKind.EDIT
    permission_arg = "path"
    description = (
        "Create a text file, or replace an existing one's whole content. To change part of an "
        "existing file prefer edit_file, which is shorter and safer."
    )
    args_model = WriteFileArgs

    async def execute(self, args: WriteFileArgs, ctx: ToolContext) -> ToolResult:
        path = ctx.resolve(args.path, tool=self.name)
        rel = ctx.relative(path)
        if problem := _not_a_regular_file(path, self.name, rel):
            return fail(self.name, problem)
        before = await asyncio.to_thread(read_text_for_change, path, self.name, rel)
        if before == args.content:
            return ok(
                self.name, f"{rel} already has exactly this content; nothing written", path=rel
            )
        ctx.record_change(rel, before, args.content, self.name)
        await asyncio.to_thread(write_text, path, args.content)
        lines = count_lines(args.content)
        if before is None:
            message = f"created {rel} ({lines} lines)"
        else:
            message = f"overwrote {rel} ({count_lines(before)} -> {lines} lines)"
        return ok(self.name, message, **change_metadata(rel, before, args.content))


# --------------------------------------------------------------------------------------------
# edit_file


class EditFileArgs(ToolArgs):
    path: str = Field(description="File to edit, relative to the workspace root.")
    """File to edit, relative to the workspace root."""
    old_string: str = Field(
        description="Exact text to replace, copied from the file (without read_file's line "
        "numbers). It must occur exactly once unless replace_all is true; include a few "
        "neighbouring lines to make it unique. An empty old_string creates a new file."
    )
    """Exact text to replace; empty creates a new file."""
    new_string: str = Field(description="Text to put in its place; must differ from old_string.")
    """Replacement text."""
    replace_all: bool = Field(
        default=False,
        description="Replace every occurrence of old_string instead of requiring exactly one.",
    )
    """Replace every occurrence instead of requiring a unique one."""


class EditFileTool(BaseTool):
    name = "edit_file"
    kind = ToolKind.EDIT
    permission_arg = "path"
    description = (
        "Replace text in a file: old_string must match the file's text exactly once (or pass "
        "replace_all=true). If it matches nowhere exactly but matches one place when leading "
        "and repeated whitespace is ignored, that place is edited and new_string is re-indented "
        "to fit. The reply shows the edited region with line numbers."
    )
    args_model = EditFileArgs

    async def execute(self, args: EditFileArgs, ctx: ToolContext) -> ToolResult:
        path = ctx.resolve(args.path, tool=self.name)
        rel = ctx.relative(path)
        if args.old_string == args.new_string:
            return fail(
                self.name,
                f"{self.name}: old_string and new_string are identical, so {rel} would not "
                "change; pass the text you want in new_string",
            )
        if problem := _not_a_regular_file(path, self.name, rel):
            return fail(self.name, problem)
        if not path.exists():
            if args.old_string == "":
                ctx.record_change(rel, None, args.new_string, self.name)
                await asyncio.to_thread(write_text, path, args.new_string)
                return ok(
                    self.name,
                    f"created {rel} ({count_lines(args.new_string)} lines)",
                    **change_metadata(rel, None, args.new_string),
                )
            return fail(
                self.name, await asyncio.to_thread(missing_path_message, self.name, path, ctx)
            )
        before = await asyncio.to_thread(read_text_for_change, path, self.name, rel)
        if before is None:
            return fail(self.name, f"{self.name}: {rel} disappeared while it was being edited")
        if args.old_string == "" and before != "":
            return fail(
                self.name,
                f"{self.name}: old_string is empty but {rel} already has content; quote the text "
                "to replace (or the lines next to where new text goes), or use write_file to "
                "replace the whole file",
            )
        outcome = apply_edit(
            before, args.old_string, args.new_string, replace_all=args.replace_all, where=rel
        )
        if outcome.text == before:
            return fail(
                self.name,
                f"{self.name}: after fitting new_string to the file's indentation, {rel} would "
                "not change; check that new_string really differs from the file's text",
            )
        ctx.record_change(rel, before, outcome.text, self.name)
        await asyncio.to_thread(write_text, path, outcome.text)
        return ok(
            self.name,
            _edit_report(rel, outcome),
            replacements=outcome.replacements,
            match=outcome.match,
            **change_metadata(rel, before, outcome.text),
        )


@dataclass(frozen=True)
class EditOutcome:
    """The result of applying one edit to a text."""

    text: str
    replacements: int
    match: str
    """"exact" or "whitespace" (the whitespace-tolerant fallback was used)."""
    regions: tuple[tuple[int, int], ...]
    """1-based (first, last) line of each replaced region in the new text."""


def apply_edit(
    text: str, old: str, new: str, *, replace_all: bool = False, where: str = "the file"
) -> EditOutcome:
    """Replace `old` by `new` in `text`, or raise ToolError explaining why it can't be done.

    Exact matching first; when `old` is nowhere in `text`, a line-based match that ignores
    indentation and runs of whitespace is tried and used only if it finds exactly one place.
    A file whose line breaks are all CRLF is matched as if they were LF and keeps CRLF.
    """
    if old == "":
        if text == "":
            return EditOutcome(new, 1, "exact", ((1, max(1, count_lines(new))),))
        raise ToolError(f"edit_file: old_string is empty; quote the text of {where} to replace")
    crlf = "\r\n" in text and "\r" not in old and text.count("\r\n") == text.count("\n")
    if crlf:
        outcome = apply_edit(
            text.replace("\r\n", "\n"),
            old,
            new.replace("\r\n", "\n"),
            replace_all=replace_all,
            where=where,
        )
        return EditOutcome(
            outcome.text.replace("\n", "\r\n"), outcome.replacements, outcome.match, outcome.regions
        )
    positions = _find_all(text, old)
    if len(positions) == 1 or (replace_all and positions):
        return _replace_exact(text, old, new, positions)
    if len(positions) > 1:
        lines = [_line_of(text, p) for p in positions]
        raise ToolError(
            f"edit_file: old_string matched {len(positions)} times in {where} "
            f"(lines {_number_list(lines)}); add neighbouring lines to old_string so it matches "
            "one place only, or pass replace_all=true to change them all"
        )
    fuzzy = _whitespace_matches(text, old)
    if len(fuzzy) == 1:
        return _replace_fuzzy(text, old, new, fuzzy[0])
    if len(fuzzy) > 1:
        lines = [m.start + 1 for m in fuzzy]
        raise ToolError(
            f"edit_file: old_string is not in {where} exactly, and ignoring whitespace it matches "
            f"{len(fuzzy)} places (lines {_number_list(lines)}); copy the exact text from "
            "read_file and add neighbouring lines so it matches one place only"
        )
    raise ToolError(_no_match_message(text, old, where))


def _find_all(text: str, old: str) -> list[int]:
    positions = []
    start = text.find(old)
    while start != -1:
        positions.append(start)
        start = text.find(old, start + len(old))
    return positions


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _number_list(numbers: list[int], most: int = 10) -> str:
    shown = ", ".join(str(n) for n in numbers[:most])
    return shown + (f", ... ({len(numbers) - most} more)" if len(numbers) > most else "")


def _replace_exact(text: str, old: str, new: str, positions: list[int]) -> EditOutcome:
    pieces: list[str] = []
    regions: list[tuple[int, int]] = []
    cursor = 0
    line = 1  # line number in the new text where pieces so far end
    for pos in positions:
        kept = text[cursor:pos]
        pieces.append(kept)
        line += kept.count("\n")
        regions.append((line, line + new.count("\n")))
        pieces.append(new)
        line += new.count("\n")
        cursor = pos + len(old)
    pieces.append(text[cursor:])
    return EditOutcome("".join(pieces), len(positions), "exact", tuple(regions))


def _split_lines(text: str) -> list[str]:
    """Lines with their line breaks kept; unlike str.splitlines only '\\n' ends a line."""
    lines = text.split("\n")
    out = [line + "\n" for line in lines[:-1]]
    if lines[-1]:
        out.append(lines[-1])
    return out


def _norm(line: str) -> str:
    return " ".join(line.split())


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


@dataclass(frozen=True)
class _Window:
    start: int
    """0-based index of the first file line of the match."""
    length: int


def _trimmed_old_lines(old: str) -> tuple[list[str], int, int]:
    """old_string's lines without leading and trailing blank lines, and how many were cut."""
    lines = old.split("\n")
    lead = 0
    while lead < len(lines) and not lines[lead].strip():
        lead += 1
    trail = 0
    while trail < len(lines) - lead and not lines[len(lines) - 1 - trail].strip():
        trail += 1
    return lines[lead : len(lines) - trail], lead, trail


def _whitespace_matches(text: str, old: str) -> list[_Window]:
    wanted = [_norm(line) for line in _trimmed_old_lines(old)[0]]
    if not wanted:
        return []
    lines = [_norm(line) for line in _split_lines(text)]
    found: list[_Window] = []
    size = len(wanted)
    for i in range(len(lines) - size + 1):
        if lines[i] == wanted[0] and lines[i : i + size] == wanted:
            found.append(_Window(i, size))
    return found


def _replace_fuzzy(text: str, old: str, new: str, window: _Window) -> EditOutcome:
    file_lines = _split_lines(text)
    old_lines, lead, trail = _trimmed_old_lines(old)
    new_lines = new.split("\n")
    # Blank lines cut from the ends of old_string are cut from new_string's ends too.
    while lead and new_lines and not new_lines[0].strip():
        new_lines.pop(0)
        lead -= 1
    while trail and new_lines and not new_lines[-1].strip():
        new_lines.pop()
        trail -= 1
    matched = file_lines[window.start : window.start + window.length]
    eol = "\r\n" if matched[0].endswith("\r\n") else "\n"
    ends_with_break = matched[-1].endswith("\n")
    reindented = _reindent(new_lines, old_lines, matched)
    block = eol.join(reindented)
    if reindented and ends_with_break:
        block += eol
    if new == "":
        block = ""
    result = "".join(file_lines[: window.start]) + block
    result += "".join(file_lines[window.start + window.length :])
    first = window.start + 1
    return EditOutcome(result, 1, "whitespace", ((first, first + max(0, len(reindented) - 1)),))


def _reindent(new_lines: list[str], old_lines: list[str], matched: list[str]) -> list[str]:
    """Give new_string the file's indentation, as old_string's lines map onto the file's.

    Each non-blank old line pairs its indentation with the matched file line's. A new line's
    indentation is translated through the longest old indentation it starts with; lines that
    start with none of them are left alone. Blank lines become empty.
    """
    mapping: dict[str, str] = {}
    for old_line, file_line in zip(old_lines, matched, strict=True):
        if old_line.strip():
            mapping.setdefault(_indent(old_line), _indent(file_line))
    by_length = sorted(mapping, key=len, reverse=True)
    out = []
    for line in new_lines:
        if not line.strip():
            out.append("")
            continue
        indent = _indent(line)
        for old_indent in by_length:
            if indent.startswith(old_indent):
                out.append(mapping[old_indent] + line[len(old_indent) :])
                break
        else:
            out.append(line)
    return out


def _no_match_message(text: str, old: str, where: str) -> str:
    message = f"edit_file: old_string was not found in {where}, not even ignoring whitespace."
    old_lines = _trimmed_old_lines(old)[0]
    numbered = [line for line in old_lines if line.strip()]
    if numbered and all(re.match(r"\s*\d+\t", line) for line in numbered):
        message += (
            " It looks like it contains line numbers from read_file's output; pass only the "
            "file's own text."
        )
    file_lines = _split_lines(text)
    best = _closest_region(file_lines, old_lines)
    if best is None:
        return message + f" Nothing in {where} resembles it; read the file to see its contents."
    start, length, ratio = best
    shown = _numbered(file_lines, start + 1, min(start + length, start + 30))
    return (
        f"{message} The most similar text is at lines {start + 1}-{start + length} "
        f"({ratio:.0%} alike):\n{shown}\nCopy the text exactly from the file (read it again if "
        "it may have changed) and retry."
    )


def _closest_region(file_lines: list[str], old_lines: list[str]) -> tuple[int, int, float] | None:
    """(start index, length, similarity) of the file region most like `old_lines`."""
    if not file_lines or not old_lines:
        return None
    size = min(len(old_lines), len(file_lines))
    normalized = [_norm(line) for line in file_lines]
    target = "\n".join(_norm(line) for line in old_lines)
    candidates: set[int] = set()
    # Find file lines resembling the first few lines of old_string; each suggests a start.
    for k, line in enumerate(old_lines[:3]):
        probe = _norm(line)
        if not probe:
            continue
        matcher = difflib.SequenceMatcher(None, autojunk=False)
        matcher.set_seq2(probe)
        scored: list[tuple[float, int]] = []
        for j, candidate in enumerate(normalized):
            matcher.set_seq1(candidate)
            if matcher.real_quick_ratio() < 0.4 or matcher.quick_ratio() < 0.4:
                continue
            scored.append((matcher.ratio(), j))
        for _, j in sorted(scored, reverse=True)[:3]:
            candidates.add(min(max(0, j - k), len(file_lines) - size))
    best: tuple[int, int, float] | None = None
    for start in sorted(candidates):
        region = "\n".join(normalized[start : start + size])
        ratio = difflib.SequenceMatcher(None, region, target, autojunk=False).ratio()
        if best is None or ratio > best[2]:
            best = (start, size, ratio)
    if best is None or best[2] < 0.3:
        return None
    return best


def _edit_report(rel: str, outcome: EditOutcome) -> str:
    if outcome.match == "whitespace":
        first, last = outcome.regions[0]
        head = (
            f"edited {rel}: old_string matched lines {first}-{last} only when whitespace is "
            "ignored, so that region was replaced and new_string re-indented to fit. Check the "
            "result:"
        )
    elif outcome.replacements == 1:
        head = f"edited {rel}: replaced 1 occurrence at line {outcome.regions[0][0]}"
    else:
        starts = [first for first, _ in outcome.regions]
        head = (
            f"edited {rel}: replaced {outcome.replacements} occurrences "
            f"(lines {_number_list(starts)} of the new text)"
        )
    if outcome.replacements > 1:
        return head
    first, last = outcome.regions[0]
    lines = _split_lines(outcome.text)
    lo = max(1, first - SNIPPET_CONTEXT)
    hi = min(len(lines), last + SNIPPET_CONTEXT, lo + 39)
    snippet = _numbered(lines, lo, hi)
    return f"{head}\n{snippet}" if snippet else head


def _numbered(lines: list[str], first: int, last: int) -> str:
    """Lines `first`..`last` (1-based, inclusive) in read_file's numbered format."""
    return "\n".join(f"{n:>6}\t{lines[n - 1].rstrip(_EOL)}" for n in range(first, last + 1))


_EOL = "\r\n"


# --------------------------------------------------------------------------------------------
# list_files


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
    read_only = True
    parallel_safe = True
    kind = ToolKind.READ

    async def execute(self, args: ListFilesArgs, ctx: ToolContext) -> ToolResult:
        path = ctx.resolve(args.path, tool=self.name)
        rel = ctx.relative(path)
        if not path.exists():
            return fail(
                self.name, await asyncio.to_thread(missing_path_message, self.name, path, ctx)
            )
        if not path.is_dir():
            return fail(self.name, f"{self.name}: {rel} is a file, not a directory; use read_file")
        entries, more = await asyncio.to_thread(
            _list_dir, ctx.workspace, path, args.recursive, args.max_entries
        )
        if not entries:
            return ok(
                self.name, f"[{rel} is empty, or everything in it is ignored]", path=rel, count=0
            )
        body = "\n".join(entries)
        if more:
            body += (
                f"\n[stopped after {args.max_entries} entries; list a subdirectory or use glob "
                "to narrow down]"
            )
        return ok(self.name, body, path=rel, count=len(entries), truncated=more)


def _list_dir(root: Path, start: Path, recursive: bool, cap: int) -> tuple[list[str], bool]:
    rules = IgnoreRules.for_start(root, start)
    entries: list[str] = []
    for entry in walk(start, recursive=recursive, skip_dir=lambda p: rules.ignored(p, True)):
        if entry.kind != "dir" and rules.ignored(entry.path, False):
            continue
        if len(entries) >= cap:
            return entries, True
        rel = entry.path.relative_to(root).as_posix()
        entries.append(rel + {"dir": "/", "link": "@"}.get(entry.kind, ""))
    return entries, False


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
    read_only = True
    parallel_safe = True
    kind = ToolKind.READ

    async def execute(self, args: GlobArgs, ctx: ToolContext) -> ToolResult:
        pattern = args.pattern.strip()
        if not pattern or pattern.startswith("/") or ".." in pattern.split("/"):
            return fail(
                self.name,
                f"{self.name}: pattern {args.pattern!r} must be relative and stay inside `path` "
                "(no leading '/' or '..'); pass the directory in `path` instead",
            )
        base = ctx.resolve(args.path, tool=self.name)
        if not base.is_dir():
            if not base.exists():
                message = await asyncio.to_thread(missing_path_message, self.name, base, ctx)
                return fail(self.name, message)
            return fail(self.name, f"{self.name}: {ctx.relative(base)} is not a directory")
        regex = glob_regex(pattern.removeprefix("./"))
        found, more = await asyncio.to_thread(
            _glob_files, ctx.workspace, base, regex, args.max_results
        )
        where = ctx.relative(base)
        if not found:
            hint = ""
            if "/" not in pattern and "**" not in pattern:
                hint = f"; '*' does not cross directories, try '**/{pattern}'"
            return ok(self.name, f"no files match {pattern!r} under {where}{hint}", count=0)
        body = "\n".join(found)
        if more:
            body += f"\n[stopped after {args.max_results} files; use a narrower pattern or path]"
        return ok(self.name, body, count=len(found), truncated=more)


def _glob_files(root: Path, base: Path, regex: re.Pattern[str], cap: int) -> tuple[list[str], bool]:
    rules = IgnoreRules.for_start(root, base)
    found: list[str] = []
    for entry in walk(base, recursive=True, skip_dir=lambda p: rules.ignored(p, True)):
        if entry.kind == "dir" or rules.ignored(entry.path, False):
            continue
        if regex.match(entry.path.relative_to(base).as_posix()):
            if len(found) >= cap:
                return sorted(found), True
            found.append(entry.path.relative_to(root).as_posix())
    return sorted(found), False


# --------------------------------------------------------------------------------------------
# Shared helpers (also used by search.py)


def count_lines(text: str) -> int:
    """Number of lines as an editor shows them (a final line without a break counts)."""
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def change_metadata(rel: str, before: str | None, after: str) -> dict[str, Any]:
    """The file-change record every writing tool puts in its result metadata."""
    return {
        "path": rel,
        "change": "created" if before is None else "modified",
        "before": before,
        "after": after,
    }


def _not_a_regular_file(path: Path, tool: str, rel: str) -> str | None:
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
        data = path.read_bytes()
    except FileNotFoundError:
        return None
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
            found.append(entry.path.relative_to(root).as_posix())
    return found


class IgnoreRules:
    """The .gitignore files of a workspace (the root one and nested ones), read on demand.

    As in git, a deeper file's rules override shallower ones and `!pattern` re-includes.
    `.git` is always ignored. Rules from .gitignore files above `floor` are not applied, which
    lets a caller list a directory it asked for even if that directory is itself ignored.
    """

    def __init__(self, root: Path, *, floor: Path | None = None) -> None:
        self.root = root
        self.floor = floor or root
        self._specs: dict[Path, pathspec.GitIgnoreSpec | None] = {}

    @classmethod
    def for_start(cls, root: Path, start: Path) -> IgnoreRules:
        """Rules for walking from `start`: if `start` itself is ignored, its own rules apply."""
        rules = cls(root)
        if start != root and rules.ignored_with_parents(start):
            return cls(root, floor=start)
        return rules

    def _spec(self, directory: Path) -> pathspec.GitIgnoreSpec | None:
        if directory not in self._specs:
            spec = None
            try:
                text = (directory / ".gitignore").read_text(encoding="utf-8", errors="replace")
            except OSError:
                pass
            else:
                spec = pathspec.GitIgnoreSpec.from_lines(text.splitlines())
            self._specs[directory] = spec
        return self._specs[directory]

    def ignored(self, path: Path, is_dir: bool) -> bool:
        """Whether the rules exclude `path` (inside the root); `is_dir` decides "dir/" patterns."""
        if path.name == ".git":
            return True
        try:
            parts = path.relative_to(self.root).parts
        except ValueError:
            return False
        verdict = False
        directory = self.root
        for depth in range(len(parts)):
            if depth:
                directory = directory / parts[depth - 1]
            if directory != self.floor and self.floor not in directory.parents:
                continue  # a .gitignore above the floor
            spec = self._spec(directory)
            if spec is None:
                continue
            rel = "/".join(parts[depth:]) + ("/" if is_dir else "")
            result = spec.check_file(rel)
            if result.include is not None:
                verdict = bool(result.include)
        return verdict

    def ignored_with_parents(self, path: Path) -> bool:
        """Whether `path` or any directory between the root and it is ignored."""
        try:
            parts = path.relative_to(self.root).parts
        except ValueError:
            return False
        current = self.root
        for i, part in enumerate(parts):
            current = current / part
            if self.ignored(current, is_dir=i < len(parts) - 1 or current.is_dir()):
                return True
        return False


@dataclass(frozen=True)
class WalkEntry:
    path: Path
    kind: str
    """"file", "dir", "link" (a symlink, never followed) or "other" (FIFO, socket, device)."""


def walk(
    start: Path, *, recursive: bool = True, skip_dir: Callable[[Path], bool] = lambda p: False
) -> Iterator[WalkEntry]:
    """Depth-first walk below `start`, entries of each directory sorted by name.

    Directories are yielded (unless `skip_dir` says to skip them, which also prunes them) and
    then descended into before the next sibling, the order `rg --sort path` uses. Symlinks are
    yielded as "link" and never followed; unreadable directories are passed over.
    """
    stack: list[Iterator[os.DirEntry[str]]] = [_sorted_entries(start)]
    while stack:
        entry = next(stack[-1], None)
        if entry is None:
            stack.pop()
            continue
        path = Path(entry.path)
        try:
            if entry.is_symlink():
                yield WalkEntry(path, "link")
            elif entry.is_dir(follow_symlinks=False):
                if skip_dir(path):
                    continue
                yield WalkEntry(path, "dir")
                if recursive:
                    stack.append(_sorted_entries(path))
            elif entry.is_file(follow_symlinks=False):
                yield WalkEntry(path, "file")
            else:
                yield WalkEntry(path, "other")
        except OSError:
            continue


def _sorted_entries(directory: Path) -> Iterator[os.DirEntry[str]]:
    try:
        with os.scandir(directory) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError:
        return iter(())
    return iter(entries)


def expand_braces(pattern: str, *, most: int = 256) -> list[str]:
    """Expand `{a,b}` alternatives (nested ones too) into separate patterns."""
    depth = 0
    open_at = -1
    for i, char in enumerate(pattern):
        if char == "{":
            if depth == 0:
                open_at = i
            depth += 1
        elif char == "}" and depth:
            depth -= 1
            if depth == 0:
                inner = pattern[open_at + 1 : i]
                options = _split_top_level(inner)
                if len(options) < 2:
                    continue
                out: list[str] = []
                for option in options:
                    for rest in expand_braces(pattern[:open_at] + option + pattern[i + 1 :]):
                        out.append(rest)
                        if len(out) >= most:
                            return out
                return out
    return [pattern]


def _split_top_level(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for char in text:
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
            continue
        depth += {"{": 1, "}": -1}.get(char, 0)
        current += char
    parts.append(current)
    return parts


def glob_regex(pattern: str) -> re.Pattern[str]:
    """Compile a glob ('*', '?', '[...]', '**', '{a,b}') to a regex over '/'-separated paths."""
    return re.compile("(?:" + "|".join(_translate(p) for p in expand_braces(pattern)) + r")\Z")


def _translate(pattern: str) -> str:
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        char = pattern[i]
        if pattern.startswith("**", i):
            at_start = i == 0 or pattern[i - 1] == "/"
            if at_start and pattern.startswith("**/", i):
                out.append("(?:.*/)?")
                i += 3
                continue
            out.append(".*")
            i += 2
            continue
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            first = i + 2 if pattern[i + 1 : i + 2] in ("!", "^") else i + 1
            end = pattern.find("]", first + 1)  # a ']' right after '[' is a member
            if end == -1:
                out.append(re.escape(char))
            else:
                negate = "^" if first == i + 2 else ""
                members = "".join(c if c == "-" else re.escape(c) for c in pattern[first:end])
                out.append(f"[{negate}{members}]")
                i = end + 1
                continue
        else:
            out.append(re.escape(char))
        i += 1
    return "".join(out)


def path_glob_matcher(glob: str) -> Callable[[str], bool]:
    """Matcher with ripgrep's `--glob` semantics for one glob (gitignore-style, '!' negates).

    Returns a function of a workspace-relative path that says whether the glob matches it,
    ignoring a leading '!'.
    """
    lines = expand_braces(glob.removeprefix("!"))
    spec = pathspec.GitIgnoreSpec.from_lines(lines)
    return lambda rel: bool(spec.match_file(rel))
