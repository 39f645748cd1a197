"""Adapter for the official `anthropic` SDK: the Messages API with prompt caching and streaming.

The system prompt and the tool list are the stable prefix of every request, so both carry a
`cache_control` breakpoint; later calls of a run then read that prefix from the prompt cache.
When the request marks a prefix of the system prompt that other runs share (a swarm's workers),
a third breakpoint after it lets those runs read it from one another's cache entries. The last
block of the conversation carries the fourth, so each call reads the history the previous call
of the run sent.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

import anthropic
import httpx2
from anthropic import AsyncAnthropic, AsyncStream, omit
from anthropic.types import (
    InputJSONDelta,
    MessageDeltaUsage,
    MessageParam,
    RawContentBlockDeltaEvent,
    RawContentBlockStartEvent,
    RawMessageDeltaEvent,
    RawMessageStartEvent,
    RawMessageStopEvent,
    RawMessageStreamEvent,
    TextBlock,
    TextBlockParam,
    TextDelta,
    ToolParam,
    ToolResultBlockParam,
    ToolUseBlock,
    ToolUseBlockParam,
)
from anthropic.types import Message as AnthropicMessage
from anthropic.types import Usage as AnthropicUsage

from journeyman.core.display import printable
from journeyman.core.errors import AgentError, ConfigurationError, LLMError
from journeyman.core.messages import Message, Role, ToolCall, Usage, with_paired_results
from journeyman.core.redact import remember_provider_key
from journeyman.providers import wire
from journeyman.providers.arguments import (
    TOO_DEEP,
    check_arguments,
    decode_json,
    paired_history,
)
from journeyman.providers.base import (
    Capabilities,
    ModelRequest,
    ModelResponse,
    TextCallback,
    ToolSpec,
)
from journeyman.providers.http_errors import (
    connection_error,
    provider_error_from_status,
    stream_interrupted,
)
from journeyman.providers.rate_limit import limit_key

MESSAGES_PATH = "/v1/messages"
API_KEY_ENV = "ANTHROPIC_API_KEY"
BASE_URL_ENV = "ANTHROPIC_BASE_URL"
DEFAULT_TIMEOUT = 600.0
"""Seconds; for streaming it bounds each read, not the whole reply."""

_STATUS_OF_ERROR_TYPE = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}
"""Error types the API reports inside a stream (where the HTTP status is already 200)."""

_Block: TypeAlias = TextBlockParam | ToolUseBlockParam | ToolResultBlockParam


@dataclass
class _ToolBlock:
    """A tool_use block being streamed."""

    id: str
    name: str
    initial: object
    json_parts: list[str] = field(default_factory=list)


class _StreamedReply:
    """What the events of a reply stream have said so far; text is passed on as it comes."""

    def __init__(self, on_text: TextCallback) -> None:
        self.on_text = on_text
        self.text: list[str] = []
        self.tools: dict[int, _ToolBlock] = {}
        self.problems: list[str] = []
        self.usage = Usage()
        self.reported = False
        """The stream said how many tokens were used (else the usage is marked missing)."""
        self.stop: str | None = None
        self.model: str | None = None
        self.finished = False
        """message_stop arrived: the reply is whole."""
        self.received = 0
        """Events read, to say where an interrupted stream broke off."""

    def take(self, event: RawMessageStreamEvent) -> None:
        self.received += 1
        if isinstance(event, RawMessageStartEvent):
            self.model = event.message.model
            started_usage = getattr(event.message, "usage", None)
            self.reported = self.reported or started_usage is not None
            self.usage = _usage(started_usage)
        elif isinstance(event, RawContentBlockStartEvent):
            self._start_block(event)
        elif isinstance(event, RawContentBlockDeltaEvent):
            self._add_to_block(event)
        elif isinstance(event, RawMessageDeltaEvent):
            self.stop = event.delta.stop_reason or self.stop
            delta_usage = getattr(event, "usage", None)
            if delta_usage is not None:
                self.reported = True
                self.usage = _updated_usage(self.usage, delta_usage)
        elif isinstance(event, RawMessageStopEvent):
            self.finished = True

    def _start_block(self, event: RawContentBlockStartEvent) -> None:
        started = event.content_block
        kind = getattr(started, "type", None)
        if kind == "tool_use" and isinstance(started, ToolUseBlock):
            if _named_call(started, self.problems):
                self.tools[event.index] = _ToolBlock(started.id, started.name, started.input)
        elif kind == "text" and isinstance(started, TextBlock):
            if isinstance(started.text, str) and started.text:
                self.text.append(started.text)
                self.on_text(started.text)
        else:
            _unread_block(kind, self.problems)

    def _add_to_block(self, event: RawContentBlockDeltaEvent) -> None:
        delta = event.delta
        if getattr(delta, "type", None) == "text_delta" and isinstance(
            getattr(delta, "text", None), str
        ):
            assert isinstance(delta, TextDelta)
            self.text.append(delta.text)
            self.on_text(delta.text)
        elif isinstance(delta, InputJSONDelta) and event.index in self.tools:
            self.tools[event.index].json_parts.append(delta.partial_json)


class AnthropicProvider:
    """Messages API through `anthropic.AsyncAnthropic` (SDK retries off: `resilient` retries)."""

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        max_output_tokens: int | None = None,
        context_window: int = 200_000,
        name: str = "anthropic",
        prebuilt_body: bool = True,
    ) -> None:
        """`api_key`/`base_url` default to what the SDK finds (ANTHROPIC_API_KEY,
        ANTHROPIC_BASE_URL). `max_output_tokens` overrides the request's limit.

        `prebuilt_body` sends request bodies built from JSON kept between calls (see `wire`);
        False lets the SDK build each body from the whole history again, which costs more the
        longer the history; kept to compare the two."""
        self._name = name
        self._model = model
        self.max_output_tokens = max_output_tokens
        self._caps = Capabilities(
            native_tools=True, streaming=True, prompt_caching=True, context_window=context_window
        )
        try:
            self._client = AsyncAnthropic(
                api_key=api_key, base_url=base_url, timeout=timeout, max_retries=0
            )
        except anthropic.CredentialsError as exc:  # a named profile that cannot be read
            raise ConfigurationError(
                f"{name}: no usable credentials; set {API_KEY_ENV} or pass api_key ({exc})"
            ) from exc
        remember_provider_key(self._client.api_key)  # never in a command's environment
        self._base_url = str(self._client.base_url)
        self._prebuilt_body = prebuilt_body
        self._history = wire.HistoryWire(_convert_to_wire)
        self._tool_parts: wire.SameParts[bytes] = wire.SameParts()

    @property
    def name(self) -> str:
        return self._name

    @property
    def rate_limit_key(self) -> str:
        """Whose rate limits this adapter's calls count against (`rate_limit.limit_key`)."""
        client = self._client
        return limit_key(self._name, self._base_url, client.api_key or client.auth_token)

    @property
    def model(self) -> str:
        return self._model

    @property
    def capabilities(self) -> Capabilities:
        return self._caps

    async def aclose(self) -> None:
        await self._client.close()

    async def complete(
        self, request: ModelRequest, on_text: TextCallback | None = None
    ) -> ModelResponse:
        max_tokens = self.max_output_tokens or request.max_output_tokens
        send = self._post if self._prebuilt_body else self._create
        try:
            sent = await send(request, max_tokens, stream=on_text is not None)
        except anthropic.APIError as exc:
            raise self._error(exc) from exc
        except ValueError as exc:  # the body was not JSON
            raise LLMError(f"{self._name}: the reply body was not valid JSON ({exc})") from exc
        except RecursionError as exc:
            raise LLMError(f"{self._name}: the reply body is nested too deeply to read") from exc
        except anthropic.CredentialsError as exc:  # no key, and no usable profile on disk
            raise ConfigurationError(
                f"{self._name}: no API key; set {API_KEY_ENV} or pass api_key ({exc})"
            ) from exc
        except TypeError as exc:  # raised by the SDK before sending when it has no credentials
            if "authentication" not in str(exc):
                raise
            raise ConfigurationError(
                f"{self._name}: no API key; set {API_KEY_ENV} or pass api_key"
            ) from exc
        if on_text is None:
            if isinstance(sent, AsyncStream):
                raise LLMError(f"{self._name}: the SDK returned a stream for a request without one")
            return self._from_message(sent)
        if not isinstance(sent, AsyncStream):
            raise LLMError(f"{self._name}: the SDK did not return a stream for a streamed request")
        return await self._from_stream(sent, on_text)

    async def _post(
        self, request: ModelRequest, max_tokens: int, *, stream: bool
    ) -> AnthropicMessage | AsyncStream[RawMessageStreamEvent]:
        """The request with its body prebuilt (`_body`), sent through the SDK's client."""
        _warn_if_deprecated(self._model)  # as the SDK's `create` does
        sent: AnthropicMessage | AsyncStream[RawMessageStreamEvent] = await self._client.post(
            MESSAGES_PATH,
            content=self._body(request, max_tokens, stream=stream),
            cast_to=AnthropicMessage,
            stream=stream,
            stream_cls=AsyncStream[RawMessageStreamEvent],
        )
        return sent

    async def _create(
        self, request: ModelRequest, max_tokens: int, *, stream: bool
    ) -> AnthropicMessage | AsyncStream[RawMessageStreamEvent]:
        """The request as the SDK builds it from the whole history (without `prebuilt_body`)."""
        system = to_anthropic_system(request.system, request.system_shared_chars) or omit
        tools = to_anthropic_tools(request.tools)
        messages = with_history_breakpoint(to_anthropic_messages(request.messages))
        # `request.temperature` is not sent: API version 2026-10-21 (SDK 2.x) rejects sampling
        # parameters with a 400, and the SDK no longer offers them.
        if not stream:
            return await self._client.messages.create(
                model=self._model,
                max_tokens=max_tokens,
                system=system,
                messages=messages,
                tools=tools or omit,
            )
        return await self._client.messages.create(
            model=self._model,
            max_tokens=max_tokens,
            system=system,
            messages=messages,
            tools=tools or omit,
            stream=True,
        )

    def _body(self, request: ModelRequest, max_tokens: int, *, stream: bool) -> bytes:
        """The JSON body `_create` has the SDK send, byte for byte, from the parts kept between
        calls: the tools once per set, the history from where it last changed (see `wire`).
        Keys in the SDK's order; the temperature is not sent (see `_create`)."""
        fields: list[tuple[str, bytes | list[bytes]]] = [
            ("max_tokens", wire.dumps(max_tokens)),
            ("messages", self._history.units(request.messages)),
            ("model", wire.dumps(self._model)),
        ]
        if stream:
            fields.append(("stream", b"true"))
        system = to_anthropic_system(request.system, request.system_shared_chars)
        if system:
            fields.append(("system", wire.dumps(system)))
        if request.tools:
            tools = request.tools
            fields.append(("tools", self._tool_parts.get(tools, None, lambda: _tools_json(tools))))
        return wire.json_object(fields)

    # -- response --------------------------------------------------------------------

    def _from_message(self, reply: AnthropicMessage) -> ModelResponse:
        if not isinstance(reply, AnthropicMessage):  # e.g. a body that was not JSON at all
            raise LLMError(f"{self._name}: the reply was not a message: {reply!r:.200}")
        content = getattr(reply, "content", None)
        if not isinstance(content, list):
            raise LLMError(f"{self._name}: the reply had no content list")
        text: list[str] = []
        calls: list[ToolCall] = []
        problems: list[str] = []
        for block in content:
            kind = getattr(block, "type", None)
            if kind == "text" and isinstance(getattr(block, "text", None), str):
                text.append(block.text)
            elif kind == "tool_use" and isinstance(block, ToolUseBlock):
                if not _named_call(block, problems):
                    continue
                arguments, problem = check_arguments(block.input)
                calls.append(self._call(block.id, block.name, arguments, problem, problems))
            else:
                _unread_block(kind, problems)
        raw_usage = getattr(reply, "usage", None)
        stop = getattr(reply, "stop_reason", None)
        model = getattr(reply, "model", None)
        response = self._response("".join(text), calls, problems, _usage(raw_usage), stop, model)
        return _missing_usage_marked(response, raw_usage is None)

    async def _from_stream(
        self, stream: AsyncStream[RawMessageStreamEvent], on_text: TextCallback
    ) -> ModelResponse:
        reply = _StreamedReply(on_text)
        try:
            async with stream:
                async for event in stream:
                    reply.take(event)
        except anthropic.APIStatusError as exc:  # an `event: error` inside the stream
            raise self._error(exc) from exc
        except (anthropic.APIConnectionError, httpx2.TransportError) as exc:
            raise stream_interrupted(self._name, exc, reply.received) from exc
        except ValueError as exc:
            raise LLMError(f"{self._name}: a stream event was not valid JSON ({exc})") from exc
        except RecursionError as exc:
            raise LLMError(f"{self._name}: a stream event is nested too deeply to read") from exc
        if not reply.finished:
            raise LLMError(
                f"{self._name}: the reply stream ended after {reply.received} events without "
                "message_stop; the reply is incomplete",
                details={"stream_interrupted": True},
            )
        calls = [
            self._streamed_call(reply.tools[index], reply.stop, reply.problems)
            for index in sorted(reply.tools)
        ]
        response = self._response(
            "".join(reply.text), calls, reply.problems, reply.usage, reply.stop, reply.model
        )
        return _missing_usage_marked(response, not reply.reported)

    def _streamed_call(self, block: _ToolBlock, stop: str | None, problems: list[str]) -> ToolCall:
        """The call a streamed tool_use block makes, its input decoded once the stream ended."""
        source = "".join(block.json_parts)
        value, problem = decode_json(source) if source.strip() else (block.initial, None)
        if problem is not None and problem != TOO_DEEP:  # not JSON
            if stop != "max_tokens":
                raise LLMError(
                    f"{self._name}: the streamed input of tool {block.name} is not valid JSON "
                    f"({problem})",
                    details={"tool": block.name},
                )
            problem = (
                "the output token limit cut them off; make the call again with less "
                "content per call"
            )
        arguments, shape_problem = check_arguments(value) if problem is None else ({}, None)
        problem = problem or shape_problem
        return self._call(block.id, block.name, arguments, problem, problems)

    @staticmethod
    def _call(
        call_id: str,
        name: str,
        arguments: dict[str, object],
        problem: str | None,
        problems: list[str],
    ) -> ToolCall:
        """The call; one that cannot be used keeps its id with an `invalid` reason (added to
        `problems`), so the loop answers it with an error result."""
        if problem is None:
            return ToolCall(call_id, name, arguments)
        reason = f"the arguments of {name} (call {call_id}) could not be used: {problem}"
        problems.append(reason)
        return ToolCall(call_id, name, {}, invalid=reason)

    def _response(
        self,
        text: str,
        calls: list[ToolCall],
        problems: list[str],
        usage: Usage,
        stop: str | None,
        model: str | None,
    ) -> ModelResponse:
        format_error = None
        if problems:
            listed = "\n".join(f"- {p}" for p in problems)
            format_error = f"Some tool calls could not be used and were not run:\n{listed}"
        if not text.strip() and not calls and format_error is None:
            hint = " (it hit the output token limit)" if stop == "max_tokens" else ""
            raise LLMError(
                f"{self._name}: the model returned no text and no tool calls{hint}",
                details={"empty": True, "stop_reason": stop},
            )
        return ModelResponse(
            text=text,
            tool_calls=tuple(calls),
            usage=usage,
            stop_reason=stop,
            model=model or self._model,
            format_error=format_error,
        )

    # -- errors ----------------------------------------------------------------------

    def _key_source(self) -> dict[str, str]:
        """Where the key and the server come from, for the advice of a refused key."""
        return {"env_var": API_KEY_ENV, "base_url": self._base_url, "base_url_env": BASE_URL_ENV}

    def _error(self, exc: anthropic.APIError) -> AgentError:
        if isinstance(exc, anthropic.APITimeoutError):
            return connection_error(self._name, self._base_url, timed_out=True, cause=exc)
        if isinstance(exc, anthropic.APIConnectionError):
            return connection_error(self._name, self._base_url, timed_out=False, cause=exc)
        if isinstance(exc, anthropic.APIResponseValidationError):
            return LLMError(f"{self._name}: the reply did not have the expected shape ({exc})")
        if isinstance(exc, anthropic.APIStatusError):
            error_type = exc.type or ""
            status: int | None = exc.status_code
            if status is None or status < 400:  # reported inside a 200 stream
                status = _STATUS_OF_ERROR_TYPE.get(error_type)
            message = exc.api_message or exc.message
            if error_type and error_type not in message:
                message = f"{error_type}: {message}"
            headers = {k.lower(): v for k, v in exc.response.headers.items()}
            return provider_error_from_status(
                self._name, status, message, headers, **self._key_source()
            )
        return provider_error_from_status(self._name, None, str(exc), {}, **self._key_source())


