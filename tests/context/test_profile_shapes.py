"""The detected check on real repository shapes: it must run the tests and tell the bug.

Each shape is a small tree with a bug planted in `add` (it subtracts). The test detects the
profile, picks the runnable command as the harness does, and runs it for real in a subprocess,
with the shared virtualenv first on PATH: with the bug the runner's own summary must show at
least one test and a failure (non-zero exit); once fixed, at least one test and exit 0. A check
that "passes" with nothing run, or fails because it cannot even start, is what this catches.

Wrappers that would build an environment from the network (uv, poetry, tox, ...) count as not
installed here, so a uv project falls back to the plain runner as it would on such a machine.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from journeyman.context.profile import (
    ProjectProfile,
    detect_profile,
    runnable_test,
    runnable_test_command,
)
from tests.support.checks import offline_which, run_check
from tests.support.sdists import write

BUG, FIX = "return a - b", "return a + b"
ADD = f"def add(a, b):\n    {BUG}\n"
DOCTEST_ADD = f'def add(a, b):\n    """Add.\n\n    >>> add(1, 2)\n    3\n    """\n    {BUG}\n'

PYTEST_TEST = "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"
PYTEST_CLASS = (
    "from calc import add\n\n\nclass TestAdd:\n    def test_add(self):\n"
    "        assert add(2, 2) == 4\n"
)
PYTEST_FIXTURE = "from calc import add\n\n\ndef test_add(pair):\n    assert add(*pair) == 3\n"
CONFTEST = "import pytest\n\n\n@pytest.fixture\ndef pair():\n    return (1, 2)\n"
UNITTEST_TEST = (
    "import unittest\n\nfrom calc import add\n\n\nclass AddTest(unittest.TestCase):\n"
    "    def test_add(self):\n        self.assertEqual(add(1, 2), 3)\n"
)
PARAMETRIZED = (
    "import pytest\n\nfrom calc import add\n\n\n@pytest.mark.parametrize('a', [1, 2])\n"
    "def test_add_zero(a):\n    assert add(a, 0) == a\n"
)


@dataclass(frozen=True)
class Shape:
    """A repository shape: its files (bug planted) and the runner its check must use."""

    name: str
    files: dict[str, str]
    runner: str | None
    """The runner of the detected check; None when the shape must have no check at all."""
    buggy: str = "calc/__init__.py"
    """The file holding `add`."""
    command: str | None = None
    """The exact command expected, when it matters."""


SHAPES = [
    Shape("pytest-flat-tests", {"calc/__init__.py": ADD, "tests/test_calc.py": PYTEST_TEST},
          "pytest", command="python -m pytest"),
    Shape("pytest-tests-package", {"calc/__init__.py": ADD, "tests/__init__.py": "",
                                   "tests/test_calc.py": PYTEST_TEST}, "pytest"),
    Shape("pytest-next-to-code", {"calc.py": ADD, "test_calc.py": PYTEST_TEST}, "pytest",
          buggy="calc.py"),
    Shape("pytest-plain-test-class", {"calc/__init__.py": ADD, "setup.py": "",
                                      "tests/test_calc.py": PYTEST_CLASS}, "pytest"),
    Shape("pytest-conftest-fixture", {"calc/__init__.py": ADD, "tests/conftest.py": CONFTEST,
                                      "tests/test_calc.py": PYTEST_FIXTURE}, "pytest"),
    Shape("pytest-tests-inside-package", {"calc/__init__.py": ADD, "calc/tests/__init__.py": "",
                                          "calc/tests/test_calc.py": PYTEST_TEST}, "pytest"),
    Shape("unittest-flat-tests", {"calc/__init__.py": ADD, "tests/test_calc.py": UNITTEST_TEST},
          "unittest", command="python -m unittest discover -s tests"),
    Shape("unittest-tests-package", {"calc/__init__.py": ADD, "tests/__init__.py": "",
                                     "tests/test_calc.py": UNITTEST_TEST},
          "unittest", command="python -m unittest discover -s tests -t ."),
    Shape("unittest-in-non-package-subfolders", {"calc/__init__.py": ADD,
                                                 "tests/unit/test_calc.py": UNITTEST_TEST},
          "pytest", command="python -m pytest"),
    Shape("unittest-next-to-code", {"calc.py": ADD, "test_calc.py": UNITTEST_TEST}, "unittest",
          buggy="calc.py", command="python -m unittest discover"),
    Shape("src-layout-pytest", {"pyproject.toml": '[project]\nname = "calc"\n',
                                "src/calc/__init__.py": ADD, "tests/test_calc.py": PYTEST_TEST},
          "pytest", buggy="src/calc/__init__.py", command="PYTHONPATH=src python -m pytest"),
    Shape("src-layout-unittest", {"setup.py": "", "src/calc/__init__.py": ADD,
                                  "tests/test_calc.py": UNITTEST_TEST},
          "unittest", buggy="src/calc/__init__.py",
          command="PYTHONPATH=src python -m unittest discover -s tests"),
    Shape("src-layout-unittest-package", {"src/calc/__init__.py": ADD, "tests/__init__.py": "",
                                          "tests/test_calc.py": UNITTEST_TEST},
          "unittest", buggy="src/calc/__init__.py"),
    Shape("doctest-only", {"pyproject.toml": '[project]\nname = "calc"\n',
                           "calc/__init__.py": DOCTEST_ADD, "setup.py": "raise SystemExit(1)\n"},
          "pytest", command="python -m pytest --doctest-modules calc"),
    Shape("doctest-only-src-layout", {"src/calc/__init__.py": DOCTEST_ADD}, "pytest",
          buggy="src/calc/__init__.py"),
    Shape("no-tests", {"pyproject.toml": '[project]\nname = "calc"\n', "calc/__init__.py": ADD},
          None),
    Shape("makefile-test-target", {"Makefile": "lint:\n\ttrue\n\ntest:\n\tpython -m pytest -q\n",
                                   "calc/__init__.py": ADD, "tests/test_calc.py": PYTEST_TEST},
          "make", command="make test"),
    Shape("tox-ini", {"tox.ini": "[tox]\nenvlist = py3\n[testenv]\ndeps = pytest\n"
                      "commands = pytest {posargs}\n",
                      "calc/__init__.py": ADD, "tests/test_calc.py": UNITTEST_TEST}, "pytest"),
    Shape("pyproject-pytest-ini-options", {"pyproject.toml": '[project]\nname = "calc"\n'
                                           '[tool.pytest.ini_options]\ntestpaths = ["tests"]\n',
                                           "calc/__init__.py": ADD,
                                           "tests/test_calc.py": UNITTEST_TEST}, "pytest"),
    Shape("setup-cfg-tool-pytest", {"setup.cfg": "[tool:pytest]\naddopts = -ra\n",
                                    "setup.py": "", "calc/__init__.py": ADD,
                                    "tests/__init__.py": "", "tests/test_calc.py": PYTEST_TEST},
          "pytest"),
    Shape("uv-project", {"pyproject.toml": '[project]\nname = "calc"\n', "uv.lock": "",
                         "calc/__init__.py": ADD, "tests/test_calc.py": PYTEST_TEST},
          "pytest", command="python -m pytest"),
    Shape("uv-project-src-layout", {"pyproject.toml": '[project]\nname = "calc"\n',
                                    "uv.lock": "", "src/calc/__init__.py": ADD,
                                    "tests/test_calc.py": UNITTEST_TEST},
          "unittest", buggy="src/calc/__init__.py",
          command="PYTHONPATH=src python -m unittest discover -s tests"),
    Shape("mix-testcase-and-pytest", {"calc/__init__.py": ADD, "tests/__init__.py": "",
                                      "tests/test_calc.py": UNITTEST_TEST,
                                      "tests/test_more.py": PARAMETRIZED}, "pytest"),
]  # fmt: skip


def judge(
    shape: Shape,
    root: Path,
    detect: Callable[[Path], ProjectProfile],
    runnable: Callable[[ProjectProfile], str | None],
) -> str | None:
    """None when the shape's check is right (ran tests, told the bug, passed the fix); else why.

    `detect` and `runnable` are parameters so the same judgement can be made of another
    version of the profile module (the figure in the change's notes).
    """
    write(root, shape.files)
    command = runnable(detect(root))
    if shape.runner is None:
        return None if command is None else f"no tests, yet the check is {command!r}"
    if command is None:
        return "no check detected"
    broken = run_check(root, command)
    if broken.exit_code == 0 or broken.ran < 1 or broken.failed < 1:
        return f"{command!r} with the bug: exit {broken.exit_code}, {broken.ran} ran"
    buggy = root / shape.buggy
    buggy.write_text(buggy.read_text().replace(BUG, FIX))
    fixed = run_check(root, command)
    if fixed.exit_code != 0 or fixed.ran < 1 or fixed.failed:
        return f"{command!r} once fixed: exit {fixed.exit_code}, {fixed.ran} ran"
    return None


@pytest.mark.parametrize("shape", SHAPES, ids=[s.name for s in SHAPES])
def test_the_detected_check_runs_the_tests_and_tells_the_bug(shape: Shape, tmp_path: Path) -> None:
    root = tmp_path / "repo"
    verdict = judge(
        shape, root, detect_profile, lambda p: runnable_test_command(p, which=offline_which)
    )
    assert verdict is None, verdict
    test = runnable_test(detect_profile(root), which=offline_which)
    if shape.runner is None:
        assert test is None
        return
    assert test is not None
    assert test.runner == shape.runner, test
    if shape.command is not None:
        assert test.command == shape.command


def test_the_judge_catches_a_check_that_runs_nothing(tmp_path: Path) -> None:
    """The old detection of a pytest-style tests package: unittest, which runs 0 tests."""
    shape = SHAPES[1]
    verdict = judge(
        shape, tmp_path, detect_profile, lambda p: "python -m unittest discover -s tests -t ."
    )
    assert verdict is not None and "0 ran" in verdict
