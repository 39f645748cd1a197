"""Malformed tool calls and malformed replies through both official SDKs.

A reply mixing a valid and a malformed call must not leave either call id without a result
in the next request (strict servers answer that with a 400, and every later request of the
session would fail the same way); deeply nested JSON is a malformed call or reply, never a
RecursionError.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from tests.fakes import FakeAnthropicServer, FakeOpenAIServer, FakeServer, RawBody, reply, tool_call

from journeyman.core.errors import LLMError
from journeyman.core.messages import Message, ToolResult, pair_tool_results
from journeyman.providers.anthropic import AnthropicProvider
from journeyman.providers.base import ModelRequest, Provider, ToolSpec
from journeyman.providers.openai import OpenAIProvider

READ = ToolSpec(
    "read_file", "Read a file.", {"type": "object", "properties": {"path": {"type": "string"}}}
)
DEEP = "[" * 100_000 + "]" * 100_000
"""Tool arguments nested 100,000 lists deep."""


def make(kind: str, server: FakeServer) -> Provider:
    if kind == "openai":
        return OpenAIProvider("gpt-test", api_key="sk-test", base_url=server.base_url, timeout=5)
    return AnthropicProvider("claude-test", api_key="sk-ant", base_url=server.base_url, timeout=5)


def strict_server(kind: str) -> FakeServer:
    return (FakeOpenAIServer if kind == "openai" else FakeAnthropicServer)(strict=True)


def request(*messages: Message) -> ModelRequest:
    return ModelRequest(system="Be careful.", messages=messages, tools=(READ,))


def answered_ids(kind: str, body: dict[str, Any]) -> list[str]:
    """The call ids the request's tool results answer, in order."""
    if kind == "openai":
        return [m["tool_call_id"] for m in body["messages"] if m["role"] == "tool"]
    return [
        block["tool_use_id"]
        for m in body["messages"]
        if isinstance(m["content"], list)
        for block in m["content"]
        if block["type"] == "tool_result"
    ]


MALFORMED = {"not-json": '{"path": ', "not-an-object": '["a.py"]'}


CASES = [
    (kind, malformed, streaming)
    for kind in ("openai", "anthropic")
    for malformed in sorted(MALFORMED)
    for streaming in (False, True)
    # the Messages API sends tool input as JSON inside the body: only a stream can break it
    if not (kind == "anthropic" and malformed == "not-json" and not streaming)
]


@pytest.mark.parametrize(("kind", "malformed", "streaming"), CASES)
async def test_a_valid_and_a_malformed_call_both_get_results_in_the_next_request(
    kind: str, malformed: str, streaming: bool, caplog: pytest.LogCaptureFixture
) -> None:
    # a streamed Anthropic tool input that is not JSON is a malformed call only when the output
    # limit cut it off (otherwise the reply is retried)
    stop = "max_tokens" if kind == "anthropic" and malformed == "not-json" else None
    with strict_server(kind) as server:
        server.enqueue(
            reply(
                "Two calls.",
                [
                    tool_call("read_file", {"path": "a.py"}, id="good"),
                    tool_call("read_file", MALFORMED[malformed], id="bad"),
                ],
                stop_reason=stop,
            ),
            reply("Thanks."),
        )
        provider = make(kind, server)
        on_text = (lambda _: None) if streaming else None
        task = Message.user("Read a.py.")
        first = await provider.complete(request(task), on_text)
        assert [c.id for c in first.tool_calls] == ["good", "bad"]
        assert first.format_error is not None
        # the history as the loop builds it today: the calls, then the format error, no results
        history = (
            task,
            Message.assistant(first.text, first.tool_calls),
            Message.user(f"Fix this: {first.format_error}"),
        )
        with caplog.at_level(logging.WARNING):
            second = await provider.complete(request(*history), on_text)
        assert second.text == "Thanks."  # a strict server accepted the conversation
        assert answered_ids(kind, server.last_request.json) == ["good", "bad"]
        assert "without their result" in caplog.text


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_results_paired_by_the_loop_are_sent_as_they_are(
    kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    with strict_server(kind) as server:
        server.enqueue(
            reply(
                "",
                [tool_call("read_file", {"path": "a.py"}, id="good"), tool_call("read_file", "7")],
            ),
            reply("Thanks."),
        )
        provider = make(kind, server)
        first = await provider.complete(request(Message.user("Read a.py.")), None)
        assistant = Message.assistant(first.text, first.tool_calls)
        ran = [ToolResult("good", "read_file", "print('a')")]
        results = pair_tool_results(assistant, ran)
        history = (Message.user("Read a.py."), assistant, *map(Message.tool, results))
        with caplog.at_level(logging.WARNING):
            assert (await provider.complete(request(*history), None)).text == "Thanks."
        assert "without their result" not in caplog.text
        assert results[0] is ran[0]
        assert results[1].is_error and "JSON object" in results[1].content


@pytest.mark.parametrize("streaming", [False, True], ids=["json", "stream"])
async def test_deeply_nested_openai_arguments_are_a_malformed_call(
    fake_openai: FakeOpenAIServer, streaming: bool
) -> None:
    fake_openai.enqueue(
        reply(tool_calls=[tool_call("read_file", DEEP, id="deep")], chunk_size=50_000)
    )
    on_text = (lambda _: None) if streaming else None
    response = await make("openai", fake_openai).complete(request(Message.user("go")), on_text)
    [call] = response.tool_calls
    assert call.invalid is not None and "nested" in call.invalid
    assert call.arguments == {}
    assert response.format_error is not None and "nested" in response.format_error


async def test_deeply_nested_anthropic_streamed_input_is_a_malformed_call(
    fake_anthropic: FakeAnthropicServer,
) -> None:
    fake_anthropic.enqueue(
        reply(tool_calls=[tool_call("read_file", DEEP, id="deep")], chunk_size=50_000)
    )
    response = await make("anthropic", fake_anthropic).complete(
        request(Message.user("go")), lambda _: None
    )
    [call] = response.tool_calls
    assert call.invalid is not None and "nested" in call.invalid


async def test_moderately_deep_arguments_are_refused_before_they_reach_a_tool(
    fake_openai: FakeOpenAIServer,
) -> None:
    nested = '{"path": ' + "[" * 500 + "]" * 500 + "}"  # decodable, but no schema nests so deep
    fake_openai.enqueue(reply(tool_calls=[tool_call("read_file", nested, id="deep")]))
    response = await make("openai", fake_openai).complete(request(Message.user("go")), None)
    assert response.tool_calls[0].invalid is not None


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_a_deeply_nested_reply_body_is_a_retryable_malformed_reply(kind: str) -> None:
    server = FakeOpenAIServer() if kind == "openai" else FakeAnthropicServer()
    with server:
        server.enqueue(RawBody('{"id": "x", "choices": ' + DEEP + "}"))
        with pytest.raises(LLMError) as caught:
            await make(kind, server).complete(request(Message.user("go")), None)
    assert caught.value.retryable is True
    assert "nested too deeply" in caught.value.message