def _warn_if_deprecated(model: str) -> None:
    """A DeprecationWarning for a model the SDK lists as deprecated."""
    try:
        from anthropic._data import DEPRECATED_MODELS
    except ImportError:  # another SDK version: its own `create` is not called either
        return
    if model in DEPRECATED_MODELS:
        warnings.warn(
            f"the model {model!r} is deprecated and reaches its end of life on "
            f"{DEPRECATED_MODELS[model]}; move to a newer model",
            DeprecationWarning,
            stacklevel=4,
        )


def _missing_usage_marked(response: ModelResponse, absent: bool) -> ModelResponse:
    """`response`, marked when the reply carried no usage or no prompt count: the loop then
    charges the call's worst case."""
    if not absent and response.usage.total_input_tokens > 0:
        return response
    return dataclasses.replace(response, usage_missing=True)


READ_ELSEWHERE = frozenset(
    {
        "thinking",
        "redacted_thinking",
        "server_tool_use",
        "web_search_tool_result",
        "web_fetch_tool_result",
        "code_execution_tool_result",
        "bash_code_execution_tool_result",
        "text_editor_code_execution_tool_result",
        "tool_search_tool_result",
        "container_upload",
    }
)
"""Content blocks of Anthropic's own that a reply may hold and journeyman has no use for:
passed over without a word (the model's own reasoning, server-side tools)."""


