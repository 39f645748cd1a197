"""Which of the agent's changes are test infrastructure: left out of the graded tree, flagged.

Grading applies the agent's changes to a fresh copy of the task (`batch.pristine`); before it
does, every changed path is sorted here. A change that could decide how the hidden tests run,
rather than what the code under test does, is left out and listed as a `Flag` (path and why):

- the tests themselves: a file the hidden tests install or the test patch touches (the task's
  own version is used), or a file put where a folder of them goes;
- pytest's settings files at any depth (`pytest.ini`, `.pytest.ini`, `tox.ini`), and the test
  sections of `setup.cfg` (`[tool:pytest]`, `[pytest]`, the `pytest11` entry points) and
  `pyproject.toml` (`[tool.pytest]`, `[tool.pytest.ini_options]`, the
  `[project.entry-points.pytest11]` table): the file is kept with those sections as they were
  (`Decision.content`), or left out whole when that cannot be done exactly;
- code pytest or Python runs before any test: `conftest.py` anywhere, `sitecustomize.py`,
  `usercustomize.py`, `*.pth`, a module that shadows the test runner (`SHADOW_MODULES`), a
  module that loads plugins (`pytest_plugins = ...`), and every module named as a plugin by the
  settings, old or new (`-p NAME` in `addopts`, `pytest_plugins`, `pytest11` entry points);
- a symlink pointing out of the task (refused), and a nested git repository (not a change git
  can carry).

A kept Python file that newly names pytest's internals or hooks (`_pytest`, `pluggy`,
`hookimpl`, `pytest_runtest_*`...) is flagged too, but kept: it may be the fix, and only a
reviewer can tell (code the tests import could patch pytest as it is imported).

This module reads contents and never runs them; `sort_changes` is the one entry point.
"""

from __future__ import annotations

import ast
import configparser
import posixpath
import re
import shlex
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from journeyman.context.test_infra import SHADOW_MODULES, TEST_DIRS

SETTINGS_FILES = frozenset({"pytest.ini", ".pytest.ini", "tox.ini"})
"""pytest reads these whole; any change to one is left out."""
START_UP_FILES = frozenset({"conftest.py", "sitecustomize.py", "usercustomize.py"})
SYMLINK_MODE = "120000"
FILE_MODES = frozenset({"100644", "100755"})
GITLINK_MODE = "160000"
SETTINGS_NAMES = SETTINGS_FILES | {"setup.cfg", "pyproject.toml", "conftest.py"}
"""The files whose plugins `sort_changes` wants to know of in the task as it was."""
SETUP_CFG_SECTIONS = ("tool:pytest", "pytest")
ENTRY_POINTS_SECTION = "options.entry_points"
PLUGIN_GROUP = "pytest11"


@dataclass(frozen=True)
class Flag:
    """One change left out of the graded tree (or kept only in part), and why."""

    path: str
    why: str

    def to_dict(self) -> dict[str, str]:
        return {"path": self.path, "why": self.why}


@dataclass(frozen=True)
class Change:
    """One path the agent changed, as `git diff --raw` reports it."""

    path: str
    status: str
    """"A" added, "M" modified, "D" deleted, "T" type changed."""
    old_mode: str
    new_mode: str
    old_blob: str
    new_blob: str


@dataclass
class Sorted:
    """What to apply: `kept` paths as the agent left them, `rewritten` paths with the given
    contents (the agent's file with its test sections as they were), and the `flags`."""

    kept: list[str] = field(default_factory=list)
    rewritten: dict[str, bytes] = field(default_factory=dict)
    flags: list[Flag] = field(default_factory=list)


Blob = Callable[[str], bytes]
"""Reads a blob by id (empty bytes for the null id)."""


def sort_changes(
    changes: Iterable[Change],
    blob: Blob,
    hidden_paths: Iterable[str],
    base_settings: Iterable[tuple[str, bytes]] = (),
) -> Sorted:
    """Sort the agent's changes (see the module docstring). `hidden_paths` are the files the
    hidden tests install, relative to the task's root; `base_settings` the task's own
    settings files and conftest.py files (path, contents), for the plugins they name."""
    changes = list(changes)
    hidden = frozenset(hidden_paths)
    plugins = _plugin_modules(changes, blob)
    for path, content in base_settings:
        for plugin in _plugins_named(posixpath.basename(path), _text(content)):
            for module in _import_paths(plugin):
                plugins.setdefault(module, path)
    result = Sorted()
    for change in changes:
        why = _left_out(change, blob, hidden, plugins)
        if why is not None:
            result.flags.append(Flag(change.path, why))
            continue
        name = posixpath.basename(change.path)
        if name in SECTIONED and change.new_mode != SYMLINK_MODE:
            rewrite = SECTIONED[name](_text(blob(change.old_blob)), _text(blob(change.new_blob)))
            if rewrite is not None:
                graded, why = rewrite
                result.flags.append(Flag(change.path, why))
                if graded is not None:
                    result.rewritten[change.path] = graded.encode("utf-8")
                continue
        result.kept.append(change.path)
        reaches = _reaches_into_pytest(change, blob)
        if reaches is not None:
            result.flags.append(Flag(change.path, reaches))
    return result


