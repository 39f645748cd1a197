"""A fake OpenAI Chat Completions API: `POST /v1/chat/completions`, JSON and SSE streaming."""

from __future__ import annotations

import time
from typing import Any, ClassVar

from .script import HTTPFault, MidStreamError, RecordedRequest, Reply
from .server import FakeServer, SSEEvent, sse

_ERRORS: dict[int, tuple[str, str | None, str]] = {
    400: ("invalid_request_error", None, "invalid request"),
    401: ("invalid_request_error", "invalid_api_key", "Incorrect API key provided."),
    403: ("invalid_request_error", "unsupported_country_region_territory", "Access denied."),
    404: ("invalid_request_error", "model_not_found", "The model does not exist."),
    429: ("requests", "rate_limit_exceeded", "Rate limit reached for requests."),
    500: ("server_error", None, "The server had an error while processing your request."),
    503: ("server_error", None, "The engine is currently overloaded, please try again later."),
}


def _chunks(text: str, size: int) -> list[str]:
    size = max(1, size)
    return [text[i : i + size] for i in range(0, len(text), size)]


class FakeOpenAIServer(FakeServer):
    """Speaks Chat Completions. Pass `base_url` (which ends in `/v1`) to `openai.AsyncOpenAI`."""

    provider: ClassVar[str] = "openai"
    api_path: ClassVar[str] = "/v1/chat/completions"
    request_id_header: ClassVar[str] = "x-request-id"

    models: tuple[str, ...] | None = ("gpt-4.1-mini",)
    """What `GET /v1/models` lists (set on the instance before a run; None answers 404, as a
    service without a model list does). Model-list requests are counted in
    `model_list_requests`, not recorded in `requests`."""
    model_list_requests: int = 0

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def listing(self, request: RecordedRequest) -> dict[str, Any] | None:
        if self.models is None or request.path.split("?")[0] != "/v1/models":
            return None
        with self._lock:
            self.model_list_requests += 1
        data = [
            {"id": model, "object": "model", "created": 1_700_000_000, "owned_by": "fake"}
            for model in self.models
        ]
        return {"object": "list", "data": data}

    def _usage(self, reply: Reply) -> dict[str, Any] | None:
        usage = reply.usage
        if usage is None:
            return None
        prompt = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
        details: dict[str, int] = {"cached_tokens": usage.cache_read_tokens}
        if usage.cache_write_tokens:
            details["cache_write_tokens"] = usage.cache_write_tokens
        return {
            "prompt_tokens": prompt,
            "completion_tokens": usage.output_tokens,
            "total_tokens": prompt + usage.output_tokens,
            "prompt_tokens_details": details,
        }

    def _finish_reason(self, reply: Reply) -> str:
        if reply.stop_reason is not None:
            return reply.stop_reason
        return "tool_calls" if reply.tool_calls else "stop"

    def _model(self, reply: Reply, request: RecordedRequest) -> str:
        requested = request.body.get("model") if isinstance(request.body, dict) else None
        return reply.model or str(requested or "gpt-fake")

    def _tool_ids(self, reply: Reply) -> list[str]:
        return [call.id or self.next_id("call_fake_") for call in reply.tool_calls]

    def render_json(self, reply: Reply, request: RecordedRequest) -> dict[str, Any]:
        message: dict[str, Any] = {
            "role": "assistant",
            "content": reply.text or None,
            "refusal": None,
        }
        if reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments_json()},
                }
                for call, call_id in zip(reply.tool_calls, self._tool_ids(reply), strict=True)
            ]
        return {
            "id": self.next_id("chatcmpl-fake-"),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self._model(reply, request),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": self._finish_reason(reply),
                }
            ],
            **({} if reply.usage is None else {"usage": self._usage(reply)}),
        }

    def render_events(self, reply: Reply, request: RecordedRequest) -> list[SSEEvent]:
        completion_id = self.next_id("chatcmpl-fake-")
        created = int(time.time())
        model = self._model(reply, request)

        def chunk(
            delta: dict[str, Any], finish: str | None = None, kind: Any = "other"
        ) -> SSEEvent:
            body = {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [
                    {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
                ],
            }
            return sse(body, kind=kind)

        events = [chunk({"role": "assistant", "content": ""})]
        for piece in _chunks(reply.text, reply.chunk_size):
            events.append(chunk({"content": piece}, kind="text"))
        for index, (call, call_id) in enumerate(
            zip(reply.tool_calls, self._tool_ids(reply), strict=True)
        ):
            head = {
                "index": index,
                "id": call_id,
                "type": "function",
                "function": {"name": call.name, "arguments": ""},
            }
            events.append(chunk({"tool_calls": [head]}))
            for piece in _chunks(call.arguments_json(), reply.chunk_size):
                part = {"index": index, "function": {"arguments": piece}}
                events.append(chunk({"tool_calls": [part]}, kind="arguments"))
        events.append(chunk({}, self._finish_reason(reply)))
        options = request.body.get("stream_options") if isinstance(request.body, dict) else None
        if isinstance(options, dict) and options.get("include_usage") and reply.usage:
            usage_chunk = {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [],
                "usage": self._usage(reply),
            }
            events.append(sse(usage_chunk))
        return events

    def conversation_problem(self, body: Any) -> str | None:
        """The tool messages after an assistant message must answer each of its calls."""
        messages = body.get("messages", []) if isinstance(body, dict) else []
        expected: set[str] = set()
        for index, message in enumerate(messages):
            role = message.get("role")
            if role == "tool":
                call_id = message.get("tool_call_id")
                if call_id not in expected:
                    return (
                        f"Invalid parameter: messages[{index}] with role 'tool' must be a "
                        "response to a preceding message with 'tool_calls'."
                    )
                expected.discard(call_id)
                continue
            if expected:
                missing = ", ".join(sorted(expected))
                return (
                    "An assistant message with 'tool_calls' must be followed by tool messages "
                    f"responding to each 'tool_call_id'. The following tool_call_ids did not "
                    f"have response messages: {missing}"
                )
            if role == "assistant":
                expected = {call.get("id") for call in message.get("tool_calls") or ()}
        return None

    def stream_terminator(self) -> list[SSEEvent]:
        return [sse("[DONE]")]

    def error_body(self, fault: HTTPFault) -> dict[str, Any]:
        default_type = "server_error" if fault.status >= 500 else "invalid_request_error"
        error_type, code, message = _ERRORS.get(
            fault.status, (default_type, None, f"HTTP {fault.status}")
        )
        return {
            "error": {
                "message": fault.message or message,
                "type": fault.error_type or error_type,
                "param": None,
                "code": fault.code if fault.code is not None else code,
            }
        }

    def error_event(self, fault: MidStreamError) -> SSEEvent:
        return sse(
            {
                "error": {
                    "message": fault.message,
                    "type": fault.error_type,
                    "param": None,
                    "code": None,
                }
            }
        )
