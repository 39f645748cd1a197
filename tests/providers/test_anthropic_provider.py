"""AnthropicProvider through the official SDK against the fake Messages API."""

from __future__ import annotations

import email.utils
import time
from typing import Any

import pytest
from tests.fakes import (
    FakeAnthropicServer,
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
from journeyman.core.messages import Message, ToolCall, ToolResult, Usage
from journeyman.providers.anthropic import AnthropicProvider
from journeyman.providers.base import ModelRequest, Provider, ToolSpec

READ = ToolSpec(
    "read_file", "Read a file.", {"type": "object", "properties": {"path": {"type": "string"}}}
)
GREP = ToolSpec(
    "grep", "Search files.", {"type": "object", "properties": {"pattern": {"type": "string"}}}
)


def provider(server: FakeAnthropicServer, **kwargs: Any) -> AnthropicProvider:
    kwargs.setdefault("timeout", 5.0)
    return AnthropicProvider(
        "claude-test", api_key="sk-ant-test", base_url=server.base_url, **kwargs
    )


def request(*messages: Message, tools: tuple[ToolSpec, ...] = (READ, GREP)) -> ModelRequest:
    return ModelRequest(
        system="You are a careful coder.",
        messages=messages or (Message.user("Fix the bug."),),
        tools=tools,
        max_output_tokens=1000,
    )


def test_satisfies_provider_protocol(fake_anthropic: FakeAnthropicServer) -> None:
    p = provider(fake_anthropic)
    assert isinstance(p, Provider)
    assert p.name == "anthropic"
    assert p.model == "claude-test"
    caps = p.capabilities
    assert (caps.native_tools, caps.streaming, caps.prompt_caching) == (True, True, True)
    assert caps.context_window == 200_000


async def test_text_reply_with_usage_and_cache_tokens(fake_anthropic: FakeAnthropicServer) -> None:
    fake_anthropic.enqueue(
        reply(
            "Hello there.",
            input_tokens=20,
            output_tokens=5,
            cache_read_tokens=300,
            cache_write_tokens=40,
        )
    )
    response = await provider(fake_anthropic).complete(request())
    assert response.text == "Hello there."
    assert response.tool_calls == ()
    assert response.stop_reason == "end_turn"
    assert response.model == "claude-test"
    assert response.format_error is None
    assert response.usage == Usage(
        input_tokens=20, output_tokens=5, cache_read_tokens=300, cache_write_tokens=40
    )


async def test_request_shape_and_prompt_caching(fake_anthropic: FakeAnthropicServer) -> None:
    fake_anthropic.enqueue(reply("ok"))
    await provider(fake_anthropic).complete(request())
    sent = fake_anthropic.last_request
    assert sent.path == "/v1/messages"
    assert "sk-ant-test" in (
        sent.headers.get("x-api-key", "") + sent.headers.get("authorization", "")
    )
    body = sent.json
    assert body["model"] == "claude-test"
    assert body["max_tokens"] == 1000
    assert "stream" not in body or body["stream"] is False
    assert "temperature" not in body
    assert body["system"] == [
        {"type": "text", "text": "You are a careful coder.", "cache_control": {"type": "ephemeral"}}
    ]
    tools = body["tools"]
    assert [t["name"] for t in tools] == ["read_file", "grep"]
    assert tools[0]["input_schema"] == READ.parameters
    assert tools[0]["description"] == "Read a file."
    assert "cache_control" not in tools[0]
    assert tools[-1]["cache_control"] == {"type": "ephemeral"}
    last_block = {"type": "text", "text": "Fix the bug.", "cache_control": {"type": "ephemeral"}}
    assert body["messages"] == [{"role": "user", "content": [last_block]}]


async def test_no_system_and_no_tools_are_left_out(fake_anthropic: FakeAnthropicServer) -> None:
    fake_anthropic.enqueue(reply("ok"))
    req = ModelRequest(system="", messages=(Message.user("hi"),))
    await provider(fake_anthropic, max_output_tokens=77).complete(req)
    body = fake_anthropic.last_request.json
    assert "system" not in body
    assert "tools" not in body
    assert body["max_tokens"] == 77


async def test_tool_calls_non_streaming(fake_anthropic: FakeAnthropicServer) -> None:
    fake_anthropic.enqueue(
        reply(
            "Let me look.",
            [
                tool_call("read_file", {"path": "src/app.py"}, id="toolu_1"),
                tool_call("grep", {"pattern": "def main"}, id="toolu_2"),
            ],
        )
    )
    response = await provider(fake_anthropic).complete(request())
    assert response.text == "Let me look."
    assert response.stop_reason == "tool_use"
    assert response.tool_calls == (
        ToolCall("toolu_1", "read_file", {"path": "src/app.py"}),
        ToolCall("toolu_2", "grep", {"pattern": "def main"}),
    )


async def test_streaming_text_deltas_in_order_and_tool_calls(
    fake_anthropic: FakeAnthropicServer,
) -> None:
    text = "I will read the file and then search for the entry point."
    fake_anthropic.enqueue(
        reply(
            text,
            [tool_call("read_file", {"path": "src/app.py", "limit": 40}, id="toolu_9")],
            chunk_size=5,
            input_tokens=11,
            output_tokens=33,
            cache_read_tokens=200,
            cache_write_tokens=9,
        )
    )
    deltas: list[str] = []
    response = await provider(fake_anthropic).complete(request(), on_text=deltas.append)
    assert fake_anthropic.last_request.json["stream"] is True
    assert len(deltas) > 5
    assert "".join(deltas) == text == response.text
    assert deltas[0] == text[:5]
    assert response.tool_calls == (
        ToolCall("toolu_9", "read_file", {"path": "src/app.py", "limit": 40}),
    )
    assert response.stop_reason == "tool_use"
    assert response.usage == Usage(11, 33, 200, 9)


async def test_streaming_several_tool_calls_without_text(
    fake_anthropic: FakeAnthropicServer,
) -> None:
    fake_anthropic.enqueue(
        reply(
            tool_calls=[
                tool_call("grep", {"pattern": "x" * 30}, id="a"),
                tool_call("read_file", {}, id="b"),
            ],
            chunk_size=3,
        )
    )
    deltas: list[str] = []
    response = await provider(fake_anthropic).complete(request(), on_text=deltas.append)
    assert deltas == []
    assert response.text == ""
    assert response.tool_calls == (
        ToolCall("a", "grep", {"pattern": "x" * 30}),
        ToolCall("b", "read_file", {}),
    )


async def test_tool_results_round_trip(fake_anthropic: FakeAnthropicServer) -> None:
    fake_anthropic.enqueue(reply("Done."))
    calls = [
        ToolCall("toolu_1", "read_file", {"path": "a.py"}),
        ToolCall("toolu_2", "grep", {"pattern": "x"}),
    ]
    history = (
        Message.user("Fix the bug."),
        Message.assistant("Looking.", calls),
        Message.tool(ToolResult("toolu_1", "read_file", "print('a')")),
        Message.tool(ToolResult("toolu_2", "grep", "no match", is_error=True)),
        Message.user("Also run the tests."),
        Message.assistant("", [ToolCall("toolu_3", "read_file", {"path": "b.py"})]),
        Message.tool(ToolResult("toolu_3", "read_file", "")),
    )
    await provider(fake_anthropic).complete(request(*history))
    messages = fake_anthropic.last_request.json["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user"]
    assert messages[1]["content"] == [
        {"type": "text", "text": "Looking."},
        {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a.py"}},
        {"type": "tool_use", "id": "toolu_2", "name": "grep", "input": {"pattern": "x"}},
    ]
    assert messages[2]["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": "toolu_1",
            "content": "print('a')",
            "is_error": False,
        },
        {"type": "tool_result", "tool_use_id": "toolu_2", "content": "no match", "is_error": True},
        {"type": "text", "text": "Also run the tests."},
    ]
    assert messages[3]["content"] == [
        {"type": "tool_use", "id": "toolu_3", "name": "read_file", "input": {"path": "b.py"}}
    ]
    assert messages[4]["content"][0]["tool_use_id"] == "toolu_3"


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
    fake_anthropic: FakeAnthropicServer, status: int, retryable: bool
) -> None:
    fake_anthropic.enqueue(error(status))
    with pytest.raises(ProviderError) as caught:
        await provider(fake_anthropic).complete(request())
    err = caught.value
    assert err.provider == "anthropic"
    assert err.status_code == status
    assert err.retryable is retryable
    assert "context_overflow" not in err.details


