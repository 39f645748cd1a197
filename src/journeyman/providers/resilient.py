"""Bounded retries with exponential backoff and jitter, then a fallback chain of providers.

Only retryable errors are retried (rate limits, overload, 5xx, timeouts, connection resets,
empty or malformed replies). Anything else — authentication, bad requests — fails at once. A
caller that schedules its own retries turns off `retry_rate_limits`: a 429 then ends the call
at once, marked `rate_limited`.

With a `RateLimiter` in the policy (`rate_limit.py`), every call waits for it before it is sent,
and a 429 pauses every call with the same key (the provider, base URL and API key) for the
service's `Retry-After`, then the call is sent again: waits for a 429 do not use up
`max_retries` (they have their own bound, `max_rate_limit_waits`, and the call's deadline).

Every call has one deadline that covers all its attempts and the waits between them: the
per-call limit of the policy, or an earlier one the caller passes (the run's remaining time).
It is enforced around the whole call, not per network read, so a body dripped byte by byte
or a stream of keep-alive comments cannot stretch it.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from journeyman.core.errors import AgentError, ProviderError
from journeyman.providers.base import (
    Capabilities,
    ModelRequest,
    ModelResponse,
    Provider,
    TextCallback,
)
from journeyman.providers.rate_limit import Permit, RateLimiter, WaitPastDeadline

RetryListener = Callable[[AgentError, str, int, float], object]
"""Called as (error, provider name, attempt number, delay in seconds) before each retry."""


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 4
    """Retries per provider after the first attempt; the total is always bounded."""
    base_delay_s: float = 0.5
    max_delay_s: float = 30.0
    """Upper bound of the computed backoff."""
    max_retry_after_s: float = 60.0
    """Upper bound of a server-requested `Retry-After` wait."""
    jitter: float = 0.25
    """Random spread added to each delay, as a fraction of it."""
    call_timeout_s: float | None = 600.0
    """Seconds one model call may take, all retries and waits included; None: no limit."""
    retry_rate_limits: bool = True
    """Retry a 429 like other transient faults; False ends the call at once with an error
    marked `rate_limited` (and `retry_after` when the service said), no fallback tried."""
    rate_limiter: RateLimiter | None = None
    """Shared limits and 429 pauses of each provider key; None: each call on its own."""
    max_rate_limit_waits: int = 50
    """With a `rate_limiter`: 429s one call waits out before it gives up (marked
    `rate_limited`); the call's deadline bounds them too."""

    def delay(self, attempt: int, error: AgentError, rng: random.Random) -> float:
        """Seconds to wait before retry number `attempt` (1-based)."""
        if isinstance(error, ProviderError) and error.retry_after is not None:
            return min(max(error.retry_after, 0.0), self.max_retry_after_s)
        backoff = min(self.base_delay_s * 2.0 ** (attempt - 1), self.max_delay_s)
        return backoff * (1 + rng.uniform(0, self.jitter))


