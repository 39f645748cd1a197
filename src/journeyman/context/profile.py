"""Project profile: the languages of a workspace, how it manages dependencies, how it runs tests.

`detect_profile(root)` reads marker files at the workspace root, counts source files a few
levels down and reads a bounded number of Python test files; it never runs or imports anything.
What it looks at:

* Python: ``pyproject.toml`` (``[tool.pytest.ini_options]``, ``[tool.uv]``, ``[tool.poetry]``,
  ``[tool.pdm]``, ``[tool.hatch.envs.*]``, dependency lists), ``setup.cfg`` (``[tool:pytest]``),
  ``setup.py``, ``pytest.ini``, ``tox.ini``, ``noxfile.py``, ``conftest.py`` anywhere in the
  scan, ``requirements*.txt``, ``Pipfile``, lock files (``uv.lock``, ``poetry.lock``,
  ``pdm.lock``, ``Pipfile.lock``) and ``hatch.toml``. Then the test files themselves
  (`context.python_tests`): pytest runs the project when its configuration names pytest or a
  test file is pytest-style (module-level ``test`` functions, ``import pytest``, a plain
  ``class TestX:``); unittest only runs ``TestCase`` suites with no such sign, from a start
  folder it can import (``-s tests`` for a plain folder, ``-s tests -t .`` for a package), and
  behind pytest (when installed) if some test files sit where discovery cannot enter. A
  plain-pip src layout gets ``PYTHONPATH=src`` (uv, poetry, pdm and hatch install the project
  themselves). A project without test files whose docstrings hold ``>>>`` examples is checked
  with ``pytest --doctest-modules`` on those packages, provided pytest is installed; a project
  with no tests at all gets no Python test command.
* Node: ``package.json`` (``scripts.test``, the ``packageManager`` field, test frameworks among
  the dependencies) and lock files (``pnpm-lock.yaml``, ``yarn.lock``, ``bun.lock(b)``,
  ``package-lock.json``); ``tsconfig.json`` makes it TypeScript.
* Go (``go.mod``, ``go.work``), Rust (``Cargo.toml``), Java/Kotlin (``pom.xml``,
  ``build.gradle(.kts)``, ``settings.gradle(.kts)``, the ``mvnw``/``gradlew`` wrappers).
* A ``Makefile`` target named ``test`` (else ``tests``, else ``check``): what the authors run,
  so ``make test`` comes first among the test commands.

Every test command names its runner (pytest, unittest, make, tox, nox, npm, ...), so whoever
runs it knows whose summary to read; `runnable_test` picks the first one whose programs are
installed. Languages are ordered by how many of their source files the scan saw (marker-only
languages last); test commands follow the same order, ``make`` first. Detection is read-only
and cheap: the scan stops after `ProfileConfig.scan_files` files and skips what .gitignore
excludes, test and source files are read up to `ProfileConfig.read_test_files` /
`read_source_files` files of `read_bytes` bytes, configuration files up to `MAX_CONFIG_BYTES`,
and only regular files are opened.
"""

from __future__ import annotations

import configparser
import dataclasses
import itertools
import json
import logging
import re
import shlex
import shutil
import tomllib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from journeyman.context.python_tests import (
    classify_tests,
    doctest_targets,
    read_bounded,
    unittest_misses,
    unittest_start,
)
from journeyman.tools.walk import IgnoreRules, walk

log = logging.getLogger(__name__)

EXTENSIONS: Mapping[str, str] = {
    ".py": "python",
    ".pyi": "python",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".ts": "typescript",
    ".tsx": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
    ".kt": "kotlin",
    ".kts": "kotlin",
}
"""Source file extension -> language name, for counting files in the scan."""

SKIPPED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "node_modules",
        ".venv",
        "__pycache__",
        ".tox",
        ".nox",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        "target",
        "dist",
        "build",
        ".gradle",
    }
)
"""Directory names the scan never enters, ignored by .gitignore or not."""

MAKE_TEST_TARGETS = ("test", "tests", "check")
"""Makefile targets that run the tests, in order of preference."""

NPM_PLACEHOLDER_TEST = "no test specified"
"""Text of the `scripts.test` that `npm init` writes, which only fails."""

NODE_TEST_FRAMEWORKS = ("vitest", "jest", "mocha", "ava", "jasmine", "tap", "uvu")
"""Test runners recognised among a package.json's dependencies, most specific first."""