def _unread_block(kind: object, problems: list[str]) -> None:
    """A block journeyman does not read: passed over, and unless Anthropic documents it, the
    model is told (a new block type, or a reply that is not quite Anthropic's format)."""
    if isinstance(kind, str) and kind in READ_ELSEWHERE:
        return
    shown = printable(str(kind))[:60] if kind is not None else "(none)"
    problems.append(f"a reply block of type {shown} is not one journeyman reads; it was ignored")


def _named_call(block: ToolUseBlock, problems: list[str]) -> bool:
    """Whether a tool_use block has the id and name a call needs; a note in `problems` if not."""
    call_id, name = getattr(block, "id", None), getattr(block, "name", None)
    if isinstance(call_id, str) and call_id and isinstance(name, str) and name:
        return True
    problems.append("a tool_use block without an id or a tool name was ignored")
    return False


def _count(value: object, current: int = 0) -> int:
    """A token count as reported: whole numbers kept (negative ones are the loop's to clamp and
    tell), anything else (absent, text, a fraction, infinity) gives `current`."""
    if isinstance(value, bool) or not isinstance(value, int):
        return current
    return value


def _usage(usage: AnthropicUsage | None) -> Usage:
    if usage is None:
        return Usage()
    return Usage(
        input_tokens=_count(usage.input_tokens),
        output_tokens=_count(usage.output_tokens),
        cache_read_tokens=_count(usage.cache_read_input_tokens),
        cache_write_tokens=_count(usage.cache_creation_input_tokens),
    )


