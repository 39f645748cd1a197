"""Reliability scenario 6: secrets in the environment and in workspace files never reach the
session store, its export, the CLI's stream-json output or its log
(tests/support/secret_trials.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.secret_trials import secret_trial


@pytest.mark.slow
def test_no_secret_leaves_the_workspace(tmp_path: Path) -> None:
    outcome = secret_trial(tmp_path, 0, 20261123)
    assert outcome.completed and not outcome.crashed
    assert outcome.leaks == []
    assert outcome.undo_restored
    assert outcome.vault_files > 0 and outcome.vault_private
