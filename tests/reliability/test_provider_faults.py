"""Reliability scenario 1: provider faults during whole runs (bench/fault_trials.py).

Through the real OpenAI SDK adapter and the resilient wrapper against the fake server: every
run completes, retries stay within the policy, and no tool runs twice after a retried call.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from bench.fault_trials import FAULTS, POLICY, STEPS, fault_trial, run_fault_trials

SEED = 20261123


@pytest.mark.parametrize("streaming", [True, False], ids=["stream", "json"])
@pytest.mark.parametrize("kind", sorted(FAULTS))
async def test_each_fault_on_every_step_is_survived(
    kind: str, streaming: bool, tmp_path: Path
) -> None:
    outcome = await fault_trial(tmp_path, 0, SEED, only=kind, streaming=streaming)
    assert outcome.problems == []
    assert outcome.completed
    assert outcome.injected[kind] == STEPS + 1  # the first request of every step failed
    assert outcome.retries == STEPS + 1
    assert outcome.duplicated == 0


@pytest.mark.slow
def test_random_faults_at_20_percent(tmp_path: Path) -> None:
    outcomes = run_fault_trials(tmp_path, 6, SEED)
    assert [o.problems for o in outcomes] == [[]] * 6
    assert all(o.completed and not o.crashed and not o.data_lost for o in outcomes)
    assert sum(o.duplicated for o in outcomes) == 0
    assert sum(sum(o.injected.values()) for o in outcomes) > 0
    assert max(o.max_requests_per_step for o in outcomes) <= POLICY.max_retries + 1
