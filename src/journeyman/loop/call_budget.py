"""The worst case of a model call, fitted to what is left of the run's limits before it is sent.

The budget gate decides *between* turns whether a run may go on; it cannot stop the turn it lets
through from costing more than is left. Caps that must hold — `--max-budget-usd` for one run,
for a tree of subagents sharing one pool, for a batch under a global cap — need each call priced
before it is made: a bound on the prompt's size plus the reply at its `max_output_tokens`. When
that does not fit, the reply is shortened until it does; when not even a short reply fits, the
call is not made and the run ends with the limit's finish reason.

The same floor — a prompt's bound plus `MIN_REPLY_TOKENS` of reply at the model's price — is
the smallest allocation a shared pool may grant: `opening_call_floor` prices the first call of
a run that has not started, so a subagent or a batch task that could not make even that call
is refused before it starts instead of ending at once with nothing done.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from journeyman.context import compaction
from journeyman.core.errors import BudgetExhaustedError
from journeyman.core.messages import Message, ToolSpec, Usage
from journeyman.providers.base import ModelRequest
from journeyman.providers.pricing import cost_usd, estimate_fixed_tokens

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


@dataclass(frozen=True)
class CallFloor:
    """The least one model call can cost: its prompt's bound and the shortest useful reply."""

    tokens: int
    usd: float | None
    """None when the model's price is not known."""

    def __str__(self) -> str:
        shown = f"{self.tokens:,} tokens"
        return shown if self.usd is None else f"${self.usd:.4f} ({shown})"


def least_call(prompt_tokens: int, price: Pricer) -> CallFloor:
    """The floor of a call whose prompt is bounded by `prompt_tokens`."""
    return CallFloor(
        prompt_tokens + MIN_REPLY_TOKENS, price(Usage(prompt_tokens, MIN_REPLY_TOKENS))
    )


def opening_call_floor(
    system: str, tools: Sequence[ToolSpec], task: str, price: Pricer
) -> CallFloor:
    """The floor of a new run's first call: `system` prompt, `tools` and the `task` message,
    estimated and bounded as the run will before any size is reported."""
    estimate = compaction.estimate_tokens(
        (Message.user(task),), estimate_fixed_tokens(system, tools)
    )
    return least_call(PromptBound().of(estimate), price)


def model_pricer(price_per_mtok: tuple[float, float] | None, provider: str, model: str) -> Pricer:
    """US dollars of a call: `price_per_mtok` (per million input, output tokens) when given,
    else the price database (None when the model is not in it)."""
    if price_per_mtok is None:
        return lambda usage: cost_usd(provider, model, usage)
    per_input, per_output = price_per_mtok
    return lambda usage: (
        (usage.total_input_tokens * per_input + usage.output_tokens * per_output) / 1e6
    )


def fit_request(
    request: ModelRequest, prompt_tokens: int, remaining: Remaining, price: Pricer
) -> ModelRequest:
    """`request` with its reply shortened so that a prompt of `prompt_tokens` and the longest
    reply fit `remaining`; raises `BudgetExhaustedError` when not even a short reply fits (when
    `remaining` is below the call's floor, `least_call`)."""
    floor = least_call(prompt_tokens, price)
    reply = request.max_output_tokens
    if remaining.tokens is not None:
        if remaining.tokens < floor.tokens:
            raise _exhausted("tokens", "max_tokens", remaining.tokens, prompt_tokens)
        reply = min(reply, remaining.tokens - prompt_tokens)
    if remaining.usd is not None:
        if remaining.usd < (floor.usd or 0.0):
            raise _exhausted("USD", "max_budget_usd", remaining.usd, prompt_tokens)
        left = remaining.usd - (price(Usage(prompt_tokens, 0)) or 0.0)
        per_reply_token = price(Usage(0, 1)) or 0.0
        if per_reply_token > 0:
            # the floor says the shortest reply fits: float rounding must not say otherwise
            reply = min(reply, max(MIN_REPLY_TOKENS, int(left / per_reply_token)))
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
