"""Prebuilt request bodies are byte for byte what the SDKs build themselves.

Each scenario sends the same run of requests (a history that grows, is compacted, forked and
resumed) through two providers on one fake server: one that lets the SDK build every body
(`prebuilt_body=False`, the SDK's own path) and one that sends bodies built from the JSON it
keeps between calls. The fake server records the raw bytes; they must be identical, request
by request, and so must the headers.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from tests.fakes import FakeAnthropicServer, FakeOpenAIServer, error, reply
from tests.fakes.server import FakeServer

from journeyman.core.errors import LLMError, ProviderError
from journeyman.core.messages import Message, Role, ToolCall, ToolResult
from journeyman.providers import anthropic as anthropic_provider
from journeyman.providers import openai as openai_provider
from journeyman.providers import tool_modes, wire
from journeyman.providers.anthropic import AnthropicProvider
from journeyman.providers.base import ModelRequest, ToolSpec
from journeyman.providers.openai import OpenAIProvider

READ = ToolSpec(
    "read_file",
    "Read a file. Paths are relative to the workspace — «quoted» and ünïcode are fine.",
    {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)
EDIT = ToolSpec(
    "edit_file",
    "Replace text in a file.",
    {
        "type": "object",
        "properties": {"path": {"type": "string"}, "old": {"type": "string"}},
        "required": ["path", "old"],
    },
)
FINISH = ToolSpec("finish", "End the run.", {"type": "object", "properties": {}})
TOOLS = (READ, EDIT, FINISH)
ANSWER = '{"answer": "done"}'
"""A reply every tool mode reads (a constrained one needs a JSON object)."""


def histories() -> list[tuple[Message, ...]]:
    """A run's histories: growing, with every kind of message, then compacted, forked and
    resumed (the same messages as new objects)."""
    task = Message.user("Fix the failing test in calc.py — the add() function subtracts ✓.")
    calls = (
        ToolCall("call_1", "read_file", {"path": "calc.py"}),
        ToolCall("call_2", "read_file", {"path": "tests/t.py", "note": 'ü "q" \\ \n 😀'}),
    )
    first = (
        Message.assistant("", calls),
        Message.tool(ToolResult("call_1", "read_file", "def add(a, b):\n    return a - b\n")),
        Message.tool(ToolResult("call_2", "read_file", "no such file", is_error=True)),
    )
    chatter = (
        Message.assistant("The bug is in add(). Let me look once more."),
        Message.user("Keep going."),
        Message(Role.SYSTEM, "Budget note: half the tokens are used."),
        Message.user(""),  # an empty message: dropped by Anthropic's turns
    )
    unanswered = (
        Message.assistant(
            "Editing.",
            (ToolCall("call_3", "edit_file", {}),),
        ),
    )
    answered = (
        Message.tool(ToolResult("call_3", "edit_file", "edited")),
        Message.assistant("", (ToolCall("call_4", "finish", {"n": [1, 2.5, None, True]}),)),
        Message.assistant("A second assistant message in a row."),
        Message.tool(ToolResult("call_4", "finish", "finished")),
        Message.user("One more thing."),
    )
    grown = [(task,), (task, *first), (task, *first, *chatter)]
    grown += [(*grown[-1], *unanswered), (*grown[-1], *unanswered, *answered)]
    full = grown[-1]
    compacted = (task, Message.user("Summary of the earlier steps."), *full[-4:])
    resumed = tuple(Message.from_dict(m.to_dict()) for m in full)
    return [*grown, compacted, grown[2][:3], full, (*resumed, Message.user("Resumed."))]


def requests(system_shared_chars: int = 0) -> Iterator[ModelRequest]:
    system = "You are a careful coder. Shared part. | This run's own part: «calc»."
    for index, messages in enumerate(histories()):
        yield ModelRequest(
            system=system if index != 5 else "",
            messages=messages,
            tools=TOOLS if index != 2 else (),
            max_output_tokens=900 + index,
            temperature=None if index % 2 else 0.25,
            system_shared_chars=system_shared_chars,
        )


async def send_both(
    server: FakeServer,
    make: Callable[[bool], Any],
    *,
    stream: bool,
    system_shared_chars: int = 0,
) -> int:
    """Send every request through the SDK's path and the prebuilt one; assert the bodies and
    headers agree. Returns how many pairs were compared."""
    sdk_path, prebuilt = make(False), make(True)
    on_text = (lambda _text: None) if stream else None
    compared = 0
    for request in requests(system_shared_chars):
        for provider in (sdk_path, prebuilt):
            await provider.complete(request, on_text)
        expected, got = server.requests[-2:]
        assert got.raw_body == expected.raw_body, (
            f"request {compared}: {got.raw_body[:300]!r}\n!=\n{expected.raw_body[:300]!r}"
        )
        assert got.headers == expected.headers
        assert (got.method, got.path) == (expected.method, expected.path)
        compared += 1
    return compared


# --------------------------------------------------------------------------- OpenAI


def openai_maker(server: FakeOpenAIServer, **options: Any) -> Callable[[bool], OpenAIProvider]:
    def make(prebuilt: bool) -> OpenAIProvider:
        return OpenAIProvider(
            "gpt-test",
            api_key="sk-test",
            base_url=server.base_url,
            timeout=5.0,
            prebuilt_body=prebuilt,
            **options,
        )

    return make


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("tool_format", ["native", "text", "json_schema"])
async def test_openai_bodies_match_the_sdk(
    fake_openai: FakeOpenAIServer, tool_format: str, stream: bool
) -> None:
    fake_openai.default = reply(ANSWER)
    make = openai_maker(fake_openai, tool_format=tool_format, seed=7)
    assert await send_both(fake_openai, make, stream=stream) == len(histories())
    sent = fake_openai.requests[-1].json
    assert sent["seed"] == 7 and sent["max_tokens"] == 900 + len(histories()) - 1
    if tool_format == "native":
        assert [t["function"]["name"] for t in sent["tools"]] == [
            "read_file",
            "edit_file",
            "finish",
        ]
        assert any(m.get("tool_calls") for m in sent["messages"])
    else:
        assert "tools" not in sent
    if stream and tool_format == "native":
        assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}


async def test_openai_response_format_styles_and_completion_tokens_field(
    fake_openai: FakeOpenAIServer,
) -> None:
    """The json_object style, and the `max_completion_tokens` field OpenAI's own API takes."""
    fake_openai.default = reply(ANSWER)
    make = openai_maker(fake_openai, tool_format="json_schema")

    def openai_like(prebuilt: bool) -> OpenAIProvider:
        provider = make(prebuilt)
        provider.response_format_style = "json_object"
        provider._uses_completion_tokens_field = True  # as for api.openai.com
        return provider

    await send_both(fake_openai, openai_like, stream=False)
    sent = fake_openai.requests[-1].json
    assert sent["response_format"]["type"] == "json_object"
    assert "max_completion_tokens" in sent and "max_tokens" not in sent


