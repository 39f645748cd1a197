"""OpenAIProvider through the official SDK against the fake Chat Completions API."""

from __future__ import annotations

import email.utils
import json
import time
from typing import Any

import pytest
from tests.fakes import (
    FakeOpenAIServer,
    MidStreamError,
    RawBody,
    cut_stream,
    disconnect,
    error,
    hang,
    malformed_json,
    reply,
    tool_call,
)

from journeyman.core.errors import ConfigurationError, LLMError, ProviderError
from journeyman.core.messages import Message, Role, ToolCall, ToolResult, Usage
from journeyman.providers.base import ModelRequest, Provider, ToolSpec
from journeyman.providers.openai import OpenAIProvider

READ = ToolSpec(
    "read_file", "Read a file.", {"type": "object", "properties": {"path": {"type": "string"}}}
)
GREP = ToolSpec(
    "grep", "Search files.", {"type": "object", "properties": {"pattern": {"type": "string"}}}
)


def provider(server: FakeOpenAIServer, **kwargs: Any) -> OpenAIProvider:
    kwargs.setdefault("timeout", 5.0)
    return OpenAIProvider("gpt-test", api_key="sk-test", base_url=server.base_url, **kwargs)


def request(
    *messages: Message, tools: tuple[ToolSpec, ...] = (READ, GREP), **kwargs: Any
) -> ModelRequest:
    return ModelRequest(
        system="You are a careful coder.",
        messages=messages or (Message.user("Fix the bug."),),
        tools=tools,
        max_output_tokens=1000,
        **kwargs,
    )


def test_satisfies_provider_protocol(fake_openai: FakeOpenAIServer) -> None:
    native = provider(fake_openai)
    assert isinstance(native, Provider)
    assert native.name == "openai"
    assert native.capabilities.native_tools is True
    assert native.capabilities.streaming is True
    assert native.capabilities.context_window == 128_000
    text = provider(fake_openai, tool_format="text", context_window=32_000)
    assert text.capabilities.native_tools is False
    assert text.capabilities.context_window == 32_000


async def test_text_reply_with_cached_token_usage(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.enqueue(
        reply(
            "Hello.", input_tokens=50, output_tokens=9, cache_read_tokens=1024, cache_write_tokens=4
        )
    )
    response = await provider(fake_openai).complete(request())
    assert response.text == "Hello."
    assert response.tool_calls == ()
    assert response.stop_reason == "stop"
    assert response.model == "gpt-test"
    assert response.usage == Usage(
        input_tokens=50, output_tokens=9, cache_read_tokens=1024, cache_write_tokens=4
    )


async def test_request_shape(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.enqueue(reply("ok"))
    await provider(fake_openai).complete(request(temperature=0.2))
    sent = fake_openai.last_request
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == "Bearer sk-test"
    body = sent.json
    assert body["model"] == "gpt-test"
    assert body["temperature"] == 0.2
    # a compatible server (not api.openai.com) gets the widely supported field
    assert body["max_tokens"] == 1000
    assert "max_completion_tokens" not in body
    assert "stream" not in body or body["stream"] is False
    assert body["messages"] == [
        {"role": "system", "content": "You are a careful coder."},
        {"role": "user", "content": "Fix the bug."},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "read_file",
                "description": "Read a file.",
                "parameters": READ.parameters,
            },
        },
        {
            "type": "function",
            "function": {
                "name": "grep",
                "description": "Search files.",
                "parameters": GREP.parameters,
            },
        },
    ]