@pytest.mark.parametrize("status", [401, 403])
async def test_auth_errors_name_the_env_var(
    fake_anthropic: FakeAnthropicServer, status: int
) -> None:
    fake_anthropic.enqueue(error(status))
    with pytest.raises(ProviderError) as caught:
        await provider(fake_anthropic).complete(request())
    assert "ANTHROPIC_API_KEY" in caught.value.message
    assert caught.value.retryable is False


async def test_rate_limit_carries_retry_after(fake_anthropic: FakeAnthropicServer) -> None:
    fake_anthropic.enqueue(error(429, retry_after=7))
    with pytest.raises(ProviderError) as caught:
        await provider(fake_anthropic).complete(request())
    assert caught.value.retry_after == 7.0
    assert caught.value.details["retry_after"] == 7.0
    assert "rate_limit_error" in caught.value.message


async def test_retry_after_ms_wins_and_http_dates_are_understood(
    fake_anthropic: FakeAnthropicServer,
) -> None:
    later = email.utils.formatdate(time.time() + 30, usegmt=True)
    fake_anthropic.enqueue(
        error(529, retry_after=9, retry_after_ms=1500), error(503, retry_after=later)
    )
    p = provider(fake_anthropic)
    with pytest.raises(ProviderError) as first:
        await p.complete(request())
    assert first.value.retry_after == 1.5
    with pytest.raises(ProviderError) as second:
        await p.complete(request())
    assert second.value.retry_after is not None
    assert 25 <= second.value.retry_after <= 31


