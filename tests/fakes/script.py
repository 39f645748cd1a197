"""What a fake model server plays back: scripted replies and scripted faults.

A test queues items on a fake server; each incoming request consumes one item. Items are plain
frozen dataclasses, so a script reads like the conversation it stands for:

    server.enqueue(
        error(429, retry_after=2),
        reply(tool_calls=[("read_file", {"path": "a.py"})]),
        reply("All done."),
    )

`item_to_dict` / `item_from_dict` turn items into JSON-ready dicts and back, for servers that
run in another process (see `python -m tests.fakes --help`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, TypeAlias

# --------------------------------------------------------------------------- requests


@dataclass(frozen=True)
class RecordedRequest:
    """One HTTP request as the fake server received it."""

    method: str
    path: str
    headers: dict[str, str]
    """Header names are lower-cased."""
    body: Any
    """The JSON body, parsed; None when the body was empty or not JSON."""
    raw_body: bytes = b""

    @property
    def json(self) -> dict[str, Any]:
        """The parsed body, asserted to be a JSON object (the common case in tests)."""
        assert isinstance(self.body, dict), f"request body is not a JSON object: {self.raw_body!r}"
        return self.body

    @property
    def streaming(self) -> bool:
        return isinstance(self.body, dict) and self.body.get("stream") is True


# --------------------------------------------------------------------------- replies


@dataclass(frozen=True)
class FakeToolCall:
    """A tool call the fake model makes."""

    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    """A dict is sent as JSON. A string is sent verbatim, which is how a test scripts
    arguments that are not valid JSON."""
    id: str | None = None
    """The call id; None lets the server number it (`toolu_fake_1`, `call_fake_1`, ...)."""

    def arguments_json(self) -> str:
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments)


@dataclass(frozen=True)
class FakeUsage:
    """Token counts the fake server reports, in the neutral split used by `core.messages.Usage`.

    The OpenAI server reports `prompt_tokens = input + cache_read + cache_write` and
    `prompt_tokens_details.cached_tokens = cache_read`, so an adapter that maps usage correctly
    gets these four numbers back from either server.
    """

    input_tokens: int = 12
    output_tokens: int = 7
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


@dataclass(frozen=True)
class Reply:
    """A normal model reply: text and/or tool calls, with usage."""

    text: str = ""
    tool_calls: tuple[FakeToolCall, ...] = ()
    usage: FakeUsage | None = field(default_factory=FakeUsage)
    """None leaves usage out of the reply altogether, as some servers and proxies do."""
    stop_reason: str | None = None
    """None derives it: Anthropic `tool_use`/`end_turn`, OpenAI `tool_calls`/`stop`."""
    model: str | None = None
    """None echoes the model named in the request."""
    chunk_size: int = 4
    """Streaming only: characters per text delta and per tool-argument delta."""


# --------------------------------------------------------------------------- faults


@dataclass(frozen=True)
class HTTPFault:
    """An HTTP error status with a body in the provider's error JSON shape."""

    status: int
    message: str = ""
    """Empty: a default message for the status."""
    error_type: str | None = None
    """`error.type` in the body; None: the provider's usual type for the status."""
    code: str | None = None
    """OpenAI only: `error.code` (e.g. `context_length_exceeded`)."""
    retry_after: str | float | None = None
    """Value of the `Retry-After` header: seconds, or an HTTP date string."""
    retry_after_ms: float | None = None
    """Value of the `retry-after-ms` header."""
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Hang:
    """Read the request, send nothing for `seconds`, then drop the connection.

    Use it with a short client timeout to provoke a read timeout.
    """

    seconds: float = 10.0


@dataclass(frozen=True)
class RawBody:
    """Send exactly this body (e.g. malformed JSON, or a JSON reply with no choices)."""

    body: str | bytes
    status: int = 200
    content_type: str = "application/json"


@dataclass(frozen=True)
class Disconnect:
    """Read the request and close the connection without answering."""

    reset: bool = True
    """True sends a TCP reset; False closes politely (FIN)."""


@dataclass(frozen=True)
class StreamCut:
    """Stream `reply` but stop partway.

    Non-streaming requests get the reply cut the same way: the JSON body is truncated.
    """

    reply: Reply
    after_events: int | None = None
    """How many SSE events to send; None cuts right after the first tool-argument delta
    (or the first text delta when the reply has no tool calls)."""
    clean_end: bool = False
    """False drops the connection mid-body (the client sees an incomplete chunked body);
    True ends the HTTP body properly, so the stream just stops early."""


@dataclass(frozen=True)
class MidStreamError:
    """Stream part of `reply`, then an in-band error (Anthropic `event: error`, or an OpenAI
    chunk carrying `{"error": ...}`), then end the stream."""

    reply: Reply
    after_events: int | None = None
    """As in `StreamCut`."""
    error_type: str = "overloaded_error"
    message: str = "Overloaded"


@dataclass(frozen=True)
class Drip:
    """Answer with `reply`, but send the response body one byte every `interval_s` seconds.

    Every read gets a byte in time, so a per-read timeout never fires: only a limit on the
    whole call ends it. Streaming requests get the SSE events dripped the same way.
    """

    reply: Reply = field(default_factory=Reply)
    interval_s: float = 1.0


