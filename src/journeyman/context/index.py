"""Workspace index: the text files of a workspace, keyword search, snippets and a repo map.

`WorkspaceIndexer` keeps per text file a small record (size, mtime, grammar), the set of
lowercase word tokens in it, the names it defines, and, within a byte budget, its lowercased
contents (for search). Symbols are parsed on demand and cached.

* **Which files.** Every regular file below the root except what .gitignore files exclude
  (root and nested, with `!` re-includes, as the grep tool applies them), `.git`, the extra
  gitignore-style patterns of `IndexConfig.exclude` (virtualenvs, dependency and tool caches
  by default), symlinks (never followed), binary files (a NUL byte in the first 8 KiB, or a
  well-known binary extension) and files above `IndexConfig.max_file_bytes`.
* **Bootstrap and refresh.** `bootstrap()` reads everything once. `refresh()` walks again and
  re-reads only files whose mtime or size changed (new files are added, vanished ones dropped);
  `refresh(paths)` looks at just those files or directories, for callers that know what they
  changed. Search, snippets and the repo map bootstrap on first use.
* **Search.** `search(keyword)` finds lines containing a fixed string (case-insensitive by
  default). The token sets answer first which files can possibly contain the keyword (each
  run of word characters in the keyword must be part of a token of the file), so only those
  files are scanned: in memory (lowercased contents are cached up to
  `IndexConfig.text_cache_bytes`), or by ripgrep when the candidates are large enough for its
  parallel scan to pay off. Files are ranked (a definition of the keyword, then the keyword
  in the path, then the number of matches) and the lines of the best files returned.
* **Repo map.** `repo_map(goal, errors)` lists the top-level symbols of code files (classes,
  functions, methods with their signatures, from tree-sitter grammars of
  `tree-sitter-language-pack`) for the files most relevant to the goal and recent errors
  (files named in an error first, then files whose tokens and paths match their keywords,
  weighted by rarity), within a token budget. Files are parsed lazily, best first, and the
  symbols cached until the file changes.

Paths in and out are workspace-relative and '/'-separated.
"""

from __future__ import annotations

import logging
import math
import os
import re
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pathspec
from pydantic import BaseModel, Field

from journeyman.providers.pricing import estimate_tokens
from journeyman.tools.context import GENERATED_DIRS
from journeyman.tools.fileio import SNIFF_BYTES, is_binary
from journeyman.tools.search import find_ripgrep
from journeyman.tools.walk import IgnoreRules, walk

log = logging.getLogger(__name__)

DEFAULT_EXCLUDE = GENERATED_DIRS
"""Left out of the index on top of .gitignore: dependency folders, virtualenvs, tool caches."""


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


BINARY_SUFFIXES = _words(
    ".pyc .pyo .pyd .so .dll .dylib .exe .o .a .lib .class .jar .war .zip .gz .tgz .bz2 .xz "
    ".zst .7z .rar .whl .egg .png .jpg .jpeg .gif .bmp .ico .webp .tiff .pdf .woff .woff2 .ttf "
    ".otf .eot .mp3 .mp4 .wav .ogg .flac .avi .mov .mkv .db .sqlite .sqlite3 .bin .dat .npy "
    ".npz .pkl .pickle .wasm"
)
"""Extensions treated as binary without reading the file."""

GRAMMARS_BY_SUFFIX: Mapping[str, str] = {
    ".py": "python",
    ".pyi": "python",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "tsx",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
}
"""File extension -> tree-sitter grammar used for the repo map's symbols."""

_TOKEN_BYTES = bytes(
    c if chr(c).isascii() and (chr(c).isalnum() or c == 0x5F) else 0x20 for c in range(256)
)
"""Maps every byte that is not an ASCII letter, digit or underscore to a space."""


def _words_of(data: bytes) -> list[bytes]:
    """Tokens of the index: runs of ASCII letters, digits and underscores (what rb'\\w+' finds)."""
    return data.translate(_TOKEN_BYTES).split()


class IndexConfig(BaseModel):
    """What the workspace index holds and how much it shows."""

    max_file_bytes: int = Field(default=1024 * 1024, ge=1)
    """Files larger than this many bytes are left out (generated code, data dumps)."""
    max_files: int = Field(default=200_000, ge=1)
    """Stop indexing after this many files; the rest of the tree is not searched."""
    exclude: list[str] = Field(default_factory=lambda: list(DEFAULT_EXCLUDE))
    """Gitignore-style patterns left out on top of the workspace's .gitignore files."""
    snippet_context: int = Field(default=3, ge=0)
    """Lines shown before and after each match in `read_snippets`."""
    snippet_max_lines: int = Field(default=40, ge=1)
    """Most lines `read_snippets` returns for one file."""
    ripgrep: bool = True
    """Let ripgrep (when installed) count matches when the candidate files are large."""
    ripgrep_min_bytes: int = Field(default=4 * 1024 * 1024, ge=0)
    """Candidate files holding at least this many bytes in all are counted by ripgrep."""
    text_cache_bytes: int = Field(default=64 * 1024 * 1024, ge=0)
    """Lowercased file contents kept in memory for search, up to this many bytes in all
    (0: every search reads the candidate files from disk)."""
    repo_map_tokens: int = Field(default=2048, ge=1)
    """Default token budget of the rendered repo map."""
    signature_chars: int = Field(default=160, ge=20)
    """Signatures longer than this are cut (with '...') in the repo map."""


# --------------------------------------------------------------------------------------------
# Records


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


