"""Every tool call gets exactly one result: `pair_tool_results` and `with_paired_results`."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from journeyman.core.messages import (
    Message,
    Role,
    ToolCall,
    ToolResult,
    pair_tool_results,
    with_paired_results,
)

GOOD = ToolCall("a", "read_file", {"path": "x.py"})
BAD = ToolCall("b", "grep", {}, invalid="its arguments are not valid JSON")
ASSISTANT = Message.assistant("two calls", [GOOD, BAD])


def test_each_call_gets_its_result_or_an_error_in_call_order() -> None:
    ran = ToolResult("a", "read_file", "contents")
    stray = ToolResult("zzz", "grep", "answers nothing")
    results = pair_tool_results(ASSISTANT, [stray, ran, ToolResult("a", "read_file", "again")])
    assert [r.call_id for r in results] == ["a", "b"]
    assert results[0] is ran
    assert results[1].is_error
    assert "not valid JSON" in results[1].content


def test_a_valid_call_without_result_is_told_it_did_not_run() -> None:
    [result] = pair_tool_results(Message.assistant("", [GOOD]), [], missing="skipped: budget")
    assert result.is_error and result.content == "skipped: budget"


def test_a_paired_history_is_kept_as_it_is() -> None:
    history = [
        Message.user("task"),
        ASSISTANT,
        Message.tool(ToolResult("a", "read_file", "ok")),
        Message.tool(ToolResult("b", "grep", "bad", is_error=True)),
        Message.user("a nudge"),
        Message.assistant("done"),
    ]
    paired, fixes = with_paired_results(history)
    assert fixes == 0
    assert paired == history
    assert all(a is b for a, b in zip(paired, history, strict=True))


def test_missing_results_are_added_before_later_user_text_and_strays_dropped() -> None:
    history = [
        Message.tool(ToolResult("old", "grep", "from a compacted turn")),
        Message.user("task"),
        ASSISTANT,
        Message.user("Your call b was malformed."),
        Message.tool(ToolResult("a", "read_file", "ok")),
        Message.tool(ToolResult("nope", "grep", "answers no call")),
    ]
    paired, fixes = with_paired_results(history)
    assert [(m.role, m.tool_result.call_id if m.tool_result else m.content) for m in paired] == [
        (Role.USER, "task"),
        (Role.ASSISTANT, "two calls"),
        (Role.TOOL, "a"),
        (Role.TOOL, "b"),
        (Role.USER, "Your call b was malformed."),
    ]
    assert fixes == 3  # one result added, two dropped


def test_invalid_marker_survives_a_round_trip() -> None:
    assert ToolCall.from_dict(BAD.to_dict()) == BAD
    assert "invalid" not in GOOD.to_dict()


ids = st.sampled_from(["a", "b", "c", "d"])
messages = st.one_of(
    st.builds(lambda: Message.user("u")),
    st.builds(
        lambda call_ids: Message.assistant("", [ToolCall(i, "t") for i in dict.fromkeys(call_ids)]),
        st.lists(ids, max_size=3),
    ),
    st.builds(lambda i: Message.tool(ToolResult(i, "t", "r")), ids),
)


@given(st.lists(messages, max_size=12))
def test_every_call_is_answered_once_right_after_its_message(history: list[Message]) -> None:
    paired, _ = with_paired_results(history)
    for index, message in enumerate(paired):
        if message.role is Role.TOOL:
            continue
        following = []
        for later in paired[index + 1 :]:
            if later.role is not Role.TOOL:
                break
            assert later.tool_result is not None
            following.append(later.tool_result.call_id)
        assert following == [c.id for c in message.tool_calls]
    assert with_paired_results(paired) == (paired, 0)
