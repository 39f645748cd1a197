"""kill -9 at a random step, then `journeyman resume`: nothing is lost (reliability scenario 2).

The trial itself lives in tests/support/crash_trials.py, shared with bench/reliability.py,
which runs 50 trials (docs/reliability.md); see its docstring for what each trial checks. The
suite runs 20 (JOURNEYMAN_CRASH_TRIALS changes that): each costs four CLI processes, about two
minutes in all on two cores, hence the test's own timeout.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.crash_trials import CrashLab

TRIALS = int(os.environ.get("JOURNEYMAN_CRASH_TRIALS", "20"))
SEED = 20261122


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_kill_9_and_resume_loses_nothing(tmp_path: Path) -> None:
    with CrashLab(tmp_path, SEED) as lab:
        outcomes = [lab.trial(trial) for trial in range(TRIALS)]
    failed = [(o.trial, o.killed_after, o.problems) for o in outcomes if o.problems]
    assert failed == []
    assert all(1 <= o.resumed_at <= 30 for o in outcomes)
