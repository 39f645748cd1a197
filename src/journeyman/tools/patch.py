"""apply_patch: change several files at once, all or nothing.

Two patch formats are accepted:

- a unified diff (`--- a/path`, `+++ b/path`, `@@ -l,n +l,n @@` hunks; `/dev/null` creates or
  deletes a file), as `diff -u` and `git diff` write it;
- the file-oriented envelope OpenAI's models are trained to write: `*** Begin Patch`, then
  `*** Add File: path` (every line `+`), `*** Delete File: path`, or `*** Update File: path`
  (optionally `*** Move to: new path`) with `@@ [a line to find first]` hunks of ` `, `-` and
  `+` lines (`*** End of File` pins a hunk to the file's end), then `*** End Patch`.

Every hunk of every file is located and the new texts computed before anything is written;
one miss leaves every file untouched. Hunks are found exactly first, then ignoring trailing
whitespace, then ignoring all whitespace; context lines always keep the file's own text. A hunk
found only by ignoring all whitespace has its '+' lines moved by the offset between its lines
and the file's (shifted, or tabs for spaces: `edit_match.reindent`, as edit_file does), and is
refused, with the file's lines, when no one offset explains it: code is never written at a
depth the model did not mean.

Permission rules see the paths (`ApplyPatchTool.paths_of`): every file the patch touches,
including both ends of a move, must pass; the `patch` argument itself is not a path.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from journeyman.core.errors import ToolError
from journeyman.core.messages import ToolResult
from journeyman.tools.base import BaseTool, ToolArgs, ToolKind, ok
from journeyman.tools.context import ToolContext, echo
from journeyman.tools.edit_match import (
    closest_text,
    indent_unit,
    numbered_lines,
    reindent,
    reindent_in_file_frame,
)
from journeyman.tools.fileio import (
    change_metadata,
    check_edit_size,
    not_a_regular_file,
    read_text_for_change,
    refuse_own_python,
    refuse_protected,
    write_text,
)

TOOL = "apply_patch"

Op = Literal[" ", "-", "+"]


@dataclass
class Hunk:
    """One hunk: lines to keep (" "), remove ("-") and add ("+"), in order."""

    number: int
    """1-based position among its file's hunks, for messages."""
    lines: list[tuple[Op, str]] = field(default_factory=list)
    anchor: str = ""
    """Envelope format: a line to find before the hunk's own lines (the text after `@@`)."""
    old_start: int | None = None
    """Unified format: the 1-based line the hunk starts at in the old file."""
    at_end: bool = False
    """The hunk must match at the end of the file."""
    old_has_final_break: bool = True
    new_has_final_break: bool = True

    @property
    def old(self) -> list[str]:
        return [text for op, text in self.lines if op != "+"]


@dataclass
class FilePatch:
    """What the patch does to one file."""

    action: Literal["add", "delete", "update"]
    path: str
    move_to: str | None = None
    hunks: list[Hunk] = field(default_factory=list)


# --------------------------------------------------------------------------------------------
# Parsing


def parse_patch(text: str) -> list[FilePatch]:
    """The file changes of a patch in either accepted format; ToolError if it is malformed."""
    lines = _strip_fence(text.replace("\r\n", "\n").split("\n"))
    first = next((line for line in lines if line.strip()), "")
    if first.strip() == "*** Begin Patch":
        patches = _parse_envelope(lines)
    else:
        patches = _parse_unified(lines)
    if not patches:
        raise ToolError(
            f"{TOOL}: the patch changes no file; give a unified diff (--- a/x, +++ b/x, @@ hunks) "
            "or a '*** Begin Patch' envelope with '*** Update File:' / '*** Add File:' sections"
        )
    seen: set[str] = set()
    for patch in patches:
        for path in (patch.path, patch.move_to):
            if path is None:
                continue
            if path in seen:
                raise ToolError(
                    f"{TOOL}: {path} appears more than once in the patch; put all of its hunks "
                    "in one section"
                )
            seen.add(path)
    return patches