def _updated_usage(usage: Usage, delta: MessageDeltaUsage) -> Usage:
    """message_delta counts are cumulative; take the ones it reports."""
    return Usage(
        input_tokens=_count(delta.input_tokens, usage.input_tokens),
        output_tokens=_count(delta.output_tokens, usage.output_tokens),
        cache_read_tokens=_count(delta.cache_read_input_tokens, usage.cache_read_tokens),
        cache_write_tokens=_count(delta.cache_creation_input_tokens, usage.cache_write_tokens),
    )


# --------------------------------------------------------------------------- conversion


def to_anthropic_system(system: str, shared_chars: int = 0) -> list[TextBlockParam]:
    """The system prompt as text blocks, each ending in a cache breakpoint.

    With `shared_chars` (the part other runs send too, e.g. a swarm's shared worker prefix)
    the prompt is split there into two blocks: the first block's breakpoint covers the tools
    and the shared part, which is byte-identical across those runs, so each of them reads it
    from the cache the first one wrote; the second covers the rest of this run's prompt. With
    the tools' and the last message's, that is the four breakpoints the API allows.
    """
    if not system:
        return []
    blocks: list[TextBlockParam] = []
    if 0 < shared_chars < len(system):
        blocks.append(
            {"type": "text", "text": system[:shared_chars], "cache_control": {"type": "ephemeral"}}
        )
        system = system[shared_chars:]
    blocks.append({"type": "text", "text": system, "cache_control": {"type": "ephemeral"}})
    return blocks


