"""Smoke test of bench/e2e.py: `journeyman run` for 3 and 6 steps against the bench's scripted
server (journeyman only: mini-swe-agent needs its own venv), run as a script; figures are
checked for shape and sense, never for speed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_real_command_follows_the_script_and_every_step_is_measured() -> None:
    done = subprocess.run(
        [
            sys.executable, str(REPO / "bench" / "e2e.py"), "--only", "journeyman",
            "--steps", "3", "6", "--repeat", "1", "--window", "2", "--json",
        ],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    runs = report["runs"]["journeyman"]
    assert sorted(runs, key=int) == ["3", "6"]
    for steps, (run,) in runs.items():
        # one request per step and one for the finish, each seen with the agent's CPU so far
        assert run["requests"] == int(steps) + 1
        cpu = [s["cpu_self"] + s["cpu_children"] for s in run["samples"]]
        assert cpu == sorted(cpu) and cpu[0] > 0
        assert run["cpu_s"] >= run["cpu_self_s"] > 0
        sizes = [s["bytes"] for s in run["samples"]]
        assert sizes == sorted(sizes)  # the history grows
    summary = report["summary"]["harnesses"]["journeyman"]
    assert set(summary["per_step_ms"]) == {"3", "6"}
    assert "3-6" in summary["marginal_ms_per_step"]