# --------------------------------------------------------------------------------------------
# Keywords

STOP_WORDS = _words(
    """
    a about above after again against all also an and any are as at be because been before
    being below between both but by can cannot could did do does doing done down during each
    few for from further had has have having here how however if in into is it its itself just
    me more most much must my no nor not now of off on once only or other our out over own
    please same should so some still such than that the their them then there these they this
    those through to too under until up us very was we were what when where which while who
    whom why will with within without would yet you your
    add added adds change changed changes code correct currently does doesn error errors fail
    failed failing fails file files fix fixed fixes fixing function functions get gets got
    implement implemented issue line lines make makes method methods need needs new now
    problem return returns run running seems test tests true false none null use used uses
    using value values want work works wrong instead
    traceback recent call last most self def class import print raise
    """
)
"""Words too common in tasks, errors and code to narrow a search."""

_PATHLIKE = re.compile(r"(?:[\w.-]+/)+[\w.-]+|[\w-]+\.[A-Za-z]{1,5}\b")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_BACKTICKED = re.compile(r"`([^`\n]{2,80})`")
_CODE_SUFFIXES = _words(
    "py pyi js mjs cjs jsx ts tsx go rs java kt c h cc cpp hpp cs rb php swift scala sh md rst "
    "toml yaml yml json cfg ini txt html css sql"
)


def extract_keywords(text: str, max_keywords: int = 8) -> list[str]:
    """The words of `text` most likely to find the relevant code, best first.

    Kept: backticked spans, file names (from paths), identifiers (dotted names kept whole)
    of three or more characters that are not stop words. Each occurrence adds a weight that
    grows with how code-like the word is (backticks, file names, snake_case, CamelCase,
    dotted, exception names, digits); words are ranked by total weight, then by first
    appearance. Duplicates are merged case-insensitively, keeping the first spelling.
    """
    scores: dict[str, float] = {}
    first: dict[str, int] = {}
    spelled: dict[str, str] = {}

    def add(word: str, weight: float, position: int) -> None:
        word = word.strip(".")
        key = word.lower()
        if len(word) < 3 or key in STOP_WORDS or word.isdigit():
            return
        spelled.setdefault(key, word)
        first.setdefault(key, position)
        scores[key] = scores.get(key, 0.0) + weight

    for match in _BACKTICKED.finditer(text):
        span = match.group(1).strip()
        if " " not in span:
            add(span.rsplit("/", 1)[-1] if "/" in span else span, 4.0, match.start())
    consumed: list[tuple[int, int]] = []
    for match in _PATHLIKE.finditer(text):
        name = match.group(0).rstrip(".").rsplit("/", 1)[-1]
        suffix = name.rsplit(".", 1)[-1].lower() if "." in name else ""
        if suffix in _CODE_SUFFIXES:
            add(name, 3.0, match.start())
            consumed.append(match.span())
    for match in _IDENTIFIER.finditer(text):
        if any(start <= match.start() < end for start, end in consumed):
            continue
        word = match.group(0)
        weight = 1.0
        if "_" in word.strip("_") or "." in word:
            weight += 1.5
        if any(c.isupper() for c in word[1:]) and any(c.islower() for c in word):
            weight += 1.5  # CamelCase or camelCase
        if word.endswith(("Error", "Exception", "Warning")):
            weight += 1.0
        if any(c.isdigit() for c in word):
            weight += 0.5
        add(word, weight, match.start())
    ranked = sorted(scores, key=lambda k: (-scores[k], first[k]))
    return [spelled[k] for k in ranked[:max_keywords]]


_MENTIONED_PATH = re.compile(r"[\w./\\-]*[\w-]\.[A-Za-z]{1,5}\b")


def mentioned_paths(text: str) -> list[str]:
    """Path-like strings in `text` (tracebacks, compiler errors), '/'-separated, in order."""
    out = []
    for match in _MENTIONED_PATH.finditer(text):
        path = match.group(0).replace("\\", "/")
        if path.rsplit(".", 1)[-1].lower() in _CODE_SUFFIXES:
            out.append(path)
    return list(dict.fromkeys(out))


# --------------------------------------------------------------------------------------------
# The indexer


@dataclass
class _Walked:
    seen: set[str] = field(default_factory=set)
    skipped_binary: int = 0
    skipped_large: int = 0
    truncated: bool = False


