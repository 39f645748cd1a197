"""How a Python project's tests are written, read from the files themselves (never imported).

The project profile asks three questions here once the configuration files said nothing
decisive:

* `classify_tests`: are the test files pytest-style (module-level ``test_`` functions,
  ``import pytest``, bare ``class TestX:`` classes) or unittest ``TestCase`` suites? unittest
  runs none of the former: a tests folder of plain functions "passes" with ``Ran 0 tests``.
* `unittest_start`: which ``unittest discover`` arguments find the tests. A start folder that is
  not a package must be its own top level (``-s tests``): ``-t .`` fails on it with "Start
  directory is not importable". `unittest_misses` lists the test files discovery would still
  leave out (a folder below the start without ``__init__.py``).
* `doctest_targets`: for a project without test files, the packages and modules whose
  docstrings hold ``>>>`` examples, for ``pytest --doctest-modules``.

Every read is bounded (a number of files, a number of bytes each) and goes through
`read_bounded`, which opens only regular files: a FIFO or a device planted under a marker's
name cannot stall or flood detection.
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

_PYTEST_IMPORT = re.compile(r"^[ \t]*(?:import[ \t]+pytest\b|from[ \t]+_?pytest\b)", re.MULTILINE)
_TEST_FUNCTION = re.compile(r"^(?:async[ \t]+)?def[ \t]+test\w*[ \t]*\(", re.MULTILINE)
_PLAIN_TEST_CLASS = re.compile(
    r"^class[ \t]+Test\w*[ \t]*(?:\([ \t]*(?:object)?[ \t]*\))?[ \t]*:", re.MULTILINE
)
_TESTCASE_CLASS = re.compile(r"^[ \t]*class[ \t]+\w+[ \t]*\([^)]*TestCase\b", re.MULTILINE)
_UNITTEST_IMPORT = re.compile(r"^[ \t]*(?:import|from)[ \t]+unittest\b", re.MULTILINE)
_DOCTEST_PROMPT = re.compile(r"^[ \t]*>>>[ \t]", re.MULTILINE)

NOT_DOCTEST_MODULES = frozenset({"setup.py", "conftest.py", "noxfile.py", "fabfile.py"})
"""Root modules that pytest --doctest-modules should not import (they run code or need tools)."""
MAX_DOCTEST_TARGETS = 5
"""Packages or modules named on a doctest command line, at most."""


def read_bounded(path: Path, limit: int) -> str | None:
    """The first `limit` bytes of the regular file `path` as text; None for anything else.

    Opened without blocking and checked after opening, so a FIFO, a socket or a device (even
    behind a symlink, even swapped in between a check and the open) is refused, not read.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks: list[bytes] = []
        left = limit
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks).decode("utf-8", errors="replace")
    except OSError:
        return None
    finally:
        os.close(fd)


@dataclass(frozen=True)
class TestStyles:
    """What the test files that were read look like."""

    pytest_reason: str | None
    """Why they need pytest (the first pytest-only construct seen and where), None if nothing."""
    unittest_files: int
    """Files that define a unittest TestCase class or import unittest."""
    read: int
    """Test files read."""
    unread: int
    """Test files left unread (over the bound, or not a readable regular file)."""

    __test__ = False  # not a pytest test class


def classify_tests(
    base: Path, test_paths: Sequence[str], *, max_files: int, max_bytes: int
) -> TestStyles:
    """Read up to `max_files` of `test_paths` (relative to `base`), `max_bytes` each.

    Reading stops at the first pytest-style file: one is enough to need pytest.
    """
    unittest_files = read = 0
    for rel in test_paths[:max_files]:
        text = read_bounded(base / rel, max_bytes)
        if text is None:
            continue
        read += 1
        construct = _pytest_construct(text)
        if construct is not None:
            return TestStyles(f"{construct} in {rel}", unittest_files, read, len(test_paths) - read)
        if _TESTCASE_CLASS.search(text) or _UNITTEST_IMPORT.search(text):
            unittest_files += 1
    return TestStyles(None, unittest_files, read, len(test_paths) - read)


