"""WorkerBudgetTracker: fingerprints, local doom loops, budgets, and what it reports."""

from __future__ import annotations

import hashlib
import json

from journeyman.core import events as ev
from journeyman.core.messages import ToolCall, Usage
from journeyman.swarm.shared import (
    SharedEconomicsState,
    WorkerBudgetConfig,
    WorkerBudgetTracker,
    call_fingerprint,
)


def test_defaults_are_the_seeds() -> None:
    config = WorkerBudgetConfig()
    assert (config.max_tokens, config.max_iterations, config.doom_loop_threshold) == (
        300_000,
        50,
        3,
    )
    assert config.history_size == 20


def test_fingerprint_is_md5_of_tool_and_args_with_sorted_keys() -> None:
    expected = hashlib.md5(
        json.dumps({"tool": "grep", "args": {"a": 1, "b": [2]}}, sort_keys=True).encode()
    ).hexdigest()
    assert call_fingerprint("grep", {"b": [2], "a": 1}) == expected
    assert call_fingerprint("grep", {"a": 2, "b": [2]}) != expected
    assert call_fingerprint("grep", {"x": object()})  # never raises on odd values


def test_three_identical_calls_in_a_row_are_a_local_doom_loop() -> None:
    stops: list[str] = []
    tracker = WorkerBudgetTracker("w1", on_stop=stops.append)
    verdicts = [tracker.record_tool_call("run_command", {"command": "ls"}) for _ in range(3)]
    assert [v.repeats for v in verdicts] == [1, 2, 3]
    assert [v.local_doom_loop for v in verdicts] == [False, False, True]
    assert tracker.is_doom_loop()
    assert len(stops) == 1 and "3 times in a row" in stops[0] and "run_command" in stops[0]
    tracker.record_tool_call("run_command", {"command": "ls"})
    assert len(stops) == 1  # stopped once


def test_repeats_that_are_not_consecutive_are_no_loop() -> None:
    tracker = WorkerBudgetTracker("w1")
    for _ in range(5):
        tracker.record_tool_call("read_file", {"path": "a"})
        tracker.record_tool_call("read_file", {"path": "b"})
    assert not tracker.is_doom_loop()
    assert tracker.stop_reason is None


def test_only_the_last_twenty_fingerprints_are_kept() -> None:
    tracker = WorkerBudgetTracker("w1")
    for i in range(25):
        tracker.record_tool_call("read_file", {"path": str(i)})
    recent = tracker.recent_fingerprints
    assert len(recent) == 20
    assert recent[0] == call_fingerprint("read_file", {"path": "5"})


def test_every_call_is_reported_to_the_shared_economics() -> None:
    shared = SharedEconomicsState(global_doom_threshold=3)
    trackers = [WorkerBudgetTracker(f"w{i}", None, shared, task=f"t{i}") for i in range(2)]
    verdicts = [t.record_tool_call("curl", {"url": "http://down"}) for t in trackers * 2]
    assert shared.count(call_fingerprint("curl", {"url": "http://down"})) == 4
    assert verdicts[-1].global_doom_loop and not verdicts[-1].local_doom_loop
    assert shared.should_skip("t0") and shared.should_skip("t1")


def test_tokens_and_iterations_over_budget_stop_the_worker() -> None:
    stops: list[str] = []
    config = WorkerBudgetConfig(max_tokens=100, max_iterations=5)
    tracker = WorkerBudgetTracker("w1", config, on_stop=stops.append)
    tracker.record_tokens(99)
    assert not tracker.is_over_budget() and stops == []
    tracker.record_tokens(1)
    assert tracker.over_budget() == "tokens"
    assert stops == ["worker w1 used 100 tokens, its limit is 100"]
    turns = WorkerBudgetTracker("w2", config)
    for _ in range(5):
        turns.record_iteration()
    assert turns.over_budget() == "iterations"
    assert turns.status().stop_reason == "worker w2 took 5 turns, its limit is 5"


def test_observe_reads_a_runs_events() -> None:
    tracker = WorkerBudgetTracker("w1", WorkerBudgetConfig(max_tokens=1_000))
    response = ev.ModelResponseReceived(
        iteration=2, text="", tool_calls=(), usage=Usage(300, 50, 100), cost_usd=None,
        stop_reason=None, latency_s=0.1,
    )  # fmt: skip
    assert tracker.observe(response) is None
    assert (tracker.tokens, tracker.iterations) == (450, 2)
    verdict = tracker.observe(ev.ToolCallStarted(3, ToolCall("c1", "grep", {"pattern": "x"})))
    assert verdict is not None and verdict.fingerprint == call_fingerprint("grep", {"pattern": "x"})
    assert tracker.observe(ev.NudgeInjected("loop", "hi")) is None