class WorkspaceIndexer:
    """File index of one workspace: bootstrap, refresh, search, snippets, repo map.

    Methods are synchronous and do file I/O (search may run ripgrep); inside an event loop,
    call them through `asyncio.to_thread`. One instance is not meant for concurrent use.
    """

    def __init__(
        self,
        root: str | Path,
        *,
        config: IndexConfig | None = None,
        count_tokens: Callable[[str], int] = estimate_tokens,
    ) -> None:
        self.root = Path(root).resolve()
        if not self.root.is_dir():
            raise NotADirectoryError(f"WorkspaceIndexer: {self.root} is not a directory")
        self.config = config or IndexConfig()
        self.count_tokens = count_tokens
        self._entries: dict[str, FileEntry] = {}
        self._tokens: dict[str, bytes] = {}
        """Unique lowercase word tokens of each file, each followed and preceded by '\n'."""
        self._defined: dict[str, bytes] = {}
        """Lowercase names the file defines (def/class/fn/... NAME), '\n'-joined."""
        self._lowered: dict[str, bytes] = {}
        """Lowercased contents, while they fit `text_cache_bytes`."""
        self._cached_bytes = 0
        self._passed: dict[str, tuple[int, int]] = {}
        """Binary or oversized files seen: (mtime_ns, size), so refresh does not re-read them."""
        self._symbols: dict[str, tuple[int, int, tuple[Symbol, ...]]] = {}
        self._exclude = pathspec.GitIgnoreSpec.from_lines(self.config.exclude)
        self._bootstrapped = False

    # ---- index maintenance -----------------------------------------------------------------

    @property
    def files(self) -> Mapping[str, FileEntry]:
        """The indexed files by relative path (bootstraps on first use)."""
        self._ensure()
        return self._entries

    def __len__(self) -> int:
        return len(self.files)

    def __contains__(self, path: object) -> bool:
        return isinstance(path, str) and path in self.files

    def bootstrap(self) -> IndexStats:
        """Index the whole workspace from scratch."""
        started = time.perf_counter()
        self._entries.clear()
        self._tokens.clear()
        self._defined.clear()
        self._lowered.clear()
        self._cached_bytes = 0
        self._passed.clear()
        self._symbols.clear()
        self._bootstrapped = True
        walked = _Walked()
        added = [rel for rel, change in self._scan(self.root, walked) if change == "added"]
        return IndexStats(
            files=len(self._entries),
            added=tuple(added),
            skipped_binary=walked.skipped_binary,
            skipped_large=walked.skipped_large,
            truncated=walked.truncated,
            seconds=time.perf_counter() - started,
        )

    def refresh(self, paths: Iterable[str | Path] | None = None) -> IndexStats:
        """Bring the index up to date: re-read files whose mtime or size changed.

        Without `paths` the whole tree is walked; with `paths` (files or directories, relative
        to the root or absolute) only those are looked at. Returns what changed.
        """
        if not self._bootstrapped:
            return self.bootstrap()
        started = time.perf_counter()
        walked = _Walked()
        added: list[str] = []
        changed: list[str] = []
        removed: list[str] = []
        starts = [self.root] if paths is None else [self._absolute(p) for p in paths]
        rules = IgnoreRules(self.root)  # one per refresh: .gitignore files are read once
        for start in starts:
            prefix = self._relative(start)
            if prefix is None:
                continue
            if start.is_dir() and not start.is_symlink():
                if prefix and self._ignored_with_parents(start, rules):
                    continue
                for rel, change in self._scan(start, walked):
                    {"added": added, "changed": changed, "removed": removed}[change].append(rel)
                under = "" if not prefix else prefix + "/"
                for rel in [r for r in self._entries if r.startswith(under)]:
                    if rel not in walked.seen:
                        self._forget(rel)
                        removed.append(rel)
                continue
            change = "gone"
            if (
                start.is_file()
                and not start.is_symlink()
                and not self._ignored_with_parents(start, rules)
            ):
                change = self._consider(start, prefix, walked)
            if change in ("added", "changed", "removed"):
                {"added": added, "changed": changed, "removed": removed}[change].append(prefix)
            elif change != "same" and prefix in self._entries:
                self._forget(prefix)
                removed.append(prefix)
        return IndexStats(
            files=len(self._entries),
            added=tuple(added),
            changed=tuple(changed),
            removed=tuple(removed),
            skipped_binary=walked.skipped_binary,
            skipped_large=walked.skipped_large,
            truncated=walked.truncated,
            seconds=time.perf_counter() - started,
        )

    def _ensure(self) -> None:
        if not self._bootstrapped:
            self.bootstrap()

    def _absolute(self, path: str | Path) -> Path:
        candidate = Path(path)
        return candidate if candidate.is_absolute() else self.root / candidate

    def _relative(self, path: Path) -> str | None:
        try:
            rel = path.relative_to(self.root).as_posix()
        except ValueError:
            return None
        return "" if rel == "." else rel

    def _excluded(self, rel: str, is_dir: bool) -> bool:
        return bool(self._exclude.match_file(rel + "/" if is_dir else rel))

    def _ignored_with_parents(self, path: Path, rules: IgnoreRules) -> bool:
        rel = self._relative(path) or ""
        parts = rel.split("/") if rel else []
        for i in range(1, len(parts) + 1):
            is_dir = i < len(parts) or path.is_dir()
            if self._excluded("/".join(parts[:i]), is_dir):
                return True
        return rules.ignored_with_parents(path)

    def _scan(self, start: Path, walked: _Walked) -> Iterator[tuple[str, str]]:
        """Walk below `start`, (re)indexing new and changed files.

        Yields (rel, change) for each file added, changed, or removed because it became
        binary or too large; files that vanished are the caller's to find (not in `seen`).
        """
        rules = IgnoreRules.for_start(self.root, start)
        root_len = len(str(self.root)) + 1
        governed: dict[Path, bool] = {}

        def has_rules(directory: Path) -> bool:
            """Whether a .gitignore sits in `directory` or between it and the root."""
            known = governed.get(directory)
            if known is None:
                above = directory != self.root and has_rules(directory.parent)
                known = governed[directory] = above or (directory / ".gitignore").is_file()
            return known

        def ignored(path: Path, is_dir: bool) -> bool:
            if path.name == ".git":
                return True
            return has_rules(path.parent) and rules.ignored(path, is_dir)

        def skip_dir(path: Path) -> bool:
            rel = str(path)[root_len:].replace(os.sep, "/")
            return self._excluded(rel, True) or ignored(path, True)

        for entry in walk(start, skip_dir=skip_dir):
            if entry.kind != "file":
                continue
            rel = str(entry.path)[root_len:].replace(os.sep, "/")
            if self._excluded(rel, False) or ignored(entry.path, False):
                continue
            if len(self._entries) >= self.config.max_files and rel not in self._entries:
                if not walked.truncated:
                    log.warning(
                        "index: stopped at %d files (IndexConfig.max_files); files after %s "
                        "are not indexed",
                        self.config.max_files,
                        rel,
                    )
                walked.truncated = True
                walked.seen.add(rel)
                continue
            change = self._consider(entry.path, rel, walked)
            if change in ("added", "changed", "removed"):
                yield rel, change

    def _consider(self, path: Path, rel: str, walked: _Walked) -> str:
        """Index one file if new or changed: 'added', 'changed', 'same' or 'skipped'."""
        try:
            st = path.stat()
        except OSError:
            return "skipped"
        walked.seen.add(rel)
        stamp = (st.st_mtime_ns, st.st_size)
        old = self._entries.get(rel)
        if old is not None and (old.mtime_ns, old.size) == stamp:
            return "same"
        if old is None and self._passed.get(rel) == stamp:
            self._count_passed(path, st.st_size, walked)
            return "skipped"
        if st.st_size > self.config.max_file_bytes or path.suffix.lower() in BINARY_SUFFIXES:
            return self._pass(rel, stamp, path, walked)
        try:
            with path.open("rb") as fh:
                data = fh.read(self.config.max_file_bytes + 1)
        except OSError:
            return "skipped"
        if len(data) > self.config.max_file_bytes or is_binary(data[:SNIFF_BYTES]):
            return self._pass(rel, (st.st_mtime_ns, len(data)), path, walked)
        self._passed.pop(rel, None)
        self._forget(rel)
        grammar = GRAMMARS_BY_SUFFIX.get(path.suffix.lower())
        self._entries[rel] = FileEntry(rel, st.st_size, st.st_mtime_ns, grammar)
        lowered = data.lower()
        self._tokens[rel] = b"\n" + b"\n".join(set(_words_of(lowered))) + b"\n"
        definition = _DEFINITION.get(grammar or "")
        if definition is not None:
            names = set(definition.findall(lowered))
            self._defined[rel] = b"\n" + b"\n".join(names) + b"\n" if names else b""
        if self._cached_bytes + len(lowered) <= self.config.text_cache_bytes:
            self._lowered[rel] = lowered
            self._cached_bytes += len(lowered)
        return "changed" if old is not None else "added"

    def _pass(self, rel: str, stamp: tuple[int, int], path: Path, walked: _Walked) -> str:
        existed = rel in self._entries
        self._forget(rel)
        self._passed[rel] = stamp
        self._count_passed(path, stamp[1], walked)
        return "removed" if existed else "skipped"

    def _count_passed(self, path: Path, size: int, walked: _Walked) -> None:
        if size > self.config.max_file_bytes:
            walked.skipped_large += 1
        else:
            walked.skipped_binary += 1

    def _forget(self, rel: str) -> None:
        self._entries.pop(rel, None)
        self._tokens.pop(rel, None)
        self._defined.pop(rel, None)
        self._symbols.pop(rel, None)
        lowered = self._lowered.pop(rel, None)
        if lowered is not None:
            self._cached_bytes -= len(lowered)

    # ---- keywords and search ---------------------------------------------------------------

    @staticmethod
    def extract_keywords(text: str, max_keywords: int = 8) -> list[str]:
        """See the module function `extract_keywords`."""
        return extract_keywords(text, max_keywords)

    def candidates(self, keyword: str) -> list[str]:
        """Indexed files that may contain `keyword` (any case), judged by their tokens alone."""
        self._ensure()
        pieces = _words_of(keyword.lower().encode("utf-8"))
        if not pieces:
            return list(self._entries)
        pieces.sort(key=len, reverse=True)  # the longest piece rules most files out first
        found = [rel for rel, blob in self._tokens.items() if pieces[0] in blob]
        for piece in pieces[1:]:
            found = [rel for rel in found if piece in self._tokens[rel]]
        return found

    def search(
        self, keyword: str, max_results: int | None = 50, *, case_sensitive: bool = False
    ) -> list[SearchHit]:
        """Lines containing `keyword` (a fixed string, not a regex), best files first.

        Files are ranked: code files that define the keyword as a name (`def`, `class`,
        `function`, `func`, `fn`, `struct`, ... of their language), then files that define a
        name containing it, then files whose path contains it, then by number of matches,
        then by path. Lines keep their file order. `max_results=None`
        returns every matching line.
        """
        if not keyword or max_results == 0:
            return []
        folded = keyword if case_sensitive else keyword.lower()
        candidates = self.candidates(keyword)
        counts = self._ripgrep_counts(keyword, case_sensitive, candidates)
        if counts is None:
            counts = self._python_counts(folded, case_sensitive, candidates)
        name = keyword.lower().encode("utf-8") if _NAME.fullmatch(keyword) else None
        ranked: list[tuple[bool, bool, bool, int, str]] = []
        for rel, count in counts.items():
            exact = defines = False
            if name is not None and rel in self._defined:
                exact = b"\n" + name + b"\n" in self._defined[rel]
                defines = name in self._defined[rel]
            in_path = folded in (rel if case_sensitive else rel.lower())
            ranked.append((not exact, not defines, not in_path, -count, rel))
        ranked.sort()
        hits: list[SearchHit] = []
        for *_, rel in ranked:
            remaining = None if max_results is None else max_results - len(hits)
            if remaining is not None and remaining <= 0:
                break
            hits += self._matching_lines(rel, folded, case_sensitive, remaining)
        return hits

    def _python_counts(
        self, folded: str, case_sensitive: bool, candidates: list[str]
    ) -> dict[str, int]:
        """Occurrences of the keyword per candidate file (files without any left out)."""
        needle = folded.encode("utf-8")
        byte_mode = case_sensitive or folded.isascii()
        counts = {}
        for rel in candidates:
            hay: bytes | str | None = None
            if byte_mode and not case_sensitive:
                hay = self._lowered.get(rel)
            if hay is None:
                data = self._read(rel)
                if data is None:
                    continue
                if byte_mode:
                    hay = data if case_sensitive else data.lower()
                else:
                    hay = data.decode("utf-8", errors="replace").lower()
            count = hay.count(needle) if isinstance(hay, bytes) else hay.count(folded)
            if count:
                counts[rel] = count
        return counts

    def _ripgrep_counts(
        self, keyword: str, case_sensitive: bool, candidates: list[str]
    ) -> dict[str, int] | None:
        """The same counts from ripgrep, or None where Python should count.

        ripgrep scans on all cores, which pays off once the candidates are large; it is used
        for ASCII keywords only (for others the two disagree on case folding), and a failed
        run falls back to Python.
        """
        if not self.config.ripgrep or not (case_sensitive or keyword.isascii()):
            return None
        if sum(self._entries[rel].size for rel in candidates) < self.config.ripgrep_min_bytes:
            return None
        rg = find_ripgrep()
        if rg is None:
            return None
        command = [rg, "--no-config", "--count-matches", "--with-filename", "--null",
                   "--no-messages", "--fixed-strings", "--color=never", "--no-ignore"]  # fmt: skip
        if not case_sensitive:
            command.append("--ignore-case")
        command += ["--regexp", keyword, "--"]
        counts: dict[str, int] = {}
        for first in range(0, len(candidates), _RG_BATCH):
            batch = candidates[first : first + _RG_BATCH]
            try:
                proc = subprocess.run(
                    [*command, *batch], cwd=self.root, capture_output=True, check=False
                )
            except OSError as exc:
                log.info("index: ripgrep could not run (%s); counting in Python", exc)
                return None
            if proc.returncode not in (0, 1):
                log.info("index: ripgrep exited %d; counting in Python", proc.returncode)
                return None
            for line in proc.stdout.splitlines():
                path, _, count = line.partition(b"\0")
                if count.isdigit():
                    counts[path.decode("utf-8", errors="surrogateescape")] = int(count)
        return counts

    def _read(self, rel: str) -> bytes | None:
        try:
            return (self.root / rel).read_bytes()
        except OSError:
            return None

    def _matching_lines(
        self, rel: str, folded: str, case_sensitive: bool, most: int | None
    ) -> list[SearchHit]:
        data = self._read(rel)
        if data is None:
            return []
        if not case_sensitive and not folded.isascii():
            return self._matching_lines_unicode(rel, data, folded, most)
        # bytes.lower() folds ASCII only and keeps every offset, so positions found in the
        # folded copy are positions in the original.
        hay = data if case_sensitive else data.lower()
        needle = folded.encode("utf-8")
        hits = []
        line_number = 1
        counted_to = 0
        pos = hay.find(needle)
        while pos != -1:
            line_number += hay.count(b"\n", counted_to, pos)
            start = hay.rfind(b"\n", 0, pos) + 1
            end = hay.find(b"\n", pos)
            end = len(hay) if end == -1 else end
            text = data[start:end].decode("utf-8", errors="replace").removesuffix("\r")
            hits.append(SearchHit(rel, line_number, text))
            if most is not None and len(hits) >= most:
                break
            counted_to = start
            pos = hay.find(needle, end)  # one hit per line
        return hits

    def _matching_lines_unicode(
        self, rel: str, data: bytes, folded: str, most: int | None
    ) -> list[SearchHit]:
        hits = []
        for number, line in enumerate(data.decode("utf-8", errors="replace").split("\n"), 1):
            if folded in line.lower():
                hits.append(SearchHit(rel, number, line.removesuffix("\r")))
                if most is not None and len(hits) >= most:
                    break
        return hits

    # ---- snippets --------------------------------------------------------------------------

    def read_snippets(
        self,
        paths: Iterable[str | Path],
        keywords: Sequence[str] = (),
        *,
        context: int | None = None,
        max_lines: int | None = None,
    ) -> list[Snippet]:
        """Excerpts of `paths`: the lines around each keyword match, or the head of the file.

        Matching is case-insensitive; windows of `context` lines around matches are merged
        when they touch, and a file yields at most `max_lines` lines in all (defaults from
        `IndexConfig`). Missing, binary and out-of-workspace files are passed over.
        """
        context = self.config.snippet_context if context is None else context
        budget = self.config.snippet_max_lines if max_lines is None else max_lines
        needles = [k.lower() for k in keywords if k]
        out: list[Snippet] = []
        for path in paths:
            absolute = self._absolute(path)
            rel = self._relative(absolute)
            if not rel:
                continue
            try:
                data = absolute.read_bytes()
            except OSError:
                continue
            if is_binary(data[:SNIFF_BYTES]):
                continue
            lines = data.decode("utf-8", errors="replace").split("\n")
            if lines and lines[-1] == "":
                lines.pop()
            lines = [line.removesuffix("\r") for line in lines]
            if not lines:
                continue
            matches = [i for i, line in enumerate(lines) if any(n in line.lower() for n in needles)]
            windows = _windows(matches, context, len(lines)) if matches else [(0, len(lines) - 1)]
            left = budget
            for first, last in windows:
                if left <= 0:
                    break
                last = min(last, first + left - 1)
                out.append(Snippet(rel, first + 1, last + 1, "\n".join(lines[first : last + 1])))
                left -= last - first + 1
        return out

    # ---- symbols and the repo map -----------------------------------------------------------

    def symbols(self, path: str) -> tuple[Symbol, ...]:
        """Top-level symbols (and class members) of an indexed code file; () for other files."""
        entry = self.files.get(path)
        if entry is None or entry.grammar is None:
            return ()
        cached = self._symbols.get(path)
        if cached is not None and cached[:2] == (entry.mtime_ns, entry.size):
            return cached[2]
        data = self._read(path)
        found = () if data is None else extract_symbols(data, entry.grammar, self.config)
        self._symbols[path] = (entry.mtime_ns, entry.size, found)
        return found

    def rank_files(
        self, goal: str = "", errors: Sequence[str] = (), *, focus: Sequence[str] = ()
    ) -> list[str]:
        """Code files ordered by relevance to the goal and recent errors (best first).

        Order: files named in an error (latest error first), then `focus` files, then by a
        score over the keywords of the goal and the errors (errors weigh double): for each
        keyword piece a file has as a whole token, its rarity log(1 + files / files having it)
        (half that when the piece is only part of a longer token), plus twice the rarity when
        the piece is in the file's path, plus three times when the file defines a name equal
        to the piece. Ties (and files that match nothing) go shallowest path
        first, then alphabetically.
        """
        code = [rel for rel, entry in self.files.items() if entry.grammar is not None]
        if not code:
            return []
        weights: dict[bytes, float] = {}
        for text, weight in [(goal, 1.0), *((e, 2.0) for e in errors)]:
            for keyword in extract_keywords(text, 12):
                for piece in _words_of(keyword.lower().encode("utf-8")):
                    if len(piece) >= 3:
                        weights[piece] = max(weights.get(piece, 0.0), weight)
        scores = dict.fromkeys(code, 0.0)
        for piece, weight in weights.items():
            having = [rel for rel in code if piece in self._tokens[rel]]
            if not having:
                continue
            idf = math.log(1 + len(code) / len(having))
            text_piece = piece.decode()
            token = b"\n" + piece + b"\n"
            for rel in having:
                factor = (
                    (1.0 if token in self._tokens[rel] else 0.5)
                    + 2 * (text_piece in rel.lower())
                    + 3 * (token in self._defined.get(rel, b""))
                )
                scores[rel] += weight * idf * factor
        pinned = self._mentioned(errors, code) + [rel for rel in focus if rel in scores]
        pinned = list(dict.fromkeys(pinned))
        pinned_set = set(pinned)
        rest = sorted(
            (rel for rel in code if rel not in pinned_set),
            key=lambda rel: (-scores[rel], rel.count("/"), rel),
        )
        return pinned + rest

    def _mentioned(self, errors: Sequence[str], code: Sequence[str]) -> list[str]:
        by_name: dict[str, list[str]] = {}
        for rel in code:
            by_name.setdefault(rel.rsplit("/", 1)[-1], []).append(rel)
        out: list[str] = []
        for error in reversed(errors):
            for mention in mentioned_paths(error):
                name = mention.rsplit("/", 1)[-1]
                for rel in by_name.get(name, []):
                    if mention.endswith(rel) or rel.endswith(mention.lstrip("./")):
                        out.append(rel)
        return out

    def repo_map(
        self,
        goal: str = "",
        errors: Sequence[str] = (),
        *,
        max_tokens: int | None = None,
        focus: Sequence[str] = (),
    ) -> RepoMap:
        """The symbols of the files most relevant to `goal` and `errors`, within a token budget.

        Files come in `rank_files` order; each is shown as its path followed by its symbols,
        members indented under their class. A file that does not fit whole is shown with the
        symbols that fit and a '... N more' line; files without symbols are left out.
        """
        budget = self.config.repo_map_tokens if max_tokens is None else max_tokens
        ranked = self.rank_files(goal, errors, focus=focus)
        blocks: list[str] = []
        shown: list[str] = []
        used = 0
        truncated = False
        misses = 0
        for rel in ranked:
            if budget - used < 8 or misses >= 25:
                truncated = True
                break
            symbols = self.symbols(rel)
            if not symbols:
                continue
            lines = [f"{rel}:"] + [_symbol_line(s) for s in symbols]
            block = "\n".join(lines)
            cost = self.count_tokens(block + "\n")
            if used + cost <= budget:
                blocks.append(block)
                shown.append(rel)
                used += cost
                misses = 0
                continue
            truncated = True
            partial = self._partial_block(lines, budget - used)
            if partial is None:
                misses += 1
                continue
            blocks.append(partial)
            shown.append(rel)
            used += self.count_tokens(partial + "\n")
        text = "\n".join(blocks)
        return RepoMap(
            text=text,
            files=tuple(shown),
            tokens=self.count_tokens(text) if text else 0,
            candidates=len(ranked),
            truncated=truncated,
        )

    def _partial_block(self, lines: list[str], room: int) -> str | None:
        """The header and the first symbols of a block that fit `room` tokens, or None."""
        kept = lines[:1]
        for i, line in enumerate(lines[1:], 1):
            more = f"  ... {len(lines) - i - 1} more" if i < len(lines) - 1 else ""
            attempt = "\n".join([*kept, line, more]).rstrip("\n")
            if self.count_tokens(attempt + "\n") > room:
                break
            kept.append(line)
        if len(kept) == 1:
            return None
        rest = len(lines) - len(kept)
        if rest:
            kept.append(f"  ... {rest} more")
        return "\n".join(kept)


