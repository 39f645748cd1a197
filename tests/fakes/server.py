"""The threaded HTTP machinery shared by the fake model servers.

`FakeServer` owns a `ThreadingHTTPServer` on 127.0.0.1 (a free port unless one is given) that
runs in a daemon thread, so it never blocks the test (nor a subprocess talking to it). Each
request to the provider's endpoint consumes one script item; subclasses turn replies and faults
into their provider's wire format (`render_json`, `render_events`, `error_body`, ...).

Besides the provider endpoint, every fake answers a small control API, so a server running in
another process can be scripted and inspected over HTTP:

    POST /_fake/enqueue   body: list of item dicts (see `script.item_to_dict`)
    GET  /_fake/requests  recorded requests as JSON
    POST /_fake/reset     forget the queue and the recorded requests
"""

from __future__ import annotations

import contextlib
import itertools
import json
import socket
import struct
import threading
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, Literal, Self

from .script import (
    Disconnect,
    Drip,
    Hang,
    HTTPFault,
    KeepAlive,
    MidStreamError,
    RawBody,
    RecordedRequest,
    Reply,
    ScriptItem,
    StreamCut,
    item_from_dict,
)

EventKind = Literal["text", "arguments", "other"]


@dataclass(frozen=True)
class SSEEvent:
    """One server-sent event, already encoded, tagged so that cuts can target a spot."""

    data: bytes
    kind: EventKind = "other"
    """"text" for a non-empty text delta, "arguments" for a non-empty tool-argument delta."""


def sse(data: Any, event: str | None = None, kind: EventKind = "other") -> SSEEvent:
    """Encode one SSE frame; `data` that is not a string is sent as compact JSON."""
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    head = f"event: {event}\n" if event else ""
    return SSEEvent(f"{head}data: {payload}\n\n".encode(), kind)


