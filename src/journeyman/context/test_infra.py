"""The files a check's verdict rests on, and what changed in them since the run started.

A check proves a fix only while the tests and their settings are the ones the user had. The
verdict takes a `TestInfra` manifest before the model's first turn and compares it with the
tree when the check passes. What counts as test infrastructure:

* test files: ``test_*.py``, ``*_test.py``, ``conftest.py`` and every file under a folder
  named ``tests``, ``test`` or ``testing`` (data files the tests compare against included);
* test settings: ``pytest.ini``, ``.pytest.ini``, ``tox.ini``, ``noxfile.py``, ``hatch.toml``,
  the Makefiles, and the test tables of ``pyproject.toml`` (``[tool.pytest*]``, ``[tool.tox]``,
  ``[tool.nox]``, ``[tool.hatch.envs]``, ``[tool.pdm.scripts]``, ``[tool.coverage]``) and
  ``setup.cfg`` (``[tool:pytest]``, ``[pytest]``, ``[coverage:*]``): a change elsewhere in those
  two files (a dependency, the version) is the model's to make;
* what Python runs before any test: a module or package that shadows the runner or a library it
  imports at start (``pytest.py``, ``_pytest/``, ``unittest.py``, ``pluggy``, ``py``, ``tox``,
  ``nox``, ``coverage``), ``sitecustomize.py``/``usercustomize.py``, and ``*.pth`` files in any
  ``site-packages`` folder inside the workspace.

Comparing two manifests gives the `TestChange`s: an existing test file changed or deleted, and
settings or start-up code changed, added or deleted. A new test file is listed too, as
``added`` with ``allowed=True``: new tests run with the others and prove more, not less.

The walk never follows links and stops after `MAX_ENTRIES` entries; contents are hashed, never
imported or run.
"""

from __future__ import annotations

import configparser
import hashlib
import json
import os
import stat
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from journeyman.tools.fingerprint import RUN_CACHES

MAX_ENTRIES = 100_000
"""Directory entries the walk looks at before it stops (a huge tree is protected in part)."""
MAX_HASHED_BYTES = 16 * 1024 * 1024
"""Larger files are identified by size and modification time instead of their contents."""
TEST_DIRS = frozenset({"tests", "test", "testing"})
SETTINGS_FILES = frozenset(
    {
        "pytest.ini",
        ".pytest.ini",
        "tox.ini",
        "noxfile.py",
        "hatch.toml",
        "Makefile",
        "makefile",
        "GNUmakefile",
    }
)
SECTIONED_FILES = frozenset({"pyproject.toml", "setup.cfg"})
"""Settings files of which only the test tables count."""
PYPROJECT_TABLES = (
    ("pytest",),
    ("tox",),
    ("nox",),
    ("hatch", "envs"),
    ("pdm", "scripts"),
    ("coverage",),
)
SETUP_CFG_SECTIONS = ("tool:pytest", "pytest")
SHADOW_MODULES = frozenset(
    {
        "pytest",
        "_pytest",
        "unittest",
        "pluggy",
        "py",
        "tox",
        "nox",
        "coverage",
        "sitecustomize",
        "usercustomize",
    }
)
"""Module names that change what a test runner does when a file or folder of that name is
importable ahead of the real one."""
SKIPPED_DIRS = RUN_CACHES | {".git", ".hg", ".svn", "node_modules"}


@dataclass(frozen=True)
class TestChange:
    """One difference in the test infrastructure between the start of a run and now."""

    path: str
    """Relative to the workspace, with forward slashes."""
    change: str
    """"modified", "deleted" or "added"."""
    role: str
    """"test" (a test file), "settings" (test settings) or "startup" (code Python runs before
    the tests: a shadowing module, sitecustomize, a .pth file)."""
    allowed: bool = False
    """True for a new test file: it runs with the others and is not held against the run."""

    __test__ = False

    def describe(self) -> str:
        what = {"test": "test file", "settings": "test settings", "startup": "start-up code"}
        return f"{self.path} ({what.get(self.role, self.role)} {self.change})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "change": self.change,
            "role": self.role,
            "allowed": self.allowed,
        }


@dataclass(frozen=True)
class TestInfra:
    """A manifest of the test infrastructure: path -> (role, digest)."""

    entries: dict[str, tuple[str, str]] = field(default_factory=dict)
    complete: bool = True
    """False when the walk stopped at `MAX_ENTRIES` before seeing the whole tree."""

    __test__ = False

    def changes_since(self, start: TestInfra) -> list[TestChange]:
        """What differs in this manifest from `start`, in path order."""
        changes: list[TestChange] = []
        for path in sorted(start.entries.keys() | self.entries.keys()):
            before, now = start.entries.get(path), self.entries.get(path)
            if before is not None and now is None:
                changes.append(TestChange(path, "deleted", before[0]))
            elif before is None and now is not None:
                role = now[0]
                changes.append(TestChange(path, "added", role, allowed=role == "test"))
            elif before is not None and now is not None and before[1] != now[1]:
                changes.append(TestChange(path, "modified", now[0]))
        return changes

    def to_dict(self) -> dict[str, Any]:
        return {
            "entries": {path: list(value) for path, value in sorted(self.entries.items())},
            "complete": self.complete,
        }

    @classmethod
    def from_dict(cls, data: Any) -> TestInfra:
        if not isinstance(data, dict) or not isinstance(data.get("entries"), dict):
            return cls(complete=False)
        entries: dict[str, tuple[str, str]] = {}
        for path, value in data["entries"].items():
            if isinstance(value, list) and len(value) == 2:
                role, digest = value
                if isinstance(role, str) and isinstance(digest, str):
                    entries[str(path)] = (role, digest)
        return cls(entries, bool(data.get("complete", True)))


