"""The worst case of a model call, fitted to what is left of the run's limits before it is sent.

The budget gate decides *between* turns whether a run may go on; it cannot stop the turn it lets
through from costing more than is left. Caps that must hold — `--max-budget-usd` for one run,
for a tree of subagents sharing one pool, for a batch under a global cap — need each call priced
before it is made: a bound on the prompt's size plus the reply at its `max_output_tokens`. When
that does not fit, the reply is shortened until it does; when not even a short reply fits, the
call is not made and the run ends with the limit's finish reason.

The prompt's bound holds whatever the text: one token a UTF-8 byte (CJK text and emoji make
more tokens than characters; no byte-level tokenizer makes more than one a byte), learned down
to the provider's own count of what it has already billed (`PromptBound`). The same bound is
what a reply that reported no usage is charged: the worst case the call could have cost.

The same floor — a prompt's bound plus `MIN_REPLY_TOKENS` of reply at the model's price — is
the smallest allocation a shared pool may grant: `opening_call_floor` prices the first call of
a run that has not started, so a subagent or a batch task that could not make even that call
is refused before it starts instead of ending at once with nothing done.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from journeyman.core.errors import BudgetExhaustedError
from journeyman.core.messages import (
    FRAMING_TOKENS,
    Message,
    ToolSpec,
    Usage,
    text_token_ceiling,
)
from journeyman.providers.base import ModelRequest
from journeyman.providers.pricing import Pricer

MIN_REPLY_TOKENS = 64
"""A call whose reply would have to be shorter than this is not worth making."""
TOOLS_ALLOWANCE = 512
"""Tokens a provider may add to a request that offers tools (its own tool-use instructions:
Anthropic's are about 350)."""
REQUEST_ALLOWANCE = 64
"""Tokens a chat format may add once per request (start and end markers, the reply's header)."""


@dataclass(frozen=True)
class Remaining:
    """What is left of the run's limits; None where there is no limit."""

    tokens: int | None = None
    usd: float | None = None


def tool_token_ceiling(tool: ToolSpec) -> int:
    """The most tokens a tool definition can take in a prompt (its JSON, one a byte)."""
    return tool.token_ceiling


def request_ceiling(request: ModelRequest) -> int:
    """The most tokens `request`'s prompt can be billed for, whatever the tokenizer: every
    part at one token a UTF-8 byte, with the framing and tool allowances."""
    tokens = REQUEST_ALLOWANCE + text_token_ceiling(request.system) + FRAMING_TOKENS
    if request.tools:
        tokens += TOOLS_ALLOWANCE + sum(map(tool_token_ceiling, request.tools))
    return tokens + sum(message.token_ceiling for message in request.messages)


@dataclass
class PromptBound:
    """An upper bound on a prompt's reported size, however its text tokenizes.

    Before any report: `request_ceiling`, one token a byte. After one: the last reported size
    plus the ceiling of every part the new request has that the reported one had not (new
    messages, a changed system prompt, new tools). A chat prompt's tokens add up part by part,
    so parts that were reported cost what they cost then and dropped parts only make it
    smaller: the sum is a bound too, and the smaller of the two bounds is used.

    A provider that has billed more than a request's ceiling (a prompt of its own that the
    request does not show) has its ceilings scaled up by the largest such excess seen."""

    _reported_request: ModelRequest | None = None
    _reported_tokens: int = 0
    _excess: float = 1.0

    def of(self, request: ModelRequest) -> int:
        whole = math.ceil(request_ceiling(request) * self._excess)
        last = self._reported_request
        if last is None:
            return whole
        return min(whole, self._reported_tokens + _added_ceiling(last, request))

    def learn(self, request: ModelRequest, reported: int) -> None:
        """The provider billed `reported` prompt tokens for `request` (not for a reply that
        reported no usage: the bound keeps the last real report)."""
        reported = max(0, reported)
        self._excess = max(self._excess, reported / request_ceiling(request))
        self._reported_request, self._reported_tokens = request, reported


def _added_ceiling(last: ModelRequest, request: ModelRequest) -> int:
    """The ceiling of the parts of `request` that `last` did not have."""
    added = 0
    if request.system != last.system:
        added += text_token_ceiling(request.system) + FRAMING_TOKENS
    if request.tools != last.tools:
        added += sum(tool_token_ceiling(t) for t in request.tools if t not in last.tools)
        if request.tools and not last.tools:
            added += TOOLS_ALLOWANCE
    return added + sum(m.token_ceiling for m in _new_messages(last.messages, request.messages))


def _new_messages(reported: Sequence[Message], messages: Sequence[Message]) -> list[Message]:
    """The `messages` that are not parts of the `reported` ones. A history grows by keeping
    its message objects (`reported` keeps them alive, so an id is never another's); one read
    back from the store (a follow-up, a resume) has equal messages instead."""
    kept = Counter(id(message) for message in reported)
    unmatched: list[Message] = []
    for message in messages:
        if kept[id(message)] > 0:
            kept[id(message)] -= 1
        else:
            unmatched.append(message)
    if not unmatched:
        return unmatched
    spare: dict[tuple[str, str], list[Message]] = defaultdict(list)
    for message in reported:
        if kept[id(message)] > 0:
            kept[id(message)] -= 1
            spare[(message.role, message.content)].append(message)
    new: list[Message] = []
    for message in unmatched:
        equal = spare.get((message.role, message.content), [])
        match = next((i for i, other in enumerate(equal) if other == message), None)
        if match is None:
            new.append(message)
        else:
            del equal[match]
    return new


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
    bounded as the run will before any size is reported."""
    request = ModelRequest(system=system, messages=(Message.user(task),), tools=tuple(tools))
    return least_call(PromptBound().of(request), price)


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
