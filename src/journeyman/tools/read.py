"""read_file: a page of a text file, numbered, without loading more of the file than it shows."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field

from journeyman.core.messages import ToolResult
from journeyman.tools.base import BaseTool, ToolArgs, ToolKind, fail, ok
from journeyman.tools.context import ToolContext
from journeyman.tools.fileio import SNIFF_BYTES, missing_path_message, not_a_regular_file

MAX_READ_LINES = 2000
"""Most lines one read_file call returns."""
MAX_READ_BYTES = 256 * 1024
"""Most bytes of file text one read_file call returns."""
MAX_LINE_CHARS = 2000
"""Longer lines are cut in read_file output."""


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