class ProfileConfig(BaseModel):
    """How far `detect_profile` looks."""

    scan_files: int = Field(default=5000, ge=0)
    """Stop counting source files after this many files (0 skips the scan: markers only)."""
    scan_depth: int = Field(default=6, ge=0)
    """Directory levels below the root that the scan enters."""
    read_test_files: int = Field(default=40, ge=0)
    """Python test files whose text is read to tell pytest-style tests from unittest ones."""
    read_source_files: int = Field(default=100, ge=0)
    """Python source files searched for doctest examples when the project has no test files."""
    read_bytes: int = Field(default=64 * 1024, ge=1)
    """Bytes read from each of those files, at most."""


@dataclass(frozen=True)
class TestCommand:
    """One way to run the project's tests."""

    command: str
    """Shell command line, run from the workspace root."""
    language: str | None
    """The language whose tests it runs; None for a project-wide target such as `make test`."""
    runner: str
    """The tool whose output the check prints: make, pytest, unittest, tox, nox, hatch (a hatch
    script that is not plainly pytest or unittest), npm, pnpm, yarn, bun, go, cargo, maven or
    gradle."""
    source: str
    """Where it was found, e.g. "Makefile target 'test'" or "package.json scripts.test"."""
    requires: tuple[str, ...] = ()
    """Programs that must be installed besides the one the command starts (pytest for a
    `python -m pytest --doctest-modules` check that nothing else would run)."""
    unwrapped_env: str = ""
    """`VAR=value` words put in front once the environment wrapper (`uv run`, `poetry run`,
    ...) is dropped for want of its program: the wrapper installed the project, the plain
    runner may need it on PYTHONPATH (a src layout)."""

    __test__ = False  # not a pytest test class


@dataclass(frozen=True)
class ProjectProfile:
    """What a workspace is written in and how to build and test it."""

    root: Path
    languages: tuple[str, ...] = ()
    """Detected languages, the one with the most source files first."""
    package_managers: tuple[str, ...] = ()
    """uv, poetry, pdm, pipenv, hatch, pip, npm, pnpm, yarn, bun, go, cargo, maven, gradle."""
    test_frameworks: tuple[str, ...] = ()
    """pytest, unittest, jest, vitest, mocha, ..., go test, cargo test, junit."""
    test_commands: tuple[TestCommand, ...] = ()
    """Ways to run the tests, the recommended one first."""
    markers: tuple[str, ...] = ()
    """Marker and config files found at the root (relative names)."""
    source_files: Mapping[str, int] = field(default_factory=dict)
    """Source files counted per language in the scan."""

    @property
    def language(self) -> str | None:
        """The main language, None when nothing was recognised."""
        return self.languages[0] if self.languages else None

    @property
    def package_manager(self) -> str | None:
        """The package manager of the main language, None when unknown."""
        return self.package_managers[0] if self.package_managers else None

    @property
    def test_command(self) -> str | None:
        """The recommended test command line, None when none was found."""
        return self.test_commands[0].command if self.test_commands else None

    def to_text(self) -> str:
        """A few lines for a prompt: languages, package managers, test commands and why."""
        if not self.languages and not self.test_commands:
            return "Project: no known language or test command detected."
        lines = [f"Languages: {', '.join(self.languages) or 'unknown'}"]
        if self.package_managers:
            lines.append(f"Package managers: {', '.join(self.package_managers)}")
        if self.test_frameworks:
            lines.append(f"Test frameworks: {', '.join(self.test_frameworks)}")
        if self.test_commands:
            lines.append("Test commands (recommended first):")
            lines += [f"  {c.command}    # {c.source}" for c in self.test_commands]
        else:
            lines.append("Test commands: none found")
        return "\n".join(lines)


