"""Rate limits shared by every call to one provider account: requests and tokens per minute,
and the pause a 429 asks for.

A call asks the limiter before it is sent (`RateLimiter.admit`) and waits as long as it says;
a 429 is reported to it (`RateLimiter.throttled`), which pauses every call with the same key
until the service's `Retry-After` has passed (exactly that long; without one, a backoff that
doubles from 1 s to 60 s), and the call is then sent again: a 429 costs the call a wait, never
the run. `ResilientProvider` does all this when its `RetryPolicy` carries a limiter.

The key says whose limit it is: provider, base URL and a fingerprint of the API key
(`limit_key`; never the key itself). Limits are kept over a sliding minute: at most
`requests_per_minute` calls admitted in any 60 s, and at most `tokens_per_minute` tokens, a
call counting its estimated prompt plus its output limit until its reply reports real usage.

Where the windows live is the backend's business (`LimiterBackend`): `RateWindows` in this
process, or a service every worker of a batch asks (`journeyman.batch.rate_limit_service`, a
Ray actor on a cluster). A backend answers with how long to wait, never by holding a caller,
so a waiting call holds nothing but its own coroutine.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from journeyman.providers.base import ModelRequest
from journeyman.providers.pricing import tokens_for_chars

WINDOW_S = 60.0
"""The span the per-minute limits are counted over."""
FIRST_BACKOFF_S = 1.0
"""Pause after a 429 that names no `Retry-After`; doubled for each next one, up to a minute."""
MAX_BACKOFF_S = 60.0
CALM_AFTER_S = 60.0
"""Seconds without a 429 after which the backoff starts again from `FIRST_BACKOFF_S`."""


def limit_key(provider: str, base_url: str, api_key: str | None) -> str:
    """Whose limit a call counts against: the provider, its base URL and a fingerprint of the
    API key (12 hex digits of its SHA-256), so keys never travel or get stored."""
    fingerprint = hashlib.sha256((api_key or "").encode()).hexdigest()[:12] if api_key else "-"
    return f"{provider}|{base_url.rstrip('/')}|key:{fingerprint}"


def request_tokens(request: ModelRequest) -> int:
    """What a call counts against a tokens-per-minute limit before its reply says: its prompt
    (about four characters a token) and the most output it may produce."""
    chars = len(request.system) + sum(len(repr(tool)) for tool in request.tools)
    chars += sum(message.approx_chars for message in request.messages)
    return tokens_for_chars(chars) + request.max_output_tokens


@dataclass(frozen=True)
class RateLimits:
    """The limits a caller holds a key to (None: no such limit)."""

    requests_per_minute: int | None = None
    """Calls admitted in any 60 s."""
    tokens_per_minute: int | None = None
    """Tokens (prompt and output) admitted in any 60 s."""

    @property
    def counts_tokens(self) -> bool:
        return self.tokens_per_minute is not None


@dataclass(frozen=True)
class Admission:
    """A backend's answer to a call asking to go: wait `wait_s` and ask again, or go now."""

    wait_s: float
    """0 when admitted."""
    permit: int = 0
    """The admitted call's entry in the window (to settle its tokens)."""


class LimiterBackend(Protocol):
    """Where the windows and pauses of every key live."""

    async def ask(self, key: str, tokens: int, limits: RateLimits) -> Admission:
        """Admit a call of `tokens` under `limits` now, or say how long to wait."""
        ...

    async def settle(self, key: str, permit: int, tokens: int) -> None:
        """The admitted call `permit` used `tokens` (its reply's usage; 0 when refused)."""
        ...

    async def throttled(self, key: str, retry_after_s: float | None) -> float:
        """The service answered 429: pause `key` (for `retry_after_s` when it said); returns
        the seconds the pause has left."""
        ...


@dataclass
class _KeyState:
    entries: deque[list[float]] = field(default_factory=deque)
    """[admitted at, tokens, permit] of the calls admitted in the last minute, oldest first."""
    paused_until: float = 0.0
    backoff_s: float = 0.0
    last_throttled: float = float("-inf")
    permits: int = 0