def _windows(matches: list[int], context: int, count: int) -> list[tuple[int, int]]:
    """Merged [first, last] line windows (0-based, inclusive) around matching lines."""
    windows: list[tuple[int, int]] = []
    for i in matches:
        first, last = max(0, i - context), min(count - 1, i + context)
        if windows and first <= windows[-1][1] + 1:
            windows[-1] = (windows[-1][0], max(windows[-1][1], last))
        else:
            windows.append((first, last))
    return windows


_DEFINITION: Mapping[str, re.Pattern[bytes]] = {
    "python": re.compile(rb"\b(?:def|class)[ \t]+(\w+)"),
    "javascript": re.compile(rb"\b(?:function\*?|class)[ \t]+(\w+)"),
    "typescript": re.compile(rb"\b(?:function\*?|class|interface|type|enum)[ \t]+(\w+)"),
    "tsx": re.compile(rb"\b(?:function\*?|class|interface|type|enum)[ \t]+(\w+)"),
    "go": re.compile(rb"\b(?:func(?:[ \t]*\([^)\n]*\))?|type)[ \t]+(\w+)"),
    "rust": re.compile(rb"\b(?:fn|struct|enum|trait|type|union|mod)[ \t]+(\w+)"),
    "java": re.compile(rb"\b(?:class|interface|enum|record)[ \t]+(\w+)"),
}
"""Per grammar, a pattern whose group is a name the file defines (lowercased source)."""

