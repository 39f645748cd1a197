"""Tool modes for OpenAI-compatible servers that drop `tools`: detection, the constrained
requests and replies, and the per-(server, model) record, against the fake Chat Completions API."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from tests.fakes import FakeOpenAIServer, error, reply

from journeyman.core.errors import ConfigurationError
from journeyman.core.messages import Message, Role, ToolCall, ToolResult
from journeyman.providers import tool_modes
from journeyman.providers.base import ModelRequest, ToolSpec
from journeyman.providers.openai import OpenAIProvider, to_openai_messages
from journeyman.providers.tool_modes import ToolModeRecord, ToolModeRecords
from journeyman.tools.builtin import default_tools
from journeyman.tools.registry import ToolRegistry

READ = ToolSpec(
    "read_file",
    "Read a file of the workspace and return its text with line numbers. " * 8,
    {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)
FINISH = ToolSpec(
    "finish", "End the run.", {"type": "object", "properties": {"summary": {"type": "string"}}}
)
SYSTEM = "You are a careful coding agent."
TASK = Message(Role.USER, "Fix the failing test.")
PROBE_OK = '{"probe": "jm-probe"}'


def request(*messages: Message, tools: tuple[ToolSpec, ...] = (READ, FINISH)) -> ModelRequest:
    return ModelRequest(system=SYSTEM, messages=messages or (TASK,), tools=tools)


def prompt_without_tools() -> int:
    """A prompt count a server that dropped the tools would report for `request()`."""
    return len(SYSTEM + TASK.content) // 4 + 6


def provider(server: FakeOpenAIServer, records: ToolModeRecords, **kwargs: Any) -> OpenAIProvider:
    kwargs.setdefault("tool_format", "auto")
    return OpenAIProvider(
        "tiny-model", base_url=server.base_url, timeout=5.0, mode_records=records, **kwargs
    )


@pytest.fixture
def records(tmp_path: Path) -> ToolModeRecords:
    return ToolModeRecords(tmp_path / "tool_modes.json")


def bodies(server: FakeOpenAIServer) -> list[dict[str, Any]]:
    return [r.body for r in server.requests]


# -- detection --------------------------------------------------------------------------


def test_a_prompt_count_without_room_for_the_tools_means_they_were_dropped() -> None:
    tools = (READ, FINISH)
    small = prompt_without_tools()
    assert tool_modes.tools_were_dropped(small, SYSTEM, (TASK,), tools) is True
    assert tool_modes.tools_were_dropped(small + 200, SYSTEM, (TASK,), tools) is False
    assert tool_modes.tools_were_dropped(0, SYSTEM, (TASK,), tools) is None  # not reported
    assert tool_modes.tools_were_dropped(small, SYSTEM, (TASK,), ()) is None  # nothing sent


async def test_auto_switches_to_a_json_schema_reply_when_the_server_drops_the_tools(
    fake_openai: FakeOpenAIServer, records: ToolModeRecords
) -> None:
    fake_openai.enqueue(
        reply("I would read the file.", input_tokens=prompt_without_tools()),
        reply(PROBE_OK),  # the probe of response_format is honoured
        reply('{"tool": "read_file", "arguments": {"path": "calc/ops.py"}}'),
    )
    notices: list[str] = []
    model = provider(fake_openai, records, on_notice=notices.append)
    assert model.tool_mode_description.startswith("auto")

    response = await model.complete(request())

    assert [c.name for c in response.tool_calls] == ["read_file"]
    assert response.tool_calls[0].arguments == {"path": "calc/ops.py"}
    first, probe, again = bodies(fake_openai)
    assert "tools" in first
    assert probe["response_format"]["type"] == "json_schema"
    shapes = again["response_format"]["json_schema"]["schema"]
    # no tool has run yet: a call is required, and finish is not offered
    assert shapes["properties"]["tool"]["enum"] == ["read_file"]
    assert "tools" not in again and "# Tools" in again["messages"][0]["content"]
    assert model.tool_format == "json_schema" and not model.capabilities.native_tools
    recorded = records.get(model._base_url, "tiny-model")
    assert recorded is not None and recorded.mode == "json_schema"
    assert "dropped the tool definitions" in notices[0]


async def test_the_llama_cpp_shape_of_response_format_is_tried_when_openais_is_refused(
    fake_openai: FakeOpenAIServer, records: ToolModeRecords
) -> None:
    fake_openai.enqueue(
        reply("Sure.", input_tokens=prompt_without_tools()),
        error(400, "response_format.type: Input should be 'text' or 'json_object'"),
        reply(PROBE_OK),
        reply('{"answer": "nothing to do"}'),
    )
    model = provider(fake_openai, records)
    response = await model.complete(request(TASK, *tool_round()))
    assert response.text == "nothing to do" and not response.tool_calls
    last = bodies(fake_openai)[-1]
    assert last["response_format"]["type"] == "json_object"
    assert last["response_format"]["schema"]["anyOf"][-1]["required"] == ["answer"]
    recorded = records.get(model._base_url, "tiny-model")
    assert recorded == ToolModeRecord("json_schema", "json_object", recorded.reason)


async def test_the_text_format_is_used_when_no_constraint_is_honoured(
    fake_openai: FakeOpenAIServer, records: ToolModeRecords, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)  # no grammar builder
    fake_openai.enqueue(
        reply("Sure.", input_tokens=prompt_without_tools()),
        reply("not json"),
        reply('{"probe": "something else"}'),
        reply('```json\n{"tool": "read_file", "arguments": {"path": "a.py"}}\n```'),
    )
    model = provider(fake_openai, records)
    response = await model.complete(request())
    assert [c.arguments for c in response.tool_calls] == [{"path": "a.py"}]
    assert model.tool_format == "text"
    assert "Available tools" in bodies(fake_openai)[-1]["messages"][0]["content"]


async def test_a_server_whose_count_includes_the_tools_keeps_native_calls_and_is_not_recorded(
    fake_openai: FakeOpenAIServer, records: ToolModeRecords
) -> None:
    fake_openai.enqueue(reply("Done.", input_tokens=900), reply("Again."))
    model = provider(fake_openai, records)
    await model.complete(request())
    await model.complete(request())
    assert len(fake_openai.requests) == 2 and all("tools" in b for b in bodies(fake_openai))
    assert model.tool_format == "native" and not records.path.exists()


async def test_a_count_that_cannot_be_a_real_prompt_size_proves_nothing(
    fake_openai: FakeOpenAIServer, records: ToolModeRecords
) -> None:
    """Scripted servers report a handful of tokens: no detection, no extra request."""
    fake_openai.enqueue(reply("Done.", input_tokens=3))
    model = provider(fake_openai, records)
    await model.complete(request())
    assert len(fake_openai.requests) == 1 and model.tool_format == "native"


async def test_a_recorded_mode_is_used_from_the_first_request(
    fake_openai: FakeOpenAIServer, records: ToolModeRecords
) -> None:
    records.put(
        f"{fake_openai.base_url}/", "tiny-model", ToolModeRecord("json_schema", "json_object", "x")
    )
    fake_openai.enqueue(reply('{"tool": "read_file", "arguments": {"path": "b.py"}}'))
    model = provider(fake_openai, records)
    assert model.tool_mode_description.startswith("json_schema")
    response = await model.complete(request())
    assert response.tool_calls[0].arguments == {"path": "b.py"}
    assert len(fake_openai.requests) == 1
    assert bodies(fake_openai)[0]["response_format"]["type"] == "json_object"


async def test_a_forced_mode_is_never_detected_or_recorded(
    fake_openai: FakeOpenAIServer, records: ToolModeRecords
) -> None:
    fake_openai.enqueue(reply("prose", input_tokens=prompt_without_tools()))
    model = provider(fake_openai, records, tool_format="native")
    response = await model.complete(request())
    assert response.text == "prose" and len(fake_openai.requests) == 1
    assert not records.path.exists()


# -- constrained replies ----------------------------------------------------------------


def tool_round() -> tuple[Message, Message]:
    call = ToolCall("call-1", "read_file", {"path": "calc/ops.py"})
    return (
        Message(Role.ASSISTANT, "", tool_calls=(call,)),
        Message(Role.TOOL, "", tool_result=ToolResult("call-1", "read_file", "1: x = 1")),
    )


def test_after_a_tool_ran_the_reply_may_answer_or_call_any_tool() -> None:
    schema = tool_modes.reply_schema((READ, FINISH), require_call=False)
    names = [s["properties"].get("tool", {}).get("enum") for s in schema["anyOf"]]
    assert names == [["read_file"], ["finish"], None]
    assert schema["anyOf"][-1]["required"] == ["answer"]


def test_constrained_history_writes_calls_as_the_json_objects_replies_are() -> None:
    sent = to_openai_messages(SYSTEM, (TASK, *tool_round()), (READ,), "json_schema")
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
    assert json.loads(str(sent[2]["content"])) == {
        "tool": "read_file",
        "arguments": {"path": "calc/ops.py"},
    }
    assert "1: x = 1" in str(sent[3]["content"])


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"tool": "delete_all", "arguments": {}}', "no tool named"),
        ('{"tool": "read_file", "arguments": [1]}', "must be a JSON object"),
        ('{"tool": "read_file", "argu', "cut off"),
        ("[1, 2]", "not an object"),
        ('{"other": 1}', "neither a tool call nor an answer"),
    ],
)
def test_an_unusable_constrained_reply_is_explained_to_the_model(text: str, problem: str) -> None:
    _, calls, format_error = tool_modes.parse_reply(text, (READ,), "call-1")
    assert not calls and format_error is not None and problem in format_error


def test_grammar_mode_says_what_to_install_when_llama_cpp_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    with pytest.raises(ConfigurationError, match=r"journeyman\[local\]"):
        OpenAIProvider("m", base_url="http://127.0.0.1:9/v1", tool_format="grammar")


def test_an_unreadable_record_file_counts_as_empty(tmp_path: Path) -> None:
    path = tmp_path / "tool_modes.json"
    path.write_text("{not json")
    records = ToolModeRecords(path)
    assert records.get("http://x/v1", "m") is None
    assert records.put("http://x/v1", "m", ToolModeRecord("text"))
    assert records.get("http://x/v1/", "m") == ToolModeRecord("text")


def test_the_record_lives_in_the_user_config_dir_not_the_workspace(tmp_path: Path) -> None:
    assert tool_modes.records_path({"JOURNEYMAN_CONFIG_DIR": str(tmp_path)}) == (
        tmp_path / "tool_modes.json"
    )


def test_optional_arguments_with_number_bounds_are_left_out_of_the_constraint() -> None:
    """llama.cpp's grammars cannot keep `offset` at 1 or more: the tool's default is used."""
    paged = ToolSpec(
        "read_file",
        "Read a file.",
        {
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "offset": {"type": "integer", "minimum": 1},
                "limit": {"anyOf": [{"type": "integer", "maximum": 9}, {"type": "null"}]},
                "count": {"type": "integer", "minimum": 0},
            },
            "required": ["path", "count"],
        },
    )
    arguments = tool_modes.call_shape(paged)["properties"]["arguments"]
    assert list(arguments["properties"]) == ["path", "count"]
    assert "- read_file(path, count): Read a file." in tool_modes.render_instructions((paged,))


def test_references_of_a_tool_schema_are_inlined_in_the_reply_schema() -> None:
    """Inside the reply schema, a tool's `#/$defs/...` would point at the wrong root."""
    noting = ToolSpec(
        "note",
        "Keep a note.",
        {
            "$defs": {"Kind": {"enum": ["plan", "task"], "type": "string"}},
            "type": "object",
            "properties": {"kind": {"$ref": "#/$defs/Kind", "description": "which"}},
            "required": ["kind"],
        },
    )
    arguments = tool_modes.call_shape(noting)["properties"]["arguments"]
    assert "$defs" not in arguments
    assert arguments["properties"]["kind"] == {
        "enum": ["plan", "task"],
        "type": "string",
        "description": "which",
    }