def detect_profile(root: str | Path, *, config: ProfileConfig | None = None) -> ProjectProfile:
    """Detect the project profile of the workspace at `root` (a directory)."""
    config = config or ProfileConfig()
    base = Path(root).resolve()
    if not base.is_dir():
        raise NotADirectoryError(f"detect_profile: {base} is not a directory")
    scan = _scan(base, config)
    found = _Findings()
    _detect_python(base, scan, found, config)
    _detect_node(base, scan, found)
    _detect_go(base, found)
    _detect_rust(base, found)
    _detect_jvm(base, scan, found)

    order = _language_order(found.languages, scan.counts)
    make = _make_target(base)
    commands: list[TestCommand] = []
    if make is not None:
        name, makefile = make
        commands.append(TestCommand(f"make {name}", None, "make", f"{makefile} target {name!r}"))
    rank = {lang: i for i, lang in enumerate(order)}
    commands += sorted(found.commands, key=lambda c: rank.get(c.language or "", len(rank)))
    managers = [m for _, m in sorted(found.managers, key=lambda lm: rank.get(lm[0], len(rank)))]
    frameworks = [f for _, f in sorted(found.frameworks, key=lambda lf: rank.get(lf[0], len(rank)))]
    return ProjectProfile(
        root=base,
        languages=tuple(order),
        package_managers=tuple(_unique(managers)),
        test_frameworks=tuple(_unique(frameworks)),
        test_commands=tuple(_unique_commands(commands)),
        markers=tuple(sorted(found.markers | ({make[1]} if make else set()))),
        source_files=dict(scan.counts),
    )


RUN_WRAPPERS = frozenset({"uv", "poetry", "pdm", "pipenv"})
"""Programs whose `<wrapper> run CMD` runs CMD inside the project's environment."""
PYTHONS = ("python", "python3")


def runnable_test_command(
    profile: ProjectProfile, *, which: Callable[[str], str | None] = shutil.which
) -> str | None:
    """The command line of `runnable_test`, None when no candidate is installed."""
    test = runnable_test(profile, which=which)
    return test.command if test is not None else None


def runnable_test(
    profile: ProjectProfile, *, which: Callable[[str], str | None] = shutil.which
) -> TestCommand | None:
    """The first detected test command whose programs are installed, else None.

    A candidate whose program is missing gives way to its plainer forms (`uv run pytest`
    without uv becomes `pytest`, then `python -m pytest`), then to the next candidate; the
    check is chosen before the model's first turn, so a missing tool never costs a turn. The
    result keeps the candidate's runner and source, with the form that was found installed.
    """
    for candidate in profile.test_commands:
        if any(which(program) is None for program in candidate.requires):
            continue
        for form in _command_forms(candidate.command, candidate.unwrapped_env):
            program = command_program(form)
            found = which(program) if program is not None else None
            if found is not None:
                command = _pytest_as_module(form, found, which) if program == "pytest" else form
                return dataclasses.replace(candidate, command=command)
    return None


def _pytest_as_module(form: str, script: str, which: Callable[[str], str | None]) -> str:
    """`form` with its `pytest` started as `python -m pytest` when a Python sits beside the
    script (the same environment).

    Only the module form puts the project root on sys.path, which a flat layout whose tests
    folder is not a package needs to import the code. A script from elsewhere (pipx, a tools
    folder) stays as it is: the Python on PATH may not have pytest at all.
    """
    words = form.split()
    prefix = list(itertools.takewhile(_ASSIGNMENT.fullmatch, words))
    rest = words[len(prefix) :]
    if rest[:1] != ["pytest"]:
        return form
    for python in PYTHONS:
        found = which(python)
        if found is not None and Path(found).parent == Path(script).parent:
            return " ".join([*prefix, python, "-m", *rest])
    return form