_RG_BATCH = 2000
"""Paths per ripgrep run, to stay far below the command-line length limit."""

_NAME = re.compile(r"[A-Za-z0-9_]+")
"""A keyword that can be a defined name."""


def _symbol_line(symbol: Symbol) -> str:
    return ("    " if symbol.parent else "  ") + symbol.signature


# --------------------------------------------------------------------------------------------
# tree-sitter symbol extraction


@dataclass(frozen=True)
class _Grammar:
    definitions: Mapping[str, str]
    """Top-level node type -> symbol kind."""
    members: Mapping[str, str]
    """Node type inside a container's body -> member kind."""
    wrappers: Mapping[str, str] = field(default_factory=dict)
    """Node type -> field holding the real definition (exports, decorators)."""
    passthrough: frozenset[str] = frozenset()
    """Body child types whose own children are members (Java enum body declarations)."""


_CONTAINERS = frozenset({"class", "interface", "trait", "impl", "enum"})

_JS_DEFINITIONS = {
    "function_declaration": "function",
    "generator_function_declaration": "function",
    "class_declaration": "class",
    "abstract_class_declaration": "class",
    "interface_declaration": "interface",
    "type_alias_declaration": "type",
    "enum_declaration": "enum",
    "function_signature": "function",
}
_JS_MEMBERS = {
    "method_definition": "method",
    "method_signature": "method",
    "abstract_method_signature": "method",
}
_JS_WRAPPERS = {"export_statement": "declaration", "ambient_declaration": ""}

