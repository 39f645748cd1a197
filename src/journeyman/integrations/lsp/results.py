"""What the LSP manager answers: typed records in the agent's terms, and the converters to them.

Every path is workspace-relative (absolute only for files outside the workspace, such as the
standard library), every line and column 1-based, columns counted in characters.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from journeyman.integrations.lsp.positions import (
    display_path,
    line_at,
    units_to_column,
    uri_to_path,
)

T = TypeVar("T")

LinesOf = Callable[[Path], list[str]]
"""Gives the current lines of a file (empty when unreadable), to convert UTF-16 offsets."""

SEVERITIES = {1: "error", 2: "warning", 3: "info", 4: "hint"}

SYMBOL_KINDS = [
    "file",
    "module",
    "namespace",
    "package",
    "class",
    "method",
    "property",
    "field",
    "constructor",
    "enum",
    "interface",
    "function",
    "variable",
    "constant",
    "string",
    "number",
    "boolean",
    "array",
    "object",
    "key",
    "null",
    "enum-member",
    "struct",
    "event",
    "operator",
    "type-parameter",
]
"""LSP SymbolKind names; kind n is SYMBOL_KINDS[n - 1]."""

COMPLETION_KINDS = [
    "text",
    "method",
    "function",
    "constructor",
    "field",
    "variable",
    "class",
    "interface",
    "module",
    "property",
    "unit",
    "value",
    "enum",
    "keyword",
    "snippet",
    "color",
    "file",
    "reference",
    "folder",
    "enum-member",
    "constant",
    "struct",
    "event",
    "operator",
    "type-parameter",
]
"""LSP CompletionItemKind names; kind n is COMPLETION_KINDS[n - 1]."""

_CAPABILITIES = {
    "definitionProvider": "definition",
    "referencesProvider": "references",
    "hoverProvider": "hover",
    "completionProvider": "completion",
    "workspaceSymbolProvider": "workspace-symbols",
    "documentSymbolProvider": "document-symbols",
    "typeDefinitionProvider": "type-definition",
    "implementationProvider": "implementation",
    "renameProvider": "rename",
    "signatureHelpProvider": "signature-help",
    "documentFormattingProvider": "formatting",
    "codeActionProvider": "code-actions",
    "diagnosticProvider": "pull-diagnostics",
}


@dataclass(frozen=True)
class Location:
    path: str
    """Workspace-relative path (absolute for files outside the workspace)."""
    line: int
    column: int
    end_line: int
    end_column: int
    preview: str = ""
    """The stripped text of the first line of the range, when the file could be read."""

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}:{self.column}"


@dataclass(frozen=True)
class Diagnostic:
    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    severity: str
    """error, warning, info or hint."""
    message: str
    source: str | None = None
    """The tool behind the finding (pyflakes, Pyright...)."""
    code: str | None = None

    def render(self, *, with_path: bool = False) -> str:
        where = f"{self.path}:" if with_path else ""
        tag = " ".join(part for part in (self.source, self.code) if part)
        suffix = f" [{tag}]" if tag else ""
        return f"{where}{self.line}:{self.column} {self.severity}: {self.message}{suffix}"


@dataclass(frozen=True)
class Hover:
    text: str
    """Markdown or plain text as the server wrote it."""
    location: Location | None = None
    """The span the hover is about, when the server says."""


@dataclass(frozen=True)
class Completion:
    label: str
    kind: str | None = None
    detail: str | None = None
    insert_text: str | None = None


@dataclass(frozen=True)
class LspSymbol:
    name: str
    kind: str
    location: Location
    container: str | None = None
    """Enclosing symbol (class of a method...), when known."""


@dataclass(frozen=True)
class LspReply(Generic[T]):
    """An answer from the manager; it never raises, a failed call says why in `problem`."""

    value: T
    server: str | None = None
    """Name of the server that answered (or should have)."""
    problem: str | None = None
    """Why there is no answer: no server, not installed, crashed, timed out, unavailable."""
    notice: str | None = None
    """Something worth telling alongside the answer (the server was restarted...)."""
    complete: bool = True
    """False when the answer may be partial (a bounded wait ran out, a list was capped)."""
    analysing: dict[str, int] = field(default_factory=dict)
    """Files (workspace-relative) whose current version, given here, the server has not yet
    reported on; their earlier diagnostics are stale and left out of `value`."""

    @property
    def ok(self) -> bool:
        return self.problem is None


@dataclass
class ServerStatus:
    """One configured server as `journeyman lsp` shows it."""

    name: str
    language: str
    command: list[str]
    extensions: list[str]
    installed: bool
    executable: str | None
    detected: bool
    markers: list[str]
    shadowed_by: str | None
    """Set for a fallback not used because this server is installed."""
    state: str
    """not started, starting, running, stopped, crashed, unavailable or not installed."""
    pid: int | None = None
    capabilities: list[str] = field(default_factory=list)
    restarts: int = 0
    last_error: str | None = None

    @property
    def running(self) -> bool:
        return self.state == "running"


def capability_names(capabilities: Mapping[str, Any]) -> list[str]:
    """Friendly names of what a server offers, from its `ServerCapabilities`."""
    names = [name for key, name in _CAPABILITIES.items() if capabilities.get(key)]
    if capabilities.get("textDocumentSync") is not None:
        names.insert(0, "diagnostics")
    return names


class Converter:
    """Converts protocol values to records for one workspace, reading lines through `lines_of`."""

    def __init__(self, root: Path, lines_of: LinesOf) -> None:
        self.root = root
        self._lines_of = lines_of

    def location(self, uri: str, range_: Mapping[str, Any] | None) -> Location | None:
        path = uri_to_path(uri)
        if path is None:
            return None
        shown = display_path(path, self.root)
        if not range_:
            return Location(shown, 1, 1, 1, 1)
        lines = self._lines_of(path)
        start, end = range_.get("start", {}), range_.get("end", {})
        start_line, end_line = int(start.get("line", 0)), int(end.get("line", 0))
        first = line_at(lines, start_line)
        return Location(
            path=shown,
            line=start_line + 1,
            column=units_to_column(first, int(start.get("character", 0))),
            end_line=end_line + 1,
            end_column=units_to_column(line_at(lines, end_line), int(end.get("character", 0))),
            preview=first.strip(),
        )

    def locations(self, result: Any) -> list[Location]:
        """`Location | Location[] | LocationLink[] | null` to a list, duplicates dropped."""
        items = result if isinstance(result, list) else [result] if result else []
        found: list[Location] = []
        for item in items:
            if not isinstance(item, dict):
                continue
            if "targetUri" in item:  # a LocationLink
                where = self.location(
                    item["targetUri"], item.get("targetSelectionRange") or item.get("targetRange")
                )
            else:
                where = self.location(str(item.get("uri", "")), item.get("range"))
            if where is not None and where not in found:
                found.append(where)
        return found

    def diagnostics(self, uri: str, items: Iterable[Mapping[str, Any]]) -> list[Diagnostic]:
        found: list[Diagnostic] = []
        for item in items:
            where = self.location(uri, item.get("range"))
            if where is None:
                continue
            code = item.get("code")
            found.append(
                Diagnostic(
                    path=where.path,
                    line=where.line,
                    column=where.column,
                    end_line=where.end_line,
                    end_column=where.end_column,
                    severity=SEVERITIES.get(int(item.get("severity") or 1), "error"),
                    message=str(item.get("message", "")).strip(),
                    source=str(item["source"]) if item.get("source") else None,
                    code=str(code) if code not in (None, "") else None,
                )
            )
        return sorted(found, key=lambda d: (_severity_rank(d.severity), d.line, d.column))

    def hover(self, result: Any, uri: str) -> Hover | None:
        if not isinstance(result, dict):
            return None
        text = _hover_text(result.get("contents")).strip()
        if not text:
            return None
        span = self.location(uri, result["range"]) if result.get("range") else None
        return Hover(text=text, location=span)

    def symbols(self, result: Any, uri: str | None = None) -> list[LspSymbol]:
        """SymbolInformation[], WorkspaceSymbol[] or (hierarchical) DocumentSymbol[] to a list."""
        found: list[LspSymbol] = []
        for item in result if isinstance(result, list) else []:
            if isinstance(item, dict):
                self._collect_symbol(item, uri, None, found)
        return found

    def _collect_symbol(
        self, item: Mapping[str, Any], uri: str | None, parent: str | None, out: list[LspSymbol]
    ) -> None:
        name = str(item.get("name", ""))
        kind = _kind_name(SYMBOL_KINDS, item.get("kind"))
        if "location" in item:  # SymbolInformation or WorkspaceSymbol
            place = item["location"]
            where = self.location(str(place.get("uri", "")), place.get("range"))
            container = item.get("containerName") or parent
        else:  # DocumentSymbol
            where = (
                self.location(uri, item.get("selectionRange") or item.get("range")) if uri else None
            )
            container = parent
        if where is not None:
            out.append(LspSymbol(name, kind, where, str(container) if container else None))
        for child in item.get("children") or []:
            self._collect_symbol(child, uri, name, out)


def completions(result: Any, *, limit: int) -> tuple[list[Completion], bool]:
    """`CompletionItem[] | CompletionList | null` to at most `limit` items; True when complete."""
    if isinstance(result, dict):
        items, complete = result.get("items") or [], not result.get("isIncomplete", False)
    else:
        items, complete = (result if isinstance(result, list) else []), True
    ordered = sorted(
        (item for item in items if isinstance(item, dict)),
        key=lambda item: str(item.get("sortText") or item.get("label", "")),
    )
    found = [
        Completion(
            label=str(item.get("label", "")),
            kind=_kind_name(COMPLETION_KINDS, item.get("kind")) if item.get("kind") else None,
            detail=str(item["detail"]) if item.get("detail") else None,
            insert_text=_insert_text(item),
        )
        for item in ordered[:limit]
    ]
    return found, complete and len(ordered) <= limit


def _insert_text(item: Mapping[str, Any]) -> str | None:
    edit = item.get("textEdit")
    if isinstance(edit, dict) and edit.get("newText"):
        return str(edit["newText"])
    return str(item["insertText"]) if item.get("insertText") else None


def _hover_text(contents: Any) -> str:
    if isinstance(contents, str):
        return contents
    if isinstance(contents, list):
        return "\n\n".join(text for part in contents if (text := _hover_text(part).strip()))
    if isinstance(contents, dict):
        value = str(contents.get("value", ""))
        language = contents.get("language")
        if language and value:  # a MarkedString with a language is a code block
            return f"```{language}\n{value}\n```"
        return value
    return ""


def _kind_name(names: list[str], kind: Any) -> str:
    if isinstance(kind, int) and 1 <= kind <= len(names):
        return names[kind - 1]
    return "symbol"


def _severity_rank(severity: str) -> int:
    order = list(SEVERITIES.values())
    return order.index(severity) if severity in order else len(order)
