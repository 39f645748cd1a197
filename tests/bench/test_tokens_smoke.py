"""Smoke test of bench/tokens.py's core: 10 steps, chars/4 counts, mini-swe-agent rebuilt in
process (no network, no tiktoken, no timings)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[2] / "bench" / "tokens.py"


def load_bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_tokens", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_ten_steps_count_every_request_and_ours_stay_below_the_linear_history(
    tmp_path: Path,
) -> None:
    bench = load_bench()
    steps = 10
    report = bench.run_benchmark(
        steps,
        0,
        bench.Counter(),
        mini_mode="reconstruct",
        # a small stale budget so that masking happens within ten steps
        compaction={"stale_observation_tokens": 1_000, "keep_recent_observations": 2},
        workdir=tmp_path,
    )
    ours, mini = report.ours, report.mini
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
    phased = report.phased
    assert phased is not None
    assert phased.requests == steps + 1 + phased.summary_calls
    assert all(size > 0 for size in phased.sizes)


def test_the_trajectory_is_fixed_by_its_seed(tmp_path: Path) -> None:
    bench = load_bench()
    repo = bench.prepare_repo(tmp_path / "repo", bench.rich_source())
    first = bench.make_trajectory(repo, 30, 7)
    assert first == bench.make_trajectory(repo, 30, 7)
    assert first != bench.make_trajectory(repo, 30, 8)
    assert len(first) == 31 and first[-1].kind == "finish"
    kinds = {action.kind for action in first}
    assert {"read", "grep", "test"} <= kinds