def command_program(command: str) -> str | None:
    """The program a shell command line starts (after `VAR=value` assignments and `env`)."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    words = [w for w in words if not _ASSIGNMENT.fullmatch(w)]
    if words and words[0] == "env":
        words = words[1:]
    return words[0] if words else None


_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=.*")


def _command_forms(command: str, unwrapped_env: str = "") -> Iterator[str]:
    """`command`, then the same check without its environment wrapper or with another Python.

    Leading `VAR=value` assignments stay in front of every form, and `unwrapped_env` joins
    them in the forms without the wrapper.
    """
    words = command.split()
    prefix = list(itertools.takewhile(_ASSIGNMENT.fullmatch, words))
    words = words[len(prefix) :]
    forms = [[*prefix, *words]]
    if len(words) > 2 and words[0] in RUN_WRAPPERS and words[1] == "run":
        words = words[2:]
        prefix += [w for w in unwrapped_env.split() if w not in prefix]
        forms.append([*prefix, *words])
    if words and words[0] in PYTHONS and len(words) > 1:
        forms += [[*prefix, python, *words[1:]] for python in PYTHONS if python != words[0]]
    elif words and words[0] in ("pytest", "tox", "nox"):
        forms += [[*prefix, python, "-m", *words] for python in PYTHONS]
    yield from _unique(" ".join(form) for form in forms)


# --------------------------------------------------------------------------------------------
# Scan and bookkeeping


@dataclass
class _Scan:
    counts: Counter[str] = field(default_factory=Counter)
    """Source files per language."""
    conftests: list[str] = field(default_factory=list)
    """Relative paths of conftest.py files."""
    test_paths: list[str] = field(default_factory=list)
    """Relative paths of Python files named test*.py or *_test.py, in walk order."""
    source_paths: list[str] = field(default_factory=list)
    """Relative paths of the other Python files (conftest.py left out), in walk order."""
    test_dirs: set[str] = field(default_factory=set)
    """Top-level directories named test or tests."""

    @property
    def src_layout(self) -> bool:
        """Whether Python sources live under a top-level `src/` folder."""
        return any(p.startswith("src/") for p in self.source_paths)


@dataclass
class _Findings:
    languages: set[str] = field(default_factory=set)
    managers: list[tuple[str, str]] = field(default_factory=list)
    frameworks: list[tuple[str, str]] = field(default_factory=list)
    commands: list[TestCommand] = field(default_factory=list)
    markers: set[str] = field(default_factory=set)

    def mark(self, base: Path, *names: str) -> list[str]:
        """The names that exist under `base`; they are recorded as markers."""
        present = [name for name in names if (base / name).exists()]
        self.markers.update(present)
        return present


def _scan(base: Path, config: ProfileConfig) -> _Scan:
    scan = _Scan()
    if config.scan_files == 0:
        return scan
    rules = IgnoreRules(base)
    root_depth = len(base.parts)

    def skip_dir(path: Path) -> bool:
        if path.name in SKIPPED_DIRS or len(path.parts) - root_depth > config.scan_depth:
            return True
        return rules.ignored(path, True)

    seen = 0
    for entry in walk(base, skip_dir=skip_dir):
        if entry.kind == "dir":
            if len(entry.path.parts) - root_depth == 1 and entry.path.name in ("test", "tests"):
                scan.test_dirs.add(entry.path.name)
            continue
        if entry.kind != "file":
            continue
        seen += 1
        if seen > config.scan_files:
            break
        name = entry.path.name
        language = EXTENSIONS.get(entry.path.suffix)
        if language is None or rules.ignored(entry.path, False):
            continue
        scan.counts[language] += 1
        if language == "python":
            rel = entry.path.relative_to(base).as_posix()
            if name == "conftest.py":
                scan.conftests.append(rel)
            elif _is_test_file(name):
                scan.test_paths.append(rel)
            else:
                scan.source_paths.append(rel)
    return scan


def _is_test_file(name: str) -> bool:
    """pytest's default file patterns, plus the `tests.py`/`test.py` that unittest finds."""
    return name.startswith("test_") or name.endswith("_test.py") or name in ("tests.py", "test.py")


def _language_order(detected: set[str], counts: Counter[str]) -> list[str]:
    languages = detected | {lang for lang, n in counts.items() if n > 0}
    return sorted(languages, key=lambda lang: (-counts.get(lang, 0), lang))


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _unique_commands(commands: Iterable[TestCommand]) -> list[TestCommand]:
    seen: set[str] = set()
    out = []
    for command in commands:
        if command.command not in seen:
            seen.add(command.command)
            out.append(command)
    return out


MAX_CONFIG_BYTES = 1 << 20
"""Bytes read from a configuration file at most (a larger one is cut, and may then not parse)."""


def _read_text(path: Path) -> str | None:
    return read_bounded(path, MAX_CONFIG_BYTES)


def _read_toml(path: Path) -> dict[str, Any]:
    text = _read_text(path)
    if text is None:
        return {}
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        log.info("profile: %s is not valid TOML (%s); its settings are ignored", path, exc)
        return {}


def _read_ini(path: Path) -> configparser.ConfigParser | None:
    text = _read_text(path)
    if text is None:
        return None
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read_string(text)
    except configparser.Error as exc:
        log.info("profile: %s could not be parsed (%s); its settings are ignored", path, exc)
        return None
    return parser


