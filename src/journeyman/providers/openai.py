"""Adapter for the official `openai` SDK: Chat Completions on OpenAI or any compatible server.

Works with OpenAI itself and with OpenAI-compatible servers (Ollama, vLLM, llama.cpp server,
LM Studio, OpenRouter) through `base_url`. How tools reach the model is the tool format
(see `tool_modes`): `native` tool calls; `json_schema` or `grammar`, where the reply is
constrained to a tool call or an answer; `text`, fenced JSON blocks read from the reply (see
`text_tools`). `auto` (the default) uses native tool calls, and when the first reply shows that
the server dropped the tools, finds the mode the server supports, records it for that server
and model, and sends the request again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias, TypedDict
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

from journeyman.core.errors import AgentError, ConfigurationError, LLMError, ProviderError
from journeyman.core.messages import (
    Message,
    Role,
    ToolCall,
    ToolResult,
    Usage,
    with_paired_results,
)
from journeyman.core.redact import remember_provider_key
from journeyman.providers import text_tools, tool_modes, wire
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
from journeyman.providers.rate_limit import limit_key
from journeyman.providers.tool_modes import (
    MODE_DESCRIPTIONS,
    ResponseFormatStyle,
    ToolMode,
    ToolModeChoice,
    ToolModeRecord,
    ToolModeRecords,
)

ToolFormat = ToolModeChoice
ChunkStream: TypeAlias = AsyncStream[ChatCompletionChunk]
PROBE_VALUE = {"probe": "jm-probe"}
"""What a probe for constrained output asks for; a server that honours the constraint returns
exactly this object, which a model left to itself would hardly write."""
PROBE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"probe": {"type": "string", "enum": ["jm-probe"]}},
    "required": ["probe"],
}
PROBE_GRAMMAR = 'root ::= "{\\"probe\\": \\"jm-probe\\"}"'

CHAT_PATH = "/chat/completions"
API_KEY_ENV = "OPENAI_API_KEY"
BASE_URL_ENV = "OPENAI_BASE_URL"
DEFAULT_TIMEOUT = 600.0
"""Seconds; for streaming it bounds each read, not the whole reply."""
UNNAMED_TOOL = "unnamed_tool"
TOOLS_REFUSED = "tools_refused"
"""Detail key of the error a server answers a request with tools for a model without tool
support (the auto mode then switches to a mode without `tools`)."""
TOOLS_REFUSED_HINTS = ("does not support tools", "doesn't support tools", "tools not supported")
"""Name given to a call the server sent without one (it is answered with an error)."""

# --------------------------------------------------------------------------- adapter


class _ChatParams(TypedDict):
    model: str
    messages: list[ChatCompletionMessageParam]
    tools: list[ChatCompletionFunctionToolParam] | Omit
    temperature: float | Omit
    max_tokens: int | Omit
    max_completion_tokens: int | Omit
    seed: int | Omit
    extra_body: dict[str, Any] | None


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


@dataclass
class _WireParts:
    """What an adapter keeps between calls to build request bodies (see `wire`)."""

    histories: dict[ToolMode, wire.HistoryWire] = field(default_factory=dict)
    """The conversation's encoded messages, per tool mode (the auto mode may switch)."""
    system: wire.SameParts[list[bytes]] = field(default_factory=wire.SameParts)
    tools: wire.SameParts[bytes] = field(default_factory=wire.SameParts)


