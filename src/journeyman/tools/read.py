"""read_file: a page of a text file, numbered, without loading more of the file than it shows."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from pydantic import Field

from journeyman.core.messages import ToolResult
from journeyman.core.text import clip_noted, noted_cut
from journeyman.tools.base import BaseTool, ToolArgs, ToolKind, fail, ok
from journeyman.tools.context import ToolContext
from journeyman.tools.fileio import SNIFF_BYTES, missing_path_message, not_a_regular_file

MAX_READ_LINES = 2000
"""Most lines one read_file call returns."""
MAX_READ_BYTES = 256 * 1024
"""Most bytes of file text one read_file call returns."""
MAX_LINE_CHARS = 2000
"""Longer lines are cut in read_file output."""
MAX_LINE_BYTES = 4 * MAX_LINE_CHARS
"""Most bytes of one line read_file holds in memory; the rest of a longer line is skipped."""
MAX_COUNT_BYTES = 64 * 1024 * 1024
"""Past the page it returns, read_file counts the file's remaining lines only within this many
bytes, so a huge file costs a bounded read."""
COUNT_CHUNK_BYTES = 1024 * 1024
"""Size of the pieces a file is scanned in."""


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
        "numbers are not part of the file, so leave them out of any text quoted in an edit. Long "
        f"files are returned {MAX_READ_LINES} lines (or {MAX_READ_BYTES // 1024} KB) at a time; "
        "the reply says which offset to pass to read on."
    )
    args_model = ReadFileArgs
    parallel_safe = True
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
        if problem := not_a_regular_file(path, self.name, rel):
            return fail(self.name, problem)
        page = await asyncio.to_thread(_read_page, path, args.offset, args.limit)
        meta: dict[str, Any] = {"path": rel, "total_lines": page.total_lines}
        if page.binary:
            message = f"{self.name}: {rel} is a binary file ({page.size:,} bytes) and is not shown"
            if ctx.offers("run_command"):
                message += (
                    "; inspect it with run_command (e.g. `file` or `xxd | head`) if you need to"
                )
            return fail(self.name, message, **meta)
        if page.total_lines == 0:
            return ok(self.name, f"[{rel} is empty]", **meta)
        if page.total_lines is not None and args.offset > page.total_lines:
            return fail(
                self.name,
                f"{self.name}: offset {args.offset} is past the end of {rel}, which has "
                f"{page.total_lines} lines; pass an offset between 1 and {page.total_lines}",
                **meta,
            )
        last = args.offset + len(page.lines) - 1
        body = "\n".join(f"{n:>6}\t{text}" for n, text in enumerate(page.lines, args.offset))
        if page.total_lines is None:
            body += (
                f"\n[showing lines {args.offset}-{last} of a {page.size:,}-byte file whose lines "
                f"were not all counted; call read_file with offset={last + 1} to read on]"
            )
        elif last < page.total_lines:
            body += (
                f"\n[showing lines {args.offset}-{last} of {page.total_lines}; call read_file "
                f"with offset={last + 1} to read on]"
            )
        return ok(self.name, body, start_line=args.offset, end_line=last, **meta)


@dataclass
class _Page:
    lines: list[str]
    total_lines: int | None
    """None when the file is too long to count its lines past the page."""
    size: int
    binary: bool = False


def _read_page(path: Path, offset: int, limit: int) -> _Page:
    """The lines `offset`.. of `path`, reading the file in bounded pieces: memory use does
    not grow with the file's size or the length of its lines."""
    lines: list[str] = []
    budget = MAX_READ_BYTES
    number = 0
    with path.open("rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if b"\0" in fh.read(SNIFF_BYTES):
            return _Page([], 0, size, binary=True)
        fh.seek(0)
        while True:
            raw, skipped, whole = _next_line(fh)
            if not raw:
                return _Page(lines, number, size)
            number += 1
            if number >= offset:
                if len(lines) >= limit or (len(raw) + skipped > budget and lines):
                    more = _count_lines_left(fh) if whole else None
                    return _Page(lines, None if more is None else number + more, size)
                budget -= len(raw) + skipped
                lines.append(_shown_line(raw, skipped))
            if not whole:
                return _Page(lines, None, size)


def _next_line(fh: BinaryIO) -> tuple[bytes, int, bool]:
    """The next line's first MAX_LINE_BYTES bytes, how many more bytes it had (skipped), and
    whether its end was reached (False when it goes on past MAX_COUNT_BYTES)."""
    raw = fh.readline(MAX_LINE_BYTES)
    skipped = 0
    if len(raw) < MAX_LINE_BYTES or raw.endswith(b"\n"):
        return raw, 0, True
    while skipped <= MAX_COUNT_BYTES:
        rest = fh.readline(COUNT_CHUNK_BYTES)
        skipped += len(rest)
        if not rest or rest.endswith(b"\n"):
            return raw, skipped, True
    return raw, skipped, False


def _shown_line(raw: bytes, skipped: int) -> str:
    text = raw.decode("utf-8", errors="replace").rstrip("\r\n")
    if skipped:  # the line went on past what was read: what is left is counted in bytes
        return noted_cut(text[:MAX_LINE_CHARS], f"line cut, about {skipped:,} more bytes")
    return clip_noted(text, MAX_LINE_CHARS, "line cut, {cut} more characters")


def _count_lines_left(fh: BinaryIO) -> int | None:
    """Lines from the file position to the end, scanning at most MAX_COUNT_BYTES; None when
    the file goes on beyond that."""
    count = 0
    open_line = False
    scanned = 0
    while chunk := fh.read(COUNT_CHUNK_BYTES):
        scanned += len(chunk)
        if scanned > MAX_COUNT_BYTES:
            return None
        count += chunk.count(b"\n")
        open_line = not chunk.endswith(b"\n")
    return count + open_line
