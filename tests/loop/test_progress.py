from __future__ import annotations

from journeyman.core.messages import ToolCall, ToolResult
from journeyman.loop.progress import ProgressTracker, call_fingerprint


def test_fingerprint_ignores_key_order() -> None:
    a = ToolCall("1", "grep", {"pattern": "x", "path": "."})
    b = ToolCall("2", "grep", {"path": ".", "pattern": "x"})
    assert call_fingerprint(a) == call_fingerprint(b)
    assert call_fingerprint(a) != call_fingerprint(ToolCall("3", "grep", {"pattern": "y"}))


def test_streak_counts_turns_without_anything_new() -> None:
    tracker = ProgressTracker()
    call = ToolCall("1", "run_command", {"command": "pytest"})
    failing = ToolResult("1", "run_command", "1 failed")
    assert tracker.observe("", [call], [failing])
    assert not tracker.observe("", [call], [failing])
    assert not tracker.observe("", [call], [failing])
    assert tracker.unproductive_streak == 2
    # same command, different output (the code changed): progress again
    assert tracker.observe("", [call], [ToolResult("1", "run_command", "all passed")])
    assert tracker.unproductive_streak == 0
    assert tracker.observe("new thought", [call], [failing])