async def test_openai_grammar_bodies_match_the_sdk(
    fake_openai: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The grammar mode's body (its grammar is built by llama-cpp-python, stood in for here:
    what is compared is how the body carries it)."""
    monkeypatch.setattr(openai_provider, "_can_build_grammars", lambda: True)
    monkeypatch.setattr(tool_modes, "grammar_for", lambda schema: f"root ::= {len(str(schema))}")
    fake_openai.default = reply(ANSWER)
    await send_both(fake_openai, openai_maker(fake_openai, tool_format="grammar"), stream=False)
    assert fake_openai.requests[-1].json["grammar"].startswith("root ::= ")


async def test_openai_auto_mode_switch_keeps_the_bodies(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    """A server that refuses tools: the auto mode switches to a constrained mode mid-run; the
    history is sent in the new mode's form from then on, the same on both paths."""
    for prebuilt in (False, True):
        records = tool_modes.ToolModeRecords(tmp_path / f"modes-{prebuilt}.json")
        provider = openai_maker(fake_openai, tool_format="auto", mode_records=records)(prebuilt)
        fake_openai.enqueue(
            error(400, "registry.ollama.ai/library/tiny does not support tools"),
            reply(json.dumps({"probe": "jm-probe"})),
            reply(ANSWER),
            reply(ANSWER),
        )
        for request in list(requests())[:2]:
            await provider.complete(request)
        assert provider.tool_format == "json_schema"
    assert len(fake_openai.requests) == 8  # refused, probe, sent again, next request
    first, second = fake_openai.requests[:4], fake_openai.requests[4:]
    assert [r.raw_body for r in first] == [r.raw_body for r in second]
    assert "tools" not in second[-1].json and "response_format" in second[-1].json


# --------------------------------------------------------------------------- Anthropic