async def test_tool_calls_non_streaming(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.enqueue(
        reply(
            "",
            [
                tool_call("read_file", {"path": "src/app.py"}, id="call_1"),
                tool_call("grep", {"pattern": "TODO"}, id="call_2"),
            ],
        )
    )
    response = await provider(fake_openai).complete(request())
    assert response.text == ""
    assert response.stop_reason == "tool_calls"
    assert response.tool_calls == (
        ToolCall("call_1", "read_file", {"path": "src/app.py"}),
        ToolCall("call_2", "grep", {"pattern": "TODO"}),
    )
    assert response.format_error is None


async def test_streaming_deltas_tool_calls_by_index_and_usage(
    fake_openai: FakeOpenAIServer,
) -> None:
    text = "Reading two files to compare them."
    fake_openai.enqueue(
        reply(
            text,
            [
                tool_call("read_file", {"path": "a.py"}, id="call_a"),
                tool_call("read_file", {"path": "b/" * 12 + "b.py"}, id="call_b"),
            ],
            chunk_size=3,
            input_tokens=70,
            output_tokens=21,
            cache_read_tokens=512,
        )
    )
    deltas: list[str] = []
    response = await provider(fake_openai).complete(request(), on_text=deltas.append)
    body = fake_openai.last_request.json
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert len(deltas) == len(range(0, len(text), 3))
    assert "".join(deltas) == text == response.text
    assert response.tool_calls == (
        ToolCall("call_a", "read_file", {"path": "a.py"}),
        ToolCall("call_b", "read_file", {"path": "b/" * 12 + "b.py"}),
    )
    assert response.stop_reason == "tool_calls"
    assert response.usage == Usage(input_tokens=70, output_tokens=21, cache_read_tokens=512)


async def test_tool_results_round_trip(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.enqueue(reply("Done."))
    calls = [
        ToolCall("call_1", "read_file", {"path": "a.py"}),
        ToolCall("call_2", "grep", {"pattern": "x"}),
    ]
    history = (
        Message.user("Fix the bug."),
        Message.assistant("", calls),
        Message.tool(ToolResult("call_1", "read_file", "print('a')")),
        Message.tool(ToolResult("call_2", "grep", "grep: bad pattern", is_error=True)),
        Message.assistant("Fixed it."),
        Message(Role.SYSTEM, "Budget: 80% used."),
        Message.user("Thanks"),
    )
    await provider(fake_openai).complete(request(*history))
    messages = fake_openai.last_request.json["messages"]
    assert messages[2] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "read_file", "arguments": '{"path": "a.py"}'},
            },
            {
                "id": "call_2",
                "type": "function",
                "function": {"name": "grep", "arguments": '{"pattern": "x"}'},
            },
        ],
    }
    assert messages[3] == {"role": "tool", "tool_call_id": "call_1", "content": "print('a')"}
    assert messages[4]["role"] == "tool"
    assert messages[4]["tool_call_id"] == "call_2"
    assert "grep: bad pattern" in messages[4]["content"]
    assert "error" in messages[4]["content"].lower()
    assert messages[5] == {"role": "assistant", "content": "Fixed it."}
    assert messages[6] == {"role": "system", "content": "Budget: 80% used."}
    assert messages[7] == {"role": "user", "content": "Thanks"}


@pytest.mark.parametrize("streaming", [False, True])
async def test_malformed_tool_arguments_become_format_error(
    fake_openai: FakeOpenAIServer, streaming: bool
) -> None:
    fake_openai.enqueue(
        reply(
            "Trying.",
            [
                tool_call("read_file", '{"path": "a.py"', id="bad"),
                tool_call("grep", '["not", "an", "object"]', id="list"),
                tool_call("grep", {"pattern": "ok"}, id="good"),
            ],
        )
    )
    on_text = (lambda _: None) if streaming else None
    response = await provider(fake_openai).complete(request(), on_text=on_text)
    assert response.text == "Trying."
    assert [c.id for c in response.tool_calls] == ["bad", "list", "good"]  # every id kept
    bad, listed, good = response.tool_calls
    assert good == ToolCall("good", "grep", {"pattern": "ok"})
    assert bad.invalid is not None and "not valid JSON" in bad.invalid
    assert listed.invalid is not None and "JSON object" in listed.invalid
    assert bad.arguments == listed.arguments == {}
    assert response.format_error is not None
    assert "read_file" in response.format_error
    assert "not valid JSON" in response.format_error
    assert "JSON object" in response.format_error


