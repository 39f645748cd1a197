"""The language servers as agent tools, and diagnostics appended to the agent's own edits.

Five read-only, parallel-safe tools ask the `LspManager`: `lsp_definition`, `lsp_references`,
`lsp_hover`, `lsp_diagnostics` and `lsp_symbols`. Positions are given as a 1-based line plus
either the symbol's name on that line or its 1-based column, because models quote names far
more reliably than they count characters. Answers use workspace-relative paths and 1-based
lines and columns. A missing, crashed or hung server makes the call fail with a message that
says so and what to use instead; it never ends the run.

`EditDiagnostics` wraps a file-changing tool (one that declares `ToolKind.EDIT`): after a successful
write to a file that a *running* server covers, the server is given the new text and its
diagnostics for that file are appended to the result, at most `LspConfig.edit_diagnostics`
lines. Nothing is started for this, and any trouble leaves the edit's own result untouched.

When the server has not finished with the file's current text, both say "still analysing
<file> (version N)" rather than repeat what it said about an earlier text, and the
`lsp_diagnostics` result carries `pending=True` in its metadata so that asking again is not
counted as a repeated call by the loop detector.
`with_lsp(tools, manager)` returns a tool list with both applied.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from journeyman.core.messages import ToolResult
from journeyman.core.text import clip_noted
from journeyman.integrations.lsp.manager import LspManager
from journeyman.integrations.lsp.positions import split_lines
from journeyman.integrations.lsp.results import Diagnostic, Location, LspReply, LspSymbol
from journeyman.tools.base import BaseTool, Tool, ToolArgs, ToolKind, fail, ok
from journeyman.tools.context import ToolContext

log = logging.getLogger(__name__)

MAX_SHOWN = 50
"""Most locations, symbols or diagnostics listed in one tool result."""
MAX_HOVER_CHARS = 4000
"""Hover text longer than this is cut."""
EDIT_DIAGNOSTICS_GRACE = 5.0
"""Seconds allowed beyond `diagnostics_wait` for the post-edit exchange before giving up."""


# --------------------------------------------------------------------------------------------
# arguments


class PositionArgs(ToolArgs):
    path: str = Field(description="File to ask about, relative to the workspace root.")
    """File to ask about, relative to the workspace root."""
    line: int = Field(ge=1, description="1-based line number of the symbol, as read_file shows.")
    """1-based line of the symbol."""
    symbol: str | None = Field(
        default=None,
        description="The name on that line to ask about (its first occurrence is used); "
        "give this or column.",
    )
    """Name on that line to ask about; its first whole-word occurrence is used."""
    column: int | None = Field(
        default=None,
        ge=1,
        description="1-based character column of the symbol; overrides symbol when given.",
    )
    """1-based character column; takes precedence over `symbol`."""


class ReferencesArgs(PositionArgs):
    include_declaration: bool = Field(
        default=True, description="Also list the place where the symbol is defined."
    )
    """List the definition among the references."""


class DiagnosticsArgs(ToolArgs):
    path: str | None = Field(
        default=None,
        description="File to check, relative to the workspace root; omit to list what running "
        "language servers have reported so far for all files.",
    )
    """File to check; None lists everything running servers have reported."""


class SymbolsArgs(ToolArgs):
    query: str = Field(
        default="",
        description="Part of the name to look for (case-insensitive); empty lists all symbols "
        "of the file given in path.",
    )
    """Case-insensitive part of the symbol name; empty matches every symbol."""
    path: str | None = Field(
        default=None,
        description="Only search this file (relative to the workspace root); omit to search "
        "the whole workspace.",
    )
    """Limit the search to one file; None searches the workspace."""


# --------------------------------------------------------------------------------------------
# tools


class _LspTool(BaseTool):
    parallel_safe = True
    kind = ToolKind.READ

    def __init__(self, manager: LspManager) -> None:
        self.manager = manager

    async def _position(self, args: PositionArgs, ctx: ToolContext) -> tuple[Path, int] | str:
        """The file and 1-based column the arguments point at, or why they point nowhere."""
        file = ctx.resolve(args.path, tool=self.name)
        if args.column is not None:
            return file, args.column
        if not args.symbol:
            return f"{self.name}: give the symbol's name (symbol) or its column (column)"
        try:
            text = await asyncio.to_thread(file.read_text, encoding="utf-8", errors="replace")
        except OSError as exc:
            return f"{self.name}: cannot read {ctx.relative(file)}: {exc.strerror or exc}"
        lines = split_lines(text)
        if args.line > len(lines):
            return (
                f"{self.name}: {ctx.relative(file)} has {len(lines)} lines, so there is no "
                f"line {args.line}"
            )
        column = find_column(lines[args.line - 1], args.symbol)
        if column is None:
            return (
                f"{self.name}: {args.symbol!r} does not occur on line {args.line} of "
                f"{ctx.relative(file)}, which reads: {lines[args.line - 1].strip()[:200]!r}"
            )
        return file, column

    def _failed(self, reply: LspReply[Any]) -> ToolResult:
        text = f"{self.name}: {reply.problem}"
        if reply.notice:
            text += f" ({reply.notice})"
        return fail(self.name, text, error="lsp_unavailable", server=reply.server)

    def _answer(self, reply: LspReply[Any], text: str, **metadata: Any) -> ToolResult:
        notes = []
        if reply.notice:
            notes.append(f"note: {reply.notice}")
        if not reply.complete:
            notes.append("note: the answer may be incomplete (a limit was reached)")
        body = "\n".join([text, *notes])
        return ok(self.name, body, server=reply.server, **metadata)


class LspDefinitionTool(_LspTool):
    name = "lsp_definition"
    description = (
        "Go to definition via the language server: where the symbol at a position is defined, "
        "following imports across files. Give the file, the line where the symbol appears and "
        "its name. Answers path:line:column of each definition with that line's text."
    )
    args_model = PositionArgs

    async def execute(self, args: PositionArgs, ctx: ToolContext) -> ToolResult:
        where = await self._position(args, ctx)
        if isinstance(where, str):
            return fail(self.name, where)
        file, column = where
        reply = await self.manager.definition(file, args.line, column)
        if not reply.ok:
            return self._failed(reply)
        what = _what(args, ctx, file, column)
        if not reply.value:
            return self._answer(reply, f"no definition found for {what}", count=0)
        head = f"definition of {what}:" if len(reply.value) == 1 else f"definitions of {what}:"
        return self._answer(
            reply, "\n".join([head, *_locations(reply.value)]), count=len(reply.value)
        )


class LspReferencesTool(_LspTool):
    name = "lsp_references"
    description = (
        "Find references via the language server: every place in the workspace that uses the "
        "symbol at a position (more precise than grep: it follows scopes and imports). Give "
        "the file, the line and the symbol's name."
    )
    args_model = ReferencesArgs

    async def execute(self, args: ReferencesArgs, ctx: ToolContext) -> ToolResult:
        where = await self._position(args, ctx)
        if isinstance(where, str):
            return fail(self.name, where)
        file, column = where
        reply = await self.manager.references(
            file, args.line, column, include_declaration=args.include_declaration
        )
        if not reply.ok:
            return self._failed(reply)
        what = _what(args, ctx, file, column)
        if not reply.value:
            return self._answer(reply, f"no references found for {what}", count=0)
        files = len({loc.path for loc in reply.value})
        head = f"{_count(len(reply.value), 'reference')} to {what} in {_count(files, 'file')}:"
        return self._answer(
            reply, "\n".join([head, *_locations(reply.value)]), count=len(reply.value)
        )


class LspHoverTool(_LspTool):
    name = "lsp_hover"
    description = (
        "Hover via the language server: the type, signature and documentation of the symbol "
        "at a position. Give the file, the line and the symbol's name."
    )
    args_model = PositionArgs

    async def execute(self, args: PositionArgs, ctx: ToolContext) -> ToolResult:
        where = await self._position(args, ctx)
        if isinstance(where, str):
            return fail(self.name, where)
        file, column = where
        reply = await self.manager.hover(file, args.line, column)
        if not reply.ok:
            return self._failed(reply)
        what = _what(args, ctx, file, column)
        if reply.value is None:
            return self._answer(reply, f"the language server has nothing to show for {what}")
        text = reply.value.text
        return self._answer(reply, clip_noted(text, MAX_HOVER_CHARS))


class LspDiagnosticsTool(_LspTool):
    name = "lsp_diagnostics"
    description = (
        "Errors and warnings the language server reports for a file: undefined names, type "
        "errors, bad imports, unused variables. Much faster than running the whole test "
        "suite; results are path:line:column severity: message."
    )
    args_model = DiagnosticsArgs

    async def execute(self, args: DiagnosticsArgs, ctx: ToolContext) -> ToolResult:
        file = ctx.resolve(args.path, tool=self.name) if args.path else None
        reply = await self.manager.diagnostics(file)
        if not reply.ok:
            return self._failed(reply)
        counts = severity_counts(reply.value)
        scope = ctx.relative(file) if file is not None else "the files checked so far"
        waiting = analysing_text(reply.analysing)
        if waiting and not reply.value:
            text = f"{waiting}; its earlier diagnostics are out of date, so none are shown"
        elif not reply.value:
            text = f"no problems reported in {scope}"
        else:
            text = "\n".join(
                [
                    f"{_summary(counts)} in {scope}:",
                    *_capped([d.render(with_path=True) for d in reply.value]),
                    *([f"note: {waiting}"] if waiting else []),
                ]
            )
        # a "still analysing" answer says nothing new when repeated, but asking again is how
        # the model gets the real answer, so it must not count as a repeated call
        pending = {"pending": True} if reply.analysing else {}
        return self._answer(
            dataclasses.replace(reply, complete=True),
            text,
            count=len(reply.value),
            **counts,
            **pending,
        )


class LspSymbolsTool(_LspTool):
    name = "lsp_symbols"
    description = (
        "Find classes, functions, methods and variables by name via the language server: in "
        "one file (path), or across the workspace (query, case-insensitive part of the name). "
        "Answers kind name path:line:column."
    )
    args_model = SymbolsArgs

    async def execute(self, args: SymbolsArgs, ctx: ToolContext) -> ToolResult:
        file = ctx.resolve(args.path, tool=self.name) if args.path else None
        if file is None and not args.query.strip():
            return fail(
                self.name,
                f"{self.name}: give a query (part of a name) to search the workspace, or a "
                "path to list one file's symbols",
            )
        reply = await self.manager.symbols(args.query.strip(), file)
        if not reply.ok:
            return self._failed(reply)
        scope = ctx.relative(file) if file is not None else "the workspace"
        wanted = f" matching {args.query.strip()!r}" if args.query.strip() else ""
        if not reply.value:
            return self._answer(reply, f"no symbols{wanted} found in {scope}", count=0)
        head = f"{_count(len(reply.value), 'symbol')}{wanted} in {scope}:"
        return self._answer(
            reply,
            "\n".join([head, *_capped([_symbol(s) for s in reply.value])]),
            count=len(reply.value),
        )


def lsp_tools(manager: LspManager) -> list[Tool]:
    """Fresh instances of the five LSP tools, all asking `manager`."""
    return [
        LspDefinitionTool(manager),
        LspReferencesTool(manager),
        LspHoverTool(manager),
        LspDiagnosticsTool(manager),
        LspSymbolsTool(manager),
    ]


# --------------------------------------------------------------------------------------------
# diagnostics after edits


class EditDiagnostics:
    """A file-writing tool whose successful results carry the covering server's diagnostics.

    Name, description, arguments and flags are the wrapped tool's, so the model, permissions,
    hooks and undo see no difference; the diagnostics are an extra paragraph of the content
    and a small `lsp` entry in the metadata.
    """

    def __init__(self, inner: Tool, manager: LspManager) -> None:
        self.inner = inner
        self.manager = manager

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def description(self) -> str:
        return self.inner.description

    @property
    def args_model(self) -> type[BaseModel]:
        return self.inner.args_model

    @property
    def read_only(self) -> bool:
        return self.inner.read_only

    @property
    def parallel_safe(self) -> bool:
        return self.inner.parallel_safe

    @property
    def kind(self) -> ToolKind:
        return self.inner.kind

    @property
    def permission_arg(self) -> str | None:
        return self.inner.permission_arg

    def paths_of(self, args: Mapping[str, Any]) -> list[str] | None:
        """The wrapped tool's `paths_of` answer (for permission rules), or None without one."""
        hook = getattr(self.inner, "paths_of", None)
        return hook(args) if callable(hook) else None

    async def execute(self, args: Any, ctx: ToolContext) -> ToolResult:
        result = await self.inner.execute(args, ctx)
        limit = self.manager.config.edit_diagnostics
        meta = result.metadata
        rel = meta.get("path")
        if result.is_error or limit <= 0 or not meta.get("change"):
            return result
        if not isinstance(rel, str):
            return result
        file = ctx.workspace / rel
        try:  # the result carries no copy of the text (the journal keeps it)
            after = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return result
        if self.manager.running_for(file) is None:
            return result
        wait = self.manager.config.diagnostics_wait + EDIT_DIAGNOSTICS_GRACE
        try:
            reply = await asyncio.wait_for(self.manager.notify_file_changed(file, after), wait)
        except TimeoutError:
            late = f"(language server: no diagnostics for {rel} within {wait:g} s)"
            return dataclasses.replace(result, content=f"{result.content}\n\n{late}")
        except Exception:  # the edit happened; a language server bug must not hide that
            log.exception("post-edit diagnostics for %s failed", rel)
            return result
        note = edit_note(reply, rel, limit)
        if note is None:
            return result
        counts = severity_counts(reply.value)
        return dataclasses.replace(
            result,
            content=f"{result.content}\n\n{note}",
            metadata={**meta, "lsp": {"server": reply.server, **counts}},
        )


