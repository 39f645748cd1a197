from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from journeyman.core.tool_kind import ToolKind
from journeyman.economics.loop_detector import LoopCheck, LoopDetector
from journeyman.economics.phases import (
    NudgeKind,
    PhaseChange,
    PhaseNudge,
    PhaseTracker,
    WorkPhase,
)

KINDS = {
    "read_file": ToolKind.READ,
    "glob": ToolKind.READ,
    "grep": ToolKind.READ,
    "list_files": ToolKind.READ,
    "edit_file": ToolKind.EDIT,
    "write_file": ToolKind.EDIT,
    "apply_patch": ToolKind.EDIT,
    "run_command": ToolKind.COMMAND,
    "finish": ToolKind.FINISH,
}
"""What the built-in tools declare (tests/tools/test_builtin.py checks the declarations)."""


def rec(
    tracker: PhaseTracker, tool: str, *, is_error: bool = False, path: str | None = None
) -> list[PhaseNudge]:
    """Record a call of `tool` with the kind it declares (None for tools it does not know)."""
    return tracker.record(tool, KINDS.get(tool), is_error=is_error, path=path)


def _kinds(nudges: list[PhaseNudge]) -> list[NudgeKind]:
    return [n.kind for n in nudges]


def _phase(tracker: PhaseTracker) -> WorkPhase:
    """Read the phase through a call, so mypy does not narrow it across assertions."""
    return tracker.phase


def _loop(tool: str = "grep", signature: str = "sig-a") -> LoopCheck:
    return LoopCheck(
        is_loop=True,
        count=3,
        tool_name=tool,
        message=f"`{tool}` repeated 3 times.",
        signature=signature,
    )


def test_starts_in_exploration_with_empty_counters() -> None:
    tracker = PhaseTracker()
    assert _phase(tracker) is WorkPhase.EXPLORATION
    assert (tracker.reads, tracker.edits_made, tracker.commands) == (0, 0, 0)
    assert tracker.files_read == frozenset()
    assert tracker.history == (PhaseChange(WorkPhase.EXPLORATION, 0),)


@pytest.mark.parametrize("tool", ["read_file", "glob", "grep", "list_files"])
def test_read_tools_explore_before_edits(tool: str) -> None:
    tracker = PhaseTracker()
    tracker.record_text()
    assert _phase(tracker) is WorkPhase.PLANNING
    assert rec(tracker, tool) == []
    assert _phase(tracker) is WorkPhase.EXPLORATION
    assert tracker.reads == 1


def test_text_while_exploring_is_planning() -> None:
    tracker = PhaseTracker()
    rec(tracker, "read_file", path="a.py")
    tracker.record_text()
    assert _phase(tracker) is WorkPhase.PLANNING
    assert tracker.history[-1] == PhaseChange(WorkPhase.PLANNING, 2)


def test_text_outside_exploration_changes_nothing() -> None:
    tracker = PhaseTracker()
    rec(tracker, "read_file")
    rec(tracker, "edit_file")
    tracker.record_text()
    assert _phase(tracker) is WorkPhase.ACTING
    rec(tracker, "run_command")
    tracker.record_text()
    assert _phase(tracker) is WorkPhase.VERIFYING


@pytest.mark.parametrize("tool", ["write_file", "edit_file", "apply_patch"])
def test_edit_tools_act(tool: str) -> None:
    tracker = PhaseTracker()
    rec(tracker, "read_file")
    tracker.record_text()
    rec(tracker, tool)
    assert _phase(tracker) is WorkPhase.ACTING
    assert tracker.edits_made == 1


def test_command_before_any_edit_keeps_the_phase() -> None:
    tracker = PhaseTracker()
    rec(tracker, "run_command")
    assert _phase(tracker) is WorkPhase.EXPLORATION
    tracker.record_text()
    rec(tracker, "run_command")
    assert _phase(tracker) is WorkPhase.PLANNING
    assert tracker.commands == 2