def _strip_fence(lines: list[str]) -> list[str]:
    """Drop a Markdown code fence around the patch, which models sometimes add."""
    body = [i for i, line in enumerate(lines) if line.strip()]
    if len(body) >= 2 and lines[body[0]].startswith("```") and lines[body[-1]].strip() == "```":
        return lines[body[0] + 1 : body[-1]]
    return lines


def _parse_envelope(lines: list[str]) -> list[FilePatch]:
    patches: list[FilePatch] = []
    current: FilePatch | None = None
    hunk: Hunk | None = None
    ended = False
    start = next(i for i, line in enumerate(lines) if line.strip()) + 1
    for number, line in enumerate(lines[start:], start + 1):
        if ended:
            if line.strip():
                raise _malformed(number, "text after '*** End Patch'")
            continue
        if line.startswith("*** "):
            directive, _, value = line[4:].partition(":")
            value = value.strip()
            hunk = None
            if line.strip() == "*** End Patch":
                ended = True
            elif line.strip() == "*** End of File":
                if current is None or not current.hunks:
                    raise _malformed(number, "'*** End of File' outside a hunk")
                current.hunks[-1].at_end = True
            elif directive in _ACTIONS:
                if not value:
                    raise _malformed(number, f"'*** {directive}:' without a path")
                current = FilePatch(_ACTIONS[directive], value)
                patches.append(current)
                if current.action == "add":
                    current.hunks.append(Hunk(1))
            elif directive == "Move to":
                if current is None or current.action != "update" or current.hunks:
                    raise _malformed(number, "'*** Move to:' must follow '*** Update File:'")
                current.move_to = value
            else:
                raise _malformed(number, f"unknown directive {echo(line)}")
            continue
        if current is None:
            if line.strip():
                raise _malformed(number, "text before the first '*** ... File:' header")
            continue
        if current.action == "delete":
            if line.strip():
                raise _malformed(number, f"'*** Delete File: {current.path}' takes no lines")
            continue
        if current.action == "update" and line.startswith("@@"):
            hunk = Hunk(len(current.hunks) + 1, anchor=line[2:].strip())
            current.hunks.append(hunk)
            continue
        if current.action == "add":
            if line and not line.startswith("+"):
                raise _malformed(
                    number, f"every line of an added file starts with '+' ({echo(line, 60)})"
                )
            current.hunks[0].lines.append(("+", line[1:]))  # "": a blank line, '+' trimmed
            continue
        if hunk is None:  # a hunk without an "@@" line: allowed for the first one
            hunk = Hunk(len(current.hunks) + 1)
            current.hunks.append(hunk)
        if line == "":
            hunk.lines.append((" ", ""))  # a blank context line whose space was trimmed
        elif line[0] in " -+":
            hunk.lines.append((line[0], line[1:]))  # type: ignore[arg-type]
        else:
            raise _malformed(
                number, f"hunk lines start with ' ', '-' or '+' ({echo(line, 60)} does not)"
            )
    if not ended:
        raise ToolError(f"{TOOL}: the patch has no '*** End Patch' line; end it with one")
    for patch in patches:
        if patch.action == "update" and not any(h.lines for h in patch.hunks) and not patch.move_to:
            raise ToolError(f"{TOOL}: '*** Update File: {patch.path}' has no hunks")
        patch.hunks = [h for h in patch.hunks if h.lines or patch.action == "add"]
    return patches


_ACTIONS: dict[str, Literal["add", "delete", "update"]] = {
    "Add File": "add",
    "Delete File": "delete",
    "Update File": "update",
}