async def test_the_seed_goes_with_every_request(
    fake_openai: FakeOpenAIServer, records: ToolModeRecords
) -> None:
    fake_openai.enqueue(reply("Done.", input_tokens=900))
    model = provider(fake_openai, records, seed=7)
    await model.complete(request())
    assert bodies(fake_openai)[0]["seed"] == 7


def test_a_raw_newline_inside_a_string_is_read_as_written() -> None:
    """A 135M model wrote this three times in a row; strict JSON refuses the bare newline,
    which left the run without a single call."""
    text = '{ "tool": "read_file", "arguments": { "path" : "calc/ops.py\n# the file" }}'
    _, calls, format_error = tool_modes.parse_reply(text, (READ,), "call-1")
    assert format_error is None
    assert calls == [ToolCall("call-1", "read_file", {"path": "calc/ops.py\n# the file"})]


EDIT = ToolSpec(
    "edit_file",
    "Replace text in a file.",
    {
        "type": "object",
        "properties": {
            "path": {"type": "string", "maxLength": 50},
            "old": {"type": "string"},
            "new": {"type": "string"},
            "count": {"type": "integer"},
        },
        "required": ["path", "old", "new"],
    },
)


def test_strings_of_a_constrained_reply_are_bounded_to_fit_its_token_limit() -> None:
    """A model that rambles inside a string would be cut off mid-JSON at the token limit: the
    bound makes the grammar close every string in time."""
    schema = tool_modes.reply_schema((EDIT, FINISH), require_call=False, reply_tokens=256)
    edit, finish, answer = schema["anyOf"]
    strings = edit["properties"]["arguments"]["properties"]
    limits = {name: s.get("maxLength") for name, s in strings.items()}
    assert limits["count"] is None  # only strings are bounded
    assert limits["path"] == 50  # a tighter bound of the tool's own is kept
    assert limits["old"] == limits["new"] == (256 - tool_modes.REPLY_OVERHEAD_TOKENS) // 3
    assert finish["properties"]["arguments"]["properties"]["summary"]["maxLength"] == 208
    assert answer["properties"]["answer"]["maxLength"] == 208
    unbounded = tool_modes.reply_schema((EDIT,), require_call=True)
    assert "maxLength" not in unbounded["properties"]["arguments"]["properties"]["old"]


