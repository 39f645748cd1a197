"""The phased workflow follows its transition table, whatever sequence of moves is tried."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from journeyman.loop.modes.phased import Edge, WorkflowError, WorkflowPhase
from journeyman.loop.modes.phased.workflow import LIVE, TABLE, TERMINAL, allowed, transition

P = WorkflowPhase
SEED_TABLE = {
    (P.DISCOVER, P.PLAN),
    (P.DISCOVER, P.FAIL),
    (P.PLAN, P.ACT),
    (P.PLAN, P.DONE),
    (P.PLAN, P.FAIL),
    (P.ACT, P.VERIFY),
    (P.ACT, P.FAIL),
    (P.VERIFY, P.DISCOVER),
    (P.VERIFY, P.DONE),
    (P.VERIFY, P.FAIL),
}
moves = st.lists(st.tuples(st.sampled_from(WorkflowPhase), st.sampled_from(Edge)), max_size=30)


def test_the_table_is_the_seed_table() -> None:
    assert {(a, b) for a, targets in TABLE.items() for b in targets} == SEED_TABLE


@given(moves)
def test_every_accepted_move_is_an_allowed_edge_and_terminal_phases_are_final(
    tried: list[tuple[WorkflowPhase, Edge]],
) -> None:
    phase = WorkflowPhase.DISCOVER
    for target, edge in tried:
        before = phase
        try:
            phase = transition(phase, target, edge)
        except WorkflowError:
            assert not allowed(before, target, edge)
            continue
        assert before not in TERMINAL, f"left terminal {before}"
        if edge is Edge.NEXT:
            assert (before, target) in SEED_TABLE
        elif edge in (Edge.RECOVER, Edge.UNCHANGED):
            assert target is WorkflowPhase.PLAN
        else:
            assert target is WorkflowPhase.DISCOVER


@given(st.sampled_from(sorted(LIVE)))
def test_a_recoverable_error_goes_to_plan_from_every_live_phase(phase: WorkflowPhase) -> None:
    assert transition(phase, WorkflowPhase.PLAN, Edge.RECOVER) is WorkflowPhase.PLAN


@pytest.mark.parametrize("terminal", sorted(TERMINAL))
def test_nothing_leaves_a_terminal_phase(terminal: WorkflowPhase) -> None:
    for target in WorkflowPhase:
        for edge in Edge:
            assert not allowed(terminal, target, edge)
    with pytest.raises(WorkflowError, match="cannot go from"):
        transition(terminal, WorkflowPhase.PLAN, Edge.RECOVER)


def test_act_goes_back_to_plan_only_when_it_changed_nothing() -> None:
    assert not allowed(WorkflowPhase.ACT, WorkflowPhase.PLAN)
    assert allowed(WorkflowPhase.ACT, WorkflowPhase.PLAN, Edge.UNCHANGED)
    assert not allowed(WorkflowPhase.VERIFY, WorkflowPhase.PLAN, Edge.UNCHANGED)
