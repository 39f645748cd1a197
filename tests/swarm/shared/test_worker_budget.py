"""WorkerBudgetConfig: a worker's caps are its loop's own limits, and one fingerprint of a call."""

from __future__ import annotations

from journeyman.core.messages import ToolCall
from journeyman.loop.config import AgentConfig
from journeyman.loop.progress import call_fingerprint as loop_fingerprint
from journeyman.swarm.shared import WorkerBudgetConfig, call_fingerprint, worker_limits


def test_defaults_are_the_seeds() -> None:
    config = WorkerBudgetConfig()
    assert (config.max_tokens, config.max_iterations, config.doom_loop_threshold) == (
        300_000,
        50,
        3,
    )


def test_the_caps_become_the_loops_own_limits_the_tighter_one_winning() -> None:
    budget = WorkerBudgetConfig(max_tokens=5_000, max_iterations=3, doom_loop_threshold=4)
    limits = worker_limits(AgentConfig(max_iterations=10, loop_threshold=5), budget, None)
    assert limits == {
        "max_iterations": 3,
        "max_total_tokens": 5_000,
        "hard_token_limit": True,
        "loop_threshold": 4,
    }
    tight = worker_limits(AgentConfig(max_iterations=2, loop_threshold=2), budget, 1_200)
    assert (tight["max_iterations"], tight["max_total_tokens"], tight["loop_threshold"]) == (
        2,
        1_200,
        2,
    )
    # an allocation larger than the worker's cap is capped
    assert worker_limits(AgentConfig(), budget, 9_000)["max_total_tokens"] == 5_000
    AgentConfig(**limits)  # every key is a field of the loop's config


def test_a_call_has_the_loops_fingerprint() -> None:
    expected = loop_fingerprint(ToolCall("x", "grep", {"a": 1, "b": [2]}))
    assert call_fingerprint("grep", {"b": [2], "a": 1}) == expected
    assert call_fingerprint("grep", {"a": 2, "b": [2]}) != expected
    assert call_fingerprint("grep", {"x": object()})  # never raises on odd values
    assert call_fingerprint("grep", None) == call_fingerprint("grep", {})