_PYTEST_INTERNALS = re.compile(
    r"\b(?:_pytest|pluggy|hookimpl|hookwrapper|pytest_(?:runtest|report|collect|make|configure|"
    r"sessionstart|terminal)\w*)\b"
)
"""What code that changes how pytest runs or reports looks like: its internals, its hooks."""


def _reaches_into_pytest(change: Change, blob: Blob) -> str | None:
    """A kept Python file that, unlike before, names pytest's internals or hooks: kept (it may
    be the fix), but flagged for review, since imported code could patch pytest at import."""
    if not change.path.endswith(".py") or change.new_mode not in FILE_MODES:
        return None
    new = set(_PYTEST_INTERNALS.findall(_text(blob(change.new_blob))))
    added = sorted(new - set(_PYTEST_INTERNALS.findall(_text(blob(change.old_blob)))))
    if not added:
        return None
    return f"kept, but it now names pytest's internals or hooks ({', '.join(added[:3])}): review it"


def _left_out(
    change: Change, blob: Blob, hidden: frozenset[str], plugins: dict[str, str]
) -> str | None:
    """Why `change` is left out of the graded tree whole; None when it is not."""
    path, name = change.path, posixpath.basename(change.path)
    if path in hidden:
        return "a hidden test file: the task's own version is graded"
    if any(other.startswith(path + "/") for other in hidden):
        return "put where the hidden tests go: the task's own tests are graded"
    if change.new_mode == GITLINK_MODE:
        return "a nested git repository: its files are not part of the change"
    if change.new_mode == SYMLINK_MODE:
        target = _text(blob(change.new_blob))
        if _leaves_tree(path, target):
            return f"a symlink pointing out of the task ({target}): refused"
    if name in SETTINGS_FILES:
        return f"{name}: pytest settings decide how the tests run"
    if name in START_UP_FILES:
        return f"{name}: code pytest or Python runs before the tests"
    if name.endswith(".pth"):
        return "a .pth file: Python runs its import lines at start-up"
    module = _module_name(path)
    if module is not None and module in plugins:
        return f"named as a pytest plugin by {plugins[module]}"
    shadowed = _shadowed(path)
    if shadowed is not None:
        return f"shadows `{shadowed}`, which the test run imports"
    python = name.endswith(".py") and change.new_mode != SYMLINK_MODE
    if python and _plugin_list(_text(blob(change.new_blob))):
        return "loads pytest plugins (pytest_plugins)"
    return None


def _leaves_tree(path: str, target: str) -> bool:
    if not target or target.startswith("/"):
        return True
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(path), target))
    return joined == ".." or joined.startswith("../")


def _shadowed(path: str) -> str | None:
    """The runner module a file at `path` would be imported as, at the root, in `src/` or in
    a tests folder (the folders on sys.path when the tests run); None if none."""
    parts = path.split("/")
    if parts[0] == "src" or parts[0] in TEST_DIRS:
        parts = parts[1:]
    if not parts:
        return None
    if len(parts) == 1:  # a module file: `pytest.py`, also `pytest.cpython-312-x86_64.so`
        stem, extension = parts[0].split(".", 1)[0], parts[0].rsplit(".", 1)[-1]
        importable = "." in parts[0] and extension in ("py", "pyc", "so", "pyd")
        return stem if importable and stem in SHADOW_MODULES else None
    return parts[0] if parts[0] in SHADOW_MODULES else None


def _module_name(path: str) -> str | None:
    """The dotted module a .py file is, from the root or from `src/` (both tried by the
    caller through `_plugin_modules` keys); None for anything else."""
    if not path.endswith(".py"):
        return None
    stem = path[: -len(".py")]
    if stem.endswith("/__init__"):
        stem = stem[: -len("/__init__")]
    return stem.replace("/", ".")


def _plugin_modules(changes: list[Change], blob: Blob) -> dict[str, str]:
    """Module name (as from the root, and as from `src/`) -> the settings file naming it as a
    pytest plugin, read from the old and the new version of every changed file."""
    named: dict[str, str] = {}
    for change in changes:
        name = posixpath.basename(change.path)
        if change.new_mode in (SYMLINK_MODE, GITLINK_MODE):
            continue
        for blob_id in (change.old_blob, change.new_blob):
            text = _text(blob(blob_id))
            for plugin in _plugins_named(name, text):
                for module in _import_paths(plugin):
                    named.setdefault(module, change.path)
    return named


