"""A fake Anthropic Messages API: `POST /v1/messages`, JSON and SSE streaming."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, ClassVar

from .anthropic_cache import FakePromptCache
from .script import HTTPFault, MidStreamError, RawBody, RecordedRequest, Reply, ScriptItem
from .server import FakeServer, SSEEvent, sse

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}

_MESSAGES = {
    400: "invalid request",
    401: "invalid x-api-key",
    403: "your API key does not have permission to use the specified resource",
    404: "model not found",
    429: "rate limit exceeded: too many requests",
    500: "internal server error",
    529: "Overloaded",
}

_STATUS_OF_TYPE = {"overloaded_error": 529, "rate_limit_error": 429, "api_error": 500}


def _chunks(text: str, size: int) -> list[str]:
    size = max(1, size)
    return [text[i : i + size] for i in range(0, len(text), size)]


class FakeAnthropicServer(FakeServer):
    """Speaks the Messages API. Pass `base_url` to `anthropic.AsyncAnthropic`."""

    provider: ClassVar[str] = "anthropic"
    api_path: ClassVar[str] = "/v1/messages"
    request_id_header: ClassVar[str] = "request-id"

    def __init__(
        self,
        script: Iterable[ScriptItem] = (),
        *,
        prompt_cache: FakePromptCache | None = None,
        **options: Any,
    ) -> None:
        """`prompt_cache`: report input and cache tokens as Anthropic's prompt cache would
        for each request's body (the reply's own counts are used for output tokens only)."""
        super().__init__(script, **options)
        self.prompt_cache = prompt_cache

    def _usage(self, reply: Reply, request: RecordedRequest | None = None) -> dict[str, int]:
        """The reply's usage (callers leave it out when `reply.usage` is None)."""
        assert reply.usage is not None
        if self.prompt_cache is not None and request is not None:
            cached = self.prompt_cache.account(request.body)
            return {
                "input_tokens": cached.input_tokens,
                "output_tokens": reply.usage.output_tokens,
                "cache_creation_input_tokens": cached.cache_write_tokens,
                "cache_read_input_tokens": cached.cache_read_tokens,
            }
        return {
            "input_tokens": reply.usage.input_tokens,
            "output_tokens": reply.usage.output_tokens,
            "cache_creation_input_tokens": reply.usage.cache_write_tokens,
            "cache_read_input_tokens": reply.usage.cache_read_tokens,
        }

    def _stop_reason(self, reply: Reply) -> str:
        if reply.stop_reason is not None:
            return reply.stop_reason
        return "tool_use" if reply.tool_calls else "end_turn"

    def _model(self, reply: Reply, request: RecordedRequest) -> str:
        requested = request.body.get("model") if isinstance(request.body, dict) else None
        return reply.model or str(requested or "claude-fake")

    def _tool_ids(self, reply: Reply) -> list[str]:
        return [call.id or self.next_id("toolu_fake_") for call in reply.tool_calls]

    def render_json(self, reply: Reply, request: RecordedRequest) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        if reply.text:
            content.append({"type": "text", "text": reply.text})
        for call, call_id in zip(reply.tool_calls, self._tool_ids(reply), strict=True):
            content.append(
                {"type": "tool_use", "id": call_id, "name": call.name, "input": call.arguments}
            )
        return {
            "id": self.next_id("msg_fake_"),
            "type": "message",
            "role": "assistant",
            "model": self._model(reply, request),
            "content": content,
            "stop_reason": self._stop_reason(reply),
            "stop_sequence": None,
            **({} if reply.usage is None else {"usage": self._usage(reply, request)}),
        }

    def render_events(self, reply: Reply, request: RecordedRequest) -> list[SSEEvent]:
        start_usage = None
        if reply.usage is not None:
            start_usage = {**self._usage(reply, request), "output_tokens": 1}
        message = {
            "id": self.next_id("msg_fake_"),
            "type": "message",
            "role": "assistant",
            "model": self._model(reply, request),
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            **({} if start_usage is None else {"usage": start_usage}),
        }
        events = [
            sse({"type": "message_start", "message": message}, "message_start"),
            sse({"type": "ping"}, "ping"),
        ]
        index = 0
        if reply.text:
            block = {"type": "text", "text": ""}
            events.append(
                sse(
                    {"type": "content_block_start", "index": index, "content_block": block},
                    "content_block_start",
                )
            )
            for piece in _chunks(reply.text, reply.chunk_size):
                delta = {"type": "text_delta", "text": piece}
                events.append(
                    sse(
                        {"type": "content_block_delta", "index": index, "delta": delta},
                        "content_block_delta",
                        "text",
                    )
                )
            events.append(sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
            index += 1
        for call, call_id in zip(reply.tool_calls, self._tool_ids(reply), strict=True):
            block = {"type": "tool_use", "id": call_id, "name": call.name, "input": {}}
            events.append(
                sse(
                    {"type": "content_block_start", "index": index, "content_block": block},
                    "content_block_start",
                )
            )
            pieces = ["", *_chunks(call.arguments_json(), reply.chunk_size)]
            for piece in pieces:
                delta = {"type": "input_json_delta", "partial_json": piece}
                kind = "arguments" if piece else "other"
                events.append(
                    sse(
                        {"type": "content_block_delta", "index": index, "delta": delta},
                        "content_block_delta",
                        kind,
                    )
                )
            events.append(sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
            index += 1
        delta = {"stop_reason": self._stop_reason(reply), "stop_sequence": None}
        events.append(
            sse(
                {
                    "type": "message_delta",
                    "delta": delta,
                    **(
                        {}
                        if reply.usage is None
                        else {"usage": {"output_tokens": reply.usage.output_tokens}}
                    ),
                },
                "message_delta",
            )
        )
        events.append(sse({"type": "message_stop"}, "message_stop"))
        return events

    def conversation_problem(self, body: Any) -> str | None:
        """Each tool_use needs a tool_result in the next user turn, and each tool_result a
        tool_use in the turn before it."""
        messages = body.get("messages", []) if isinstance(body, dict) else []
        called: set[str] = set()
        for index, message in enumerate(messages):
            content = message.get("content")
            blocks = content if isinstance(content, list) else []
            if message.get("role") == "assistant":
                called = {b.get("id") for b in blocks if b.get("type") == "tool_use"}
                if called and index == len(messages) - 1:
                    return f"messages.{index}: tool_use ids were found without tool_result blocks"
                continue
            answered = {b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"}
            if answered - called:
                return (
                    f"messages.{index}.content: unexpected tool_use_id found in tool_result "
                    f"blocks: {', '.join(sorted(answered - called))}. Each tool_result block "
                    "must have a corresponding tool_use block in the previous message."
                )
            if called - answered:
                return (
                    f"messages.{index}: tool_use ids were found without tool_result blocks "
                    f"immediately after: {', '.join(sorted(called - answered))}. Each tool_use "
                    "block must have a corresponding tool_result block in the next message."
                )
            called = set()
        return None

    def error_body(self, fault: HTTPFault) -> dict[str, Any]:
        error_type = fault.error_type or _ERROR_TYPES.get(
            fault.status, "api_error" if fault.status >= 500 else "invalid_request_error"
        )
        message = fault.message or _MESSAGES.get(fault.status, f"HTTP {fault.status}")
        return {
            "type": "error",
            "error": {"type": error_type, "message": message},
            "request_id": self.next_id("req_fake_"),
        }

    def error_event(self, fault: MidStreamError) -> SSEEvent:
        body = {"type": "error", "error": {"type": fault.error_type, "message": fault.message}}
        return sse(body, "error")

    def error_status(self, error_type: str) -> int:
        return _STATUS_OF_TYPE.get(error_type, 500)


def raw_message(
    content: list[Any], usage: dict[str, Any] | None = None, stop_reason: str = "tool_use"
) -> RawBody:
    """A Messages API reply whose content blocks and usage are given as they go on the wire,
    unchecked: blocks of unknown types, tool_use inputs that are not objects, negative
    counts."""
    return RawBody(
        json.dumps(
            {
                "id": "msg_raw",
                "type": "message",
                "role": "assistant",
                "model": "claude-fake",
                "content": content,
                "stop_reason": stop_reason,
                "stop_sequence": None,
                "usage": usage or {"input_tokens": 10, "output_tokens": 5},
            }
        )
    )


def raw_stream(
    block_events: list[dict[str, Any]],
    usage: dict[str, Any] | None = None,
    final_usage: dict[str, Any] | None = None,
    stop_reason: str = "tool_use",
) -> RawBody:
    """A streamed reply around `block_events` (content_block_start/delta/stop dicts, sent as
    given), with the message's opening and closing events."""
    message = {
        "id": "msg_raw",
        "type": "message",
        "role": "assistant",
        "model": "claude-fake",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage or {"input_tokens": 10, "output_tokens": 1},
    }
    closing = {
        "type": "message_delta",
        "delta": {"stop_reason": stop_reason, "stop_sequence": None},
        "usage": final_usage or {"output_tokens": 5},
    }
    events = [{"type": "message_start", "message": message}, *block_events, closing]
    events.append({"type": "message_stop"})
    body = b"".join(sse(event, event["type"]).data for event in events)
    return RawBody(body, content_type="text/event-stream")