def with_lsp(tools: Iterable[Tool], manager: LspManager) -> list[Tool]:
    """`tools` with the edit tools (kind EDIT) wrapped in `EditDiagnostics`, plus the LSP tools.

    A wrapped tool's result gains diagnostics when its metadata reports the `path` it changed
    and the text `after`; other edit tools pass through unchanged. LSP tools whose names are
    already taken are left out, so a caller's own tool wins.
    """
    wrapped: list[Tool] = [
        EditDiagnostics(t, manager) if t.kind == ToolKind.EDIT else t for t in tools
    ]
    taken = {t.name for t in wrapped}
    return wrapped + [t for t in lsp_tools(manager) if t.name not in taken]


def edit_note(reply: LspReply[list[Diagnostic]], rel: str, limit: int) -> str | None:
    """The paragraph appended to an edit's result, or None when there is nothing to say."""
    server = reply.server or "language server"
    if not reply.ok:
        # only a crash or hang of a server that was running gets here; worth one line
        return f"(language server {server}: {reply.problem})"
    if reply.analysing:
        return f"({server} is {analysing_text(reply.analysing)}; lsp_diagnostics can ask again)"
    if not reply.value:
        return f"{server}: no problems reported in {rel}"
    lines = [f"{server} reports {_summary(severity_counts(reply.value))} in {rel}:"]
    lines += [d.render() for d in reply.value[:limit]]
    if len(reply.value) > limit:
        lines.append(f"... and {len(reply.value) - limit} more (lsp_diagnostics lists them all)")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# rendering helpers