def _import_paths(plugin: str) -> list[str]:
    """The module names `plugin` is imported as: from the root, or from `src/`."""
    return [plugin, f"src.{plugin}"]


def _plugins_named(name: str, text: str) -> list[str]:
    if name == "pyproject.toml":
        return _pyproject_plugins(text)
    if name in SETTINGS_FILES or name == "setup.cfg":
        return _ini_plugins(text)
    if name.endswith(".py"):
        return _plugin_list(text)
    return []


def _addopts_plugins(addopts: Any) -> list[str]:
    """The NAMEs of every `-p NAME` / `-pNAME` in pytest's `addopts` (a string or a list)."""
    if isinstance(addopts, list):
        words = [str(item) for item in addopts]
    elif isinstance(addopts, str):
        try:
            words = shlex.split(addopts)
        except ValueError:
            words = addopts.split()
    else:
        return []
    found: list[str] = []
    for index, word in enumerate(words):
        if word == "-p" and index + 1 < len(words):
            found.append(words[index + 1])
        elif word.startswith("-p") and len(word) > 2 and not word.startswith("--"):
            found.append(word[2:].lstrip("="))
    return [plugin for plugin in found if not plugin.startswith("no:")]


def _entry_point_modules(values: Iterable[str]) -> list[str]:
    """The module of each `module:attr` entry point."""
    return [value.split(":", 1)[0].strip() for value in values if value.strip()]


def _pyproject_plugins(text: str) -> list[str]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return []
    pytest = _dig(data, "tool", "pytest")
    found: list[str] = []
    for table in (pytest, _dig(pytest, "ini_options")):
        if isinstance(table, dict):
            found += _addopts_plugins(table.get("addopts"))
            found += _as_list(table.get("pytest_plugins"))
    entry_points = _dig(data, "project", "entry-points", PLUGIN_GROUP)
    if isinstance(entry_points, dict):
        found += _entry_point_modules(str(value) for value in entry_points.values())
    return found


def _ini_plugins(text: str) -> list[str]:
    parser = _ini(text)
    if parser is None:
        return []
    found: list[str] = []
    for section in SETUP_CFG_SECTIONS:
        if parser.has_section(section):
            found += _addopts_plugins(parser.get(section, "addopts", fallback=""))
    if parser.has_section(ENTRY_POINTS_SECTION):
        lines = parser.get(ENTRY_POINTS_SECTION, PLUGIN_GROUP, fallback="").splitlines()
        found += _entry_point_modules(line.partition("=")[2] for line in lines if "=" in line)
    return found


def _plugin_list(text: str) -> list[str]:
    """The modules a Python file's top-level `pytest_plugins = ...` names (any file may try)."""
    if "pytest_plugins" not in text:
        return []
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    found: list[str] = []
    for node in tree.body:
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign | ast.AugAssign)
            else []
        )
        if not any(isinstance(t, ast.Name) and t.id == "pytest_plugins" for t in targets):
            continue
        value = getattr(node, "value", None)
        try:
            literal = ast.literal_eval(value) if value is not None else None
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            literal = None
        names = _as_list(literal)
        found += names or ["<not a literal>"]
    return found


def _as_list(value: Any) -> list[str]:
    if isinstance(value, str):
        return [part.strip() for part in value.replace(",", " ").split() if part.strip()]
    if isinstance(value, list | tuple):
        return [str(item) for item in value if isinstance(item, str)]
    return []


def _dig(data: Any, *keys: str) -> Any:
    for key in keys:
        data = data.get(key) if isinstance(data, dict) else None
    return data


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


# --- the files of which only the test sections count ----------------------------------------

Rewrite = tuple[str | None, str]
"""(the file to grade with, or None to leave it as it was; why it is flagged)."""

_TOML_HEADER = re.compile(r"^\s*\[\[?\s*([^\]\[]+?)\s*\]\]?\s*(?:#.*)?$")
_INI_HEADER = re.compile(r"^\[([^\]]+)\]\s*$")


def _pyproject(old: str, new: str) -> Rewrite | None:
    """None when the agent's pyproject.toml leaves the test tables as they were; else the
    file with them put back (checked by parsing it), or None content when that fails."""
    try:
        new_data = tomllib.loads(new)
    except tomllib.TOMLDecodeError:
        return None, "pyproject.toml that cannot be read as TOML: left as it was"
    try:
        old_data = tomllib.loads(old) if old else {}
    except tomllib.TOMLDecodeError:
        old_data = {}
    if _toml_tests(old_data) == _toml_tests(new_data):
        return None
    why = "pyproject.toml: its pytest tables changed; graded with them as they were"
    merged = _splice(new, old, _TOML_HEADER, _is_toml_test_table)
    try:
        merged_data = tomllib.loads(merged)
    except tomllib.TOMLDecodeError:
        return None, why + " (the whole file, as they could not be told apart)"
    same_tests = _toml_tests(merged_data) == _toml_tests(old_data)
    if same_tests and _toml_rest(merged_data) == _toml_rest(new_data):
        return merged, why
    return None, why + " (the whole file, as they could not be told apart)"