def _table(data: Mapping[str, Any], *keys: str) -> dict[str, Any]:
    """data[k1][k2]... when every level is a table, else {}."""
    current: Any = data
    for key in keys:
        if not isinstance(current, Mapping):
            return {}
        current = current.get(key, {})
    return dict(current) if isinstance(current, Mapping) else {}


def _strings(value: Any) -> Iterable[str]:
    """Every string inside nested lists and tables (dependency specs and the like)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


# --------------------------------------------------------------------------------------------
# Makefile

_MAKE_RULE = re.compile(r"^([A-Za-z0-9_./%-][A-Za-z0-9_./% \t-]*?)\s*::?(?![=])", re.MULTILINE)


def make_targets(text: str) -> list[str]:
    """Target names defined by rules in a Makefile's text (variables and recipes left out)."""
    targets: list[str] = []
    for match in _MAKE_RULE.finditer(text):
        line_start = match.start()
        if line_start and text[line_start - 1] == "\\":
            continue
        for name in match.group(1).split():
            if not name.startswith(".") and "%" not in name:
                targets.append(name)
    return _unique(targets)


def _make_target(base: Path) -> tuple[str, str] | None:
    for makefile in ("GNUmakefile", "makefile", "Makefile"):
        text = _read_text(base / makefile)
        if text is None:
            continue
        targets = set(make_targets(text))
        for name in MAKE_TEST_TARGETS:
            if name in targets:
                return name, makefile
        return None
    return None


# --------------------------------------------------------------------------------------------
# Python

_PYTEST_WORD = re.compile(r"(?<![\w-])pytest(?![\w])")
_UNITTEST_WORD = re.compile(r"\bunittest\b")

PYTHON_MARKERS = (
    "pyproject.toml",
    "setup.py",
    "setup.cfg",
    "requirements.txt",
    "requirements-dev.txt",
    "requirements-test.txt",
    "Pipfile",
    "pytest.ini",
    "tox.ini",
    "noxfile.py",
    "hatch.toml",
    "uv.lock",
    "poetry.lock",
    "pdm.lock",
    "Pipfile.lock",
    "conftest.py",
)


@dataclass(frozen=True)
class _PythonSettings:
    """The Python configuration files of a workspace, parsed once."""

    present: set[str]
    pyproject: dict[str, Any]
    tool: dict[str, Any]
    hatch: dict[str, Any]
    setup_cfg: configparser.ConfigParser | None
    tox: configparser.ConfigParser | None
    pytest_ini: configparser.ConfigParser | None
    tox_commands: str

    def pytest_option(self, name: str) -> bool:
        """Whether one of pytest's configuration sections sets the option `name`."""
        if name in _table(self.tool, "pytest", "ini_options"):
            return True
        sections = [(self.pytest_ini, "pytest"), (self.setup_cfg, "tool:pytest")]
        sections.append((self.tox, "pytest"))
        return any(ini is not None and ini.has_option(section, name) for ini, section in sections)


def _python_settings(base: Path, present: set[str]) -> _PythonSettings:
    pyproject = _read_toml(base / "pyproject.toml") if "pyproject.toml" in present else {}
    tool = _table(pyproject, "tool")
    hatch = dict(_table(tool, "hatch"))
    if "hatch.toml" in present:
        hatch.update(_read_toml(base / "hatch.toml"))
    tox = _read_ini(base / "tox.ini") if "tox.ini" in present else None
    tox_commands = (
        "\n".join(
            tox.get(section, "commands", fallback="")
            for section in tox.sections()
            if section == "testenv" or section.startswith("testenv:")
        )
        if tox is not None
        else ""
    )
    return _PythonSettings(
        present=present,
        pyproject=pyproject,
        tool=tool,
        hatch=hatch,
        setup_cfg=_read_ini(base / "setup.cfg") if "setup.cfg" in present else None,
        tox=tox,
        pytest_ini=_read_ini(base / "pytest.ini") if "pytest.ini" in present else None,
        tox_commands=tox_commands,
    )