def default_cut(events: list[SSEEvent]) -> int:
    """Events to send before a default cut: just past the first argument delta, else the
    first text delta, else half of the stream."""
    for kind in ("arguments", "text"):
        for index, event in enumerate(events):
            if event.kind == kind:
                return index + 1
    return max(1, len(events) // 2)


class FakeServer:
    """Base of the fake provider servers. Use as a context manager or call start()/stop()."""

    provider: ClassVar[str] = "fake"
    api_path: ClassVar[str] = "/"
    request_id_header: ClassVar[str] = "x-request-id"

    def __init__(
        self,
        script: Iterable[ScriptItem] = (),
        *,
        default: ScriptItem | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        strict: bool = False,
    ) -> None:
        self.default = default
        """Played when the queue is empty; None answers 400 "script exhausted"."""
        self.strict = strict
        """Check the conversation like the real API: a tool call without its result (or a
        result without its call) gets a 400, before any script item is consumed."""
        self.requests: list[RecordedRequest] = []
        """Every request to the provider endpoint, in arrival order."""
        self._queue: deque[ScriptItem] = deque(script)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._address = (host, port)
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._ids = itertools.count(1)

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> Self:
        if self._httpd is not None:
            return self
        self._stopping.clear()
        httpd = _HTTPServer(self._address, _Handler)
        httpd.fake = self
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"fake-{self.provider}-server",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        httpd, thread = self._httpd, self._thread
        if httpd is None:
            return
        self._stopping.set()  # wakes handlers that are hanging on purpose
        httpd.shutdown()
        httpd.server_close()
        if thread is not None:
            thread.join(timeout=5)
        self._httpd = self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- addresses ---------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError(f"fake {self.provider} server is not running; call start()")
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """Scheme, host and port, e.g. `http://127.0.0.1:40123`."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """What to pass as the SDK's `base_url`."""
        return self.url

    # -- script ------------------------------------------------------------------------

    def enqueue(self, *items: ScriptItem) -> Self:
        """Append items to the script; each request to the endpoint consumes one."""
        with self._lock:
            self._queue.extend(items)
        return self

    @property
    def remaining(self) -> int:
        """Script items not yet played."""
        with self._lock:
            return len(self._queue)

    @property
    def last_request(self) -> RecordedRequest:
        with self._lock:
            if not self.requests:
                raise AssertionError(f"fake {self.provider} server received no request")
            return self.requests[-1]

    def reset(self) -> None:
        with self._lock:
            self._queue.clear()
            self.requests.clear()

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def _next_item(self, request: RecordedRequest) -> ScriptItem:
        with self._lock:
            item = self._queue.popleft() if self._queue else self.default
            count = len(self.requests)
        if item is None:
            return HTTPFault(
                400,
                f"fake {self.provider} server: script exhausted after {count - 1} replies "
                "(enqueue more items or set `default`)",
            )
        while callable(item) and not isinstance(item, type):
            item = item(request)
        return item

    def next_id(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids)}"

    # -- wire format (subclasses) -----------------------------------------------------

    def listing(self, request: RecordedRequest) -> dict[str, Any] | None:
        """The answer to a GET the provider serves besides its endpoint (a model list), or
        None (404, recorded like any request)."""
        return None

    def render_json(self, reply: Reply, request: RecordedRequest) -> dict[str, Any]:
        raise NotImplementedError

    def render_events(self, reply: Reply, request: RecordedRequest) -> list[SSEEvent]:
        raise NotImplementedError

    def error_body(self, fault: HTTPFault) -> dict[str, Any]:
        raise NotImplementedError

    def error_event(self, fault: MidStreamError) -> SSEEvent:
        raise NotImplementedError

    def error_status(self, error_type: str) -> int:
        """HTTP status matching an in-band error type (for non-streaming `MidStreamError`)."""
        return 500

    def stream_terminator(self) -> list[SSEEvent]:
        """Frames sent after a complete stream (OpenAI's `[DONE]`)."""
        return []

    def conversation_problem(self, body: Any) -> str | None:
        """What a strict server rejects in a request body's conversation, or None."""
        return None


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    fake: FakeServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Clients hang up on purpose in fault tests; stay quiet about it."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def finish(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            super().finish()

    # -- dispatch ----------------------------------------------------------------------

    def _handle(self) -> None:
        fake = self.server.fake
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        request = RecordedRequest(
            method=self.command,
            path=self.path,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
            raw_body=raw,
        )
        try:
            if self.path.startswith("/_fake/"):
                self._control(request)
                return
            listing = fake.listing(request) if self.command == "GET" else None
            if listing is not None:
                self._send_json(200, listing)
                return
            fake._record(request)
            if self.command != "POST" or self.path.split("?")[0] != fake.api_path:
                fault = HTTPFault(
                    404, f"fake {fake.provider} server: no route {self.command} {self.path}"
                )
                self._send_fault(fault)
                return
            problem = fake.conversation_problem(request.body) if fake.strict else None
            if problem is not None:
                self._send_fault(HTTPFault(400, problem))
                return
            self._play(fake._next_item(request), request)
        except OSError:  # the client went away (timeouts, cut tests)
            self.close_connection = True

    def _control(self, request: RecordedRequest) -> None:
        fake = self.server.fake
        if request.path == "/_fake/enqueue" and isinstance(request.body, list):
            fake.enqueue(*(item_from_dict(d) for d in request.body))
            self._send_json(200, {"queued": len(request.body), "remaining": fake.remaining})
        elif request.path == "/_fake/requests":
            with fake._lock:
                recorded = [
                    {"method": r.method, "path": r.path, "headers": r.headers, "body": r.body}
                    for r in fake.requests
                ]
            self._send_json(200, recorded)
        elif request.path == "/_fake/reset":
            fake.reset()
            self._send_json(200, {"reset": True})
        else:
            self._send_json(404, {"error": f"unknown control request {request.path}"})

    def _play(self, item: ScriptItem, request: RecordedRequest) -> None:
        fake = self.server.fake
        if isinstance(item, Reply):
            if request.streaming:
                self._send_events(fake.render_events(item, request) + fake.stream_terminator())
            else:
                self._send_json(200, fake.render_json(item, request))
        elif isinstance(item, HTTPFault):
            self._send_fault(item)
        elif isinstance(item, Hang):
            fake._stopping.wait(item.seconds)
            self._drop(reset=False)
        elif isinstance(item, RawBody):
            data = item.body.encode() if isinstance(item.body, str) else item.body
            self._send_bytes(item.status, data, item.content_type)
        elif isinstance(item, Disconnect):
            self._drop(reset=item.reset)
        elif isinstance(item, StreamCut):
            self._play_cut(item, request)
        elif isinstance(item, Drip):
            self._play_drip(item, request)
        elif isinstance(item, KeepAlive):
            self._send_head(200, "text/event-stream", {"Transfer-Encoding": "chunked"})
            waited = 0.0
            while waited < item.seconds and not fake._stopping.wait(item.interval_s):
                self._chunk(b": ping\n\n")
                waited += item.interval_s
            self._drop(reset=False)
        elif isinstance(item, MidStreamError):
            if request.streaming:
                events = fake.render_events(item.reply, request)
                keep = default_cut(events) if item.after_events is None else item.after_events
                self._send_events([*events[:keep], fake.error_event(item)])
            else:
                status = fake.error_status(item.error_type)
                self._send_fault(HTTPFault(status, item.message, item.error_type))
        else:
            raise TypeError(f"unknown script item {item!r}")

    def _play_cut(self, cut: StreamCut, request: RecordedRequest) -> None:
        fake = self.server.fake
        if not request.streaming:
            data = json.dumps(fake.render_json(cut.reply, request)).encode()
            if cut.clean_end:  # a complete HTTP body holding half a JSON document
                self._send_bytes(200, data[: len(data) // 2], "application/json")
            else:  # announce the full length, send half, hang up
                self._send_head(200, "application/json", {"Content-Length": str(len(data))})
                self.wfile.write(data[: len(data) // 2])
                self._drop(reset=False)
            return
        events = fake.render_events(cut.reply, request)
        keep = default_cut(events) if cut.after_events is None else cut.after_events
        self._send_head(200, "text/event-stream", {"Transfer-Encoding": "chunked"})
        for event in events[:keep]:
            self._chunk(event.data)
        if cut.clean_end:
            self._chunk(b"")
        else:
            self._drop(reset=False)

    def _play_drip(self, drip: Drip, request: RecordedRequest) -> None:
        fake = self.server.fake
        if request.streaming:
            events = fake.render_events(drip.reply, request) + fake.stream_terminator()
            self._send_head(200, "text/event-stream", {"Transfer-Encoding": "chunked"})
            data = b"".join(event.data for event in events)
        else:
            data = json.dumps(fake.render_json(drip.reply, request)).encode()
            self._send_head(200, "application/json", {"Content-Length": str(len(data))})
        for index in range(len(data)):
            if fake._stopping.wait(drip.interval_s):
                break
            byte = data[index : index + 1]
            if request.streaming:
                self._chunk(byte)
            else:
                self.wfile.write(byte)
                self.wfile.flush()
        else:
            if request.streaming:
                self._chunk(b"")
            return
        self._drop(reset=False)

    # -- writing -----------------------------------------------------------------------

    def _send_head(self, status: int, content_type: str, headers: dict[str, str]) -> None:
        fake = self.server.fake
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header(fake.request_id_header, fake.next_id("req_fake_"))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()

    def _send_bytes(
        self, status: int, data: bytes, content_type: str, headers: dict[str, str] | None = None
    ) -> None:
        self._send_head(status, content_type, {**(headers or {}), "Content-Length": str(len(data))})
        self.wfile.write(data)
        self.wfile.flush()

    def _send_json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        self._send_bytes(status, json.dumps(body).encode(), "application/json", headers)

    def _send_fault(self, fault: HTTPFault) -> None:
        headers = dict(fault.headers)
        if fault.retry_after is not None:
            headers["Retry-After"] = str(fault.retry_after)
        if fault.retry_after_ms is not None:
            headers["retry-after-ms"] = str(fault.retry_after_ms)
        self._send_json(fault.status, self.server.fake.error_body(fault), headers)

    def _send_events(self, events: list[SSEEvent]) -> None:
        self._send_head(
            200, "text/event-stream", {"Transfer-Encoding": "chunked", "Cache-Control": "no-cache"}
        )
        for event in events:
            self._chunk(event.data)
        self._chunk(b"")

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _drop(self, *, reset: bool) -> None:
        """Close the connection without (finishing) a response."""
        self.close_connection = True
        sock = self.connection
        with contextlib.suppress(OSError):
            self.wfile.flush()
            if reset:  # SO_LINGER 0: close() sends RST instead of FIN
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                sock.close()
            else:
                sock.shutdown(socket.SHUT_RDWR)
