"""The trust scenarios of tests/support/trust_trials.py run end to end, once each, with their
quickest variants (the full counts are bench/reliability.py's)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import trust_trials

ROOT = Path(__file__).resolve().parents[2]

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


def test_the_report_has_a_row_for_a_trust_scenario() -> None:
    """bench/reliability.py turns the trial outcomes into its table row (run as a script)."""
    done = subprocess.run(
        [
            sys.executable,
            "bench/reliability.py",
            *("--only", "concurrent", "--concurrent", "1"),
            *("--seed", str(SEED), "--json"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    (row,) = json.loads(done.stdout)["rows"]
    assert (row["trials"], row["escapes"]) == (1, 0)
    assert "escapes column: double executions" in row["notes"]


def test_every_trust_finding_is_read_from_a_problem_list() -> None:
    outcome = trust_trials.TrustOutcome(0, "x")
    outcome.fail("loosened: y")
    assert outcome.problems == ["loosened: y"]
    assert trust_trials._named("sandbox", "ignored sandbox = 'local'")
    assert not trust_trials._named("allow", "ignored allow_network = true")
