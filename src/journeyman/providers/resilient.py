"""Bounded retries with exponential backoff and jitter, then a fallback chain of providers.

Only retryable errors are retried (rate limits, overload, 5xx, timeouts, connection resets,
empty or malformed replies). Anything else — authentication, bad requests — fails at once.
"""

from __future__ import annotations

import asyncio
import random
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

    async def complete(
        self, request: ModelRequest, on_text: TextCallback | None = None
    ) -> ModelResponse:
        last_error: AgentError | None = None
        for index in range(self._active, len(self.providers)):
            self._active = index
            provider = self.providers[index]
            for attempt in range(self.policy.max_retries + 1):
                try:
                    return await provider.complete(request, on_text)
                except AgentError as error:
                    if not error.retryable:
                        raise
                    last_error = error
                    if attempt == self.policy.max_retries:
                        break
                    delay = self.policy.delay(attempt + 1, error, self._rng)
                    for listener in self.listeners:
                        listener(error, provider.name, attempt + 1, delay)
                    await self._sleep(delay)
        assert last_error is not None
        tried = ", ".join(f"{p.name}:{p.model}" for p in self.providers)
        raise ProviderError(
            f"gave up after retries on every provider ({tried}); last error: {last_error.message}",
            provider=self.active.name,
            status_code=getattr(last_error, "status_code", None),
            retryable=False,
            details={"exhausted": True, "last_category": last_error.category.value},
        )