class RateWindows:
    """The windows and pauses of every key (thread-safe; every backend ends up here)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._keys: dict[str, _KeyState] = {}
        self._lock = threading.Lock()

    def ask(self, key: str, tokens: int, limits: RateLimits) -> Admission:
        with self._lock:
            now = self._clock()
            state = self._state(key, now)
            wait = max(state.paused_until - now, _window_wait(state, now, tokens, limits))
            if wait > 0:
                return Admission(max(wait, 0.001))
            state.permits += 1
            state.entries.append([now, float(tokens), float(state.permits)])
            return Admission(0.0, state.permits)

    def settle(self, key: str, permit: int, tokens: int) -> None:
        with self._lock:
            state = self._keys.get(key)
            for entry in state.entries if state is not None else ():
                if entry[2] == permit:
                    entry[1] = float(tokens)
                    return

    def throttled(self, key: str, retry_after_s: float | None) -> float:
        with self._lock:
            now = self._clock()
            state = self._state(key, now)
            if retry_after_s is not None:  # exactly what the service asked for
                state.paused_until = max(state.paused_until, now + max(0.0, retry_after_s))
            elif now >= state.paused_until:  # a 429 of calls sent during a pause adds nothing
                if now - state.last_throttled > CALM_AFTER_S:
                    state.backoff_s = 0.0
                state.backoff_s = min(MAX_BACKOFF_S, state.backoff_s * 2 or FIRST_BACKOFF_S)
                state.paused_until = now + state.backoff_s
            state.last_throttled = now
            return max(0.0, state.paused_until - now)

    def pause_left(self, key: str) -> float:
        """Seconds `key` stays paused (0 when it is not)."""
        with self._lock:
            state = self._keys.get(key)
            return 0.0 if state is None else max(0.0, state.paused_until - self._clock())

    def _state(self, key: str, now: float) -> _KeyState:
        state = self._keys.setdefault(key, _KeyState())
        while state.entries and state.entries[0][0] <= now - WINDOW_S:
            state.entries.popleft()
        return state


def _window_wait(state: _KeyState, now: float, tokens: int, limits: RateLimits) -> float:
    """How long until a call of `tokens` fits the minute's window under `limits`."""
    entries = state.entries
    wait = 0.0
    rpm = limits.requests_per_minute
    if rpm is not None and len(entries) >= rpm:
        wait = entries[len(entries) - rpm][0] + WINDOW_S - now  # when enough have expired
    tpm = limits.tokens_per_minute
    if tpm is not None and entries:
        excess = sum(entry[1] for entry in entries) + min(tokens, tpm) - tpm
        for entry in entries:  # a call larger than the limit goes alone, once the window is empty
            if excess <= 0:
                break
            excess -= entry[1]
            wait = max(wait, entry[0] + WINDOW_S - now)
    return wait


class InProcessBackend:
    """`RateWindows` of this process, as a backend (calls of one process share them)."""

    def __init__(self, windows: RateWindows | None = None) -> None:
        self.windows = windows or RateWindows()

    async def ask(self, key: str, tokens: int, limits: RateLimits) -> Admission:
        return self.windows.ask(key, tokens, limits)

    async def settle(self, key: str, permit: int, tokens: int) -> None:
        self.windows.settle(key, permit, tokens)

    async def throttled(self, key: str, retry_after_s: float | None) -> float:
        return self.windows.throttled(key, retry_after_s)


class WaitPastDeadline(Exception):
    """The limiter would hold a call past its deadline (`wait_s` from now)."""

    def __init__(self, wait_s: float) -> None:
        super().__init__(f"the rate limit holds calls for {wait_s:.1f} s more")
        self.wait_s = wait_s


@dataclass(frozen=True)
class Permit:
    """An admitted call: what it counted, to be settled with what it used."""

    key: str
    permit: int
    tokens: int


class RateLimiter:
    """What a provider's calls go through: `admit` waits until the key's limits let a call go,
    `settle` counts what it really used, `throttled` reports a 429."""

    def __init__(
        self,
        backend: LimiterBackend,
        limits: RateLimits | None = None,
        *,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> None:
        self.backend = backend
        self.limits = limits or RateLimits()
        self._sleep = sleep
        self.waited_s = 0.0
        """Seconds this limiter's calls spent waiting (for a pause or a full window)."""

    async def admit(self, key: str, request: ModelRequest, deadline: float | None = None) -> Permit:
        """Wait until a call of `request` may be sent on `key`; `WaitPastDeadline` at once
        when that would be after `deadline` (a `time.monotonic()` value)."""
        tokens = request_tokens(request) if self.limits.counts_tokens else 0
        while True:
            answer = await self.backend.ask(key, tokens, self.limits)
            if answer.wait_s <= 0:
                return Permit(key, answer.permit, tokens)
            if deadline is not None and time.monotonic() + answer.wait_s >= deadline:
                raise WaitPastDeadline(answer.wait_s)
            self.waited_s += answer.wait_s
            await self._sleep(answer.wait_s)

    async def settle(self, permit: Permit, used_tokens: int | None) -> None:
        """Count what the call used (None: it failed; nothing is known, 0 is counted)."""
        if self.limits.counts_tokens:
            await self.backend.settle(permit.key, permit.permit, used_tokens or 0)

    async def throttled(self, key: str, retry_after_s: float | None) -> float:
        return await self.backend.throttled(key, retry_after_s)


_PROCESS_WINDOWS = RateWindows()


def process_limiter(limits: RateLimits | None = None) -> RateLimiter:
    """A limiter over this process's windows: every agent of the process (subagents, a
    swarm's workers) that uses one shares the pauses and limits of each key."""
    return RateLimiter(InProcessBackend(_PROCESS_WINDOWS), limits)


__all__ = [
    "Admission",
    "InProcessBackend",
    "LimiterBackend",
    "Permit",
    "RateLimiter",
    "RateLimits",
    "RateWindows",
    "WaitPastDeadline",
    "limit_key",
    "process_limiter",
    "request_tokens",
]
