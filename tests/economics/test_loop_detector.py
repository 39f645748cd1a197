from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from journeyman.economics.loop_detector import (
    LoopDetector,
    call_signature,
    loop_signature,
    result_digest,
)


def test_signature_is_name_plus_sorted_json() -> None:
    assert call_signature("grep", {"pattern": "x", "path": "."}) == (
        'grep{"path": ".", "pattern": "x"}'
    )
    assert call_signature("grep", {"pattern": "x", "path": "."}) == call_signature(
        "grep", {"path": ".", "pattern": "x"}
    )
    assert call_signature("grep", {"pattern": "x"}) != call_signature("grep", {"pattern": "y"})
    assert call_signature("grep", {"n": 1}) != call_signature("glob", {"n": 1})
    # values JSON cannot encode do not raise
    assert call_signature("t", {"v": {1, 2}}) == 't{"v": "{1, 2}"}'


def test_loop_signature_appends_result_hash_only_when_given() -> None:
    assert loop_signature("a", {}) == call_signature("a", {})
    assert loop_signature("a", {}, "h1") != loop_signature("a", {}, "h2")


def test_result_digest_is_stable_and_discriminating() -> None:
    assert result_digest("1 failed") == result_digest("1 failed")
    assert result_digest("1 failed") != result_digest("all passed")
    assert isinstance(result_digest("\ud800 odd"), str)


def test_threshold_reached_exactly_on_third_identical_call() -> None:
    detector = LoopDetector()
    first = detector.record("read_file", {"path": "src/app.py"})
    second = detector.record("read_file", {"path": "src/app.py"})
    third = detector.record("read_file", {"path": "src/app.py"})
    assert (first.is_loop, first.count) == (False, 1)
    assert (second.is_loop, second.count) == (False, 2)
    assert (third.is_loop, third.count) == (True, 3)
    assert detector.record("read_file", {"path": "src/app.py"}).count == 4


def test_argument_key_order_does_not_matter() -> None:
    detector = LoopDetector(threshold=2)
    detector.record("grep", {"pattern": "def main", "path": "src"})
    assert detector.record("grep", {"path": "src", "pattern": "def main"}).is_loop


def test_different_arguments_are_not_a_loop() -> None:
    detector = LoopDetector()
    for i in range(10):
        assert not detector.record("read_file", {"path": f"f{i}.py"}).is_loop


def test_rerunning_tests_after_an_edit_is_not_a_loop() -> None:
    detector = LoopDetector()
    cmd = {"command": "pytest -q"}
    outputs = ["3 failed", "2 failed", "1 failed", "all passed"]
    for out in outputs:
        check = detector.record("run_command", cmd, result_digest(out))
        assert not check.is_loop
        assert check.count == 1


def test_identical_command_with_identical_result_is_a_loop() -> None:
    detector = LoopDetector()
    cmd = {"command": "pytest -q"}
    checks = [detector.record("run_command", cmd, result_digest("1 failed")) for _ in range(3)]
    assert [c.is_loop for c in checks] == [False, False, True]


def test_without_result_hash_same_args_count_together() -> None:
    detector = LoopDetector()
    cmd = {"command": "pytest -q"}
    detector.record("run_command", cmd)
    detector.record("run_command", cmd)
    assert detector.record("run_command", cmd).is_loop


def test_message_names_tool_and_count() -> None:
    detector = LoopDetector()
    for _ in range(2):
        assert detector.record("edit_file", {"path": "a.py"}).message == ""
    check = detector.record("edit_file", {"path": "a.py"})
    assert check.tool_name == "edit_file"
    assert "`edit_file`" in check.message
    assert "3 times" in check.message
    assert "same arguments" in check.message
    assert "same result" not in check.message
    with_result = LoopDetector(threshold=1).record("grep", {}, result_digest("x"))
    assert "same result" in with_result.message