def blocking(changes: list[TestChange]) -> list[TestChange]:
    """The changes a run may not succeed with unless test edits are allowed."""
    return [change for change in changes if not change.allowed]


def take_manifest(root: Path) -> TestInfra:
    """The test infrastructure of the workspace at `root` as it is now."""
    entries: dict[str, tuple[str, str]] = {}
    complete = True
    for count, (path, rel, place) in enumerate(_walk(root)):
        if count >= MAX_ENTRIES:
            complete = False
            break
        role = _role(path.name, rel, place)
        if role is None:
            continue
        digest = _digest(path)
        if digest is not None:
            entries[rel] = (role, digest)
    return TestInfra(entries, complete)


def _role(name: str, rel: str, place: str) -> str | None:
    """What the file at `rel` is to the tests (see the module docstring), None if nothing."""
    stem, suffix = os.path.splitext(name)
    if place == "site":
        if suffix == ".pth" or stem in ("sitecustomize", "usercustomize"):
            return "startup"
        return None
    parts = rel.split("/")
    if len(parts) == 1 and (name in SETTINGS_FILES or name in SECTIONED_FILES):
        return "settings"
    if name == "conftest.py":
        return "settings"
    if _shadows(parts, stem, suffix):
        return "startup"
    test_module = suffix == ".py" and (stem.startswith("test_") or stem.endswith("_test"))
    if place == "tests" or test_module:
        return "test"
    return None


def _shadows(parts: list[str], stem: str, suffix: str) -> bool:
    """A module or package importable as one of `SHADOW_MODULES`: at the root, in `src/`
    or in a tests folder (the folders a runner puts on sys.path)."""
    folders = parts[:-1]
    if folders[:1] == ["src"] or (folders and folders[0] in TEST_DIRS):
        folders = folders[1:]
    if not folders:
        return stem in SHADOW_MODULES and suffix in (".py", ".pyc", ".so", ".pth")
    return folders[0] in SHADOW_MODULES


def _walk(root: Path) -> Iterator[tuple[Path, str, str]]:
    """(path, relative path, place) of every file and link, links not followed. The place is
    "tests" under a tests folder, "site" directly in a virtual environment's site-packages
    (where .pth files take effect; nothing else of a virtual environment is looked at),
    else "tree"."""
    stack: list[tuple[Path, str, str]] = [(root, "", "tree")]
    while stack:
        folder, prefix, place = stack.pop()
        try:
            with os.scandir(folder) as scan:
                entries = sorted(scan, key=lambda e: e.name)
        except OSError:
            continue
        if place != "site" and any(e.name == "pyvenv.cfg" for e in entries):
            place = "venv"
        for entry in entries:
            rel = f"{prefix}{entry.name}"
            try:
                mode = entry.stat(follow_symlinks=False).st_mode
            except OSError:
                continue
            if stat.S_ISDIR(mode):
                inner = _inner_place(place, entry.name)
                if inner is not None:
                    stack.append((Path(entry.path), f"{rel}/", inner))
            elif (stat.S_ISREG(mode) or stat.S_ISLNK(mode)) and place != "venv":
                yield Path(entry.path), rel, place


def _inner_place(place: str, name: str) -> str | None:
    """The place of folder `name` inside a folder at `place`; None when it is not entered."""
    if name in SKIPPED_DIRS or place == "site":
        return None
    if place == "venv":
        return "site" if name == "site-packages" else "venv"
    if place == "tests" or name in TEST_DIRS:
        return "tests"
    return "tree"


def _digest(path: Path) -> str | None:
    try:
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode):
            return "link:" + os.readlink(path)
        if info.st_size > MAX_HASHED_BYTES:
            return f"size:{info.st_size}:{info.st_mtime_ns}"
        data = path.read_bytes()
    except OSError:
        return None
    if path.name == "pyproject.toml":
        data = _pyproject_tables(data)
    elif path.name == "setup.cfg":
        data = _setup_cfg_sections(data)
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def _pyproject_tables(data: bytes) -> bytes:
    try:
        tool = tomllib.loads(data.decode("utf-8", errors="replace")).get("tool", {})
    except tomllib.TOMLDecodeError:
        return data  # unreadable: any change to it counts
    picked: dict[str, Any] = {}
    for keys in PYPROJECT_TABLES:
        value: Any = tool
        for key in keys:
            value = value.get(key) if isinstance(value, dict) else None
        if value is not None:
            picked[".".join(keys)] = value
    for key, value in tool.items():
        if key.startswith("pytest"):
            picked[key] = value
    return json.dumps(picked, sort_keys=True, default=str).encode()


def _setup_cfg_sections(data: bytes) -> bytes:
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read_string(data.decode("utf-8", errors="replace"))
    except configparser.Error:
        return data
    picked = {
        name: dict(parser.items(name))
        for name in parser.sections()
        if name in SETUP_CFG_SECTIONS or name.startswith("coverage:")
    }
    return json.dumps(picked, sort_keys=True).encode()
