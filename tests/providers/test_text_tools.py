"""The text tool-calling protocol: instructions, parsing, and rendering back."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from journeyman.core.messages import ToolCall, ToolResult
from journeyman.providers.base import ToolSpec
from journeyman.providers.text_tools import (
    parse_tool_calls,
    render_tool_call,
    render_tool_instructions,
    render_tool_result,
)

READ = ToolSpec(
    "read_file",
    "Read a text file from the workspace.",
    {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)
RUN = ToolSpec(
    "run_command",
    "Run a shell command.",
    {"type": "object", "properties": {"cmd": {"type": "string"}}},
)


def test_instructions_describe_protocol_and_every_tool() -> None:
    text = render_tool_instructions([READ, RUN])
    assert "```json" in text
    assert '"tool"' in text
    assert '"arguments"' in text
    for tool in (READ, RUN):
        assert tool.name in text
        assert tool.description in text
        assert json.dumps(tool.parameters, sort_keys=True) in text


def test_single_call_and_remaining_text() -> None:
    reply = (
        'I will read it.\n\n```json\n{"tool": "read_file", "arguments": {"path": "a.py"}}\n```\n'
    )
    text, calls, error = parse_tool_calls(reply)
    assert text == "I will read it."
    assert calls == [ToolCall("text-call-1", "read_file", {"path": "a.py"})]
    assert error is None


def test_several_blocks_keep_order_and_number_ids() -> None:
    reply = (
        "First:\n```json\n"
        '{"tool": "read_file", "arguments": {"path": "a.py"}}\n'
        "```\nThen:\n```JSON\n"
        "{\n"
        '  "tool": "run_command",\n'
        '  "arguments": {"cmd": "pytest -q"}\n'
        "}\n```\nDone."
    )
    text, calls, error = parse_tool_calls(reply, start=7)
    assert error is None
    assert [c.id for c in calls] == ["text-call-7", "text-call-8"]
    assert [c.name for c in calls] == ["read_file", "run_command"]
    assert calls[1].arguments == {"cmd": "pytest -q"}
    assert text == "First:\n\nThen:\n\nDone."


def test_list_of_calls_in_one_block() -> None:
    block = json.dumps(
        [
            {"tool": "read_file", "arguments": {"path": "a"}},
            {"tool": "read_file", "arguments": {"path": "b"}},
        ]
    )
    _, calls, error = parse_tool_calls(f"```json\n{block}\n```")
    assert error is None
    assert [c.arguments["path"] for c in calls] == ["a", "b"]


def test_missing_arguments_mean_empty_arguments() -> None:
    _, calls, error = parse_tool_calls('```json\n{"tool": "list_files"}\n```')
    assert error is None
    assert calls == [ToolCall("text-call-1", "list_files", {})]


def test_one_line_block() -> None:
    _, calls, error = parse_tool_calls(
        '```json {"tool": "read_file", "arguments": {"path": "x"}}```'
    )
    assert error is None
    assert calls[0].arguments == {"path": "x"}


def test_invalid_json_is_reported_with_expected_shape() -> None:
    reply = 'Reading.\n```json\n{"tool": "read_file", "arguments": {"path": "a.py"}\n```'
    text, calls, error = parse_tool_calls(reply)
    assert calls == []
    assert error is not None
    assert "not valid JSON" in error
    assert '{"tool": "<tool name>", "arguments":' in error
    assert "```json" in text  # the malformed block stays in the text the model sees again


def test_missing_tool_key_is_reported() -> None:
    _, calls, error = parse_tool_calls('```json\n{"name": "read_file", "arguments": {}}\n```')
    assert calls == []
    assert error is not None
    assert 'no "tool" key' in error
    assert "name" in error


def test_non_object_arguments_are_reported() -> None:
    _, calls, error = parse_tool_calls('```json\n{"tool": "read_file", "arguments": "a.py"}\n```')
    assert calls == []
    assert error is not None
    assert '"arguments"' in error
    assert "JSON object" in error


def test_good_blocks_survive_a_bad_one() -> None:
    reply = '```json\n{"tool": "read_file", "arguments": {"path": "a"}}\n```\n```json\n[1, 2\n```'
    _, calls, error = parse_tool_calls(reply)
    assert [c.name for c in calls] == ["read_file"]
    assert error is not None
    assert "block 2" in error


def test_unclosed_block_is_reported() -> None:
    _, calls, error = parse_tool_calls(
        'Calling:\n```json\n{"tool": "read_file", "arguments": {"path": "a"}}'
    )
    assert calls == []
    assert error is not None
    assert "not closed" in error


def test_other_code_blocks_are_left_alone() -> None:
    reply = (
        "Here is the fix:\n```python\nprint('```json')\n```\n"
        '```\nplain block\n```\n```\n{"a": 1}\n```'
    )
    text, calls, error = parse_tool_calls(reply)
    assert calls == []
    assert error is None
    assert text == reply.strip()


def test_untagged_block_holding_a_call_counts() -> None:
    _, calls, error = parse_tool_calls(
        '```\n{"tool": "read_file", "arguments": {"path": "a"}}\n```'
    )
    assert error is None
    assert calls == [ToolCall("text-call-1", "read_file", {"path": "a"})]


def test_rendered_calls_parse_back() -> None:
    call = ToolCall(
        "whatever", "write_file", {"path": "a.md", "content": "# Title\n```py\nx = 1\n```\n"}
    )
    _, calls, error = parse_tool_calls(f"Writing.\n\n{render_tool_call(call)}")
    assert error is None
    assert calls == [ToolCall("text-call-1", call.name, call.arguments)]


def test_rendered_result_names_call_and_outcome() -> None:
    ok = render_tool_result(ToolResult("text-call-3", "read_file", "line 1"))
    failed = render_tool_result(ToolResult("text-call-4", "run_command", "exit 1", is_error=True))
    assert "read_file" in ok and "text-call-3" in ok and ok.endswith("line 1")
    assert "failed" in failed and "exit 1" in failed


# --------------------------------------------------------------------------- properties

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=10,
)
arguments = st.dictionaries(st.text(max_size=10), json_values, max_size=4)
names = st.from_regex(r"[a-z][a-z0-9_]{0,20}", fullmatch=True)
prose = st.text(max_size=60).filter(lambda s: "`" not in s)


@given(st.text())
def test_parse_never_raises(text: str) -> None:
    remaining, calls, error = parse_tool_calls(text)
    assert isinstance(remaining, str)
    assert all(isinstance(c, ToolCall) and isinstance(c.arguments, dict) for c in calls)
    assert error is None or isinstance(error, str)


@given(
    st.lists(
        st.sampled_from(
            ["```", "```json", "```json\n", "{", "}", '"tool"', ":", "\n", "x", "[", "]", ","]
        ),
        max_size=40,
    )
)
def test_parse_never_raises_on_fence_soup(pieces: list[str]) -> None:
    parse_tool_calls("".join(pieces))


@given(st.lists(st.tuples(prose, names, arguments), min_size=1, max_size=4), prose)
def test_well_formed_blocks_round_trip(
    items: list[tuple[str, str, dict[str, Any]]], tail: str
) -> None:
    parts: list[str] = []
    for before, name, args in items:
        parts += [before, render_tool_call(ToolCall("ignored", name, args))]
    parts.append(tail)
    text, calls, error = parse_tool_calls("\n".join(parts))
    assert error is None
    assert [(c.name, c.arguments) for c in calls] == [(name, args) for _, name, args in items]
    assert [c.id for c in calls] == [f"text-call-{i}" for i in range(1, len(items) + 1)]
    expected_prose = [p.strip() for p in [*(before for before, _, _ in items), tail] if p.strip()]
    for piece in expected_prose:
        assert piece in text


def test_deeply_nested_block_is_a_format_error_not_a_crash() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    moderate = '{"tool": "read_file", "arguments": {"path": ' + "[" * 200 + "]" * 200 + "}}"
    text = f"```json\n{deep}\n```\n\n```json\n{moderate}\n```"
    _, calls, error = parse_tool_calls(text)
    assert calls == []
    assert error is not None
    assert "block 1 nests" in error and "block 2 nests" in error
