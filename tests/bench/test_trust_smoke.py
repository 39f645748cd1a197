"""The trust scenarios of bench/trust_trials.py run end to end, once each, with their
quickest variants (the full counts are bench/reliability.py's)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bench import reliability, trust_trials

SEED = 7

pytestmark = pytest.mark.skipif(
    shutil.which("sh") is None or shutil.which("sleep") is None,
    reason="the scripted commands need sh and sleep",
)


def test_a_hostile_bypass_config_is_tried_and_measured(tmp_path: Path) -> None:
    bypass = 2
    assert trust_trials.HOSTILE_CONFIGS[bypass].name.endswith("bypass")
    outcome = trust_trials.hostile_config_trial(tmp_path, bypass, SEED)
    assert outcome.counts["keys set"] == 1
    assert not outcome.crashed, outcome.problems
    assert outcome.counts["loosened"] == 0, outcome.problems


def test_a_crafted_import_is_imported_resumed_and_measured(tmp_path: Path) -> None:
    assume_yes_then_resume = len(trust_trials.CRAFTED_IMPORTS) + 2
    outcome = trust_trials.crafted_import_trial(tmp_path, assume_yes_then_resume, SEED)
    assert outcome.variant == "assume_yes = true, then resume"
    assert "programs run" in outcome.counts
    assert "provider redirected" in outcome.counts


def test_a_stall_run_is_timed_and_its_outcome_read(tmp_path: Path) -> None:
    retry_after = 3  # the quick one: the others wait for the run's deadline
    outcome = trust_trials.stall_trial(tmp_path, retry_after, SEED)
    assert outcome.variant.startswith("429")
    assert outcome.counts["slowest ms"] > 0, outcome.problems
    assert any(key.startswith("finish: ") for key in outcome.counts), outcome.problems


def test_a_damaged_store_meets_every_command(tmp_path: Path) -> None:
    truncated = 0
    outcome = trust_trials.damaged_store_trial(tmp_path, truncated, SEED)
    assert outcome.variant == "truncated"
    assert outcome.counts["commands"] == 5, outcome.problems


def test_secrets_are_searched_in_the_output_and_the_store(tmp_path: Path) -> None:
    outcome = trust_trials.secret_format_trial(tmp_path, 0, SEED, formats=("stream-json",))
    assert outcome.counts["places searched"] >= 5
    assert not any("proves nothing" in p for p in outcome.problems), outcome.problems


def test_a_second_process_resumes_while_the_command_sleeps(tmp_path: Path) -> None:
    outcome = trust_trials.concurrent_resume_trial(tmp_path, 0, SEED, sleep_s=1)
    assert "double executions" in outcome.counts
    assert "the first run never started its command" not in outcome.problems


def test_trial_outcomes_become_one_table_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def trial(root: Path, number: int, seed: int) -> trust_trials.TrustOutcome:
        outcome = trust_trials.TrustOutcome(number, "stub")
        outcome.counts.update({"double executions": number, "refused naming the pid": 1})
        if number:
            outcome.fail("the command ran 2 times")
        return outcome

    monkeypatch.setitem(
        reliability.TRUST, "concurrent", (trial, "10. concurrent", "double executions")
    )
    (row,) = reliability.trust_rows("concurrent", 2, SEED, tmp_path)
    assert (row.trials, row.completed, row.escapes) == (2, 1, 1)
    assert row.notes[0] == "escapes column: double executions"
    assert "refused naming the pid: 2/2" in row.notes[1]
    assert row.failures == ["trial 1 (stub): ['the command ran 2 times']"]


def test_every_trust_finding_is_read_from_a_problem_list() -> None:
    outcome = trust_trials.TrustOutcome(0, "x")
    outcome.fail("loosened: y")
    assert outcome.problems == ["loosened: y"]
    assert trust_trials._named("sandbox", "ignored sandbox = 'local'")
    assert not trust_trials._named("allow", "ignored allow_network = true")
