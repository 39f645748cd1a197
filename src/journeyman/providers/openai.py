"""Adapter for the official `openai` SDK: Chat Completions on OpenAI or any compatible server.

Works with OpenAI itself and with OpenAI-compatible servers (Ollama, vLLM, llama.cpp server,
LM Studio, OpenRouter) through `base_url`. Models without native tool calling use
`tool_format="text"`: tools are described in the system prompt and calls are read from fenced
JSON blocks (see `text_tools`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, TypedDict
from urllib.parse import urlsplit

import openai
from openai import AsyncOpenAI, AsyncStream, Omit, omit
from openai.types import CompletionUsage
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionFunctionToolParam,
    ChatCompletionMessageFunctionToolCallParam,
    ChatCompletionMessageParam,
)

from journeyman.core.errors import AgentError, ConfigurationError, LLMError
from journeyman.core.messages import Message, Role, ToolCall, ToolResult, Usage
from journeyman.providers import text_tools
from journeyman.providers.arguments import decode_arguments, paired_history
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

ToolFormat = Literal["native", "text"]

API_KEY_ENV = "OPENAI_API_KEY"
BASE_URL_ENV = "OPENAI_BASE_URL"
DEFAULT_TIMEOUT = 600.0
"""Seconds; for streaming it bounds each read, not the whole reply."""
UNNAMED_TOOL = "unnamed_tool"
"""Name given to a call the server sent without one (it is answered with an error)."""

# --------------------------------------------------------------------------- adapter


class _ChatParams(TypedDict):
    model: str
    messages: list[ChatCompletionMessageParam]
    tools: list[ChatCompletionFunctionToolParam] | Omit
    temperature: float | Omit
    max_tokens: int | Omit
    max_completion_tokens: int | Omit


@dataclass
class _RawCall:
    """A tool call as it arrived, arguments still a JSON string."""

    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class _StreamState:
    """What the chunks of one streamed reply have said so far."""

    text: list[str] = field(default_factory=list)
    calls: dict[int, _RawCall] = field(default_factory=dict)
    finish: str | None = None
    usage: CompletionUsage | None = None
    model: str | None = None
    chunks: int = 0

    def absorb(self, chunk: ChatCompletionChunk, on_text: TextCallback) -> None:
        self.chunks += 1
        self.model = chunk.model or self.model
        self.usage = chunk.usage or self.usage
        for choice in chunk.choices:
            if choice.index != 0:
                continue
            delta = choice.delta
            if delta.content:
                self.text.append(delta.content)
                on_text(delta.content)
            for position, part in enumerate(delta.tool_calls or ()):
                # tool calls arrive in pieces keyed by index; id and name come with the first
                index = part.index if isinstance(getattr(part, "index", None), int) else position
                raw = self.calls.setdefault(index, _RawCall())
                raw.id = raw.id or part.id or ""
                if part.function is not None:
                    raw.name = raw.name or part.function.name or ""
                    raw.arguments.append(part.function.arguments or "")
            self.finish = choice.finish_reason or self.finish


def _is_openai_host(base_url: str | None) -> bool:
    return base_url is None or (urlsplit(base_url).hostname or "").endswith("openai.com")


class OpenAIProvider:
    """Chat Completions through `openai.AsyncOpenAI` (SDK retries off: `resilient` retries)."""

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        tool_format: ToolFormat = "native",
        max_output_tokens: int | None = None,
        context_window: int = 128_000,
        name: str = "openai",
    ) -> None:
        """`api_key`/`base_url` default to OPENAI_API_KEY/OPENAI_BASE_URL. A server other than
        OpenAI's may need no key. `max_output_tokens` overrides the request's limit."""
        resolved_url = base_url or os.environ.get(BASE_URL_ENV) or None
        key = api_key or os.environ.get(API_KEY_ENV)
        if not key:
            if _is_openai_host(resolved_url):
                raise ConfigurationError(
                    f"{name}: no API key; set {API_KEY_ENV}, or set {BASE_URL_ENV} (or base_url) "
                    "to an OpenAI-compatible server that needs none"
                )
            key = "no-key-needed"  # local servers ignore it, but the SDK wants one
        self._name = name
        self._model = model
        self.tool_format: ToolFormat = tool_format
        self.max_output_tokens = max_output_tokens
        self._caps = Capabilities(
            native_tools=tool_format == "native",
            streaming=True,
            prompt_caching=_is_openai_host(resolved_url),
            context_window=context_window,
        )
        # OpenAI's newer models only accept `max_completion_tokens`; many compatible servers
        # only know `max_tokens`.
        self._uses_completion_tokens_field = _is_openai_host(resolved_url)
        self._client = AsyncOpenAI(
            api_key=key, base_url=resolved_url, timeout=timeout, max_retries=0
        )
        self._base_url = str(self._client.base_url)
        self._calls_made = 0
        """Numbers generated call ids (text tool calls, calls a server sent without an id)."""

    @property
    def name(self) -> str:
        return self._name

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
        params = self._params(request)
        try:
            if on_text is None:
                completion = await self._client.chat.completions.create(**params)
                return self._from_completion(completion)
            stream = await self._client.chat.completions.create(
                **params, stream=True, stream_options={"include_usage": True}
            )
        except openai.APIError as exc:
            raise self._error(exc) from exc
        except ValueError as exc:  # the body was not JSON
            raise LLMError(f"{self._name}: the reply body was not valid JSON ({exc})") from exc
        except RecursionError as exc:
            raise LLMError(f"{self._name}: the reply body is nested too deeply to read") from exc
        return await self._from_stream(stream, on_text)

    # -- request ---------------------------------------------------------------------

    def _params(self, request: ModelRequest) -> _ChatParams:
        limit = self.max_output_tokens or request.max_output_tokens
        native = self.tool_format == "native"
        return _ChatParams(
            model=self._model,
            messages=to_openai_messages(
                request.system, request.messages, request.tools, self.tool_format
            ),
            tools=[to_openai_tool(t) for t in request.tools] if native and request.tools else omit,
            temperature=omit if request.temperature is None else request.temperature,
            max_completion_tokens=limit if self._uses_completion_tokens_field else omit,
            max_tokens=omit if self._uses_completion_tokens_field else limit,
        )

    # -- response --------------------------------------------------------------------

    def _from_completion(self, completion: ChatCompletion) -> ModelResponse:
        if not isinstance(completion, ChatCompletion):  # e.g. a body that was not JSON at all
            raise LLMError(
                f"{self._name}: the reply was not a chat completion: {completion!r:.200}"
            )
        choices = getattr(completion, "choices", None)
        if not choices:
            raise LLMError(f"{self._name}: the reply had no choices", details={"empty": True})
        choice = choices[0]
        message = choice.message
        raw_calls = [
            _RawCall(call.id, call.function.name, [call.function.arguments])
            for call in message.tool_calls or ()
            if call.type == "function"
        ]
        usage = _usage(getattr(completion, "usage", None))
        return self._response(
            message.content or "", raw_calls, usage, choice.finish_reason, completion.model
        )

    async def _from_stream(
        self, stream: AsyncStream[ChatCompletionChunk], on_text: TextCallback
    ) -> ModelResponse:
        state = _StreamState()
        try:
            async with stream:
                async for chunk in stream:
                    state.absorb(chunk, on_text)
        except openai.APIStatusError as exc:
            raise self._error(exc) from exc
        except openai.APIConnectionError as exc:  # includes read timeouts mid-stream
            raise stream_interrupted(self._name, exc, state.chunks) from exc
        except openai.APIError as exc:  # an error object sent inside the stream
            raise provider_error_from_status(
                self._name, None, exc.message, {}, env_var=API_KEY_ENV
            ) from exc
        except ValueError as exc:
            raise LLMError(f"{self._name}: a stream event was not valid JSON ({exc})") from exc
        except RecursionError as exc:
            raise LLMError(f"{self._name}: a stream event is nested too deeply to read") from exc
        if state.finish is None:
            raise LLMError(
                f"{self._name}: the reply stream ended after {state.chunks} chunks without a "
                "finish reason; the reply is incomplete",
                details={"stream_interrupted": True},
            )
        calls = [state.calls[i] for i in sorted(state.calls)]
        text = "".join(state.text)
        return self._response(text, calls, _usage(state.usage), state.finish, state.model)

    def _response(
        self,
        text: str,
        raw_calls: Sequence[_RawCall],
        usage: Usage,
        finish: str | None,
        model: str | None,
    ) -> ModelResponse:
        if self.tool_format == "text":
            text, calls, format_error = text_tools.parse_tool_calls(
                text, start=self._calls_made + 1
            )
            self._calls_made += len(calls)
        else:
            calls, format_error = self._decode_calls(raw_calls)
        if not text.strip() and not calls and format_error is None:
            hint = " (it hit the output token limit)" if finish == "length" else ""
            raise LLMError(
                f"{self._name}: the model returned no text and no tool calls{hint}",
                details={"empty": True, "stop_reason": finish},
            )
        return ModelResponse(
            text=text,
            tool_calls=tuple(calls),
            usage=usage,
            stop_reason=finish,
            model=model or self._model,
            format_error=format_error,
        )

    def _decode_calls(self, raw_calls: Sequence[_RawCall]) -> tuple[list[ToolCall], str | None]:
        """Every call, in order; one that cannot be used is kept with its `invalid` reason, so
        the loop answers it with an error result instead of leaving its id unanswered."""
        calls: list[ToolCall] = []
        problems: list[str] = []
        for raw in raw_calls:
            if not raw.id:
                self._calls_made += 1
                raw.id = f"call-{self._calls_made}"
            arguments, problem = decode_arguments("".join(raw.arguments))
            if not raw.name:
                problem = "it names no tool"
            if problem is None:
                calls.append(ToolCall(raw.id, raw.name, arguments))
                continue
            name = raw.name or UNNAMED_TOOL
            reason = f"the arguments of {name} (call {raw.id}) could not be used: {problem}"
            if not raw.name:
                reason = f"the tool call {raw.id} names no tool"
            problems.append(reason)
            calls.append(ToolCall(raw.id, name, {}, invalid=reason))
        if not problems:
            return calls, None
        listed = "\n".join(f"- {p}" for p in problems)
        return calls, (
            f"Some tool calls could not be used and were not run:\n{listed}\n"
            "Call the tool again with its arguments as one JSON object that matches its schema."
        )

    # -- errors ----------------------------------------------------------------------

    def _error(self, exc: openai.APIError) -> AgentError:
        if isinstance(exc, openai.APITimeoutError):
            return connection_error(self._name, self._base_url, timed_out=True, cause=exc)
        if isinstance(exc, openai.APIConnectionError):
            return connection_error(self._name, self._base_url, timed_out=False, cause=exc)
        if isinstance(exc, openai.APIResponseValidationError):
            return LLMError(
                f"{self._name}: the reply did not have the expected shape ({exc.message})"
            )
        if isinstance(exc, openai.APIStatusError):
            message = _error_message(exc.body) or exc.message
            code = f" [{exc.code}]" if exc.code and exc.code not in message else ""
            headers = {k.lower(): v for k, v in exc.response.headers.items()}
            return provider_error_from_status(
                self._name, exc.status_code, message + code, headers, env_var=API_KEY_ENV
            )
        return provider_error_from_status(self._name, None, exc.message, {}, env_var=API_KEY_ENV)


def _error_message(body: object) -> str | None:
    """`message` of an OpenAI-style error body (the SDK passes the inner `error` object)."""
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return str(inner["message"])
        if isinstance(inner, str):
            return inner
    return None


def _usage(usage: CompletionUsage | None) -> Usage:
    if usage is None:
        return Usage()
    details = usage.prompt_tokens_details
    cached = (details.cached_tokens or 0) if details is not None else 0
    written = (details.cache_write_tokens or 0) if details is not None else 0
    return Usage(
        input_tokens=max(0, (usage.prompt_tokens or 0) - cached - written),
        output_tokens=usage.completion_tokens or 0,
        cache_read_tokens=cached,
        cache_write_tokens=written,
    )


# --------------------------------------------------------------------------- conversion


def to_openai_tool(tool: ToolSpec) -> ChatCompletionFunctionToolParam:
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        },
    }


def _tool_message_text(result: ToolResult) -> str:
    return f"The tool reported an error:\n{result.content}" if result.is_error else result.content


def to_openai_messages(
    system: str,
    messages: Sequence[Message],
    tools: Sequence[ToolSpec] = (),
    tool_format: ToolFormat = "native",
) -> list[ChatCompletionMessageParam]:
    """Neutral messages to Chat Completions messages.

    Native: assistant tool calls become `tool_calls`, results become `tool` messages. Text:
    tools are described in the system prompt, calls are written as fenced JSON blocks and
    results are sent as user messages (consecutive user messages merged, since many chat
    templates insist that roles alternate).
    """
    text_mode = tool_format == "text"
    messages = paired_history(messages)
    if text_mode and tools:
        appendix = text_tools.render_tool_instructions(tools)
        system = f"{system}\n\n{appendix}" if system else appendix
    out: list[ChatCompletionMessageParam] = []
    if system:
        out.append({"role": "system", "content": system})
    for message in messages:
        if message.role is Role.SYSTEM:
            out.append({"role": "system", "content": message.content})
        elif message.role is Role.USER:
            _append_user(out, message.content, merge=text_mode)
        elif message.role is Role.ASSISTANT:
            if text_mode:
                parts = [message.content, *map(text_tools.render_tool_call, message.tool_calls)]
                out.append({"role": "assistant", "content": "\n\n".join(p for p in parts if p)})
            elif message.tool_calls:
                calls: list[ChatCompletionMessageFunctionToolCallParam] = [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
                    }
                    for call in message.tool_calls
                ]
                out.append(
                    {"role": "assistant", "content": message.content or None, "tool_calls": calls}
                )
            else:
                out.append({"role": "assistant", "content": message.content})
        else:
            result = message.tool_result
            if result is None:
                raise ValueError("a Role.TOOL message must carry its tool_result")
            if text_mode:
                _append_user(out, text_tools.render_tool_result(result), merge=True)
            else:
                out.append(
                    {
                        "role": "tool",
                        "tool_call_id": result.call_id,
                        "content": _tool_message_text(result),
                    }
                )
    return out


def _append_user(out: list[ChatCompletionMessageParam], text: str, *, merge: bool) -> None:
    previous = out[-1] if out else None
    if (
        merge
        and previous is not None
        and previous["role"] == "user"
        and isinstance(previous["content"], str)
    ):
        previous["content"] = f"{previous['content']}\n\n{text}"
    else:
        out.append({"role": "user", "content": text})