def analysing_text(versions: Mapping[str, int]) -> str:
    """'still analysing a.py (version 3)' for the files a server has not reported on yet."""
    if not versions:
        return ""
    shown = [f"{path} (version {version})" for path, version in sorted(versions.items())]
    return "still analysing " + ", ".join(_capped(shown))


def find_column(line: str, symbol: str) -> int | None:
    """1-based column of the first whole-word occurrence of `symbol` in `line` (else the first
    occurrence of any kind), or None when it does not occur."""
    name = symbol.strip()
    if not name:
        return None
    match = re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", line)
    if match is not None:
        return match.start() + 1
    index = line.find(name)
    return index + 1 if index >= 0 else None


def severity_counts(diagnostics: Iterable[Diagnostic]) -> dict[str, int]:
    """How many diagnostics of each severity, for metadata and summaries."""
    counts = {"errors": 0, "warnings": 0, "others": 0}
    for item in diagnostics:
        key = {"error": "errors", "warning": "warnings"}.get(item.severity, "others")
        counts[key] += 1
    return counts


def _summary(counts: dict[str, int]) -> str:
    parts = [
        _count(counts["errors"], "error"),
        _count(counts["warnings"], "warning"),
    ]
    if counts["others"]:
        parts.append(f"{counts['others']} info/hint")
    return ", ".join(parts)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _what(args: PositionArgs, ctx: ToolContext, file: Path, column: int) -> str:
    where = f"{ctx.relative(file)}:{args.line}:{column}"
    return f"{args.symbol!r} ({where})" if args.symbol and args.column is None else where


def _locations(locations: Sequence[Location]) -> list[str]:
    return _capped([f"{loc.where}  {loc.preview}".rstrip() for loc in locations])


def _symbol(symbol: LspSymbol) -> str:
    inside = f" (in {symbol.container})" if symbol.container else ""
    return f"{symbol.kind} {symbol.name}{inside}  {symbol.location.where}"


def _capped(lines: list[str]) -> list[str]:
    if len(lines) <= MAX_SHOWN:
        return lines
    return [*lines[:MAX_SHOWN], f"... and {len(lines) - MAX_SHOWN} more"]