def _detect_python(base: Path, scan: _Scan, found: _Findings, config: ProfileConfig) -> None:
    present = set(found.mark(base, *PYTHON_MARKERS))
    if not present and scan.counts["python"] == 0:
        return
    found.languages.add("python")
    settings = _python_settings(base, present)
    manager = _python_manager(present, settings.tool, settings.hatch)
    found.managers.append(("python", manager))
    test = _python_test_command(base, scan, settings, manager, config)
    if test is not None:
        commands, framework = test
        if _python_run_prefix(manager) and scan.src_layout:
            # the wrapper installs the project; without its program the plain runner does not
            commands = [
                c
                if c.runner == "pytest" and settings.pytest_option("pythonpath")
                else dataclasses.replace(c, unwrapped_env="PYTHONPATH=src")
                for c in commands
            ]
        found.frameworks.append(("python", framework))
        found.commands += commands
    tox, tool = settings.tox, settings.tool
    if tox is not None and (tox.has_section("tox") or settings.tox_commands):
        found.commands.append(TestCommand("tox", "python", "tox", "tox.ini"))
    elif settings.pyproject and "tox" in tool:
        found.commands.append(TestCommand("tox", "python", "tox", "pyproject.toml [tool.tox]"))
    if "noxfile.py" in present:
        found.commands.append(TestCommand("nox", "python", "nox", "noxfile.py"))


def _python_test_command(
    base: Path, scan: _Scan, settings: _PythonSettings, manager: str, config: ProfileConfig
) -> tuple[list[TestCommand], str] | None:
    """How the project's own tests run (pytest, unittest, pytest's doctests), the preferred
    way first, and the framework to report; None when it has no tests."""
    pytest_reason = _pytest_config_reason(base, scan, settings)
    styles = (
        None
        if pytest_reason is not None
        else classify_tests(
            base, scan.test_paths, max_files=config.read_test_files, max_bytes=config.read_bytes
        )
    )
    doctests = (
        []
        if scan.test_paths
        else doctest_targets(
            base, scan.source_paths, max_files=config.read_source_files, max_bytes=config.read_bytes
        )
    )
    pytest_reason = pytest_reason or (styles.pytest_reason if styles else None)
    run = _python_run_prefix(manager)
    # uv, poetry, pdm and hatch install the project into their environment; plain pip does not,
    # so a src layout is importable only through PYTHONPATH
    src_path = "PYTHONPATH=src " if manager == "pip" and scan.src_layout else ""
    doctest_args = " --doctest-modules " + " ".join(shlex.quote(t) for t in doctests)
    if pytest_reason is not None:
        if manager == "hatch":
            return [_hatch_test_command(settings.hatch, pytest_reason)], "pytest"
        command = f"{run}pytest" if run else "python -m pytest"
        if settings.pytest_option("pythonpath"):
            src_path = ""
        command = src_path + command + (doctest_args if doctests else "")
        source = f"{pytest_reason}; {manager} project"
        return [TestCommand(command, "python", "pytest", source)], "pytest"
    if scan.test_paths or _UNITTEST_WORD.search(settings.tox_commands):
        unittest_files = styles.unittest_files if styles else 0
        commands = _unittest_commands(base, scan, src_path, run, unittest_files)
        return commands, "unittest"
    if doctests:
        command = f"{src_path}{run}pytest" if run else f"{src_path}python -m pytest"
        source = f"doctest examples in {', '.join(doctests)}, no test files"
        test = TestCommand(command + doctest_args, "python", "pytest", source, ("pytest",))
        return [test], "doctest"
    return None


def _unittest_commands(
    base: Path, scan: _Scan, src_path: str, run: str, unittest_files: int
) -> list[TestCommand]:
    """`unittest discover` from the folder that imports the tests; pytest first (when it is
    installed) if some test files sit in folders discovery cannot enter."""
    start = unittest_start(base, scan.test_paths, sorted(scan.test_dirs))
    command = f"{src_path}{run}python -m unittest discover {start}".rstrip()
    why = (
        "unittest TestCase suites"
        if unittest_files
        else "test*.py files"
        if scan.test_paths
        else "tox.ini testenv commands"
    )
    commands = [TestCommand(command, "python", "unittest", f"{why}, no pytest-style tests")]
    missed = unittest_misses(base, scan.test_paths, start)
    if missed:
        pytest = f"{src_path}{run}pytest" if run else f"{src_path}python -m pytest"
        source = f"{why}; unittest discovery would leave out {missed[0]} (not in a package)"
        commands.insert(0, TestCommand(pytest, "python", "pytest", source, ("pytest",)))
    return commands


