"""Smoke test of bench/swarm_prefix.py, run as a script from the repository root: the engine's
prefix is shared by both workers' requests, and more of them is shared than with the built-in
prompt (which names each worker's workspace near its start)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_swarm_workers_share_the_engines_prefix() -> None:
    done = subprocess.run(
        [sys.executable, "bench/swarm_prefix.py", "--json"],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    engine, builtin = report["engine"], report["builtin"]
    assert engine["system_prompt"]["shared_bytes"] >= report["engine_prefix_bytes"]
    assert engine["system_prompt"]["share_pct"] > builtin["system_prompt"]["share_pct"]
    assert engine["openai_body"]["shared_bytes"] > builtin["openai_body"]["shared_bytes"]