class ResilientProvider:
    """Wraps one or more providers; the first is primary, the rest are fallbacks in order."""

    def __init__(
        self,
        providers: Sequence[Provider],
        policy: RetryPolicy | None = None,
        *,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
        seed: int | None = None,
    ) -> None:
        if not providers:
            raise ValueError("ResilientProvider needs at least one provider")
        self.providers = list(providers)
        self.policy = policy or RetryPolicy()
        self._sleep = sleep
        self._rng = random.Random(seed)
        self._active = 0
        self.listeners: list[RetryListener] = []

    @property
    def active(self) -> Provider:
        return self.providers[self._active]

    @property
    def name(self) -> str:
        return self.active.name

    @property
    def model(self) -> str:
        return self.active.model

    @property
    def capabilities(self) -> Capabilities:
        return self.active.capabilities

    @property
    def tool_mode_description(self) -> str | None:
        """The active provider's tool mode, for those that have a choice (see `tool_modes`)."""
        described = getattr(self.active, "tool_mode_description", None)
        return described if isinstance(described, str) else None

    async def complete(
        self,
        request: ModelRequest,
        on_text: TextCallback | None = None,
        *,
        deadline: float | None = None,
    ) -> ModelResponse:
        """Send `request` with retries and fallbacks, all finished by one deadline.

        `deadline` is an absolute `time.monotonic()` value (e.g. when the run's time runs out);
        the call ends at it or at the policy's `call_timeout_s`, whichever comes first, with a
        non-retryable `ProviderError` whose details carry `timeout` and `deadline`.
        """
        started = time.monotonic()
        limit = self.policy.call_timeout_s
        call_end = None if limit is None else started + limit
        end: float | None = call_end
        source = "call"
        if deadline is not None and (call_end is None or deadline < call_end):
            end, source = deadline, "run"
        if end is None:
            return await self._complete(request, on_text, None)
        if end <= started:
            raise self._deadline_error(0.0, source)
        try:
            async with asyncio.timeout(end - started):
                return await self._complete(request, on_text, end)
        except TimeoutError as exc:
            raise self._deadline_error(time.monotonic() - started, source) from exc

    async def _complete(
        self, request: ModelRequest, on_text: TextCallback | None, end: float | None
    ) -> ModelResponse:
        last_error: AgentError | None = None
        for index in range(self._active, len(self.providers)):
            self._active = index
            provider = self.providers[index]
            attempt = 0
            waits = 0
            while attempt <= self.policy.max_retries:
                try:
                    return await self._limited_call(provider, request, on_text, end)
                except AgentError as error:
                    if self._rate_limited_retry(error, provider):
                        waits += 1
                        await self._wait_out_429(error, provider, waits, end)
                        continue
                    if not self.policy.retry_rate_limits and _is_rate_limit(error):
                        raise rate_limited_error(error, provider) from error
                    if not error.retryable:
                        raise
                    last_error = error
                    attempt += 1
                    if attempt > self.policy.max_retries:
                        break
                    remaining = None if end is None else end - time.monotonic()
                    if _asks_to_wait_past(error, remaining):
                        last_error = _wait_too_long(error, provider, remaining)
                        break
                    delay = self.policy.delay(attempt, error, self._rng)
                    if remaining is not None and delay >= remaining:
                        raise TimeoutError from error  # waiting would only run into the deadline
                    for listener in self.listeners:
                        listener(error, provider.name, attempt, delay)
                    await self._sleep(delay)
        assert last_error is not None
        if last_error.details.get("wait_too_long") and len(self.providers) == 1:
            raise last_error
        tried = ", ".join(f"{p.name}:{p.model}" for p in self.providers)
        raise ProviderError(
            f"gave up after retries on every provider ({tried}); last error: {last_error.message}",
            provider=self.active.name,
            status_code=getattr(last_error, "status_code", None),
            retryable=False,
            details={"exhausted": True, "last_category": last_error.category.value},
        )

    async def _limited_call(
        self,
        provider: Provider,
        request: ModelRequest,
        on_text: TextCallback | None,
        end: float | None,
    ) -> ModelResponse:
        """One call of `provider`, through the policy's rate limiter when it has one and the
        provider says whose limit it counts against."""
        limiter = self.policy.rate_limiter
        key = getattr(provider, "rate_limit_key", None)
        if limiter is None or not isinstance(key, str):
            return await provider.complete(request, on_text)
        try:
            permit: Permit = await limiter.admit(key, request, end)
        except WaitPastDeadline as held:
            remaining = 0.0 if end is None else end - time.monotonic()
            raise _pause_too_long(None, provider, held.wait_s, remaining) from None
        try:
            response = await provider.complete(request, on_text)
        except AgentError:  # refused or failed: nothing was used (a cancelled call keeps its count)
            await limiter.settle(permit, None)
            raise
        if not response.usage_missing:  # without usage, its estimate keeps counting
            await limiter.settle(permit, response.usage.total_tokens)
        return response

    def _rate_limited_retry(self, error: AgentError, provider: Provider) -> bool:
        """Whether `error` is a 429 this call waits out through the policy's limiter."""
        if self.policy.rate_limiter is None or not _is_rate_limit(error):
            return False
        keyed = isinstance(getattr(provider, "rate_limit_key", None), str)
        return keyed and not error.details.get("exhausted")  # exhausted: ours, it gave up

    async def _wait_out_429(
        self, error: AgentError, provider: Provider, waits: int, end: float | None
    ) -> None:
        """Pause the provider's key for the service's Retry-After (every call of the key waits
        in `admit` until it passes); give up, marked `rate_limited`, after too many 429s or
        when the pause would outlast the call's deadline."""
        limiter = self.policy.rate_limiter
        key = getattr(provider, "rate_limit_key", None)
        assert limiter is not None and isinstance(error, ProviderError) and isinstance(key, str)
        pause = await limiter.throttled(key, error.retry_after)
        if waits > self.policy.max_rate_limit_waits:
            raise rate_limited_error(error, provider) from error
        remaining = None if end is None else end - time.monotonic()
        if remaining is not None and pause >= remaining:
            raise _pause_too_long(error, provider, pause, remaining) from error
        for listener in self.listeners:
            listener(error, provider.name, waits, pause)

    def _deadline_error(self, elapsed: float, source: str) -> ProviderError:
        return deadline_error(self.active, elapsed, source, self.policy.call_timeout_s)


