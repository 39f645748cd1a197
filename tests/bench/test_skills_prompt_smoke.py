"""Smoke test of bench/skills_prompt.py: 50 installed skills cost fewer than 2,000 prompt tokens
(the project's estimate) whatever the length of their descriptions, and their bodies nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_fifty_skills_cost_fewer_than_2000_tokens() -> None:
    done = subprocess.run(
        [sys.executable, "bench/skills_prompt.py", "--skills", "50", "--json"],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = {row["descriptions"]: row for row in json.loads(done.stdout)["rows"]}
    assert set(rows) == {"short", "typical", "longest"}
    for row in rows.values():
        assert 0 < row["estimated_tokens"] < 2000, row
        assert row["bodies_not_sent_tokens"] > row["estimated_tokens"]
    assert rows["longest"]["uncut_line_tokens"] > 10_000  # the cut is what keeps it small
