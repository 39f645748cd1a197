"""The boundary between the sandbox and the host, attacked through the real CLI
(tests/support/boundary_trials.py): commands cannot plant code in journeyman's own Python,
cannot see the session store or the user config, get none of the agent's credentials, and a
key streamed in fragments never reaches the output whole."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from journeyman.core.environ_block import ptrace_restricted
from tests.support.boundary_trials import (
    environment_trial,
    host_scratch,
    own_python_trial,
    private_folders_trial,
    stream_trial,
)

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")


@pytest.mark.slow
@needs_bwrap
def test_commands_cannot_plant_code_in_journeymans_own_virtualenv(tmp_path: Path) -> None:
    figures = own_python_trial(tmp_path)
    print(figures.line(), figures.notes)
    assert figures.attempts == 12 and figures.held == figures.attempts, figures.line()
    assert not figures.notes


@pytest.mark.slow
@needs_bwrap
def test_session_store_and_user_config_are_invisible_outside_home_and_tmp(
    tmp_path: Path,
) -> None:
    with host_scratch() as scratch:
        figures = private_folders_trial(tmp_path, scratch)
    print(figures.line(), figures.notes)
    assert figures.held == figures.attempts == 8, figures.line()
    assert not figures.notes


@pytest.mark.slow
@pytest.mark.parametrize(
    ("sandbox", "pass_key"),
    [("local", False), ("local", True), pytest.param("bubblewrap", False, marks=needs_bwrap)],
)
def test_no_credential_reaches_the_model_through_a_command(
    tmp_path: Path, sandbox: str, pass_key: bool
) -> None:
    figures = environment_trial(tmp_path, sandbox, pass_key=pass_key)
    print(figures.line(), figures.notes)
    assert figures.held == figures.attempts == 10, figures.line()
    assert not [note for note in figures.notes if "--sandbox local" not in note], figures.notes
    if sandbox == "local" and not ptrace_restricted():  # said plainly at the start
        assert any("from this process's memory" in note for note in figures.notes), figures.notes


@pytest.mark.slow
def test_a_key_streamed_in_fragments_never_reaches_the_output(tmp_path: Path) -> None:
    figures = stream_trial(tmp_path)
    print(figures.line())
    assert figures.held == figures.attempts == 6, figures.line()