def _pytest_config_reason(base: Path, scan: _Scan, settings: _PythonSettings) -> str | None:
    """Where the project's configuration asks for pytest, None when it does not."""
    tool, setup_cfg, tox = settings.tool, settings.setup_cfg, settings.tox
    requirement_text = "\n".join(
        _read_text(base / name) or ""
        for name in ("requirements-dev.txt", "requirements-test.txt")
        if name in settings.present
    )
    dependency_text = "\n".join(
        _strings(
            [
                _table(settings.pyproject, "project").get("optional-dependencies", {}),
                settings.pyproject.get("dependency-groups", {}),
                _table(tool, "poetry", "group"),
                _table(tool, "poetry").get("dev-dependencies", {}),
                _table(tool, "pdm", "dev-dependencies"),
                _table(settings.hatch, "envs"),
            ]
        )
    )
    signals = [
        ("pytest" in tool, "pyproject.toml [tool.pytest]"),
        ("pytest.ini" in settings.present, "pytest.ini"),
        (bool(scan.conftests), f"{scan.conftests[0] if scan.conftests else ''}"),
        (setup_cfg is not None and setup_cfg.has_section("tool:pytest"), "setup.cfg [tool:pytest]"),
        (tox is not None and tox.has_section("pytest"), "tox.ini [pytest]"),
        (bool(_PYTEST_WORD.search(settings.tox_commands)), "tox.ini testenv commands"),
        (bool(_PYTEST_WORD.search(dependency_text)), "pytest among the dev dependencies"),
        (bool(_PYTEST_WORD.search(requirement_text)), "pytest in requirements-*.txt"),
    ]
    return next((reason for hit, reason in signals if hit), None)


def _python_manager(present: set[str], tool: Mapping[str, Any], hatch: Mapping[str, Any]) -> str:
    if "uv.lock" in present or "uv" in tool:
        return "uv"
    if "poetry.lock" in present or "poetry" in tool:
        return "poetry"
    if "pdm.lock" in present or "pdm" in tool:
        return "pdm"
    if "Pipfile" in present or "Pipfile.lock" in present:
        return "pipenv"
    if "envs" in hatch or "hatch.toml" in present:
        return "hatch"
    return "pip"


def _python_run_prefix(manager: str) -> str:
    """How to run a command inside the project's environment ('' for plain pip)."""
    return {
        "uv": "uv run ",
        "poetry": "poetry run ",
        "pdm": "pdm run ",
        "pipenv": "pipenv run ",
    }.get(manager, "")


_HATCH_ENV_NAME = re.compile(r"[A-Za-z0-9_.-]+")


def _hatch_test_command(hatch: Mapping[str, Any], pytest_reason: str) -> TestCommand:
    """`hatch run [env:]test` when a hatch script is named test, else `hatch test` (pytest)."""
    found = _hatch_test_script(hatch)
    if found is None:
        return TestCommand("hatch test", "python", "pytest", pytest_reason)
    name, script = found
    runner = (
        "pytest"
        if _PYTEST_WORD.search(script)
        else "unittest"
        if _UNITTEST_WORD.search(script)
        else "hatch"
    )
    return TestCommand(f"hatch run {name}", "python", runner, f"hatch env script {name!r}")


def _hatch_test_script(hatch: Mapping[str, Any]) -> tuple[str, str] | None:
    """(`test` or `env:test`, the script's text) when a hatch environment has a test script."""
    envs = _table(hatch, "envs")
    names = sorted(e for e in envs if e != "default" and _HATCH_ENV_NAME.fullmatch(e))
    for env_name in ("default", *names):
        scripts = _table(envs, env_name, "scripts")
        for name in ("test", "tests"):
            if name in scripts:
                script = " ".join(_strings(scripts[name]))
                return (name if env_name == "default" else f"{env_name}:{name}"), script
    return None


# --------------------------------------------------------------------------------------------
# Node