def test_command_after_edit_verifies_and_new_edit_acts_again() -> None:
    tracker = PhaseTracker()
    rec(tracker, "read_file")
    rec(tracker, "edit_file")
    rec(tracker, "run_command", is_error=True)  # a failing test run is still verification
    assert _phase(tracker) is WorkPhase.VERIFYING
    rec(tracker, "edit_file")
    assert _phase(tracker) is WorkPhase.ACTING
    rec(tracker, "run_command")
    assert _phase(tracker) is WorkPhase.VERIFYING
    assert tracker.commands == 2
    assert [c.phase for c in tracker.history] == [
        WorkPhase.EXPLORATION,
        WorkPhase.ACTING,
        WorkPhase.VERIFYING,
        WorkPhase.ACTING,
        WorkPhase.VERIFYING,
    ]
    assert [c.call_index for c in tracker.history] == [0, 2, 3, 4, 5]


def test_reading_after_edits_keeps_the_current_phase() -> None:
    tracker = PhaseTracker()
    rec(tracker, "read_file")
    rec(tracker, "edit_file")
    rec(tracker, "read_file")
    assert _phase(tracker) is WorkPhase.ACTING
    rec(tracker, "run_command")
    rec(tracker, "grep")
    assert _phase(tracker) is WorkPhase.VERIFYING


def test_failed_reads_and_edits_count_for_nothing() -> None:
    tracker = PhaseTracker()
    rec(tracker, "read_file", is_error=True, path="missing.py")
    assert tracker.reads == 0
    assert tracker.files_read == frozenset()
    rec(tracker, "read_file")
    assert rec(tracker, "edit_file", is_error=True) == []
    assert tracker.edits_made == 0
    assert _phase(tracker) is WorkPhase.EXPLORATION


def test_unknown_tools_change_nothing() -> None:
    tracker = PhaseTracker()
    assert rec(tracker, "web_fetch") == []
    assert _phase(tracker) is WorkPhase.EXPLORATION
    assert (tracker.reads, tracker.edits_made, tracker.commands) == (0, 0, 0)


def test_saturation_fires_on_the_tenth_read_and_only_once() -> None:
    tracker = PhaseTracker()
    for i in range(9):
        assert rec(tracker, "read_file", path=f"f{i}.py") == []
    nudges = rec(tracker, "read_file", path="f9.py")
    assert _kinds(nudges) == [NudgeKind.EXPLORATION_SATURATION]
    assert "10 read/search calls" in nudges[0].message
    assert "10 distinct files" in nudges[0].message
    assert tracker.files_read == frozenset(f"f{i}.py" for i in range(10))
    for _ in range(15):
        assert rec(tracker, "grep") == []


def test_saturation_counts_calls_not_distinct_files() -> None:
    tracker = PhaseTracker(exploration_saturation=3)
    rec(tracker, "read_file", path="a.py")
    rec(tracker, "read_file", path="a.py")
    nudges = rec(tracker, "grep")
    assert _kinds(nudges) == [NudgeKind.EXPLORATION_SATURATION]
    assert "3 read/search calls over 1 distinct files" in nudges[0].message


def test_saturation_threshold_is_configurable() -> None:
    tracker = PhaseTracker(exploration_saturation=2)
    assert rec(tracker, "glob") == []
    assert _kinds(rec(tracker, "list_files")) == [NudgeKind.EXPLORATION_SATURATION]


def test_no_saturation_once_something_was_edited() -> None:
    tracker = PhaseTracker(exploration_saturation=3)
    rec(tracker, "read_file")
    rec(tracker, "edit_file")
    for _ in range(10):
        assert rec(tracker, "read_file") == []


def test_blind_edit_nudge_fires_once() -> None:
    tracker = PhaseTracker()
    nudges = rec(tracker, "write_file")
    assert _kinds(nudges) == [NudgeKind.ACTING_WITHOUT_EXPLORATION]
    assert "`write_file`" in nudges[0].message
    assert rec(tracker, "edit_file") == []