async def test_context_overflow_is_not_retryable(fake_anthropic: FakeAnthropicServer) -> None:
    fake_anthropic.enqueue(error(400, "prompt is too long: 213000 tokens > 200000 maximum"))
    with pytest.raises(ProviderError) as caught:
        await provider(fake_anthropic).complete(request())
    assert caught.value.retryable is False
    assert caught.value.details == {"context_overflow": True}
    assert "context window" in caught.value.message


async def test_read_timeout_is_retryable_provider_error(
    fake_anthropic: FakeAnthropicServer,
) -> None:
    fake_anthropic.enqueue(hang(10))
    started = time.monotonic()
    with pytest.raises(ProviderError) as caught:
        await provider(fake_anthropic, timeout=0.5).complete(request())
    assert time.monotonic() - started < 5
    assert caught.value.retryable is True
    assert caught.value.status_code is None
    assert caught.value.details.get("timeout") is True


@pytest.mark.parametrize("reset", [True, False])
async def test_connection_dropped_is_retryable(
    fake_anthropic: FakeAnthropicServer, reset: bool
) -> None:
    fake_anthropic.enqueue(disconnect(reset=reset))
    with pytest.raises(ProviderError) as caught:
        await provider(fake_anthropic).complete(request())
    assert caught.value.retryable is True
    assert caught.value.status_code is None
    assert fake_anthropic.base_url in caught.value.message


async def test_connection_refused_on_this_machine_is_final() -> None:
    """A local server that is not running does not start while we retry."""
    with FakeAnthropicServer() as server:
        url, port = server.base_url, server.port
    p = AnthropicProvider("claude-test", api_key="k", base_url=url, timeout=2)
    with pytest.raises(ProviderError) as caught:
        await p.complete(request())
    assert caught.value.retryable is False
    assert f"nothing is listening on 127.0.0.1:{port}" in caught.value.message


async def test_malformed_json_body_is_retryable_llm_error(
    fake_anthropic: FakeAnthropicServer,
) -> None:
    fake_anthropic.enqueue(malformed_json())
    with pytest.raises(LLMError) as caught:
        await provider(fake_anthropic).complete(request())
    assert not isinstance(caught.value, ProviderError)
    assert caught.value.retryable is True


async def test_empty_reply_is_retryable_llm_error(fake_anthropic: FakeAnthropicServer) -> None:
    fake_anthropic.enqueue(reply(""), reply("", stop_reason="max_tokens"))
    p = provider(fake_anthropic)
    with pytest.raises(LLMError) as caught:
        await p.complete(request())
    assert caught.value.retryable is True
    with pytest.raises(LLMError, match="output token limit"):
        await p.complete(request(), on_text=lambda _: None)