def test_peek_does_not_record() -> None:
    detector = LoopDetector()
    detector.record("glob", {"pattern": "*.py"})
    detector.record("glob", {"pattern": "*.py"})
    peeked = detector.peek("glob", {"pattern": "*.py"})
    assert peeked.is_loop
    assert peeked.count == 3
    assert detector.counts == {call_signature("glob", {"pattern": "*.py"}): 2}
    assert len(detector.recent) == 2
    assert detector.peek("glob", {"pattern": "*.py"}) == peeked
    assert not detector.peek("glob", {"pattern": "*.md"}).is_loop


def test_peek_accounts_for_the_call_that_recording_would_evict() -> None:
    detector = LoopDetector(threshold=2, window=2)
    detector.record("a", {})
    detector.record("b", {})
    # recording "a" now would push the old "a" out: still only one in the window
    assert detector.peek("a", {}).count == 1
    assert detector.peek("b", {}).count == 2
    assert detector.record("a", {}).count == 1


def test_window_trims_oldest_and_decrements() -> None:
    detector = LoopDetector(threshold=3, window=4)
    sig_a = call_signature("a", {})
    detector.record("a", {})
    detector.record("a", {})
    for name in ("b", "c"):
        detector.record(name, {})
    assert detector.counts[sig_a] == 2
    detector.record("d", {})  # first "a" falls out
    assert detector.counts[sig_a] == 1
    assert len(detector.recent) == 4
    detector.record("e", {})  # second "a" falls out: the entry disappears, no zero count
    assert sig_a not in detector.counts
    assert detector.recent == tuple(call_signature(n, {}) for n in "bcde")
    # spread out beyond the window, three identical calls are not a loop
    assert not detector.record("a", {}).is_loop


def test_default_window_is_twenty() -> None:
    detector = LoopDetector()
    assert (detector.threshold, detector.window) == (3, 20)
    detector.record("x", {})
    detector.record("x", {})
    for i in range(17):
        detector.record("y", {"i": i})
    # 2 + 17 + this one = 20 calls: both earlier "x" are still in the window
    assert detector.record("x", {}).is_loop
    detector2 = LoopDetector()
    detector2.record("x", {})
    detector2.record("x", {})
    for i in range(18):
        detector2.record("y", {"i": i})
    assert not detector2.record("x", {}).is_loop  # the first "x" has fallen out


def test_reset_forgets_everything() -> None:
    detector = LoopDetector()
    detector.record("a", {})
    detector.record("a", {})
    detector.reset()
    assert detector.counts == {}
    assert detector.recent == ()
    assert detector.record("a", {}).count == 1


@pytest.mark.parametrize(("threshold", "window"), [(0, 20), (5, 3)])
def test_invalid_configuration_is_rejected(threshold: int, window: int) -> None:
    with pytest.raises(ValueError, match="LoopDetector"):
        LoopDetector(threshold=threshold, window=window)


_calls = st.tuples(
    st.sampled_from(["read_file", "grep", "run_command"]),
    st.dictionaries(st.sampled_from(["path", "q"]), st.integers(0, 2), max_size=2),
    st.one_of(st.none(), st.sampled_from(["h1", "h2"])),
)


@given(
    window=st.integers(1, 6),
    threshold_offset=st.integers(0, 5),
    calls=st.lists(_calls, max_size=40),
)
def test_counter_matches_multiset_of_last_window(
    window: int, threshold_offset: int, calls: list[tuple[str, dict[str, Any], str | None]]
) -> None:
    threshold = max(1, window - threshold_offset)
    detector = LoopDetector(threshold=threshold, window=window)
    history: list[str] = []
    for name, args, result_hash in calls:
        peeked = detector.peek(name, args, result_hash)
        check = detector.record(name, args, result_hash)
        signature = loop_signature(name, args, result_hash)
        history.append(signature)
        expected = Counter(history[-window:])
        assert detector.counts == dict(expected)
        assert detector.recent == tuple(history[-window:])
        assert check.count == expected[signature]
        assert check.is_loop == (expected[signature] >= threshold)
        assert peeked == check