_GRAMMARS: Mapping[str, _Grammar] = {
    "python": _Grammar(
        definitions={"class_definition": "class", "function_definition": "function"},
        members={"function_definition": "method"},
        wrappers={"decorated_definition": "definition"},
    ),
    "javascript": _Grammar(_JS_DEFINITIONS, _JS_MEMBERS, _JS_WRAPPERS),
    "typescript": _Grammar(_JS_DEFINITIONS, _JS_MEMBERS, _JS_WRAPPERS),
    "tsx": _Grammar(_JS_DEFINITIONS, _JS_MEMBERS, _JS_WRAPPERS),
    "go": _Grammar(
        definitions={"function_declaration": "function", "method_declaration": "method"},
        members={},
    ),
    "rust": _Grammar(
        definitions={
            "function_item": "function",
            "struct_item": "struct",
            "enum_item": "enum",
            "trait_item": "trait",
            "impl_item": "impl",
            "type_item": "type",
            "union_item": "struct",
        },
        members={"function_item": "method", "function_signature_item": "method"},
    ),
    "java": _Grammar(
        definitions={
            "class_declaration": "class",
            "interface_declaration": "interface",
            "enum_declaration": "enum",
            "record_declaration": "class",
            "annotation_type_declaration": "interface",
        },
        members={"method_declaration": "method", "constructor_declaration": "method"},
        passthrough=frozenset({"enum_body_declarations"}),
    ),
}