_HUNK_HEADER = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def _parse_unified(lines: list[str]) -> list[FilePatch]:
    patches: list[FilePatch] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not (line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ ")):
            i += 1
            continue
        old, new = _diff_path(line[4:]), _diff_path(lines[i + 1][4:])
        i += 2
        if old is None and new is None:
            raise _malformed(i, "both sides of the diff are /dev/null")
        if old is None:
            patch = FilePatch("add", new or "")
        elif new is None:
            patch = FilePatch("delete", old)
        else:
            patch = FilePatch("update", old, move_to=new if new != old else None)
        patches.append(patch)
        while i < len(lines) and lines[i].startswith("@@"):
            match = _HUNK_HEADER.match(lines[i])
            if match is None:
                raise _malformed(i + 1, f"bad hunk header {echo(lines[i], 80)}")
            old_left = int(match[2] if match[2] is not None else 1)
            new_left = int(match[4] if match[4] is not None else 1)
            hunk = Hunk(len(patch.hunks) + 1, old_start=int(match[1]))
            patch.hunks.append(hunk)
            i += 1
            while i < len(lines) and (old_left > 0 or new_left > 0):
                body = lines[i]
                op, text = (body[0], body[1:]) if body else (" ", "")
                if op == "\\":  # "\ No newline at end of file" after the previous line
                    _no_final_break(hunk)
                    i += 1
                    continue
                if op not in " -+":
                    raise _malformed(i + 1, f"hunk {hunk.number} of {patch.path} ends early")
                hunk.lines.append((op, text))  # type: ignore[arg-type]
                old_left -= op != "+"
                new_left -= op != "-"
                i += 1
            if old_left > 0 or new_left > 0:
                raise _malformed(i, f"hunk {hunk.number} of {patch.path} is cut short")
            while i < len(lines) and lines[i].startswith("\\"):
                _no_final_break(hunk)
                i += 1
        if patch.action == "update" and not patch.hunks and not patch.move_to:
            raise _malformed(i, f"the diff of {patch.path} has no hunks")
    return patches


def _no_final_break(hunk: Hunk) -> None:
    """A '\\ No newline at end of file' marker after the hunk's last line of a side."""
    last = hunk.lines[-1][0] if hunk.lines else " "
    if last in " -":
        hunk.old_has_final_break = False
    if last in " +":
        hunk.new_has_final_break = False


def _diff_path(header: str) -> str | None:
    """The path of a `---`/`+++` header (timestamps and a/ b/ prefixes removed)."""
    name = header.split("\t")[0].strip()
    if name == "/dev/null":
        return None
    if name.startswith(('"a/', '"b/')) or name.startswith(("a/", "b/")):
        name = name.strip('"')[2:]
    return name


def _malformed(line: int, what: str) -> ToolError:
    return ToolError(f"{TOOL}: malformed patch at line {line}: {what}; fix the patch and retry")


# --------------------------------------------------------------------------------------------
# Applying hunks to a text


@dataclass
class _Text:
    lines: list[str]
    eol: str
    final_break: bool

    @classmethod
    def of(cls, text: str) -> _Text:
        crlf = "\r\n" in text and text.count("\r\n") == text.count("\n")
        body = text.replace("\r\n", "\n") if crlf else text
        lines = body.split("\n")
        final_break = lines[-1] == ""
        if final_break:
            lines.pop()
        return cls(lines, "\r\n" if crlf else "\n", final_break or not lines)

    def render(self) -> str:
        if not self.lines:
            return ""
        return self.eol.join(self.lines) + (self.eol if self.final_break else "")


_MATCHERS = (
    ("exact", lambda line: line),
    ("trailing whitespace", str.rstrip),
    ("whitespace", lambda line: " ".join(line.split())),
)


def apply_hunks(text: str, hunks: list[Hunk], where: str) -> tuple[str, int, int]:
    """The text with every hunk applied, and how many lines were added and removed.

    Raises ToolError naming the hunk and showing the closest lines when one does not match.
    """
    doc = _Text.of(text)
    cursor = 0
    drift = 0  # how far hunks landed from their unified-diff line numbers
    pieces: list[tuple[int, int, list[str]]] = []
    unit: str | None = None
    for hunk in hunks:
        start, loose = _locate(doc.lines, hunk, cursor, drift, where)
        old = hunk.old
        new_side = [line for op, line in hunk.lines if op != "-"]
        if loose:
            unit = unit or indent_unit(doc.lines)
            new_side = _reindented(doc.lines, start, hunk, unit, where)
        new: list[str] = []
        k = start  # the file line of the hunk's next context or '-' line
        for op, _ in hunk.lines:
            if op == " ":
                new.append(doc.lines[k])  # the file's own text, even when matched loosely
            elif op == "+":
                new.append(new_side[len(new)])
            k += op != "+"
        pieces.append((start, start + len(old), new))
        if hunk.old_start is not None:
            drift = start - _expected_index(hunk)
        cursor = start + len(old)
        if cursor == len(doc.lines) and not hunk.new_has_final_break:
            doc.final_break = False
        elif cursor == len(doc.lines) and not hunk.old_has_final_break:
            doc.final_break = True
    out: list[str] = []
    done = 0
    for start, end, new in pieces:
        out.extend(doc.lines[done:start])
        out.extend(new)
        done = end
    out.extend(doc.lines[done:])
    added = sum(1 for h in hunks for op, _ in h.lines if op == "+")
    removed = sum(1 for h in hunks for op, _ in h.lines if op == "-")
    result = _Text(out, doc.eol, doc.final_break)
    return result.render(), added, removed


def _reindented(
    lines: list[str], start: int, hunk: Hunk, unit: str | None, where: str
) -> list[str]:
    """The hunk's new side (context and '+' lines) with the '+' lines at the file's depths,
    for a hunk whose lines match the file at `start` only ignoring whitespace.

    The '+' lines move by the offset (or change of unit, tabs for spaces) between the hunk's
    context and '-' lines and the file's lines they matched; '+' lines that already sit at
    the depth of the file lines they keep company are left as they are. Anything else is
    refused: where the '+' lines belong cannot be told."""
    new_side = [line for op, line in hunk.lines if op != "-"]
    matched = lines[start : start + len(hunk.old)]
    placed = reindent(new_side, hunk.old, matched, unit)
    if placed is None:
        placed = reindent_in_file_frame(new_side, matched)
    if placed is None:
        first, last = start + 1, start + len(matched)
        raise ToolError(
            f"{TOOL}: hunk {hunk.number} of {where} matches lines {first}-{last} only when "
            "indentation is ignored, and its indentation does not follow the file's by one "
            "consistent offset, so how deep its '+' lines belong cannot be told. No file was "
            f"changed. The file's lines there are:\n{numbered_lines(lines, first, last)}\n"
            "Redo the hunk with the file's exact indentation on every line."
        )
    return placed


def _locate(lines: list[str], hunk: Hunk, cursor: int, drift: int, where: str) -> tuple[int, bool]:
    """Index of the first file line the hunk replaces, and whether the hunk's lines match
    there only when all whitespace is ignored (so its indentation may not be the file's)."""
    old = hunk.old
    if hunk.anchor:
        found = _find_anchor(lines, hunk.anchor, cursor)
        if found is None:
            raise ToolError(
                f"{TOOL}: hunk {hunk.number} of {where}: the line after '@@' "
                f"({echo(hunk.anchor, 80)}) is not in the file"
                + (f" after line {cursor}" if cursor else "")
                + "; copy it exactly from the file"
            )
        cursor = found + 1
    if not old:  # pure addition
        if hunk.old_start is not None:
            return min(max(_expected_index(hunk) + drift, cursor), len(lines)), False
        return (len(lines) if not hunk.anchor else cursor), False
    hint = None if hunk.old_start is None else max(cursor, _expected_index(hunk) + drift)
    for name, key in _MATCHERS:
        wanted = [key(line) for line in old]
        keyed = [key(line) for line in lines]
        starts = [
            i
            for i in range(cursor, len(lines) - len(old) + 1)
            if keyed[i] == wanted[0] and keyed[i : i + len(old)] == wanted
        ]
        if hunk.at_end:
            starts = [i for i in starts if i + len(old) == len(lines)]
        if starts:
            best = starts[0] if hint is None else min(starts, key=lambda i: abs(i - hint))
            return best, name == "whitespace"
    raise ToolError(_miss_message(lines, hunk, where))


def _expected_index(hunk: Hunk) -> int:
    """Where a unified-diff hunk starts by its header: `-l,n` is line l (1-based), except that
    a hunk removing nothing (`-l,0`) goes after line l."""
    assert hunk.old_start is not None
    return hunk.old_start if not hunk.old else hunk.old_start - 1


def _find_anchor(lines: list[str], anchor: str, cursor: int) -> int | None:
    for key in (lambda s: s, str.strip):
        for i in range(cursor, len(lines)):
            if key(lines[i]) == key(anchor):
                return i
    return None


def _miss_message(lines: list[str], hunk: Hunk, where: str) -> str:
    old = hunk.old
    shown = "\n".join(f"  {line}" for line in old[:15])
    if len(old) > 15:
        shown += f"\n  [... {len(old) - 15} more lines]"
    place = " at the end of the file" if hunk.at_end else ""
    message = (
        f"{TOOL}: hunk {hunk.number} of {where} does not match the file, not even ignoring "
        f"whitespace. The hunk expects these lines{place}:\n{shown}\n"
    )
    closest = closest_text(lines, old)
    if closest is None:
        return message + f"Nothing in {where} resembles them; read the file and redo the patch."
    return (
        message + closest + "\nNo file was changed. Read the file again and make the hunk's "
        "context and '-' lines match it exactly."
    )


# --------------------------------------------------------------------------------------------
# The tool


class ApplyPatchArgs(ToolArgs):
    patch: str = Field(
        description="The patch: a unified diff (as `git diff` prints it) or a '*** Begin Patch' "
        "... '*** End Patch' envelope with '*** Add File:', '*** Update File:' (optionally "
        "'*** Move to:'), '*** Delete File:' sections and '@@' hunks of ' ', '-' and '+' lines."
        " Paths are relative to the workspace root."
    )
    """The patch text, in either format."""


@dataclass
class _Planned:
    """A change ready to write: the path, its resolved location and the texts."""

    rel: str
    path: Path
    before: str | None
    after: str | None
    summary: str


class ApplyPatchTool(BaseTool):
    name = TOOL
    kind = ToolKind.EDIT
    permission_arg = "patch"
    """Rules cannot match the patch text; they see the paths given by `paths_of`."""
    description = (
        "Apply a multi-file patch: add, change, delete and rename files in one call. All hunks "
        "are checked first: if one does not match, no file changes and the reply shows the "
        "closest lines. A hunk that matches only with its indentation off has its '+' lines "
        "moved by the same offset."
    )
    args_model = ApplyPatchArgs

    @staticmethod
    def paths_of(args: ApplyPatchArgs | Mapping[str, Any]) -> list[str]:
        """Every workspace path the patch touches (both ends of a move), for permission rules;
        [] when the patch does not parse (the call then fails without writing)."""
        text = args.patch if isinstance(args, ApplyPatchArgs) else args.get("patch")
        if not isinstance(text, str):
            return []
        try:
            patches = parse_patch(text)
        except ToolError:
            return []
        paths: list[str] = []
        for patch in patches:
            paths.append(patch.path)
            if patch.move_to:
                paths.append(patch.move_to)
        return paths

    async def execute(self, args: ApplyPatchArgs, ctx: ToolContext) -> ToolResult:
        check_edit_size(len(args.patch.encode()), TOOL, "the patch", what="the patch")
        patches = parse_patch(args.patch)
        planned = await asyncio.to_thread(_plan, patches, ctx)
        for change in planned:
            ctx.record_change(change.rel, change.before, change.after, TOOL)
        await asyncio.to_thread(_write_all, planned)
        summary = "\n".join(change.summary for change in planned if change.summary)
        files = [change_metadata(c.rel, c.before, c.after) for c in planned]
        return ok(self.name, f"applied the patch:\n{summary}", files=files)


@dataclass(frozen=True)
class PatchPreview:
    """What applying a patch would do to one file (None: the file does not exist on that
    side: added, or deleted / moved away)."""

    path: str
    before: str | None
    after: str | None


def preview_patch(text: str, ctx: ToolContext) -> list[PatchPreview]:
    """Every file the patch would change, with its whole text before and after, written
    nowhere; raises ToolError as the tool would (the patch does not parse or apply)."""
    planned = _plan(parse_patch(text), ctx)
    return [PatchPreview(change.rel, change.before, change.after) for change in planned]


def _plan(patches: list[FilePatch], ctx: ToolContext) -> list[_Planned]:
    """Check every file and hunk and compute the new texts, writing nothing."""
    planned: list[_Planned] = []
    touched: set[Path] = set()
    for patch in patches:
        path = _target(ctx, patch.path, touched)
        rel = ctx.relative(path)
        before = read_text_for_change(path, TOOL, rel)
        if patch.action == "add":
            if before is not None:
                raise ToolError(
                    f"{TOOL}: cannot add {rel}: it already exists; use '*** Update File:' (or a "
                    "diff against its current text) to change it"
                )
            after = _Text(
                [text for _, text in patch.hunks[0].lines] if patch.hunks else [], "\n", True
            ).render()
            check_edit_size(len(after.encode()), TOOL, rel, what="the new file")
            planned.append(
                _Planned(rel, path, None, after, f"A {rel} ({len(after.splitlines())} lines)")
            )
            continue
        if before is None:
            raise ToolError(
                f"{TOOL}: cannot {'delete' if patch.action == 'delete' else 'update'} {rel}: it "
                "does not exist; check the path (list_files or glob can find it)"
            )
        if patch.action == "delete":
            planned.append(_Planned(rel, path, before, None, f"D {rel}"))
            continue
        after, added, removed = apply_hunks(before, patch.hunks, rel)
        check_edit_size(len(after.encode()), TOOL, rel, what="the patched text")
        counts = f"(+{added} -{removed})"
        if patch.move_to:
            dest = _target(ctx, patch.move_to, touched)
            dest_rel = ctx.relative(dest)
            if dest.exists() or dest.is_symlink():
                raise ToolError(
                    f"{TOOL}: cannot move {rel} to {dest_rel}: {dest_rel} already exists"
                )
            planned.append(_Planned(rel, path, before, None, ""))
            planned.append(_Planned(dest_rel, dest, None, after, f"R {rel} -> {dest_rel} {counts}"))
            continue
        if after == before:
            raise ToolError(f"{TOOL}: the hunks for {rel} change nothing; check the '+' lines")
        planned.append(_Planned(rel, path, before, after, f"M {rel} {counts}"))
    return planned


def _target(ctx: ToolContext, raw: str, touched: set[Path]) -> Path:
    """The confined, resolved path of a file the patch names; each file may be named once."""
    path = ctx.resolve(raw, tool=TOOL)
    rel = ctx.relative(path)
    refuse_protected(rel, TOOL)
    refuse_own_python(ctx.workspace, path, TOOL)
    if path in touched:
        raise ToolError(
            f"{TOOL}: {rel} is named twice in the patch (perhaps through a symlink or another "
            "spelling); put all of its changes in one section"
        )
    touched.add(path)
    if problem := not_a_regular_file(path, TOOL, rel):
        raise ToolError(problem)
    return path


def _write_all(planned: list[_Planned]) -> None:
    """Write every change; if one write fails, put back the files already written."""
    done: list[_Planned] = []
    try:
        for change in planned:
            if change.after is None:
                change.path.unlink()
            else:
                write_text(change.path, change.after)
            done.append(change)
    except OSError as exc:
        for change in reversed(done):
            try:
                if change.before is None:
                    change.path.unlink(missing_ok=True)
                else:
                    write_text(change.path, change.before)
            except OSError:
                pass
        raise ToolError(
            f"{TOOL}: writing {change.rel} failed ({exc.strerror or exc}); the files written "
            "before it were put back, so nothing changed"
        ) from None