def anthropic_maker(server: FakeAnthropicServer) -> Callable[[bool], AnthropicProvider]:
    def make(prebuilt: bool) -> AnthropicProvider:
        return AnthropicProvider(
            "claude-test",
            api_key="sk-ant-test",
            base_url=server.base_url,
            timeout=5.0,
            prebuilt_body=prebuilt,
        )

    return make


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("shared", [0, 25], ids=["one-system-block", "shared-prefix"])
async def test_anthropic_bodies_match_the_sdk(
    fake_anthropic: FakeAnthropicServer, stream: bool, shared: int
) -> None:
    fake_anthropic.default = reply(ANSWER)
    make = anthropic_maker(fake_anthropic)
    count = await send_both(fake_anthropic, make, stream=stream, system_shared_chars=shared)
    assert count == len(histories())
    sent = fake_anthropic.requests[-1].json
    assert sent["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert [b.get("cache_control") for b in sent["system"]] == [{"type": "ephemeral"}] * (
        2 if shared else 1
    )
    last = sent["messages"][-1]["content"][-1]
    assert last["cache_control"] == {"type": "ephemeral"}
    marked = [b for m in sent["messages"] for b in m["content"] if "cache_control" in b]
    assert marked == [last], "only the last block of the history carries a breakpoint"
    assert sent.get("stream") is (True if stream else None)