def _tools_json(tools: Sequence[ToolSpec]) -> bytes:
    return wire.json_array([wire.dumps(tool) for tool in to_anthropic_tools(tools)])


def to_anthropic_tools(tools: Sequence[ToolSpec]) -> list[ToolParam]:
    """Tool definitions. The API puts tools first in the prompt, so a cache breakpoint on the last
    one covers all of them (the system block carries the next breakpoint)."""
    params: list[ToolParam] = [
        {"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools
    ]
    if params:
        params[-1]["cache_control"] = {"type": "ephemeral"}
    return params


def with_history_breakpoint(messages: list[MessageParam]) -> list[MessageParam]:
    """`messages` with a cache breakpoint on the last block of the last turn (the fourth and
    last one a request may carry). The next call of the run repeats this history and adds to
    it, so it reads everything up to here from the cache instead of sending it again (without
    this breakpoint only the tools and the system prompt would be read)."""
    if messages:
        content = messages[-1]["content"]
        if isinstance(content, list) and content:
            last = content[-1]
            if isinstance(last, dict) and last.get("type") in ("text", "tool_result", "tool_use"):
                last["cache_control"] = {"type": "ephemeral"}
    return messages


def to_anthropic_messages(messages: Sequence[Message]) -> list[MessageParam]:
    """Neutral messages to Messages API turns.

    Assistant tool calls become tool_use blocks; tool results become tool_result blocks in the
    following user turn. Consecutive messages of one side are merged into one turn (the API
    wants roles to alternate), with tool_result blocks first as the API requires. System
    messages inside the conversation are sent as user text, since the API takes the system
    prompt separately. Empty messages are dropped.
    """
    return _turns(paired_history(messages))


def _turns(
    messages: Sequence[Message], assistants: list[tuple[int, int]] | None = None
) -> list[MessageParam]:
    """The turns of an already paired history (see `to_anthropic_messages`); `assistants`,
    when given, is told each assistant message that opens a turn of its own: which assistant
    message it is (0 for the first) and the number of turns before it."""
    turns: list[tuple[Literal["user", "assistant"], list[_Block]]] = []
    seen = 0
    for message in messages:
        role: Literal["user", "assistant"] = "user"
        if message.role is Role.ASSISTANT:
            role, seen = "assistant", seen + 1
        blocks = _blocks(message)
        if not blocks:
            continue
        if turns and turns[-1][0] == role:
            turns[-1][1].extend(blocks)
            continue
        if assistants is not None and role == "assistant":
            assistants.append((seen - 1, len(turns)))
        turns.append((role, blocks))
    out: list[MessageParam] = []
    for role, blocks in turns:
        if role == "user":
            # tool results first, as the API requires; the sort is stable within each group
            blocks.sort(key=lambda b: b["type"] != "tool_result")
            out.append({"role": "user", "content": blocks})
        else:
            out.append({"role": "assistant", "content": blocks})
    return out


def _blocks(message: Message) -> list[_Block]:
    """The content blocks of one message."""
    if message.role is Role.ASSISTANT:
        blocks: list[_Block] = []
        if message.content:
            blocks.append({"type": "text", "text": message.content})
        for call in message.tool_calls:
            blocks.append(
                {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
            )
        return blocks
    if message.role is Role.TOOL:
        result = message.tool_result
        if result is None:
            raise ValueError("a Role.TOOL message must carry its tool_result")
        block: ToolResultBlockParam = {
            "type": "tool_result",
            "tool_use_id": result.call_id,
            "content": result.content,
            "is_error": result.is_error,
        }
        return [block]
    return [{"type": "text", "text": message.content}] if message.content else []


def _convert_to_wire(messages: Sequence[Message]) -> wire.Converted:
    """Encoded turns of a run of messages; the last turn also as it ends a request, with the
    history's cache breakpoint (see `wire`)."""
    paired, fixes = with_paired_results(messages)
    assistants: list[tuple[int, int]] = []
    turns = _turns(paired, assistants)
    units = [wire.dumps(turn) for turn in turns]  # before the breakpoint is added below
    final = wire.dumps(with_history_breakpoint(turns)[-1]) if turns else None
    return wire.Converted(units, assistants, fixes, final)
