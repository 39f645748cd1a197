"""A detected test command whose program is missing gives way before the model's first turn."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from journeyman.context.profile import (
    ProjectProfile,
    TestCommand,
    command_program,
    runnable_test,
    runnable_test_command,
)


def profile(*commands: str) -> ProjectProfile:
    return ProjectProfile(
        root=Path("."),
        test_commands=tuple(TestCommand(c, "python", "pytest", "test") for c in commands),
    )


def only(*installed: str) -> Callable[[str], str | None]:
    return lambda program: f"/usr/bin/{program}" if program in installed else None


def test_the_first_installed_candidate_wins() -> None:
    found = profile("make test", "uv run pytest")
    assert runnable_test_command(found, which=only("make", "uv")) == "make test"
    assert runnable_test_command(found, which=only("uv")) == "uv run pytest"


def test_a_missing_wrapper_falls_back_to_the_plain_runner() -> None:
    found = profile("uv run pytest", "tox")
    assert runnable_test_command(found, which=only("pytest", "tox")) == "pytest"
    assert runnable_test_command(found, which=only("python3", "tox")) == "python3 -m pytest"
    assert runnable_test_command(found, which=only("tox")) == "tox"
    assert runnable_test_command(found, which=only()) is None


def test_python_module_commands_try_the_other_interpreter() -> None:
    found = profile("python -m unittest discover")
    assert runnable_test_command(found, which=only("python3")) == "python3 -m unittest discover"
    assert runnable_test_command(found, which=only("python")) == "python -m unittest discover"


def test_the_program_of_a_command_line() -> None:
    assert command_program("CI=1 env uv run pytest -q") == "uv"
    assert command_program("make test") == "make"
    assert command_program("'unbalanced") is None


def test_unwrapped_pytest_runs_as_a_module_of_the_python_beside_it() -> None:
    # `python -m pytest` puts the project root on sys.path; the bare script does not
    found = profile("uv run pytest -q")
    assert runnable_test_command(found, which=only("python", "pytest")) == "python -m pytest -q"
    assert runnable_test_command(found, which=only("python3", "pytest")) == "python3 -m pytest -q"
    assert runnable_test_command(found, which=only("pytest")) == "pytest -q"

    def elsewhere(program: str) -> str | None:  # a pytest of its own (pipx), a bare python3
        return {"pytest": "/opt/tools/pytest", "python3": "/usr/bin/python3"}.get(program)

    assert runnable_test_command(found, which=elsewhere) == "pytest -q"


def test_environment_assignments_stay_in_front_of_every_form() -> None:
    found = profile("PYTHONPATH=src python -m unittest discover -s tests")
    assert (
        runnable_test_command(found, which=only("python3"))
        == "PYTHONPATH=src python3 -m unittest discover -s tests"
    )
    found = profile("PYTHONPATH=src uv run pytest")
    assert runnable_test_command(found, which=only("python3")) == "PYTHONPATH=src python3 -m pytest"


def test_the_chosen_test_keeps_its_runner_and_source() -> None:
    found = ProjectProfile(
        root=Path("."),
        test_commands=(
            TestCommand(
                "python -m pytest --doctest-modules x", "python", "pytest", "doc", ("pytest",)
            ),
            TestCommand("make test", None, "make", "Makefile target 'test'"),
        ),
    )
    chosen = runnable_test(found, which=only("python", "make"))  # pytest itself is missing
    assert chosen is not None and (chosen.command, chosen.runner) == ("make test", "make")
    chosen = runnable_test(found, which=only("python3", "pytest"))
    assert chosen is not None
    assert (chosen.command, chosen.runner, chosen.source) == (
        "python3 -m pytest --doctest-modules x",
        "pytest",
        "doc",
    )


def test_a_dropped_wrapper_leaves_its_environment_to_the_plain_form() -> None:
    found = ProjectProfile(
        root=Path("."),
        test_commands=(
            TestCommand("uv run pytest", "python", "pytest", "src layout", (), "PYTHONPATH=src"),
        ),
    )
    assert runnable_test_command(found, which=only("uv")) == "uv run pytest"
    assert runnable_test_command(found, which=only("python")) == "PYTHONPATH=src python -m pytest"
