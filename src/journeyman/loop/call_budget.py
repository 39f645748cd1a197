"""The worst case of a model call, fitted to what is left of the run's limits before it is sent.

The budget gate decides *between* turns whether a run may go on; it cannot stop the turn it lets
through from costing more than is left. Caps that must hold — `--max-budget-usd` for one run,
for a tree of subagents sharing one pool, for a batch under a global cap — need each call priced
before it is made: a bound on the prompt's size plus the reply at its `max_output_tokens`. When
that does not fit, the reply is shortened until it does; when not even a short reply fits, the
call is not made and the run ends with the limit's finish reason.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

from journeyman.core.errors import BudgetExhaustedError
from journeyman.core.messages import Usage
from journeyman.providers.base import ModelRequest

MIN_REPLY_TOKENS = 64
"""A call whose reply would have to be shorter than this is not worth making."""
PROMPT_BOUND_FACTOR = 2.0
"""How far above the 4-characters-a-token estimate a prompt's bound is put: tokenizers report
up to about 1.6x it on code and non-English text, so twice the estimate is a bound, not a guess."""

SHRUNK_PROMPT_MARGIN = 1.25
"""Margin on a prompt that shrank since the last report (the calibration was for other text)."""

Pricer = Callable[[Usage], float | None]


@dataclass(frozen=True)
class Remaining:
    """What is left of the run's limits; None where there is no limit."""

    tokens: int | None = None
    usd: float | None = None


@dataclass
class PromptBound:
    """An upper bound on a prompt's reported size. Before any report: twice its estimate. After
    one: the last reported prompt plus twice the estimate of what was added since, or, for a
    prompt smaller than the last (after compaction), the last report's tokens per estimated
    token with a margin."""

    last_reported: int = 0
    last_estimate: int = 0

    def of(self, estimate: int) -> int:
        if not self.last_reported or not self.last_estimate:
            return math.ceil(estimate * PROMPT_BOUND_FACTOR)
        grown = estimate - self.last_estimate
        if grown >= 0:
            return self.last_reported + math.ceil(grown * PROMPT_BOUND_FACTOR)
        per_estimated_token = self.last_reported / self.last_estimate
        return math.ceil(estimate * per_estimated_token * SHRUNK_PROMPT_MARGIN)

    def learn(self, estimate: int, reported: int) -> None:
        if reported > 0 and estimate > 0:
            self.last_reported, self.last_estimate = reported, estimate


def fit_request(
    request: ModelRequest, prompt_tokens: int, remaining: Remaining, price: Pricer
) -> ModelRequest:
    """`request` with its reply shortened so that a prompt of `prompt_tokens` and the longest
    reply fit `remaining`; raises `BudgetExhaustedError` when not even a short reply fits."""
    reply = request.max_output_tokens
    if remaining.tokens is not None:
        reply = min(reply, remaining.tokens - prompt_tokens)
        if reply < MIN_REPLY_TOKENS:
            raise _exhausted("tokens", "max_tokens", remaining.tokens, prompt_tokens)
    if remaining.usd is not None:
        prompt_cost = price(Usage(prompt_tokens, 0)) or 0.0
        per_reply_token = price(Usage(0, 1)) or 0.0
        left = remaining.usd - prompt_cost
        if per_reply_token > 0:
            reply = min(reply, int(left / per_reply_token))
        elif left < 0:
            reply = 0
        if reply < MIN_REPLY_TOKENS:
            raise _exhausted("USD", "max_budget_usd", remaining.usd, prompt_tokens)
    if reply >= request.max_output_tokens:
        return request
    return dataclasses.replace(request, max_output_tokens=reply)


def _exhausted(what: str, reason: str, left: float, prompt_tokens: int) -> BudgetExhaustedError:
    shown = f"${max(0.0, left):.4f}" if what == "USD" else f"{max(0, int(left)):,} tokens"
    return BudgetExhaustedError(
        f"{shown} left of the run's limit: the next call (a prompt of up to "
        f"{prompt_tokens:,} tokens and a reply of at least {MIN_REPLY_TOKENS}) would not fit, "
        "so it was not made",
        details={"finish_reason": reason, "before_call": True},
    )