def _detect_node(base: Path, scan: _Scan, found: _Findings) -> None:
    if not found.mark(base, "package.json"):
        return
    found.mark(
        base,
        "tsconfig.json",
        "package-lock.json",
        "npm-shrinkwrap.json",
        "pnpm-lock.yaml",
        "yarn.lock",
        "bun.lockb",
        "bun.lock",
    )
    text = _read_text(base / "package.json") or "{}"
    try:
        package = json.loads(text)
    except json.JSONDecodeError as exc:
        log.info("profile: package.json is not valid JSON (%s); its settings are ignored", exc)
        package = {}
    if not isinstance(package, dict):
        package = {}
    typescript = (base / "tsconfig.json").exists() or scan.counts["typescript"] > scan.counts[
        "javascript"
    ]
    language = "typescript" if typescript else "javascript"
    found.languages.add(language)
    manager = _node_manager(base, package)
    found.managers.append((language, manager))

    scripts = package.get("scripts")
    scripts = scripts if isinstance(scripts, dict) else {}
    test_script = scripts.get("test")
    deps: dict[str, Any] = {}
    for key in ("devDependencies", "dependencies", "peerDependencies"):
        table = package.get(key)
        if isinstance(table, dict):
            deps.update(table)
    script_text = test_script if isinstance(test_script, str) else ""
    framework = next(
        (
            name
            for name in NODE_TEST_FRAMEWORKS
            if name in deps or re.search(rf"\b{name}\b", script_text)
        ),
        None,
    )
    if framework is None and re.search(r"node\s+(?:--\S+\s+)*--test\b", script_text):
        framework = "node:test"
    if framework:
        found.frameworks.append((language, framework))
    if script_text and NPM_PLACEHOLDER_TEST not in script_text:
        command = "bun run test" if manager == "bun" else f"{manager} test"
        found.commands.append(TestCommand(command, language, manager, "package.json scripts.test"))
    elif framework in ("vitest", "jest", "mocha", "ava"):
        binary = "vitest run" if framework == "vitest" else framework
        exe = {"npm": "npx", "pnpm": "pnpm exec", "yarn": "yarn", "bun": "bunx"}[manager]
        found.commands.append(
            TestCommand(f"{exe} {binary}", language, manager, f"{framework} in package.json deps")
        )


def _node_manager(base: Path, package: Mapping[str, Any]) -> str:
    declared = package.get("packageManager")
    if isinstance(declared, str):
        name = declared.split("@", 1)[0].strip()
        if name in ("npm", "pnpm", "yarn", "bun"):
            return name
    if (base / "pnpm-lock.yaml").exists():
        return "pnpm"
    if (base / "yarn.lock").exists():
        return "yarn"
    if (base / "bun.lockb").exists() or (base / "bun.lock").exists():
        return "bun"
    return "npm"


# --------------------------------------------------------------------------------------------
# Go, Rust, JVM


def _detect_go(base: Path, found: _Findings) -> None:
    if not found.mark(base, "go.mod", "go.work"):
        return
    found.languages.add("go")
    found.managers.append(("go", "go"))
    found.frameworks.append(("go", "go test"))
    found.commands.append(TestCommand("go test ./...", "go", "go", "go.mod"))


def _detect_rust(base: Path, found: _Findings) -> None:
    if not found.mark(base, "Cargo.toml"):
        return
    found.mark(base, "Cargo.lock")
    found.languages.add("rust")
    found.managers.append(("rust", "cargo"))
    found.frameworks.append(("rust", "cargo test"))
    manifest = _read_toml(base / "Cargo.toml")
    workspace = "workspace" in manifest
    command = "cargo test --workspace" if workspace else "cargo test"
    source = "Cargo.toml [workspace]" if workspace else "Cargo.toml"
    found.commands.append(TestCommand(command, "rust", "cargo", source))


def _detect_jvm(base: Path, scan: _Scan, found: _Findings) -> None:
    maven = found.mark(base, "pom.xml")
    gradle = found.mark(
        base, "build.gradle", "build.gradle.kts", "settings.gradle", "settings.gradle.kts"
    )
    if not maven and not gradle:
        return
    found.mark(base, "mvnw", "gradlew")
    language = "kotlin" if scan.counts["kotlin"] > scan.counts["java"] else "java"
    found.languages.add(language)
    found.frameworks.append((language, "junit"))
    if maven:
        found.managers.append((language, "maven"))
        command = "./mvnw test" if (base / "mvnw").exists() else "mvn test"
        found.commands.append(TestCommand(command, language, "maven", "pom.xml"))
    if gradle:
        found.managers.append((language, "gradle"))
        command = "./gradlew test" if (base / "gradlew").exists() else "gradle test"
        found.commands.append(TestCommand(command, language, "gradle", gradle[0]))
