"""Smoke test of bench/tokens.py: 10 steps, chars/4 counts, mini-swe-agent rebuilt in process
(no network, no tiktoken, no timings), run as a script from the repository root."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench"


def python(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


class Stats:
    """One side of the JSON report, read by attribute like the report's own records."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.__dict__.update(data)


def test_ten_steps_count_every_request_and_ours_stay_below_the_linear_history() -> None:
    steps = 10
    printed = python(
        str(BENCH / "tokens.py"),
        *("--steps", str(steps), "--seed", "0", "--mini", "reconstruct", "--tokenizer", "chars"),
        # a small stale budget so that masking happens within ten steps
        *("--stale-observation-tokens", "1000", "--keep-recent-observations", "2"),
        "--json",
    )
    report = Stats(json.loads(printed))
    ours, mini = Stats(report.ours), Stats(report.mini)
    assert not report.exact_tokens  # chars/4 was asked for

    # one request per step plus the one that finishes (and any summary calls for ours)
    assert mini.requests == steps + 1
    assert ours.requests == steps + 1 + ours.summary_calls
    assert len(mini.sizes) == mini.requests and all(size > 0 for size in ours.sizes)

    # mini-swe-agent's history is linear: each request holds the whole previous one, so the
    # sizes grow every step and their sum grows with the square of the step count
    assert all(a < b for a, b in zip(mini.sizes, mini.sizes[1:], strict=False))
    assert mini.prefix_shares and all(share == 1.0 for share in mini.prefix_shares)
    half = len(mini.sizes) // 2
    assert sum(mini.sizes) > 2 * sum(mini.sizes[:half])

    # ours masked old observations and sent fewer input tokens in all
    assert ours.compactions >= 1
    assert ours.total_tokens < mini.total_tokens
    assert ours.peak_tokens < mini.peak_tokens
    assert report.ratio is not None and 0 < report.ratio < 1
    assert ours.min_prefix is not None and ours.min_prefix < 1.0  # a masking batch shows

    # the phased mode followed the same script: one request per step (each a PLAN), and its
    # verifications ran without a model call
    assert report.phased is not None
    phased = Stats(report.phased)
    assert phased.requests == steps + 1 + phased.summary_calls
    assert all(size > 0 for size in phased.sizes)


def test_the_trajectory_is_fixed_by_its_seed(tmp_path: Path) -> None:
    program = (
        "import dataclasses, json, pathlib, sys; "
        f"sys.argv = ['tokens']; sys.path.insert(0, {str(BENCH)!r}); import tokens; "
        f"repo = tokens.prepare_repo(pathlib.Path({str(tmp_path / 'repo')!r}), "
        "tokens.rich_source()); "
        "print(json.dumps([[dataclasses.asdict(a) for a in tokens.make_trajectory(repo, 30, seed)]"
        " for seed in (7, 7, 8)]))"
    )
    first, again, other = json.loads(python("-c", program))
    assert first == again
    assert first != other
    assert len(first) == 31 and first[-1]["kind"] == "finish"
    kinds = {action["kind"] for action in first}
    assert {"read", "grep", "test"} <= kinds
