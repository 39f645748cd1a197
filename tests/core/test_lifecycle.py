from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from journeyman.core.lifecycle import (
    VALID_TRANSITIONS,
    AgentState,
    InvalidTransitionError,
    LifecycleMachine,
)

S = AgentState


def test_seven_states_and_eighteen_transitions() -> None:
    assert len(AgentState) == 7
    assert len(VALID_TRANSITIONS) == 18
    assert all(b is not S.DISPOSED for a, b in VALID_TRANSITIONS if a is S.DISPOSED)
    assert not any(a is S.DISPOSED for a, _ in VALID_TRANSITIONS)


def test_convenience_methods_walk_the_happy_path() -> None:
    machine = LifecycleMachine()
    machine.initialize()
    machine.start()
    machine.pause()
    machine.resume()
    machine.complete()
    machine.finish()
    assert machine.state is S.IDLE
    assert machine.history == [
        (S.IDLE, S.INITIALIZING),
        (S.INITIALIZING, S.RUNNING),
        (S.RUNNING, S.PAUSED),
        (S.PAUSED, S.RUNNING),
        (S.RUNNING, S.COMPLETING),
        (S.COMPLETING, S.IDLE),
    ]


def test_complete_from_paused_and_fail_then_recover() -> None:
    machine = LifecycleMachine()
    machine.initialize()
    machine.start()
    machine.pause()
    machine.complete()
    machine.fail(RuntimeError("boom"))
    assert machine.state is S.ERROR
    machine.finish()  # ERROR -> IDLE
    machine.dispose()
    assert machine.state is S.DISPOSED
    with pytest.raises(InvalidTransitionError):
        machine.initialize()


def test_invalid_transition_carries_states() -> None:
    machine = LifecycleMachine()
    with pytest.raises(InvalidTransitionError) as info:
        machine.start()
    assert info.value.from_state is S.IDLE
    assert info.value.to_state is S.RUNNING
    assert machine.state is S.IDLE
    assert machine.history == []


def test_listeners_get_metadata_and_their_errors_are_swallowed() -> None:
    machine = LifecycleMachine()
    seen: list[tuple[AgentState, AgentState, dict[str, object]]] = []

    def broken(_a: AgentState, _b: AgentState, _m: object) -> None:
        raise RuntimeError("listener bug")

    machine.on_transition(broken)
    unsubscribe = machine.on_transition(lambda a, b, m: seen.append((a, b, dict(m))))
    machine.initialize()
    machine.fail("no config")
    assert machine.state is S.ERROR
    assert seen[-1] == (S.INITIALIZING, S.ERROR, {"error": "no config"})
    unsubscribe()
    machine.finish()
    assert len(seen) == 2


@given(st.lists(st.sampled_from(list(AgentState)), max_size=40))
def test_any_sequence_keeps_the_machine_consistent(targets: list[AgentState]) -> None:
    machine = LifecycleMachine()
    observed: list[tuple[AgentState, AgentState]] = []
    machine.on_transition(lambda a, b, _m: observed.append((a, b)))
    for target in targets:
        before = machine.state
        if (before, target) in VALID_TRANSITIONS:
            machine.transition(target)
            assert machine.state is target
        else:
            with pytest.raises(InvalidTransitionError):
                machine.transition(target)
            assert machine.state is before
    assert machine.history == observed
    assert all(step in VALID_TRANSITIONS for step in machine.history)
    # history chains: each transition starts where the previous one ended
    for (_, end), (start, _) in zip(machine.history, machine.history[1:], strict=False):
        assert end is start