def test_a_bound_longer_than_a_grammar_may_repeat_is_left_off() -> None:
    """At the default output limit a string's share is thousands of characters, more than
    llama.cpp lets a grammar repeat: those strings go unbounded; the tool's own bounds stay."""
    schema = tool_modes.reply_schema((EDIT, FINISH), require_call=False, reply_tokens=4096)
    edit, _finish, answer = schema["anyOf"]
    strings = edit["properties"]["arguments"]["properties"]
    assert strings["path"]["maxLength"] == 50
    assert "maxLength" not in strings["old"] and "maxLength" not in strings["new"]
    assert "maxLength" not in answer["properties"]["answer"]
    just_inside = tool_modes.reply_schema(
        (FINISH,), require_call=True, reply_tokens=tool_modes.LONGEST_BOUNDED_STRING + 48
    )
    summary = just_inside["properties"]["arguments"]["properties"]["summary"]
    assert summary["maxLength"] == tool_modes.LONGEST_BOUNDED_STRING


@pytest.mark.parametrize("reply_tokens", [160, 1024, 2048, 4096, 32_000])
def test_no_grammar_repeats_a_rule_as_often_as_llama_cpp_refuses(reply_tokens: int) -> None:
    """llama.cpp refuses (the embedded model then crashes) a repetition of 2,000 or more: the
    grammar of the built-in tools must stay under it at every output limit."""
    llama_grammar = pytest.importorskip("llama_cpp.llama_grammar", reason="llama-cpp-python")
    specs = ToolRegistry(default_tools(edit_tool="edit_file")).specs()
    for require_call in (True, False):
        schema = tool_modes.reply_schema(
            specs, require_call=require_call, reply_tokens=reply_tokens
        )
        grammar = str(llama_grammar.json_schema_to_gbnf(json.dumps(schema)))
        repeats = [int(most) for most in re.findall(r"\{\d+,(\d+)\}", grammar)]
        assert max(repeats, default=0) <= tool_modes.LONGEST_BOUNDED_STRING


async def test_the_constrained_request_bounds_its_strings_by_the_output_limit(
    fake_openai: FakeOpenAIServer, records: ToolModeRecords
) -> None:
    fake_openai.enqueue(reply('{"tool": "read_file", "arguments": {"path": "a.py"}}'))
    model = provider(fake_openai, records, tool_format="json_schema", max_output_tokens=128)
    await model.complete(request())
    response_format = bodies(fake_openai)[0]["response_format"]
    schema = response_format.get("json_schema", response_format)["schema"]
    assert schema["properties"]["arguments"]["properties"]["path"]["maxLength"] == 80


def test_the_grammar_keeps_a_bounded_string_within_its_length() -> None:
    llama_grammar = pytest.importorskip("llama_cpp.llama_grammar", reason="llama-cpp-python")
    schema = tool_modes.reply_schema((READ,), require_call=True, reply_tokens=64)
    grammar = tool_modes.grammar_for(schema)
    assert grammar == str(llama_grammar.json_schema_to_gbnf(json.dumps(schema)))
    assert "{0,16}" in grammar or grammar.count("char") >= 16