async def test_anthropic_bodies_follow_the_layout_functions(
    fake_anthropic: FakeAnthropicServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bench/swarm_cache.py sends older layouts by replacing the module's layout functions;
    the prebuilt body honours them as the SDK path does."""
    monkeypatch.setattr(anthropic_provider, "with_history_breakpoint", lambda messages: messages)
    fake_anthropic.default = reply(ANSWER)
    await send_both(fake_anthropic, anthropic_maker(fake_anthropic), stream=False)
    assert b"cache_control" not in json.dumps(fake_anthropic.requests[-1].json["messages"]).encode()


async def test_a_deprecated_model_is_warned_about_on_both_paths(
    fake_anthropic: FakeAnthropicServer,
) -> None:
    fake_anthropic.default = reply(ANSWER)
    for prebuilt in (False, True):
        provider = AnthropicProvider(
            "claude-opus-4-5", api_key="k", base_url=fake_anthropic.base_url, prebuilt_body=prebuilt
        )
        with pytest.warns(DeprecationWarning, match="claude-opus-4-5"):
            await provider.complete(next(requests()))


# --------------------------------------------------------------------------- errors


async def test_errors_and_usage_are_the_same_on_both_paths(
    fake_openai: FakeOpenAIServer, fake_anthropic: FakeAnthropicServer
) -> None:
    request = next(requests())
    for make, server in (
        (openai_maker(fake_openai), fake_openai),
        (anthropic_maker(fake_anthropic), fake_anthropic),
    ):
        outcomes = []
        for prebuilt in (False, True):
            server.enqueue(error(429, "slow down", retry_after=3), reply("hi", input_tokens=40))
            provider = make(prebuilt)
            with pytest.raises(ProviderError) as caught:
                await provider.complete(request)
            response = await provider.complete(request)
            failure = caught.value
            outcomes.append((str(failure), failure.retryable, failure.retry_after, response.usage))
        assert outcomes[0] == outcomes[1]
        assert outcomes[1][1] is True and outcomes[1][2] == 3


async def test_arguments_json_cannot_encode_fail_alike(
    fake_openai: FakeOpenAIServer, fake_anthropic: FakeAnthropicServer
) -> None:
    """Arguments holding NaN: OpenAI carries them inside a string (sent alike on both paths);
    Anthropic's body cannot encode them: the same error either way, and nothing is sent."""
    bad = Message.assistant("", (ToolCall("c1", "read_file", {"x": float("nan")}),))
    messages = (Message.user("go"), bad, Message.tool(ToolResult("c1", "read_file", "ok")))
    request = ModelRequest(system="s", messages=messages, tools=TOOLS)
    fake_openai.default = reply(ANSWER)
    make_openai = openai_maker(fake_openai)
    for prebuilt in (False, True):
        await make_openai(prebuilt).complete(request)
    assert fake_openai.requests[0].raw_body == fake_openai.requests[1].raw_body
    assert b'"arguments":"{\\"x\\": NaN}"' in fake_openai.requests[1].raw_body
    make_anthropic = anthropic_maker(fake_anthropic)
    errors = []
    for prebuilt in (False, True):
        with pytest.raises(LLMError) as caught:
            await make_anthropic(prebuilt).complete(request)
        errors.append(str(caught.value))
    assert errors[0] == errors[1] and "not valid JSON" in errors[0]
    assert fake_anthropic.requests == []


# --------------------------------------------------------------------------- reuse


def test_a_call_converts_only_the_messages_after_the_last_fresh_start() -> None:
    """What a converter is handed, call after call, as a history grows by one step."""
    seen: list[int] = []
    inner = openai_provider.wire_converter("native")

    def counting(messages: Any) -> wire.Converted:
        seen.append(len(messages))
        return inner(messages)

    history = wire.HistoryWire(counting)
    messages: tuple[Message, ...] = (Message.user("task"),)
    for step in range(1, 200):
        call = ToolCall(f"c{step}", "read_file", {"path": f"f{step}"})
        messages += (
            Message.assistant("", (call,)),
            Message.tool(ToolResult(f"c{step}", "read_file", "x" * step)),
        )
        history.units(messages)
    assert seen[0] == 3 and max(seen[1:]) == 4  # the previous step and the new one


message_kinds = st.sampled_from(["user", "assistant", "call", "calls", "result", "system", "empty"])


def build(kinds: list[str]) -> tuple[Message, ...]:
    """A history (not always a well-paired one) from a list of message kinds."""
    out: list[Message] = []
    pending: list[str] = []
    for index, kind in enumerate(kinds):
        cid = f"c{index}"
        if kind == "user":
            out.append(Message.user(f"u{index} ✓"))
        elif kind == "assistant":
            out.append(Message.assistant(f"a{index}"))
        elif kind in ("call", "calls"):
            calls = [ToolCall(cid, "read_file", {"path": str(index)})]
            if kind == "calls":
                calls.append(ToolCall(cid + "b", "edit_file", {"path": "p", "old": "ü"}))
            pending.extend(c.id for c in calls)
            out.append(Message.assistant("" if index % 2 else "thinking", calls))
        elif kind == "result":
            call_id = pending.pop(0) if pending else "orphan"
            out.append(Message.tool(ToolResult(call_id, "read_file", f"r{index}", index % 3 == 0)))
        elif kind == "system":
            out.append(Message(Role.SYSTEM, f"note {index}"))
        else:
            out.append(Message.user(""))
    return tuple(out)


CONVERTERS = {
    "anthropic": (
        anthropic_provider._convert_to_wire,
        lambda messages: anthropic_provider.with_history_breakpoint(
            anthropic_provider.to_anthropic_messages(messages)
        ),
    ),
    **{
        mode: (
            openai_provider.wire_converter(mode),
            lambda messages, mode=mode: openai_provider.to_openai_messages("", messages, (), mode),
        )
        for mode in ("native", "text", "json_schema")
    },
}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kinds=st.lists(message_kinds, max_size=30),
    edits=st.lists(st.tuples(st.sampled_from(["grow", "cut", "swap"]), st.integers(0, 29))),
    format_name=st.sampled_from(sorted(CONVERTERS)),
)
@example(  # one assistant message object twice in a row: the second runs into the first's turn
    kinds=["assistant", "user"], edits=[("grow", 0), ("grow", 0)], format_name="anthropic"
)
def test_reused_units_equal_a_conversion_from_scratch(
    kinds: list[str], edits: list[tuple[str, int]], format_name: str
) -> None:
    """Whatever happens to a history between calls (it grows, also by messages it already
    holds, is cut back, or a message is replaced by another), the reused wire form equals
    converting the whole history again."""
    convert, from_scratch = CONVERTERS[format_name]
    history = wire.HistoryWire(convert)
    messages = build(kinds)
    extra = build([*kinds, *kinds])[len(kinds) :]  # more messages, new objects
    for action, at in [("grow", 0), *edits]:
        if action == "grow":
            messages = messages + extra[: at % 5 + 1]
        elif action == "cut":
            messages = messages[: at % (len(messages) + 1)]
        elif messages:
            index = at % len(messages)
            replacement = build([*kinds, "user"])[-1]
            messages = (*messages[:index], replacement, *messages[index + 1 :])
        got = wire.json_array(history.units(messages))
        assert got == wire.dumps(from_scratch(messages))


@given(
    st.lists(
        st.tuples(
            st.text(max_size=5),
            st.one_of(
                st.integers(),
                st.text(max_size=8),
                st.lists(st.dictionaries(st.text(max_size=3), st.integers()), max_size=4),
            ),
        ),
        max_size=5,
        unique_by=lambda field: field[0],
    )
)
def test_an_object_joined_from_encoded_parts_is_what_json_encodes(
    fields: list[tuple[str, Any]],
) -> None:
    parts: list[tuple[str, bytes | list[bytes]]] = [
        (
            key,
            [wire.dumps(item) for item in value] if isinstance(value, list) else wire.dumps(value),
        )
        for key, value in fields
    ]
    assert wire.json_object(parts) == wire.dumps(dict(fields))
