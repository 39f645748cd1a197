"""The rate limiter every task of a batch shares (see `providers.rate_limit`).

The windows and pauses live in the batch's own process; workers ask them over a socket:
`RateLimitService` listens on 127.0.0.1 (a free port) in a thread of the batch process, and
`SocketBackend` (picklable: address and secret, no state) is what a `TaskJob` carries to its
worker. One JSON line a request, one a reply; a request without the service's secret (a
random token made at start) is answered with an error and counts nothing, so no other program
on the machine can pause the batch's calls. On a Ray cluster the windows live in a named actor
instead (`ray_rate_limits`), which every batch on the cluster shares.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import secrets
import socketserver
import threading
from dataclasses import dataclass
from typing import Any

from journeyman.core.errors import ProviderError
from journeyman.providers.rate_limit import Admission, RateLimits, RateWindows

MAX_LINE = 64 * 1024
"""Longest request line the service reads."""
CONNECT_TIMEOUT_S = 10.0
"""How long a worker waits for the service to answer one request."""


class RateLimitService:
    """The batch's windows behind a socket on 127.0.0.1 (started at once; `close` stops it)."""

    def __init__(self, windows: RateWindows | None = None) -> None:
        self.windows = windows or RateWindows()
        self.token = secrets.token_hex(16)
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.service = self
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.2},
            name="batch-rate-limits",
            daemon=True,
        )
        self._thread.start()

    @property
    def backend(self) -> SocketBackend:
        """What a worker needs to reach the service."""
        host, port = self._server.server_address[:2]
        return SocketBackend(str(host), int(port), self.token)

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        """The reply to one request line (already parsed)."""
        if not hmac.compare_digest(str(request.get("token", "")), self.token):
            return {"error": "not this batch's rate limiter (wrong token)"}
        key = str(request["key"])
        op = request.get("op")
        if op == "ask":
            limits = RateLimits(_count(request.get("rpm")), _count(request.get("tpm")))
            admission = self.windows.ask(key, int(request["tokens"]), limits)
            return {"wait_s": admission.wait_s, "permit": admission.permit}
        if op == "settle":
            self.windows.settle(key, int(request["permit"]), int(request["tokens"]))
            return {}
        if op == "throttled":
            retry_after = request.get("retry_after_s")
            pause = self.windows.throttled(key, None if retry_after is None else float(retry_after))
            return {"pause_s": pause}
        return {"error": f"unknown request {op!r}"}

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def _count(value: Any) -> int | None:
    return None if value is None else int(value)


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    service: RateLimitService


class _Handler(socketserver.StreamRequestHandler):
    server: _Server

    def handle(self) -> None:
        while True:
            line = self.rfile.readline(MAX_LINE)
            if not line:
                return
            try:
                reply = self.server.service.answer(json.loads(line))
            except (ValueError, KeyError, TypeError) as error:
                reply = {"error": f"bad request: {type(error).__name__}: {error}"}
            self.wfile.write(json.dumps(reply).encode() + b"\n")
            self.wfile.flush()


@dataclass(frozen=True)
class SocketBackend:
    """A worker's way to the batch's `RateLimitService` (a `providers.rate_limit`
    `LimiterBackend`): one short connection per request."""

    host: str
    port: int
    token: str

    def __repr__(self) -> str:  # the token stays out of logs and reprs
        return f"SocketBackend({self.host}:{self.port})"

    async def ask(self, key: str, tokens: int, limits: RateLimits) -> Admission:
        reply = await self._request(
            {
                "op": "ask",
                "key": key,
                "tokens": tokens,
                "rpm": limits.requests_per_minute,
                "tpm": limits.tokens_per_minute,
            }
        )
        return Admission(float(reply["wait_s"]), int(reply["permit"]))

    async def settle(self, key: str, permit: int, tokens: int) -> None:
        await self._request({"op": "settle", "key": key, "permit": permit, "tokens": tokens})

    async def throttled(self, key: str, retry_after_s: float | None) -> float:
        reply = await self._request({"op": "throttled", "key": key, "retry_after_s": retry_after_s})
        return float(reply["pause_s"])

    async def _request(self, body: dict[str, Any]) -> dict[str, Any]:
        body["token"] = self.token
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT_S):
                reader, writer = await asyncio.open_connection(self.host, self.port)
                try:
                    writer.write(json.dumps(body).encode() + b"\n")
                    await writer.drain()
                    line = await reader.readline()
                finally:
                    writer.close()
            reply = json.loads(line) if line else {"error": "the service closed the connection"}
        except (OSError, TimeoutError, ValueError) as error:
            reply = {"error": f"{type(error).__name__}: {error}"}
        if not isinstance(reply, dict) or "error" in reply:
            why = reply.get("error") if isinstance(reply, dict) else "not a JSON object"
            raise ProviderError(
                f"the batch's rate limiter at {self.host}:{self.port} did not answer ({why}); "
                "is the batch process still running?",
                provider="rate-limiter",
                retryable=True,  # an infrastructure fault: the task resumes, never "failed"
            )
        return reply


__all__ = ["RateLimitService", "SocketBackend"]
