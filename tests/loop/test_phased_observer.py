"""A phased run's turns mean what react turns mean: the observer pairs each call with its
result, so phases move, phase nudges fire and tokens are booked per phase."""

from __future__ import annotations

from pathlib import Path

from journeyman.core import events as ev
from journeyman.core.messages import ToolCall
from journeyman.core.result import FinishReason
from journeyman.session.store import SessionStore
from tests.fakes.agents import turn
from tests.fakes.projects import calc_finish as finish
from tests.fakes.projects import fix_add as edit
from tests.fakes.projects import phased_calc_agent as make_agent


def nudges(events: list[ev.Event]) -> list[str]:
    return [e.kind for e in events if isinstance(e, ev.NudgeInjected)]


def phase_tokens(tmp_path: Path, session_id: str) -> dict[str, int]:
    store = SessionStore(tmp_path / "sessions")
    try:
        tokens: dict[str, int] = store.checkpoint(session_id)[1]["economics"]["phase_tokens"]
        return tokens
    finally:
        store.close()


async def test_a_blind_edit_is_nudged_and_later_calls_are_booked_to_acting(
    tmp_path: Path,
) -> None:
    events: list[ev.Event] = []
    script = [edit("a - b", "a * b", "e1"), edit("a * b", "a + b", "e2"), finish()]
    agent, _ = make_agent(tmp_path, script, events=events)
    result = await agent.run("make add() add its arguments")

    assert result.finish_reason is FinishReason.COMPLETED, result.error
    assert "acting_without_exploration" in nudges(events)
    booked = phase_tokens(tmp_path, result.session_id)
    # the first call came before any edit; the two after it are booked to acting
    assert set(booked) == {"exploration", "acting"} and booked["acting"] > booked["exploration"]
    assert result.tool_calls_made == 3  # both edits and the finish, counted when they ran


async def test_reading_without_editing_gets_the_saturation_nudge(tmp_path: Path) -> None:
    events: list[ev.Event] = []
    reads = [
        turn(ToolCall(f"r{i}", "read_file", {"path": path}))
        for i, path in enumerate(["calc/__init__.py", "tests/test_calc.py", "tests/__init__.py"])
    ]
    agent, _ = make_agent(
        tmp_path,
        [*reads, turn(text="stopping")],
        events=events,
        exploration_saturation=2,
        max_iterations=6,
    )
    await agent.run("make add() add its arguments")

    assert "exploration_saturation" in nudges(events)
