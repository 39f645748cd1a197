"""`GrantGuard`: a provider wrapper that keeps one task attempt inside its allocation.

The agent's own budget checks run *before* a turn, so its last call may overshoot its limit by
that call's cost. A batch cannot afford that: the overshoots of many tasks add up past the
global cap. The guard prices the worst case of each call before it is sent (a generous
estimate of the prompt, plus the reply at its `max_output_tokens`), lowers `max_output_tokens`
so the call fits what is left of the grant, and refuses the call (a budget stop) when not even
a short reply fits. A 429 from the provider ends the attempt at once (no in-task retry), so
the batch scheduler can lower its concurrency and requeue the task.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable

from journeyman.core.errors import BudgetExhaustedError, ProviderError
from journeyman.core.messages import Usage
from journeyman.providers.base import (
    Capabilities,
    ModelRequest,
    ModelResponse,
    Provider,
    TextCallback,
)

MIN_REPLY_TOKENS = 64
"""A call whose reply would have to be shorter than this is not worth making."""
CHARS_PER_TOKEN_BOUND = 2
"""Characters per token assumed when bounding a prompt's size: half the usual estimate, so the
bound stays above what tokenizers report for code and prose."""

Pricer = Callable[[Usage], float | None]


class RateLimited(ProviderError):
    """The provider answered 429: the attempt ends so the batch can slow down and requeue."""


class GrantGuard:
    """Wraps `inner`; spends at most `usd` dollars and `tokens` tokens over its calls."""

    def __init__(
        self,
        inner: Provider,
        *,
        usd: float | None,
        tokens: int | None,
        price: Pricer,
        stop_on_rate_limit: bool = True,
    ) -> None:
        self.inner = inner
        self.usd = usd
        self.tokens = tokens
        self.price = price
        self.stop_on_rate_limit = stop_on_rate_limit
        self.spent_usd = 0.0
        self.spent_tokens = 0
        self.rate_limited: ProviderError | None = None
        """The 429 that ended the attempt, if one did."""
        self._last_prompt_tokens = 0
        self._last_prompt_chars = 0

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def model(self) -> str:
        return self.inner.model

    @property
    def capabilities(self) -> Capabilities:
        return self.inner.capabilities

    async def aclose(self) -> None:
        """Close the wrapped provider's client, when it has one to close."""
        close = getattr(self.inner, "aclose", None)
        if close is not None:
            with contextlib.suppress(Exception):
                await close()

    async def complete(
        self, request: ModelRequest, on_text: TextCallback | None = None
    ) -> ModelResponse:
        request = self._fit(request)
        try:
            response = await self.inner.complete(request, on_text)
        except ProviderError as error:
            if error.status_code == 429 and self.stop_on_rate_limit:
                self.rate_limited = error
                raise RateLimited(
                    f"{self.inner.name} rate-limited the task (429); the batch requeues it "
                    "with less concurrency",
                    provider=self.inner.name,
                    status_code=429,
                    retryable=False,
                    details={"exhausted": True, "rate_limited": True, **error.details},
                ) from error
            raise
        usage = response.usage
        self.spent_tokens += usage.total_tokens
        self.spent_usd += self.price(usage) or 0.0
        self._last_prompt_tokens = usage.total_input_tokens
        self._last_prompt_chars = _prompt_chars(request)
        return response

    def _fit(self, request: ModelRequest) -> ModelRequest:
        """`request` with a reply short enough to fit the grant; raises when none fits."""
        if self.usd is None and self.tokens is None:
            return request
        prompt = self._prompt_bound(request)
        reply = request.max_output_tokens
        if self.tokens is not None:
            reply = min(reply, self.tokens - self.spent_tokens - prompt)
            if reply < MIN_REPLY_TOKENS:
                raise _exhausted("tokens", "max_tokens", self.tokens, self.spent_tokens)
        if self.usd is not None:
            left = self.usd - self.spent_usd
            prompt_cost = self.price(Usage(prompt, 0)) or 0.0
            per_reply_token = self.price(Usage(0, 1)) or 0.0
            if per_reply_token > 0:
                reply = min(reply, int((left - prompt_cost) / per_reply_token))
            elif prompt_cost > left:
                reply = 0
            if reply < MIN_REPLY_TOKENS:
                raise _exhausted("USD", "max_budget_usd", self.usd, self.spent_usd)
        if reply == request.max_output_tokens:
            return request
        return dataclasses.replace(request, max_output_tokens=reply)

    def _prompt_bound(self, request: ModelRequest) -> int:
        """More tokens than the prompt can hold: its characters at two a token, and never less
        than the last reported prompt plus what was added since."""
        chars = _prompt_chars(request)
        bound = -(-chars // CHARS_PER_TOKEN_BOUND)
        if self._last_prompt_tokens:
            grown = max(0, chars - self._last_prompt_chars)
            bound = max(bound, self._last_prompt_tokens + -(-grown // CHARS_PER_TOKEN_BOUND))
        return bound


def _prompt_chars(request: ModelRequest) -> int:
    return (
        len(request.system)
        + sum(len(repr(m)) for m in request.messages)
        + sum(len(repr(t)) for t in request.tools)
    )


def _exhausted(what: str, reason: str, limit: float, spent: float) -> BudgetExhaustedError:
    shown = f"${limit:.4f}" if what == "USD" else f"{int(limit):,} tokens"
    used = f"${spent:.4f}" if what == "USD" else f"{int(spent):,}"
    return BudgetExhaustedError(
        f"the task's batch allocation of {shown} is spent ({used} used): the next call would "
        "not fit in what is left",
        details={"finish_reason": reason, "batch_allocation": True},
    )
