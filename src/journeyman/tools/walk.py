"""Walking a workspace the way the file tools see it: .gitignore rules and a sorted walker.

Shared by list_files, glob, grep's Python fallback, the workspace index, the project profile
and the LSP manager, so they all skip exactly the same files.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pathspec


class IgnoreRules:
    """The .gitignore files of a workspace (the root one and nested ones), read on demand.

    As in git, a deeper file's rules override shallower ones and `!pattern` re-includes.
    `.git` is always ignored. Rules from .gitignore files above `floor` are not applied, which
    lets a caller list a directory it asked for even if that directory is itself ignored.
    """

    def __init__(self, root: Path, *, floor: Path | None = None) -> None:
        self.root = root
        self.floor = floor or root
        self._specs: dict[Path, pathspec.GitIgnoreSpec | None] = {}

    @classmethod
    def for_start(cls, root: Path, start: Path) -> IgnoreRules:
        """Rules for walking from `start`: if `start` itself is ignored, its own rules apply."""
        rules = cls(root)
        if start != root and rules.ignored_with_parents(start):
            return cls(root, floor=start)
        return rules

    def _spec(self, directory: Path) -> pathspec.GitIgnoreSpec | None:
        if directory not in self._specs:
            spec = None
            try:
                text = (directory / ".gitignore").read_text(encoding="utf-8", errors="replace")
            except OSError:
                pass
            else:
                spec = pathspec.GitIgnoreSpec.from_lines(text.splitlines())
            self._specs[directory] = spec
        return self._specs[directory]

    def ignored(self, path: Path, is_dir: bool) -> bool:
        """Whether the rules exclude `path` (inside the root); `is_dir` decides "dir/" patterns."""
        if path.name == ".git":
            return True
        try:
            parts = path.relative_to(self.root).parts
        except ValueError:
            return False
        verdict = False
        directory = self.root
        for depth in range(len(parts)):
            if depth:
                directory = directory / parts[depth - 1]
            if directory != self.floor and self.floor not in directory.parents:
                continue  # a .gitignore above the floor
            spec = self._spec(directory)
            if spec is None:
                continue
            rel = "/".join(parts[depth:]) + ("/" if is_dir else "")
            result = spec.check_file(rel)
            if result.include is not None:
                verdict = bool(result.include)
        return verdict

    def ignored_with_parents(self, path: Path) -> bool:
        """Whether `path` or any directory between the root and it is ignored."""
        try:
            parts = path.relative_to(self.root).parts
        except ValueError:
            return False
        current = self.root
        for i, part in enumerate(parts):
            current = current / part
            if self.ignored(current, is_dir=i < len(parts) - 1 or current.is_dir()):
                return True
        return False


@dataclass(frozen=True)
class WalkEntry:
    path: Path
    kind: str
    """"file", "dir", "link" (a symlink, never followed) or "other" (FIFO, socket, device)."""


def walk(
    start: Path, *, recursive: bool = True, skip_dir: Callable[[Path], bool] = lambda p: False
) -> Iterator[WalkEntry]:
    """Depth-first walk below `start`, entries of each directory sorted by name.

    Directories are yielded (unless `skip_dir` says to skip them, which also prunes them) and
    then descended into before the next sibling, the order `rg --sort path` uses. Symlinks are
    yielded as "link" and never followed; unreadable directories are passed over.
    """
    stack: list[Iterator[os.DirEntry[str]]] = [_sorted_entries(start)]
    while stack:
        entry = next(stack[-1], None)
        if entry is None:
            stack.pop()
            continue
        path = Path(entry.path)
        try:
            if entry.is_symlink():
                yield WalkEntry(path, "link")
            elif entry.is_dir(follow_symlinks=False):
                if skip_dir(path):
                    continue
                yield WalkEntry(path, "dir")
                if recursive:
                    stack.append(_sorted_entries(path))
            elif entry.is_file(follow_symlinks=False):
                yield WalkEntry(path, "file")
            else:
                yield WalkEntry(path, "other")
        except OSError:
            continue


def _sorted_entries(directory: Path) -> Iterator[os.DirEntry[str]]:
    try:
        with os.scandir(directory) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError:
        return iter(())
    return iter(entries)
