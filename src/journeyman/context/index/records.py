"""What the index answers with: files, statistics, search hits, snippets, symbols, repo maps."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FileEntry:
    """One indexed text file."""

    path: str
    """Workspace-relative, '/'-separated."""
    size: int
    """Bytes."""
    mtime_ns: int
    """Modification time in nanoseconds, as os.stat reports it."""
    grammar: str | None
    """tree-sitter grammar for its symbols, None when the repo map has none for it."""


@dataclass(frozen=True)
class IndexStats:
    """What one bootstrap or refresh did."""

    files: int
    """Files in the index afterwards."""
    added: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    skipped_binary: int = 0
    """Files passed over because they are binary (seen in this walk)."""
    skipped_large: int = 0
    """Files passed over because they exceed `max_file_bytes` (seen in this walk)."""
    truncated: bool = False
    """True when `max_files` stopped the walk early."""
    seconds: float = 0.0
    """Wall time taken."""


@dataclass(frozen=True)
class SearchHit:
    """One line containing the keyword."""

    path: str
    line: int
    """1-based line number."""
    text: str
    """The line, without its line break."""

    def render(self) -> str:
        return f"{self.path}:{self.line}: {self.text}"


@dataclass(frozen=True)
class Snippet:
    """Consecutive lines of one file."""

    path: str
    start: int
    """First line, 1-based."""
    end: int
    """Last line, inclusive."""
    text: str
    """The lines, joined with '\\n'."""

    def render(self) -> str:
        """`path:start-end` then each line with its number."""
        width = len(str(self.end))
        lines = self.text.split("\n")
        body = "\n".join(f"{n:>{width}}| {line}" for n, line in enumerate(lines, self.start))
        return f"{self.path}:{self.start}-{self.end}\n{body}"


@dataclass(frozen=True)
class Symbol:
    """A top-level definition of a code file, or a member of one."""

    name: str
    kind: str
    """class, function, method, interface, struct, enum, trait, impl, type."""
    signature: str
    """The definition's header on one line, without its body (e.g. 'def f(x: int) -> int')."""
    line: int
    """1-based line of the definition."""
    parent: str | None = None
    """The enclosing class, interface, trait or impl for a member; None at top level."""


@dataclass(frozen=True)
class RepoMap:
    """A rendered repo map and what went into it."""

    text: str
    files: tuple[str, ...]
    """Files shown, best first."""
    tokens: int
    """Estimated tokens of `text`."""
    candidates: int
    """Code files that were ranked."""
    truncated: bool
    """True when some file or symbol did not fit the budget."""