@pytest.mark.parametrize("clean_end", [False, True])
async def test_stream_cut_mid_tool_arguments(
    fake_anthropic: FakeAnthropicServer, clean_end: bool
) -> None:
    long_args = {"path": "src/" + "deep/" * 10 + "app.py"}
    fake_anthropic.enqueue(
        cut_stream(reply("Reading.", [("read_file", long_args)]), clean_end=clean_end)
    )
    deltas: list[str] = []
    with pytest.raises(LLMError) as caught:
        await provider(fake_anthropic).complete(request(), on_text=deltas.append)
    assert caught.value.retryable is True
    assert caught.value.details.get("stream_interrupted") is True
    assert "".join(deltas) == "Reading."


async def test_stream_cut_before_any_content(fake_anthropic: FakeAnthropicServer) -> None:
    fake_anthropic.enqueue(cut_stream(reply("Hello"), after_events=1))
    with pytest.raises(LLMError):
        await provider(fake_anthropic).complete(request(), on_text=lambda _: None)


async def test_overloaded_error_inside_stream(fake_anthropic: FakeAnthropicServer) -> None:
    fake_anthropic.enqueue(MidStreamError(reply("partial answer")))
    with pytest.raises(ProviderError) as caught:
        await provider(fake_anthropic).complete(request(), on_text=lambda _: None)
    assert caught.value.status_code == 529
    assert caught.value.retryable is True


async def test_status_error_before_stream_starts(fake_anthropic: FakeAnthropicServer) -> None:
    fake_anthropic.enqueue(error(429, retry_after=3))
    with pytest.raises(ProviderError) as caught:
        await provider(fake_anthropic).complete(request(), on_text=lambda _: None)
    assert caught.value.status_code == 429
    assert caught.value.retry_after == 3.0


async def test_invalid_streamed_tool_json_is_retryable(fake_anthropic: FakeAnthropicServer) -> None:
    fake_anthropic.enqueue(reply(tool_calls=[("read_file", '{"path": "a.py",')]))
    with pytest.raises(LLMError) as caught:
        await provider(fake_anthropic).complete(request(), on_text=lambda _: None)
    assert caught.value.retryable is True
    assert "read_file" in caught.value.message


async def test_tool_json_cut_by_output_limit_becomes_format_error(
    fake_anthropic: FakeAnthropicServer,
) -> None:
    fake_anthropic.enqueue(
        reply(
            "Writing.", [("write_file", '{"path": "a.py", "content": "x')], stop_reason="max_tokens"
        )
    )
    response = await provider(fake_anthropic).complete(request(), on_text=lambda _: None)
    [call] = response.tool_calls
    assert call.name == "write_file" and call.arguments == {}
    assert call.invalid is not None and "output token limit" in call.invalid
    assert response.format_error is not None
    assert "write_file" in response.format_error
    assert response.stop_reason == "max_tokens"


async def test_non_object_tool_input_becomes_format_error(
    fake_anthropic: FakeAnthropicServer,
) -> None:
    fake_anthropic.enqueue(
        reply(
            "Hm.",
            [tool_call("read_file", "a.py", id="t1"), tool_call("grep", {"pattern": "x"}, id="t2")],
        )
    )
    response = await provider(fake_anthropic).complete(request())
    bad, good = response.tool_calls
    assert good == ToolCall("t2", "grep", {"pattern": "x"})
    assert (bad.id, bad.arguments) == ("t1", {})
    assert bad.invalid is not None and "JSON object" in bad.invalid
    assert response.format_error is not None
    assert "read_file" in response.format_error


@pytest.mark.parametrize("empty_config_dir", [False, True])
async def test_missing_api_key_is_a_configuration_error(
    fake_anthropic: FakeAnthropicServer,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Any,
    empty_config_dir: bool,
) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    if empty_config_dir:
        monkeypatch.setenv("ANTHROPIC_CONFIG_DIR", str(tmp_path))
    else:
        monkeypatch.delenv("ANTHROPIC_CONFIG_DIR", raising=False)
    with pytest.raises(ConfigurationError, match="ANTHROPIC_API_KEY"):
        p = AnthropicProvider("claude-test", base_url=fake_anthropic.base_url, timeout=2)
        await p.complete(request())
    assert fake_anthropic.requests == []


@pytest.mark.parametrize(
    "body", [RawBody("<html>502 Bad Gateway</html>", content_type="text/html"), RawBody("{}")]
)
async def test_body_that_is_not_a_message(
    fake_anthropic: FakeAnthropicServer, body: RawBody
) -> None:
    fake_anthropic.enqueue(body)
    with pytest.raises(LLMError) as caught:
        await provider(fake_anthropic).complete(request())
    assert caught.value.retryable is True