def _pytest_construct(text: str) -> str | None:
    """The first thing in a test file that only pytest runs, None if there is none.

    A line search finds candidates cheaply; the file's syntax tree then confirms them (a
    ``def test_`` inside a docstring is no test). A file that does not parse (cut at the byte
    bound, or written for another Python) keeps the line search's answer.
    """
    in_lines = _pytest_construct_in_lines(text)
    if in_lines is None:
        return None
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return in_lines
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(_is_pytest(a.name) for a in node.names):
            return "import pytest"
        if isinstance(node, ast.ImportFrom) and _is_pytest(node.module or ""):
            return "import pytest"
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith(
            "test"
        ):
            return "module-level test functions"
        if isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            bases = [b.id for b in node.bases if isinstance(b, ast.Name)]
            if len(bases) == len(node.bases) and set(bases) <= {"object"}:
                return "a plain Test class"
    return None


def _is_pytest(module: str) -> bool:
    return module.split(".", 1)[0] in ("pytest", "_pytest")


def _pytest_construct_in_lines(text: str) -> str | None:
    if _PYTEST_IMPORT.search(text):
        return "import pytest"
    if _TEST_FUNCTION.search(text):
        return "module-level test functions"
    if _PLAIN_TEST_CLASS.search(text):
        return "a plain Test class"
    return None


def unittest_start(base: Path, test_paths: Sequence[str], test_dirs: Sequence[str]) -> str:
    """The `unittest discover` arguments that reach `test_paths` ('' for the root)."""
    folders = [d for d in test_dirs if any(p.startswith(f"{d}/") for p in test_paths)]
    if not folders:
        tops = {p.split("/", 1)[0] for p in test_paths if "/" in p}
        at_root = any("/" not in p for p in test_paths)
        if at_root or len(tops) != 1 or _is_package(base / next(iter(tops))):
            return ""  # discovery from the root walks packages and finds root modules
        folders = sorted(tops)
    start = folders[0]
    if start.startswith("-"):
        return ""  # it would read as an option
    # -t . imports the tests as `start.test_x`, which needs `start` to be a package
    quoted = shlex.quote(start)
    return f"-s {quoted} -t ." if _is_package(base / start) else f"-s {quoted}"


def unittest_misses(base: Path, test_paths: Sequence[str], start: str) -> list[str]:
    """The test files that `unittest discover` with the arguments `start` never imports.

    Since Python 3.11 discovery enters only packages below its start folder, so a test file
    in a folder without ``__init__.py`` (``tests/unit/test_x.py``) is silently left out.
    """
    words = shlex.split(start)
    folder = words[words.index("-s") + 1] if "-s" in words else ""
    packages: dict[str, bool] = {}
    missed = []
    for rel in test_paths:
        if folder and not rel.startswith(f"{folder}/"):
            missed.append(rel)
            continue
        parts = rel[len(folder) + 1 if folder else 0 :].split("/")[:-1]
        below = [folder] if folder else []
        for part in parts:
            below.append(part)
            key = "/".join(below)
            if key not in packages:
                packages[key] = _is_package(base / key)
            if not packages[key]:
                missed.append(rel)
                break
    return missed


def _is_package(folder: Path) -> bool:
    return (folder / "__init__.py").is_file()


def doctest_targets(
    base: Path, python_paths: Sequence[str], *, max_files: int, max_bytes: int
) -> list[str]:
    """Packages (``pkg``, ``src/pkg``) and root modules whose files hold ``>>>`` examples."""
    targets: list[str] = []
    for rel in python_paths[:max_files]:
        target = _doctest_target(base, rel)
        if target is None or target in targets:
            continue
        text = read_bounded(base / rel, max_bytes)
        if text is not None and _DOCTEST_PROMPT.search(text):
            targets.append(target)
            if len(targets) == MAX_DOCTEST_TARGETS:
                break
    return sorted(targets)


def _doctest_target(base: Path, rel: str) -> str | None:
    """What pytest --doctest-modules is pointed at for the file `rel`, None to leave it out."""
    parts = rel.split("/")
    if parts[0].startswith("-"):
        return None  # it would read as an option on the command line
    if len(parts) == 1:
        return None if rel in NOT_DOCTEST_MODULES else rel
    if parts[0] == "src" and len(parts) > 2 and _is_package(base / "src" / parts[1]):
        return f"src/{parts[1]}"
    if _is_package(base / parts[0]):
        return parts[0]
    return None
