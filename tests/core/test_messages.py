"""Every tool call of an assistant message gets a result: the repair of stored histories."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from journeyman.core.messages import (
    Message,
    Role,
    ToolCall,
    ToolResult,
    with_paired_results,
)


def repair_missing_tool_results(history: list[Message]) -> list[Message]:
    """The repair a stored history gets when it is loaded for a resume."""
    return with_paired_results(history, keep_pending=True)[0]

def call(n: int) -> ToolCall:
    return ToolCall(f"c{n}", "read_file", {"path": f"f{n}"})


def result(n: int) -> Message:
    return Message.tool(ToolResult(f"c{n}", "read_file", f"contents {n}"))


def test_a_complete_history_is_unchanged() -> None:
    history = [Message.user("go"), Message.assistant("", [call(1), call(2)]), result(1), result(2)]
    assert repair_missing_tool_results(history) == history


def test_a_missing_result_is_added_in_call_order_as_an_error() -> None:
    history = [
        Message.user("go"),
        Message.assistant("", [call(1), call(2), call(3)]),
        result(2),
        Message.user("next"),
    ]
    repaired = repair_missing_tool_results(history)
    assert [m.role for m in repaired] == [
        Role.USER, Role.ASSISTANT, Role.TOOL, Role.TOOL, Role.TOOL, Role.USER,
    ]  # fmt: skip
    answered = [m.tool_result for m in repaired[2:5]]
    assert [r.call_id for r in answered if r] == ["c1", "c2", "c3"]
    added = [answered[0], answered[2]]
    assert all(r is not None and r.is_error and "not run" in r.content for r in added)


def test_calls_of_the_last_turn_are_left_pending_for_the_resume_to_run() -> None:
    pending = [Message.user("go"), Message.assistant("", [call(1), call(2)]), result(1)]
    assert repair_missing_tool_results(pending) == pending


@given(st.lists(st.tuples(st.integers(1, 3), st.sets(st.integers(0, 2))), max_size=6))
def test_after_the_repair_every_call_is_answered_before_the_next_message(
    turns: list[tuple[int, set[int]]],
) -> None:
    history: list[Message] = [Message.user("go")]
    for number, (calls, answered) in enumerate(turns):
        ids = [number * 10 + i for i in range(calls)]
        history.append(Message.assistant("", [call(i) for i in ids]))
        history += [result(ids[i]) for i in sorted(answered) if i < calls]
    repaired = repair_missing_tool_results(history)
    assert repaired == repair_missing_tool_results(repaired)  # idempotent
    history.append(Message.user("next"))  # every turn above is now over
    repaired = repair_missing_tool_results(history)
    for index, message in enumerate(repaired):
        if message.role is Role.ASSISTANT:
            block = []
            for later in repaired[index + 1 :]:
                if later.role is not Role.TOOL:
                    break
                block.append(later.tool_result.call_id if later.tool_result else None)
            assert {c.id for c in message.tool_calls} <= set(block)