async def test_empty_arguments_mean_no_arguments(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.enqueue(reply(tool_calls=[tool_call("list_files", "", id="c1")]))
    response = await provider(fake_openai).complete(request())
    assert response.tool_calls == (ToolCall("c1", "list_files", {}),)


# --------------------------------------------------------------------------- text tool format


async def test_text_tool_format_round_trip(fake_openai: FakeOpenAIServer) -> None:
    block = '```json\n{"tool": "read_file", "arguments": {"path": "src/app.py"}}\n```'
    fake_openai.enqueue(
        reply(f"Let me read it.\n\n{block}"),
        reply('```json\n{"tool": "grep", "arguments": {"pattern": "main"}}\n```'),
    )
    p = provider(fake_openai, tool_format="text")
    first = await p.complete(request())
    body = fake_openai.last_request.json
    assert "tools" not in body
    system = body["messages"][0]
    assert system["role"] == "system"
    assert system["content"].startswith("You are a careful coder.")
    assert "read_file" in system["content"]
    assert "grep" in system["content"]
    assert '"tool"' in system["content"]
    assert first.text == "Let me read it."
    assert first.tool_calls == (ToolCall("text-call-1", "read_file", {"path": "src/app.py"}),)
    assert first.format_error is None

    history = (
        Message.user("Fix the bug."),
        Message.assistant(first.text, first.tool_calls),
        Message.tool(ToolResult("text-call-1", "read_file", "def main(): ...")),
        Message.user("Keep going."),
    )
    second = await p.complete(request(*history), on_text=lambda _: None)
    assert second.tool_calls == (ToolCall("text-call-2", "grep", {"pattern": "main"}),)
    messages = fake_openai.last_request.json["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[2]["content"].startswith("Let me read it.")
    assert '"tool": "read_file"' in messages[2]["content"]
    assert "def main(): ..." in messages[3]["content"]
    assert messages[3]["content"].endswith("Keep going.")
    assert "tool_calls" not in messages[2]


async def test_text_tool_format_reports_bad_blocks(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.enqueue(reply('```json\n{"name": "read_file", "args": {}}\n```'))
    response = await provider(fake_openai, tool_format="text").complete(request())
    assert response.tool_calls == ()
    assert response.format_error is not None
    assert '"tool"' in response.format_error


# --------------------------------------------------------------------------- faults


@pytest.mark.parametrize(
    ("status", "retryable"),
    [
        (400, False),
        (401, False),
        (403, False),
        (404, False),
        (408, True),
        (409, True),
        (429, True),
        (500, True),
        (503, True),
        (529, True),
    ],
)
async def test_status_errors_map_to_provider_error(
    fake_openai: FakeOpenAIServer, status: int, retryable: bool
) -> None:
    fake_openai.enqueue(error(status))
    with pytest.raises(ProviderError) as caught:
        await provider(fake_openai).complete(request())
    assert caught.value.provider == "openai"
    assert caught.value.status_code == status
    assert caught.value.retryable is retryable


@pytest.mark.parametrize("status", [401, 403])
async def test_auth_errors_name_the_env_var(fake_openai: FakeOpenAIServer, status: int) -> None:
    fake_openai.enqueue(error(status))
    with pytest.raises(ProviderError, match="OPENAI_API_KEY") as caught:
        await provider(fake_openai).complete(request())
    assert caught.value.retryable is False


async def test_retry_after_headers(fake_openai: FakeOpenAIServer) -> None:
    later = email.utils.formatdate(time.time() + 60, usegmt=True)
    fake_openai.enqueue(
        error(429, retry_after=2), error(503, retry_after=later), error(429, retry_after_ms=250)
    )
    p = provider(fake_openai)
    waits = []
    for _ in range(3):
        with pytest.raises(ProviderError) as caught:
            await p.complete(request())
        waits.append(caught.value.retry_after)
    assert waits[0] == 2.0
    assert waits[1] is not None and 55 <= waits[1] <= 61
    assert waits[2] == 0.25


async def test_context_length_exceeded(fake_openai: FakeOpenAIServer) -> None:
    message = (
        "This model's maximum context length is 128000 tokens. "
        "However, your messages resulted in 130000 tokens."
    )
    fake_openai.enqueue(error(400, message, code="context_length_exceeded"))
    with pytest.raises(ProviderError) as caught:
        await provider(fake_openai).complete(request())
    assert caught.value.retryable is False
    assert caught.value.details == {"context_overflow": True}


async def test_read_timeout(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.enqueue(hang(10))
    with pytest.raises(ProviderError) as caught:
        await provider(fake_openai, timeout=0.5).complete(request())
    assert caught.value.retryable is True
    assert caught.value.status_code is None
    assert caught.value.details.get("timeout") is True


async def test_read_timeout_while_streaming(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.enqueue(hang(10))
    with pytest.raises(ProviderError) as caught:
        await provider(fake_openai, timeout=0.5).complete(request(), on_text=lambda _: None)
    assert caught.value.retryable is True


@pytest.mark.parametrize("reset", [True, False])
async def test_connection_dropped(fake_openai: FakeOpenAIServer, reset: bool) -> None:
    fake_openai.enqueue(disconnect(reset=reset))
    with pytest.raises(ProviderError) as caught:
        await provider(fake_openai).complete(request())
    assert caught.value.retryable is True
    assert caught.value.status_code is None


async def test_malformed_json_body(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.enqueue(malformed_json())
    with pytest.raises(LLMError) as caught:
        await provider(fake_openai).complete(request())
    assert not isinstance(caught.value, ProviderError)
    assert caught.value.retryable is True


async def test_no_choices(fake_openai: FakeOpenAIServer) -> None:
    body = {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": "gpt-test",
        "choices": [],
    }
    fake_openai.enqueue(RawBody(json.dumps(body)))
    with pytest.raises(LLMError, match="no choices") as caught:
        await provider(fake_openai).complete(request())
    assert caught.value.retryable is True


@pytest.mark.parametrize("streaming", [False, True])
async def test_empty_reply(fake_openai: FakeOpenAIServer, streaming: bool) -> None:
    fake_openai.enqueue(reply(""))
    with pytest.raises(LLMError) as caught:
        await provider(fake_openai).complete(
            request(), on_text=(lambda _: None) if streaming else None
        )
    assert caught.value.retryable is True
    assert caught.value.details.get("empty") is True


@pytest.mark.parametrize("clean_end", [False, True])
async def test_stream_cut_mid_tool_arguments(
    fake_openai: FakeOpenAIServer, clean_end: bool
) -> None:
    fake_openai.enqueue(
        cut_stream(reply("Reading.", [("read_file", {"path": "x" * 40})]), clean_end=clean_end)
    )
    deltas: list[str] = []
    with pytest.raises(LLMError) as caught:
        await provider(fake_openai).complete(request(), on_text=deltas.append)
    assert caught.value.retryable is True
    assert caught.value.details.get("stream_interrupted") is True
    assert "".join(deltas) == "Reading."


async def test_non_streaming_body_cut_off(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.enqueue(cut_stream(reply("Hello there, this is long enough to cut.")))
    with pytest.raises((LLMError, ProviderError)) as caught:
        await provider(fake_openai).complete(request())
    assert caught.value.retryable is True


async def test_error_inside_stream(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.enqueue(
        MidStreamError(reply("partial"), error_type="server_error", message="upstream failed")
    )
    with pytest.raises(ProviderError, match="upstream failed") as caught:
        await provider(fake_openai).complete(request(), on_text=lambda _: None)
    assert caught.value.retryable is True


# --------------------------------------------------------------------------- configuration


def test_missing_key_for_openai_is_a_configuration_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        OpenAIProvider("gpt-test")


async def test_local_server_needs_no_key(
    fake_openai: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.base_url)
    fake_openai.enqueue(reply("hi"))
    response = await OpenAIProvider("local-model", timeout=5).complete(request())
    assert response.text == "hi"


def test_official_api_uses_max_completion_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    # checked on the built parameters: requests to api.openai.com never leave the test
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    p = OpenAIProvider("gpt-test", api_key="sk-test")
    params = p._params(request())
    assert params["max_completion_tokens"] == 1000
    assert params["max_tokens"].__class__.__name__ == "Omit"


@pytest.mark.parametrize(
    "body", [RawBody("<html>502 Bad Gateway</html>", content_type="text/html"), RawBody("{}")]
)
async def test_body_that_is_not_a_completion(fake_openai: FakeOpenAIServer, body: RawBody) -> None:
    fake_openai.enqueue(body)
    with pytest.raises(LLMError) as caught:
        await provider(fake_openai).complete(request())
    assert caught.value.retryable is True