def _can_build_grammars() -> bool:
    """GBNF grammars are built by llama-cpp-python's converter (the `local` extra)."""
    return importlib.util.find_spec("llama_cpp") is not None


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
        mode_records: ToolModeRecords | None = None,
        on_notice: Callable[[str], None] | None = None,
        seed: int | None = None,
        prebuilt_body: bool = True,
    ) -> None:
        """`api_key`/`base_url` default to OPENAI_API_KEY/OPENAI_BASE_URL. A server other than
        OpenAI's may need no key. `max_output_tokens` overrides the request's limit.

        `tool_format` "auto" reads and writes the detected mode in `mode_records` (default: the
        user's config directory); `on_notice` is told when detection changes the mode. `seed`
        is sent with every request (servers that sample with it repeat their replies).
        `prebuilt_body` False has the SDK build each body from the whole history, as it does
        by default (slower as the history grows; kept to compare, see `wire`)."""
        resolved_url = base_url or os.environ.get(BASE_URL_ENV) or None
        key = api_key or os.environ.get(API_KEY_ENV)
        if not key:
            if _is_openai_host(resolved_url):
                raise ConfigurationError(
                    f"{name}: no API key; set {API_KEY_ENV}, or set {BASE_URL_ENV} (or base_url) "
                    "to an OpenAI-compatible server that needs none"
                )
            key = "no-key-needed"  # local servers ignore it, but the SDK wants one
        else:
            remember_provider_key(key)  # never in a command's environment
        self._name = name
        self._model = model
        self.max_output_tokens = max_output_tokens
        self._caps = Capabilities(
            native_tools=True,
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
        self._records = mode_records
        self.seed = seed
        self._on_notice = on_notice
        self._last_prompt_tokens: int | None = None
        """The prompt size the server reported for the last reply (None: not reported)."""
        self.tool_format: ToolMode = "native"
        self.response_format_style: ResponseFormatStyle = "json_schema"
        self.tool_mode_reason = "as asked"
        self._auto = tool_format == "auto"
        self._detect_pending = False
        self._prebuilt_body = prebuilt_body
        self._wire = _WireParts()
        self._current_tools: tuple[ToolSpec, ...] = ()
        """The tools of the request being answered (constrained replies are read against them)."""
        if tool_format == "auto":
            self._resolve_auto(_is_openai_host(resolved_url))
        else:
            self.tool_format = tool_format
            if tool_format == "json_schema" and not _is_openai_host(resolved_url):
                # llama.cpp's servers read this shape; OpenAI-style servers the other one
                self.response_format_style = "json_object"
        if self.tool_format == "grammar" and not _can_build_grammars():
            raise ConfigurationError(
                f"{name}: the grammar tool format builds its grammars with llama-cpp-python, "
                "which is not installed; pip install 'journeyman[local]', or use "
                "--tool-format json_schema or text"
            )

    def _resolve_auto(self, openai_host: bool) -> None:
        if openai_host:
            self.tool_mode_reason = "OpenAI's API has native tool calls"
            return
        record = self._mode_records().get(self._base_url, self._model)
        if record is not None and record.mode == "grammar" and not _can_build_grammars():
            record = None  # found when llama-cpp-python was installed: look again
        if record is None:
            self._detect_pending = True
            self.tool_mode_reason = "checked on the first reply"
            return
        self.tool_format = record.mode
        self.response_format_style = record.response_format or "json_schema"
        self.tool_mode_reason = f"recorded for this server and model: {record.reason}"

    def _mode_records(self) -> ToolModeRecords:
        if self._records is None:
            self._records = ToolModeRecords()
        return self._records

    @property
    def tool_mode_description(self) -> str:
        """The tool mode in use and why, for the run header."""
        if self._detect_pending:
            return f"auto (native tool calls; {self.tool_mode_reason})"
        return (
            f"{self.tool_format}: {MODE_DESCRIPTIONS[self.tool_format]} ({self.tool_mode_reason})"
        )

    @property
    def name(self) -> str:
        return self._name

    @property
    def rate_limit_key(self) -> str:
        """Whose rate limits this adapter's calls count against (`rate_limit.limit_key`)."""
        return limit_key(self._name, self._base_url, self._client.api_key)

    @property
    def model(self) -> str:
        return self._model

    @property
    def capabilities(self) -> Capabilities:
        if self.tool_format == "native":
            return self._caps
        return Capabilities(
            native_tools=False,
            streaming=self._caps.streaming,
            prompt_caching=self._caps.prompt_caching,
            context_window=self._caps.context_window,
        )

    async def aclose(self) -> None:
        await self._client.close()

    async def complete(
        self, request: ModelRequest, on_text: TextCallback | None = None
    ) -> ModelResponse:
        try:
            if not (self._detect_pending and request.tools):
                return await self._complete(request, on_text)
            response = await self._complete(request, on_text)
        except ProviderError as error:
            refused = error.details.get(TOOLS_REFUSED) and self.tool_format == "native"
            if not (refused and self._auto and request.tools):
                raise
            await self._switch_after_refusal(error)
            return await self._complete(request, on_text)
        if await self._tools_arrived(request, response):
            return response
        return await self._complete(request, on_text)

    async def _complete(self, request: ModelRequest, on_text: TextCallback | None) -> ModelResponse:
        params = self._params(request)
        if self.tool_format in tool_modes.CONSTRAINED_MODES:
            # the reply is one JSON object: streaming it would show JSON, not prose
            response = await self._create(params, request)
            if on_text is not None and response.text:
                on_text(response.text)
            return response
        if on_text is None:
            return await self._create(params, request)
        stream = await self._send(params, request, stream=True)
        if not isinstance(stream, AsyncStream):
            raise LLMError(f"{self._name}: the SDK did not return a stream for a streamed request")
        return await self._from_stream(stream, on_text)

    async def _create(self, params: _ChatParams, request: ModelRequest) -> ModelResponse:
        completion = await self._send(params, request, stream=False)
        if isinstance(completion, AsyncStream):
            raise LLMError(f"{self._name}: the SDK returned a stream for a request without one")
        return self._from_completion(completion)

    async def _send(
        self, params: _ChatParams, request: ModelRequest, *, stream: bool
    ) -> ChatCompletion | ChunkStream:
        """One Chat Completions request through the SDK: its body prebuilt (see `wire`), or,
        without `prebuilt_body`, built by the SDK from `params`."""
        try:
            if self._prebuilt_body:
                sent: ChatCompletion | ChunkStream = await self._client.post(
                    CHAT_PATH,
                    content=self._body(params, request, stream),
                    cast_to=ChatCompletion,
                    options={"security": {"bearer_auth": True}},
                    stream=stream,
                    stream_cls=AsyncStream[ChatCompletionChunk],
                )
                return sent
            if stream:
                chunks: ChunkStream = await self._client.chat.completions.create(
                    **params, stream=True, stream_options={"include_usage": True}
                )
                return chunks
            return await self._client.chat.completions.create(**params)
        except openai.APIError as exc:
            raise self._error(exc) from exc
        except ValueError as exc:  # the body was not JSON
            raise LLMError(f"{self._name}: the reply body was not valid JSON ({exc})") from exc
        except RecursionError as exc:
            raise LLMError(f"{self._name}: the reply body is nested too deeply to read") from exc

    # -- tool mode detection -------------------------------------------------------

    async def _tools_arrived(self, request: ModelRequest, response: ModelResponse) -> bool:
        """Whether the tools of the first native request reached the model. When they did
        not, the mode that works on this server is found, recorded and used from now on."""
        self._detect_pending = False
        self.tool_mode_reason = "the server's prompt count shows the tools arrive"
        if response.tool_calls:
            self.tool_mode_reason = "the model answered with a tool call"
            return True
        prompt_tokens = self._last_prompt_tokens
        if prompt_tokens is None:  # not reported (e.g. while streaming): ask once, briefly
            probe = self._params(request)
            probe["max_tokens"], probe["max_completion_tokens"] = 1, omit
            with contextlib.suppress(AgentError):
                await self._create(probe, request)
            prompt_tokens = self._last_prompt_tokens
        dropped = tools_were_dropped_for(request, prompt_tokens or 0)
        if not dropped:
            if dropped is None:
                self.tool_mode_reason = "the server reports no usable prompt count"
            return True
        expected = _estimate_with_tools(request)
        why = (
            f"the server dropped the tool definitions ({prompt_tokens} prompt tokens counted, "
            f"about {expected} expected with them)"
        )
        await self._adopt(await self._find_working_mode(why), why)
        return False

    async def _switch_after_refusal(self, error: ProviderError) -> None:
        """The server refused a request because of its `tools` (Ollama does so for a model
        whose template has no tool support): the mode that works is found and recorded."""
        self._detect_pending = False
        why = f"the server refused native tool calls for this model ({error.details['refused']})"
        await self._adopt(await self._find_working_mode(why), why)

    async def _adopt(self, record: ToolModeRecord, why: str) -> None:
        """Use `record` from now on, record it for this server and model, and say so."""
        self.tool_format = record.mode
        self.response_format_style = record.response_format or "json_schema"
        saved = self._mode_records().put(self._base_url, self._model, record)
        self.tool_mode_reason = record.reason
        where = f"recorded in {self._mode_records().path}" if saved else "could not be recorded"
        self._notice(
            f"{why}; using {record.mode} ({MODE_DESCRIPTIONS[record.mode]}) for {self._model} "
            f"at {self._base_url}, {where}; the request is sent again"
        )

    async def _find_working_mode(self, why: str) -> ToolModeRecord:
        """The first constrained mode whose probe the server honours, else the text format."""
        styles: tuple[ResponseFormatStyle, ...] = ("json_schema", "json_object")
        for style in styles:
            body = {"response_format": tool_modes.response_format(PROBE_SCHEMA, style)}
            if await self._probe_answers(body):
                return ToolModeRecord("json_schema", style, f"{why}; response_format works")
        if _can_build_grammars() and await self._probe_answers({"grammar": PROBE_GRAMMAR}):
            return ToolModeRecord("grammar", None, f"{why}; GBNF grammars work")
        return ToolModeRecord("text", None, f"{why}; no constrained output works")

    async def _probe_answers(self, extra_body: dict[str, Any]) -> bool:
        """Whether the server constrains a short reply as `extra_body` asks."""
        try:
            completion = await self._client.chat.completions.create(
                model=self._model,
                messages=[{"role": "user", "content": "Reply with a JSON object."}],
                max_tokens=24,
                temperature=0.0,
                extra_body=extra_body,
            )
            choices = getattr(completion, "choices", None) or []
            return bool(choices) and json.loads(choices[0].message.content or "") == PROBE_VALUE
        except (openai.APIError, ValueError, RecursionError, AttributeError):
            return False

    def _notice(self, text: str) -> None:
        if self._on_notice is not None:
            self._on_notice(f"{self._name}: {text}")

    # -- request ---------------------------------------------------------------------

    def _params(self, request: ModelRequest) -> _ChatParams:
        limit = self.max_output_tokens or request.max_output_tokens
        native = self.tool_format == "native"
        extra_body: dict[str, Any] | None = None
        self._current_tools = request.tools
        if self.tool_format in tool_modes.CONSTRAINED_MODES and request.tools:
            schema = tool_modes.reply_schema(
                request.tools,
                require_call=tool_modes.call_required(request.messages),
                reply_tokens=limit,
            )
            extra_body = (
                {"grammar": tool_modes.grammar_for(schema)}
                if self.tool_format == "grammar"
                else {
                    "response_format": tool_modes.response_format(
                        schema, self.response_format_style
                    )
                }
            )
        conversation = not self._prebuilt_body  # a prebuilt body carries its own (`_body`)
        return _ChatParams(
            model=self._model,
            messages=to_openai_messages(
                request.system, request.messages, request.tools, self.tool_format
            )
            if conversation
            else [],
            tools=[to_openai_tool(t) for t in request.tools]
            if conversation and native and request.tools
            else omit,
            temperature=omit if request.temperature is None else request.temperature,
            seed=omit if self.seed is None else self.seed,
            max_completion_tokens=limit if self._uses_completion_tokens_field else omit,
            max_tokens=omit if self._uses_completion_tokens_field else limit,
            extra_body=extra_body,
        )

    def _body(self, params: _ChatParams, request: ModelRequest, stream: bool) -> bytes:
        """The JSON body the SDK builds from `params` and `request`, byte for byte, from the
        parts kept between calls: the system prompt and tools once per set, the history from
        where it last changed (see `wire`). Keys in the SDK's order."""
        fields: list[tuple[str, bytes | list[bytes]]] = [("model", wire.dumps(params["model"]))]
        if stream:
            fields.append(("stream", b"true"))
        fields.append(("messages", self._wire_messages(request)))
        _add_given(fields, "max_completion_tokens", params["max_completion_tokens"])
        _add_given(fields, "max_tokens", params["max_tokens"])
        _add_given(fields, "seed", params["seed"])
        if stream:
            fields.append(("stream_options", b'{"include_usage":true}'))
        _add_given(fields, "temperature", params["temperature"])
        if self.tool_format == "native" and request.tools:
            tools = request.tools
            fields.append(("tools", self._wire.tools.get(tools, None, lambda: _tools_json(tools))))
        for key, value in (params["extra_body"] or {}).items():
            fields.append((key, wire.dumps(value)))
        return wire.json_object(fields)

    def _wire_messages(self, request: ModelRequest) -> list[bytes]:
        mode = self.tool_format
        system = self._wire.system.get(
            request.tools,
            (request.system, mode),
            lambda: _system_units(system_text(request.system, request.tools, mode)),
        )
        history = self._wire.histories.get(mode)
        if history is None:
            history = self._wire.histories[mode] = wire.HistoryWire(wire_converter(mode))
        return [*system, *history.units(request.messages)]

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
        raw_usage = getattr(completion, "usage", None)
        self._last_prompt_tokens = raw_usage.prompt_tokens if raw_usage is not None else None
        response = self._response(
            message.content or "",
            raw_calls,
            _usage(raw_usage),
            choice.finish_reason,
            completion.model,
        )
        return _missing_usage_marked(response, raw_usage)

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
                self._name, None, exc.message, {}, **self._key_source()
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
        self._last_prompt_tokens = state.usage.prompt_tokens if state.usage is not None else None
        response = self._response(text, calls, _usage(state.usage), state.finish, state.model)
        return _missing_usage_marked(response, state.usage)

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
        elif self.tool_format in tool_modes.CONSTRAINED_MODES and self._current_tools:
            text, calls, format_error = tool_modes.parse_reply(
                text, self._current_tools, f"call-{self._calls_made + 1}"
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
            if exc.status_code == 400 and refuses_tools(message):
                return self._tools_refused(message)
            return provider_error_from_status(
                self._name, exc.status_code, message + code, headers, **self._key_source()
            )
        return provider_error_from_status(self._name, None, exc.message, {}, **self._key_source())

    def _key_source(self) -> dict[str, str]:
        """Where the key and the server come from, for the advice of a refused key."""
        return {"env_var": API_KEY_ENV, "base_url": self._base_url, "base_url_env": BASE_URL_ENV}

    def _tools_refused(self, message: str) -> ProviderError:
        text = (
            f"{self._name}: the server refused tool definitions for {self._model} (HTTP 400: "
            f"{message}); use --tool-format auto (it finds a mode the server accepts), "
            "json_schema or text, or a model with tool support"
        )
        return ProviderError(
            text,
            provider=self._name,
            status_code=400,
            retryable=False,
            details={TOOLS_REFUSED: True, "refused": message},
        )


def refuses_tools(message: str) -> bool:
    """Whether an HTTP 400's message says the model cannot take tool definitions (Ollama:
    "registry.ollama.ai/library/gemma3:270m does not support tools")."""
    lowered = message.lower()
    return any(hint in lowered for hint in TOOLS_REFUSED_HINTS)


def tools_were_dropped_for(request: ModelRequest, prompt_tokens: int) -> bool | None:
    """`tool_modes.tools_were_dropped` for one request."""
    return tool_modes.tools_were_dropped(
        prompt_tokens, request.system, request.messages, request.tools
    )


def _estimate_with_tools(request: ModelRequest) -> int:
    from journeyman.providers.pricing import estimate_fixed_tokens, estimate_tokens

    fixed = estimate_fixed_tokens(request.system, [t.parameters for t in request.tools])
    return fixed + sum(estimate_tokens(m.content) for m in request.messages)


def _error_message(body: object) -> str | None:
    """`message` of an OpenAI-style error body (the SDK passes the inner `error` object)."""
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return str(inner["message"])
        if isinstance(inner, str):
            return inner
    return None


def _missing_usage_marked(response: ModelResponse, usage: CompletionUsage | None) -> ModelResponse:
    """`response`, marked when the server sent no usage or no prompt count (some servers and
    proxies leave it out, or send zeros): the loop then charges the call's worst case."""
    if usage is not None and (usage.prompt_tokens or 0) > 0:
        return response
    return dataclasses.replace(response, usage_missing=True)


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


def _add_given(fields: list[tuple[str, bytes | list[bytes]]], key: str, value: object) -> None:
    if not isinstance(value, Omit):
        fields.append((key, wire.dumps(value)))


def _tools_json(tools: Sequence[ToolSpec]) -> bytes:
    return wire.json_array([wire.dumps(to_openai_tool(tool)) for tool in tools])


def _system_units(system: str) -> list[bytes]:
    return [wire.dumps({"role": "system", "content": system})] if system else []


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
    templates insist that roles alternate). The constrained modes (json_schema, grammar) do
    the same with calls written as the bare JSON objects their replies are.
    """
    system = system_text(system, tools, tool_format)
    out: list[ChatCompletionMessageParam] = []
    if system:
        out.append({"role": "system", "content": system})
    out.extend(_conversation(paired_history(messages), tool_format))
    return out


def system_text(system: str, tools: Sequence[ToolSpec], tool_format: ToolFormat) -> str:
    """The system prompt, followed in the modes without native tools by how to call them."""
    constrained = tool_format in tool_modes.CONSTRAINED_MODES
    if not (tools and (constrained or tool_format == "text")):
        return system
    appendix = (
        tool_modes.render_instructions(tools)
        if constrained
        else text_tools.render_tool_instructions(tools)
    )
    return f"{system}\n\n{appendix}" if system else appendix


def _conversation(
    messages: Sequence[Message],
    tool_format: ToolFormat,
    assistants: list[tuple[int, int]] | None = None,
) -> list[ChatCompletionMessageParam]:
    """The Chat Completions messages of an already paired history (see `to_openai_messages`).

    Each assistant message becomes a message of its own; `assistants`, when given, is told
    each one (0 for the first) with the number of messages before it."""
    constrained = tool_format in tool_modes.CONSTRAINED_MODES
    text_mode = tool_format == "text" or constrained
    render_call = tool_modes.render_call if constrained else text_tools.render_tool_call
    out: list[ChatCompletionMessageParam] = []
    for message in messages:
        if message.role is Role.SYSTEM:
            out.append({"role": "system", "content": message.content})
        elif message.role is Role.USER:
            _append_user(out, message.content, merge=text_mode)
        elif message.role is Role.ASSISTANT:
            if assistants is not None:
                assistants.append((len(assistants), len(out)))
            out.append(_assistant_message(message, text_mode, render_call))
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


def _assistant_message(
    message: Message, text_mode: bool, render_call: Callable[[ToolCall], str]
) -> ChatCompletionMessageParam:
    if text_mode:
        parts = [message.content, *map(render_call, message.tool_calls)]
        return {"role": "assistant", "content": "\n\n".join(p for p in parts if p)}
    if not message.tool_calls:
        return {"role": "assistant", "content": message.content}
    calls: list[ChatCompletionMessageFunctionToolCallParam] = [
        {
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
        }
        for call in message.tool_calls
    ]
    return {"role": "assistant", "content": message.content or None, "tool_calls": calls}


def wire_converter(tool_format: ToolFormat) -> wire.Converter:
    """Converts a run of messages to encoded Chat Completions messages (see `wire`)."""

    def convert(messages: Sequence[Message]) -> wire.Converted:
        paired, fixes = with_paired_results(messages)
        assistants: list[tuple[int, int]] = []
        units = _conversation(paired, tool_format, assistants)
        return wire.Converted([wire.dumps(unit) for unit in units], assistants, fixes)

    return convert


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
