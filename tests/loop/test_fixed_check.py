"""The check a session is judged by: which runner a command starts, and a Python that can run
it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from journeyman.loop.fixed_check import fix_check_now, runner_of, with_a_python_that_has_it


@pytest.mark.parametrize(
    ("command", "runner"),
    [
        ("pytest -q", "pytest"),
        ("python -m pytest", "pytest"),
        ("PYTHONPATH=src python3 -m pytest tests", "pytest"),
        ("uv run pytest", "pytest"),
        ("/venv/bin/py.test", "pytest"),
        ("python -m unittest discover -s tests", "unittest"),
        ("make test", "make"),
        ("tox -e py311", "tox"),
        ("./run_tests.sh", None),
        ("cargo test", None),
        ("grep -r BROKEN .", None),
        ("unbalanced 'quote", None),
    ],
)
def test_the_runner_a_command_starts(command: str, runner: str | None) -> None:
    assert runner_of(command) == runner


def _bare_python_without_pytest() -> str | None:
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if Path(candidate).exists():
            probe = subprocess.run(
                [candidate, "-c", "import pytest"], capture_output=True, check=False
            )
            if probe.returncode != 0:
                return candidate
    return None


def test_a_python_on_path_without_the_runner_gives_way_to_journeymans(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bare = _bare_python_without_pytest()
    if bare is None:
        pytest.skip("no Python without pytest on this machine to stand on PATH")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python").symlink_to(bare)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    own = sys.executable
    assert with_a_python_that_has_it("python -m pytest -q") == f"{own} -m pytest -q"
    assert with_a_python_that_has_it("PYTHONPATH=src python -m pytest") == (
        f"PYTHONPATH=src {own} -m pytest"
    )
    # a module the PATH's Python has, and commands that are not `python -m`, stay as they are
    assert with_a_python_that_has_it("python -m unittest") == "python -m unittest"
    assert with_a_python_that_has_it("make test") == "make test"


def test_a_workspace_check_is_fixed_with_its_runner_and_source(tmp_path: Path) -> None:
    (tmp_path / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_calc.py").write_text(
        "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"
    )
    fixed = fix_check_now(tmp_path, None)
    assert fixed.command is not None and fixed.runner == "pytest"
    assert "tests/test_calc.py" in fixed.infra.entries and fixed.needs_summary
    mine = fix_check_now(tmp_path, "  ./check.sh  ")
    assert mine.command == "./check.sh" and mine.source == "--verify"
    assert mine.runner is None and not mine.needs_summary
    empty = tmp_path / "empty"
    empty.mkdir()
    nothing = fix_check_now(empty, None)
    assert nothing.command is None and nothing.source == "no test command found"