def test_no_blind_edit_nudge_after_a_search() -> None:
    tracker = PhaseTracker()
    rec(tracker, "grep")
    assert rec(tracker, "edit_file") == []


def test_stuck_nudge_from_loop_detector() -> None:
    detector = LoopDetector()
    tracker = PhaseTracker()
    nudge = None
    for _ in range(3):
        rec(tracker, "grep")
        check = detector.record("grep", {"pattern": "x"})
        nudge = tracker.note_loop(check)
    assert nudge is not None
    assert nudge.kind is NudgeKind.STUCK_IN_LOOP
    assert "`grep`" in nudge.message
    assert "3 times" in nudge.message
    # the same loop continuing does not nudge again
    assert tracker.note_loop(detector.record("grep", {"pattern": "x"})) is None


def test_stuck_nudge_rearms() -> None:
    tracker = PhaseTracker()
    assert tracker.note_loop(_loop()) is not None
    assert tracker.note_loop(_loop()) is None
    # a different signature looping is a new loop
    assert tracker.note_loop(_loop("read_file", "sig-b")) is not None
    # a non-loop verdict re-arms
    tracker.note_loop(LoopCheck(is_loop=False, count=1, tool_name="grep", message=""))
    assert tracker.note_loop(_loop("read_file", "sig-b")) is not None
    # so does a successful edit
    rec(tracker, "edit_file")
    assert tracker.note_loop(_loop("read_file", "sig-b")) is not None


def test_stuck_message_without_detector_text() -> None:
    tracker = PhaseTracker()
    nudge = tracker.note_loop(LoopCheck(is_loop=True, count=4, tool_name="glob", message=""))
    assert nudge is not None
    assert "`glob` was called 4 times" in nudge.message


def test_the_declared_kind_decides_not_the_name() -> None:
    tracker = PhaseTracker()
    tracker.record("read_file", ToolKind.OTHER)  # a tool of that name that declares "other"
    assert tracker.reads == 0
    tracker.record("view", ToolKind.READ)
    assert tracker.reads == 1
    tracker.record("str_replace", "edit")  # kinds may arrive as their string values
    assert _phase(tracker) is WorkPhase.ACTING
    tracker.record("bash", ToolKind.COMMAND)
    assert _phase(tracker) is WorkPhase.VERIFYING
    tracker.record("unknown_tool", None)
    tracker.record("finish", ToolKind.FINISH)
    assert _phase(tracker) is WorkPhase.VERIFYING
    assert (tracker.reads, tracker.edits_made, tracker.commands) == (1, 1, 1)


def test_invalid_configuration_is_rejected() -> None:
    with pytest.raises(ValueError, match="exploration_saturation"):
        PhaseTracker(exploration_saturation=0)


_events = st.lists(
    st.tuples(
        st.sampled_from(["read_file", "grep", "edit_file", "write_file", "run_command", "text"]),
        st.booleans(),
    ),
    max_size=60,
)


@given(events=_events, saturation=st.integers(1, 12))
def test_phase_invariants(events: list[tuple[str, bool]], saturation: int) -> None:
    tracker = PhaseTracker(exploration_saturation=saturation)
    fired: list[NudgeKind] = []
    for tool, is_error in events:
        if tool == "text":
            tracker.record_text()
        else:
            fired += _kinds(rec(tracker, tool, is_error=is_error))
        # edits exist exactly when the run is acting or verifying
        assert (tracker.edits_made > 0) == (
            tracker.phase in {WorkPhase.ACTING, WorkPhase.VERIFYING}
        )
        assert tracker.history[-1].phase is tracker.phase
    assert len(fired) == len(set(fired))
    phases = [c.phase for c in tracker.history]
    assert all(a is not b for a, b in itertools.pairwise(phases))
    indexes = [c.call_index for c in tracker.history]
    assert indexes == sorted(indexes)
