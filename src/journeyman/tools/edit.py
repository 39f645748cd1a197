"""edit_file: replace one quoted piece of a file (see `edit_match` for how it is found)."""

from __future__ import annotations

import asyncio

from pydantic import Field

from journeyman.core.messages import ToolResult
from journeyman.tools.base import BaseTool, ToolArgs, ToolKind, fail, ok
from journeyman.tools.context import ToolContext
from journeyman.tools.edit_match import (
    EditOutcome,
    apply_edit,
    number_list,
    numbered_lines,
    split_lines,
)
from journeyman.tools.fileio import (
    MAX_EDIT_BYTES,
    change_metadata,
    check_edit_size,
    count_lines,
    missing_path_message,
    not_a_regular_file,
    read_text_for_change,
    refuse_own_python,
    refuse_protected,
    write_text,
)

SNIPPET_CONTEXT = 3
"""Unchanged lines shown around an edit in edit_file's reply."""


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
        "Replace text in a file: old_string must match exactly once (or pass replace_all=true). "
        "A match that differs only in indentation or repeated spaces is accepted when it is "
        "the only one, and new_string is re-indented to fit. Files over "
        f"{MAX_EDIT_BYTES // (1024 * 1024)} MB and anything under .git are not changed. The "
        "reply shows the edited region with line numbers."
    )
    args_model = EditFileArgs

    async def execute(self, args: EditFileArgs, ctx: ToolContext) -> ToolResult:
        path = ctx.resolve(args.path, tool=self.name)
        rel = ctx.relative(path)
        refuse_protected(rel, self.name)
        refuse_own_python(ctx.workspace, path, self.name)
        if args.old_string == args.new_string:
            return fail(
                self.name,
                f"{self.name}: old_string and new_string are identical, so {rel} would not "
                "change; pass the text you want in new_string",
            )
        if problem := not_a_regular_file(path, self.name, rel):
            return fail(self.name, problem)
        if not path.exists():
            if args.old_string == "":
                check_edit_size(len(args.new_string.encode()), self.name, rel, what="new_string")
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
        check_edit_size(len(outcome.text.encode()), self.name, rel, what="the edited text")
        ctx.record_change(rel, before, outcome.text, self.name)
        await asyncio.to_thread(write_text, path, outcome.text)
        return ok(
            self.name,
            _edit_report(rel, outcome),
            replacements=outcome.replacements,
            match=outcome.match,
            **change_metadata(rel, before, outcome.text),
        )


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
            f"(lines {number_list(starts)} of the new text)"
        )
    if outcome.replacements > 1:
        return head
    first, last = outcome.regions[0]
    lines = split_lines(outcome.text)
    lo = max(1, first - SNIPPET_CONTEXT)
    hi = min(len(lines), last + SNIPPET_CONTEXT, lo + 39)
    snippet = numbered_lines(lines, lo, hi)
    return f"{head}\n{snippet}" if snippet else head
