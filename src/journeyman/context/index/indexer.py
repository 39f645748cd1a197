"""`WorkspaceIndexer`: the text files of a workspace, searched and mapped (see the package doc)."""

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

import pathspec

from journeyman.context.index.config import (
    BINARY_SUFFIXES,
    GRAMMARS_BY_SUFFIX,
    IndexConfig,
    tokens_of,
)
from journeyman.context.index.keywords import extract_keywords, mentioned_paths
from journeyman.context.index.records import (
    FileEntry,
    IndexStats,
    OutlineSymbol,
    RepoMap,
    SearchHit,
    Snippet,
)
from journeyman.context.index.symbols import extract_symbols
from journeyman.providers.pricing import estimate_tokens
from journeyman.tools.context import GENERATED_DIRS
from journeyman.tools.fileio import SNIFF_BYTES, is_binary
from journeyman.tools.search import find_ripgrep
from journeyman.tools.walk import IgnoreRules, walk
from journeyman.tools.watch import ChangeWatch

log = logging.getLogger(__name__)


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
        self._symbols: dict[str, tuple[int, int, tuple[OutlineSymbol, ...]]] = {}
        self._exclude = pathspec.GitIgnoreSpec.from_lines(self.config.exclude)
        self._bootstrapped = False
        self._watch = ChangeWatch(self.root) if _watch_covers(self.config) else None
        """Tells `refresh()` that nothing moved since its last walk (see `_unchanged`)."""
        self._watched_walk: IndexStats | None = None
        """The last whole walk, when the watch was armed before it began."""

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
        armed = self._arm()
        walked = _Walked()
        added = [rel for rel, change in self._scan(self.root, walked) if change == "added"]
        stats = IndexStats(
            files=len(self._entries),
            added=tuple(added),
            skipped_binary=walked.skipped_binary,
            skipped_large=walked.skipped_large,
            truncated=walked.truncated,
            seconds=time.perf_counter() - started,
        )
        self._watched_walk = stats if armed else None
        return stats

    def refresh(self, paths: Iterable[str | Path] | None = None) -> IndexStats:
        """Bring the index up to date: re-read files whose mtime or size changed.

        Without `paths` the whole tree is walked; with `paths` (files or directories, relative
        to the root or absolute) only those are looked at. Returns what changed.
        """
        if not self._bootstrapped:
            return self.bootstrap()
        started = time.perf_counter()
        if paths is None and self._unchanged():
            assert self._watched_walk is not None
            return IndexStats(
                files=len(self._entries),
                skipped_binary=self._watched_walk.skipped_binary,
                skipped_large=self._watched_walk.skipped_large,
                truncated=self._watched_walk.truncated,
                seconds=time.perf_counter() - started,
            )
        armed = paths is None and self._arm()
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
        stats = IndexStats(
            files=len(self._entries),
            added=tuple(added),
            changed=tuple(changed),
            removed=tuple(removed),
            skipped_binary=walked.skipped_binary,
            skipped_large=walked.skipped_large,
            truncated=walked.truncated,
            seconds=time.perf_counter() - started,
        )
        if paths is None:
            self._watched_walk = stats if armed else None
        return stats

    def _arm(self) -> bool:
        """Start watching the workspace before a whole walk; False when it cannot be."""
        self._watched_walk = None
        return self._watch is not None and self._watch.arm()

    def _unchanged(self) -> bool:
        """Whether the watch, armed before the last whole walk, saw nothing change since: the
        index then holds the workspace as it is (a file written through a hard link from
        outside the workspace is the exception; see `tools.watch`)."""
        return (
            self._watched_walk is not None and self._watch is not None and not self._watch.changed()
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
        self._tokens[rel] = b"\n" + b"\n".join(set(tokens_of(lowered))) + b"\n"
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
        pieces = tokens_of(keyword.lower().encode("utf-8"))
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

    def symbols(self, path: str) -> tuple[OutlineSymbol, ...]:
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
                for piece in tokens_of(keyword.lower().encode("utf-8")):
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


def _watch_covers(config: IndexConfig) -> bool:
    """Whether a `ChangeWatch` sees every folder the index reads: it leaves out the folders
    tools fill, so only when the index leaves them out too (as it does by default)."""
    return set(GENERATED_DIRS) <= set(config.exclude)


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


def _symbol_line(symbol: OutlineSymbol) -> str:
    return ("    " if symbol.parent else "  ") + symbol.signature