async def complete_within(
    provider: Provider,
    request: ModelRequest,
    on_text: TextCallback | None = None,
    *,
    deadline: float | None,
) -> ModelResponse:
    """`provider.complete(request, on_text)`, ended at `deadline` (a `time.monotonic()` value).

    A `ResilientProvider` applies the deadline to its retries and waits as well; any other
    provider gets one timeout around its call. Either way the call ends with the same
    `ProviderError` (details `timeout`, `deadline`="run") when the deadline passes.
    """
    if isinstance(provider, ResilientProvider):
        return await provider.complete(request, on_text, deadline=deadline)
    if deadline is None:
        return await provider.complete(request, on_text)
    started = time.monotonic()
    if deadline <= started:
        raise deadline_error(provider, 0.0, "run", None)
    try:
        async with asyncio.timeout(deadline - started):
            return await provider.complete(request, on_text)
    except TimeoutError as exc:
        raise deadline_error(provider, time.monotonic() - started, "run", None) from exc


def deadline_error(
    provider: Provider, elapsed: float, source: str, call_timeout_s: float | None
) -> ProviderError:
    """The error of a call stopped at its deadline: the run's ("run") or its own ("call")."""
    if source == "run":
        why = "the run's time limit (--max-duration) was reached during the call"
        hint = "raise --max-duration"
    else:
        why = f"the call took longer than its {call_timeout_s or 0:g} s limit"
        hint = "raise model_call_timeout_s, or check that the server is answering"
    return ProviderError(
        f"{provider.name}:{provider.model}: no complete reply after {elapsed:.0f} s, "
        f"retries included; {why}. Stopped waiting; {hint}",
        provider=provider.name,
        retryable=False,
        details={"timeout": True, "deadline": source, "exhausted": True},
    )


def _is_rate_limit(error: AgentError) -> bool:
    return isinstance(error, ProviderError) and error.status_code == 429


def rate_limited_error(error: AgentError, provider: Provider) -> ProviderError:
    """The error that ends a call at a 429 when rate limits are not retried: final for the call
    (`exhausted`), marked `rate_limited`, with the service's `retry_after` when it gave one."""
    return ProviderError(
        f"{provider.name}:{provider.model} is rate-limiting requests (429); not retried here, "
        f"the caller decides when to try again ({error.message})",
        provider=provider.name,
        status_code=429,
        retryable=False,
        details={
            **error.details,
            "exhausted": True,
            "rate_limited": True,
            "last_category": error.category.value,
        },
    )


def _pause_too_long(
    error: ProviderError | None, provider: Provider, pause: float, remaining: float
) -> ProviderError:
    """A rate-limit pause (after a 429, or a full window) that ends after the call's
    deadline: the call ends marked `rate_limited`, so a caller that schedules retries (the
    batch) can put it back."""
    why = f" ({error.message})" if error is not None else ""
    return ProviderError(
        f"{provider.name}:{provider.model} is rate-limited: calls are held for {pause:.1f} s "
        f"more, longer than the {max(0.0, remaining):.0f} s left for this call{why}; not "
        "waiting",
        provider=provider.name,
        status_code=429,
        retryable=False,
        details={
            **(error.details if error is not None else {}),
            "exhausted": True,
            "rate_limited": True,
            "retry_after": pause,
        },
    )


def _asks_to_wait_past(error: AgentError, remaining: float | None) -> bool:
    """Whether the service asked for a wait that would end after the call's deadline."""
    if remaining is None or not isinstance(error, ProviderError):
        return False
    return error.retry_after is not None and error.retry_after > remaining


def _wait_too_long(error: AgentError, provider: Provider, remaining: float | None) -> ProviderError:
    assert isinstance(error, ProviderError) and error.retry_after is not None
    left = max(0.0, remaining or 0.0)
    return ProviderError(
        f"{provider.name}:{provider.model} asks to wait {error.retry_after:g} s before a retry, "
        f"longer than the {left:.0f} s left for this call ({error.message}); not waiting. "
        "Try again later, or use another provider or model",
        provider=provider.name,
        status_code=error.status_code,
        retryable=False,
        details={
            "exhausted": True,
            "wait_too_long": True,
            "retry_after": error.retry_after,
            "last_category": error.category.value,
        },
    )