_parsers: dict[str, Any] = {}


def _parser(grammar: str) -> Any:
    parser = _parsers.get(grammar)
    if parser is None:
        from tree_sitter_language_pack import get_parser

        parser = _parsers[grammar] = get_parser(grammar)  # type: ignore[arg-type]
    return parser


def extract_symbols(
    source: bytes, grammar: str, config: IndexConfig | None = None
) -> tuple[Symbol, ...]:
    """Top-level definitions of `source` and the members of its classes, in file order.

    `grammar` is a tree-sitter grammar name (python, javascript, typescript, tsx, go, rust,
    java). A file with syntax errors still yields what tree-sitter could parse.
    """
    spec = _GRAMMARS.get(grammar)
    if spec is None:
        return ()
    limit = (config or IndexConfig()).signature_chars
    tree = _parser(grammar).parse(source)
    out: list[Symbol] = []
    for child in tree.root_node.named_children:
        for node in _unwrap(child, spec):
            out += _definition(node, source, grammar, spec, limit)
    return tuple(out)


def _unwrap(node: Any, spec: _Grammar) -> list[Any]:
    """The definitions behind an export/decorator/ambient wrapper (the node itself otherwise)."""
    field_name = spec.wrappers.get(node.type)
    if field_name is None:
        return [node]
    inner = node.child_by_field_name(field_name) if field_name else None
    if inner is not None:
        return _unwrap(inner, spec)
    return [n for c in node.named_children for n in _unwrap(c, spec)]