def _is_toml_test_table(header: str) -> bool:
    name = header.replace('"', "").replace("'", "").replace(" ", "")
    plugins = f"project.entry-points.{PLUGIN_GROUP}"
    return name in ("tool.pytest", plugins) or name.startswith(("tool.pytest.", plugins + "."))


def _toml_tests(data: dict[str, Any]) -> tuple[Any, Any]:
    return _dig(data, "tool", "pytest"), _dig(data, "project", "entry-points", PLUGIN_GROUP)


def _toml_rest(data: dict[str, Any]) -> dict[str, Any]:
    """`data` without its test tables."""
    rest = {**data}
    tool = rest.get("tool")
    if isinstance(tool, dict):
        rest["tool"] = {key: value for key, value in tool.items() if key != "pytest"}
    project = rest.get("project")
    if isinstance(project, dict) and isinstance(project.get("entry-points"), dict):
        groups = {k: v for k, v in project["entry-points"].items() if k != PLUGIN_GROUP}
        rest["project"] = {**project, "entry-points": groups}
    return rest


def _setup_cfg(old: str, new: str) -> Rewrite | None:
    """As `_pyproject`, for setup.cfg's `[tool:pytest]`/`[pytest]` and pytest11 entry points."""
    new_ini = _ini(new)
    if new_ini is None:
        return None, "setup.cfg that cannot be read: left as it was"
    old_ini = _ini(old) or configparser.ConfigParser()
    if _ini_tests(old_ini) == _ini_tests(new_ini):
        return None
    why = "setup.cfg: its pytest sections changed; graded with them as they were"
    merged = _splice(new, old, _INI_HEADER, lambda name: name.strip() in _INI_TEST_SECTIONS)
    merged_ini = _ini(merged)
    exact = merged_ini is not None and _ini_tests(merged_ini) == _ini_tests(old_ini)
    if exact and merged_ini is not None and _ini_rest(merged_ini) == _ini_rest(new_ini):
        return merged, why
    return None, why + " (the whole file, as they could not be told apart)"


_INI_TEST_SECTIONS = frozenset({*SETUP_CFG_SECTIONS, ENTRY_POINTS_SECTION})


def _ini(text: str) -> configparser.ConfigParser | None:
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read_string(text)
    except configparser.Error:
        return None
    return parser


def _ini_tests(parser: configparser.ConfigParser) -> dict[str, Any]:
    found: dict[str, Any] = {
        name: dict(parser.items(name)) for name in SETUP_CFG_SECTIONS if parser.has_section(name)
    }
    found[PLUGIN_GROUP] = parser.get(ENTRY_POINTS_SECTION, PLUGIN_GROUP, fallback=None)
    return found


def _ini_rest(parser: configparser.ConfigParser) -> dict[str, Any]:
    return {
        name: dict(parser.items(name))
        for name in parser.sections()
        if name not in _INI_TEST_SECTIONS
    }


SECTIONED: dict[str, Callable[[str, str], Rewrite | None]] = {
    "pyproject.toml": _pyproject,
    "setup.cfg": _setup_cfg,
}
"""Files of which only some sections are test settings, and how each is rewritten."""


def _splice(new: str, old: str, header: re.Pattern[str], is_test: Callable[[str], bool]) -> str:
    """`new` without its test sections, followed by `old`'s test sections."""
    kept = [text for name, text in _sections(new, header) if name is None or not is_test(name)]
    restored = [text for name, text in _sections(old, header) if name is not None and is_test(name)]
    body = "".join(kept)
    if restored and body and not body.endswith("\n"):
        body += "\n"
    return body + "".join(restored)


def _sections(text: str, header: re.Pattern[str]) -> list[tuple[str | None, str]]:
    """(header name, its text with the header line) in order; the text before the first header
    has no name."""
    sections: list[tuple[str | None, str]] = [(None, "")]
    for line in text.splitlines(keepends=True):
        match = header.match(line)
        if match is not None:
            sections.append((match.group(1), line))
        else:
            name, body = sections[-1]
            sections[-1] = (name, body + line)
    return sections


__all__ = ["SETTINGS_NAMES", "Change", "Flag", "Sorted", "sort_changes"]