@dataclass(frozen=True)
class KeepAlive:
    """Open an SSE stream (HTTP 200) and send only keep-alive comments (`: ping`), one every
    `interval_s` seconds, for `seconds`; then drop the connection."""

    interval_s: float = 0.5
    seconds: float = 60.0


Fault: TypeAlias = (
    HTTPFault | Hang | RawBody | Disconnect | StreamCut | MidStreamError | Drip | KeepAlive
)
ScriptItem: TypeAlias = Reply | Fault | Callable[[RecordedRequest], "ScriptItem"]
"""A reply, a fault, or a function of the received request returning one of those."""


# --------------------------------------------------------------------------- helpers

ToolCallLike: TypeAlias = FakeToolCall | tuple[str, dict[str, Any] | str]


def tool_call(
    name: str, arguments: dict[str, Any] | str | None = None, *, id: str | None = None
) -> FakeToolCall:
    return FakeToolCall(name, {} if arguments is None else arguments, id)


def reply(
    text: str = "",
    tool_calls: Iterable[ToolCallLike] = (),
    *,
    input_tokens: int = 12,
    output_tokens: int = 7,
    cache_read_tokens: int = 0,
    cache_write_tokens: int = 0,
    stop_reason: str | None = None,
    model: str | None = None,
    chunk_size: int = 4,
    omit_usage: bool = False,
) -> Reply:
    """Build a `Reply`. Tool calls are `FakeToolCall`s or `(name, arguments)` pairs;
    `omit_usage` sends the reply without any usage (the token counts are then ignored)."""
    calls = tuple(
        c if isinstance(c, FakeToolCall) else FakeToolCall(c[0], c[1]) for c in tool_calls
    )
    usage = FakeUsage(input_tokens, output_tokens, cache_read_tokens, cache_write_tokens)
    return Reply(text, calls, None if omit_usage else usage, stop_reason, model, chunk_size)


def error(
    status: int,
    message: str = "",
    *,
    retry_after: str | float | None = None,
    retry_after_ms: float | None = None,
    error_type: str | None = None,
    code: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> HTTPFault:
    """Build an `HTTPFault`, e.g. `error(429, retry_after=3)` or `error(529)`."""
    return HTTPFault(status, message, error_type, code, retry_after, retry_after_ms, headers or {})


def hang(seconds: float = 10.0) -> Hang:
    return Hang(seconds)


def drip(reply: Reply | None = None, *, interval_s: float = 1.0) -> Drip:
    return Drip(reply or Reply("dripped"), interval_s)


def keep_alive(*, interval_s: float = 0.5, seconds: float = 60.0) -> KeepAlive:
    return KeepAlive(interval_s, seconds)


def disconnect(*, reset: bool = True) -> Disconnect:
    return Disconnect(reset)


def malformed_json(body: str = '{"id": "broken", "content": [') -> RawBody:
    """A 200 response whose JSON body is cut off."""
    return RawBody(body)


def cut_stream(
    reply: Reply, after_events: int | None = None, *, clean_end: bool = False
) -> StreamCut:
    return StreamCut(reply, after_events, clean_end)


# --------------------------------------------------------------------------- JSON form

_KINDS: dict[str, type[Any]] = {
    "reply": Reply,
    "http_error": HTTPFault,
    "hang": Hang,
    "raw": RawBody,
    "disconnect": Disconnect,
    "stream_cut": StreamCut,
    "mid_stream_error": MidStreamError,
    "drip": Drip,
    "keep_alive": KeepAlive,
}


def item_to_dict(item: ScriptItem) -> dict[str, Any]:
    """A JSON-ready dict for a script item (callables cannot be sent)."""
    for kind, cls in _KINDS.items():
        if type(item) is cls:
            data = asdict(item)
            if isinstance(item, RawBody) and isinstance(item.body, bytes):
                data["body"] = item.body.decode("utf-8", errors="replace")
            if isinstance(item, HTTPFault):
                data["headers"] = dict(item.headers)
            return {"kind": kind, **data}
    raise TypeError(f"cannot serialise script item {item!r}")


def _reply_from_dict(data: Mapping[str, Any]) -> Reply:
    calls = tuple(
        FakeToolCall(c["name"], c.get("arguments", {}), c.get("id"))
        for c in data.get("tool_calls", ())
    )
    given = data.get("usage", {})
    usage = None if given is None else FakeUsage(**given)
    return Reply(
        data.get("text", ""),
        calls,
        usage,
        data.get("stop_reason"),
        data.get("model"),
        int(data.get("chunk_size", 4)),
    )


def item_from_dict(data: Mapping[str, Any]) -> ScriptItem:
    """Inverse of `item_to_dict`; `kind` defaults to "reply"."""
    fields = {k: v for k, v in data.items() if k != "kind"}
    kind = data.get("kind", "reply")
    if kind == "reply":
        return _reply_from_dict(fields)
    if kind in ("stream_cut", "mid_stream_error", "drip"):
        fields["reply"] = _reply_from_dict(fields.get("reply", {}))
    if kind not in _KINDS:
        raise ValueError(f"unknown script item kind {kind!r}; expected one of {sorted(_KINDS)}")
    result: ScriptItem = _KINDS[kind](**fields)
    return result
