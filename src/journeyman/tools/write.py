"""write_file: create a text file or replace its whole content."""

from __future__ import annotations

import asyncio

from pydantic import Field

from journeyman.core.messages import ToolResult
from journeyman.tools.base import BaseTool, ToolArgs, ToolKind, fail, ok
from journeyman.tools.context import ToolContext
from journeyman.tools.fileio import (
    change_metadata,
    check_edit_size,
    count_lines,
    not_a_regular_file,
    read_text_for_change,
    refuse_own_python,
    refuse_protected,
    write_text,
)


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
        "existing file, a targeted edit (when an edit tool is offered) is shorter and safer."
    )
    args_model = WriteFileArgs

    async def execute(self, args: WriteFileArgs, ctx: ToolContext) -> ToolResult:
        path = ctx.resolve(args.path, tool=self.name)
        rel = ctx.relative(path)
        refuse_protected(rel, self.name)
        refuse_own_python(ctx.workspace, path, self.name)
        if problem := not_a_regular_file(path, self.name, rel):
            return fail(self.name, problem)
        check_edit_size(len(args.content.encode()), self.name, rel, what="the new content")
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
