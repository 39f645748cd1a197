"""A fingerprint of a workspace's files: equal fingerprints mean the same tree.

The verdict takes one when the check runs and one when the run ends; a receipt holds only if
they are equal ("the check ran on the final tree"). Every file counts, tracked by git or not,
ignored or not, except what running tests writes by itself: byte-code and the caches of test
tools, and virtual environments (a runner such as `uv run` may sync one). Links are hashed by
their target text, never followed. Contents are hashed up to `MAX_HASHED_BYTES` a file (a
larger file counts by size and modification time).
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass

RUN_CACHES = frozenset(
    {"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".hypothesis", ".tox", ".nox"}
)
"""Folders that running tests and linters write by themselves."""
SKIPPED_DIRS = RUN_CACHES | {".git", ".cache"}
"""Folders the fingerprint leaves out: those caches, and git's own metadata."""
SKIPPED_SUFFIXES = (".pyc", ".pyo")
SKIPPED_PREFIXES = (".coverage",)
MAX_HASHED_BYTES = 64 * 1024 * 1024
MAX_FILES = 200_000


@dataclass(frozen=True)
class Fingerprint:
    """The digest of a tree and how many files went into it."""

    digest: str
    files: int
    complete: bool = True
    """False when the tree had more than `MAX_FILES` files (the rest did not count)."""


def fingerprint(root: str | os.PathLike[str]) -> Fingerprint:
    """The fingerprint of the files under `root` (see the module docstring)."""
    total = hashlib.blake2b(digest_size=20)
    files = 0
    for rel, path, mode in _files(os.fspath(root)):
        if files >= MAX_FILES:
            return Fingerprint(total.hexdigest(), files, complete=False)
        files += 1
        total.update(rel.encode("utf-8", "surrogateescape") + b"\0")
        total.update(_content_digest(path, mode) + b"\n")
    return Fingerprint(total.hexdigest(), files)


def _files(root: str) -> list[tuple[str, str, int]]:
    found: list[tuple[str, str, int]] = []
    stack = [("", root)]
    while stack:
        prefix, folder = stack.pop()
        try:
            with os.scandir(folder) as scan:
                entries = list(scan)
        except OSError:
            continue
        if prefix and any(e.name == "pyvenv.cfg" for e in entries):
            continue  # a virtual environment: a runner may rewrite it
        for entry in entries:
            rel = f"{prefix}{entry.name}"
            try:
                mode = entry.stat(follow_symlinks=False).st_mode
            except OSError:
                continue
            if stat.S_ISDIR(mode):
                if entry.name not in SKIPPED_DIRS:
                    stack.append((f"{rel}/", entry.path))
            elif not entry.name.endswith(SKIPPED_SUFFIXES) and not entry.name.startswith(
                SKIPPED_PREFIXES
            ):
                found.append((rel, entry.path, mode))
    found.sort()
    return found


def _content_digest(path: str, mode: int) -> bytes:
    if stat.S_ISLNK(mode):
        try:
            return b"link:" + os.fsencode(os.readlink(path))
        except OSError:
            return b"link:?"
    if not stat.S_ISREG(mode):
        return b"special"
    executable = b"x" if mode & stat.S_IXUSR else b"-"
    try:
        # no link followed, and a file swapped for a FIFO since the scan cannot block the open
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return b"unreadable"
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return b"special"
        if info.st_size > MAX_HASHED_BYTES:
            return executable + f"size:{info.st_size}:{info.st_mtime_ns}".encode()
        digest = hashlib.blake2b(digest_size=16)
        while chunk := os.read(fd, 1 << 20):
            digest.update(chunk)
    except OSError:
        return b"unreadable"
    finally:
        os.close(fd)
    return executable + digest.hexdigest().encode()
