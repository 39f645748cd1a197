"""`GrantGuard`: a provider wrapper that keeps one task attempt inside its allocation.

The loop fits each call to the agent's own limits (`loop.call_budget`): its USD limit, and its
token limit counted from a baseline. A batch's allocation is a hard grant of total tokens and
dollars: the guard prices every call against what is left of it with the same fitting (a bound
on the prompt plus the reply at its `max_output_tokens`), shortens the reply to fit, and
refuses the call (a budget stop) when not even a short reply fits. A reply without usage is
charged that worst case. A 429 from the provider ends the attempt at once (no in-task retry),
so the batch scheduler can lower its concurrency and requeue the task.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from journeyman.core.errors import BudgetExhaustedError, ProviderError
from journeyman.core.messages import Usage
from journeyman.loop.call_budget import PromptBound, Remaining, fit_request
from journeyman.providers.base import (
    Capabilities,
    ModelRequest,
    ModelResponse,
    Provider,
    TextCallback,
)

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
        self._bound = PromptBound()

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
        bound = self._bound.of(request)
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
        if response.usage_missing:  # charged as the worst case the fitting allowed for
            usage = Usage(bound, request.max_output_tokens)
        else:
            self._bound.learn(request, usage.total_input_tokens)
        self.spent_tokens += usage.total_tokens
        self.spent_usd += self.price(usage) or 0.0
        return response

    def _fit(self, request: ModelRequest) -> ModelRequest:
        """`request` with a reply short enough to fit the grant; raises when none fits."""
        if self.usd is None and self.tokens is None:
            return request
        left = Remaining(
            tokens=None if self.tokens is None else self.tokens - self.spent_tokens,
            usd=None if self.usd is None else self.usd - self.spent_usd,
        )
        try:
            return fit_request(request, self._bound.of(request), left, self.price)
        except BudgetExhaustedError as error:
            what = "USD" if error.details.get("finish_reason") == "max_budget_usd" else "tokens"
            limit = self.usd if what == "USD" else self.tokens
            spent = self.spent_usd if what == "USD" else self.spent_tokens
            raise _exhausted(what, str(error.details["finish_reason"]), limit or 0, spent) from None


def _exhausted(what: str, reason: str, limit: float, spent: float) -> BudgetExhaustedError:
    shown = f"${limit:.4f}" if what == "USD" else f"{int(limit):,} tokens"
    used = f"${spent:.4f}" if what == "USD" else f"{int(spent):,}"
    return BudgetExhaustedError(
        f"the task's batch allocation of {shown} is spent ({used} used): the next call would "
        "not fit in what is left",
        details={"finish_reason": reason, "batch_allocation": True},
    )