def _definition(node: Any, source: bytes, grammar: str, spec: _Grammar, limit: int) -> list[Symbol]:
    line = node.start_point[0] + 1
    if grammar == "go" and node.type == "type_declaration":
        return [_go_type(spec_node, source, limit) for spec_node in node.named_children
                if spec_node.type in ("type_spec", "type_alias")]  # fmt: skip
    if node.type in ("lexical_declaration", "variable_declaration") and grammar in (
        "javascript",
        "typescript",
        "tsx",
    ):
        return _js_function_variables(node, source, limit)
    kind = spec.definitions.get(node.type)
    if kind is None:
        return []
    name = _name(node, source)
    parent = None
    if grammar == "go" and node.type == "method_declaration":
        receiver = node.child_by_field_name("receiver")
        parent = _receiver_type(receiver, source) if receiver is not None else None
    symbol = Symbol(name, kind, _signature(node, source, limit), line, parent)
    out = [symbol]
    if kind in _CONTAINERS:
        body = node.child_by_field_name("body")
        members = list(body.named_children) if body is not None else []
        while members:
            member = members.pop(0)
            if member.type in spec.passthrough:
                members = list(member.named_children) + members
                continue
            for inner in _unwrap(member, spec):
                member_kind = spec.members.get(inner.type)
                if member_kind is not None:
                    out.append(
                        Symbol(
                            _name(inner, source),
                            member_kind,
                            _signature(inner, source, limit),
                            inner.start_point[0] + 1,
                            name,
                        )
                    )
    return out


def _text(node: Any, source: bytes) -> str:
    return source[node.start_byte : node.end_byte].decode("utf-8", errors="replace")


def _name(node: Any, source: bytes) -> str:
    name = node.child_by_field_name("name")
    if name is not None:
        return _text(name, source)
    if node.type == "impl_item":  # impl Trait for Type / impl Type
        target = node.child_by_field_name("type")
        trait = node.child_by_field_name("trait")
        if target is not None:
            base = _text(target, source)
            return f"{_text(trait, source)} for {base}" if trait is not None else base
    return "?"


_OPEN_SPACE = re.compile(r"([(\[{]) ")
_CLOSE_SPACE = re.compile(r",? ([)\]}])")


def _squash(text: str, limit: int) -> str:
    """One line: whitespace runs collapsed, no padding inside brackets, cut at `limit`."""
    text = _CLOSE_SPACE.sub(r"\1", _OPEN_SPACE.sub(r"\1", " ".join(text.split())))
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def _signature(node: Any, source: bytes, limit: int) -> str:
    """The node's text up to its body, on one line (first line for body-less nodes)."""
    body = node.child_by_field_name("body")
    if body is None and node.type == "type_alias_declaration":
        body = node.child_by_field_name("value")
    if body is not None and body.start_byte > node.start_byte:
        # Up to the last token before the body: comments between header and body stay out.
        end = max(
            (c.end_byte for c in node.children
             if c.end_byte <= body.start_byte and c.type != "comment"),
            default=body.start_byte,
        )  # fmt: skip
        text = source[node.start_byte : end].decode("utf-8", errors="replace")
        text = text.rstrip().removesuffix("=").removesuffix(":")
    else:
        text = _text(node, source).split("\n", 1)[0].rstrip().removesuffix("{")
    return _squash(text.rstrip().removesuffix(";"), limit)


def _go_type(node: Any, source: bytes, limit: int) -> Symbol:
    name = (
        _text(node.child_by_field_name("name"), source) if node.child_by_field_name("name") else "?"
    )
    value = node.child_by_field_name("type")
    kinds = {"struct_type": "struct", "interface_type": "interface"}
    kind = kinds.get(value.type, "type") if value is not None else "type"
    shown = kind if kind != "type" and value is not None else _text(value, source) if value else ""
    return Symbol(name, kind, _squash(f"type {name} {shown}", limit), node.start_point[0] + 1)


def _receiver_type(receiver: Any, source: bytes) -> str:
    text = _text(receiver, source).strip("()").split()
    return text[-1].lstrip("*").split("[", 1)[0] if text else "?"


def _js_function_variables(node: Any, source: bytes, limit: int) -> list[Symbol]:
    out = []
    for declarator in node.named_children:
        if declarator.type != "variable_declarator":
            continue
        value = declarator.child_by_field_name("value")
        if value is None or value.type not in ("arrow_function", "function_expression", "function"):
            continue
        body = value.child_by_field_name("body")
        end = body.start_byte if body is not None else value.end_byte
        header = source[node.start_byte : end].decode("utf-8", errors="replace").rstrip()
        out.append(
            Symbol(
                _name(declarator, source),
                "function",
                _squash(header.removesuffix("=>").rstrip() + " =>", limit),
                node.start_point[0] + 1,
            )
        )
    return out
