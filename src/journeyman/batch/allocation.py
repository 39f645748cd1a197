"""How much a batch task is granted, and whether it starts at all, under a global cap.

Equal shares finish nothing when the cap is tight (8 tasks needing $0.012 each under a $0.03
cap got $0.00375 each, and none finished). So a task's grant follows what finished tasks cost:

- before any task of the batch has finished (nothing is known yet), one task runs at a time,
  allowed what is left (up to its own limit): the first tasks get enough to finish;
- then a task is *expected* to need the 90th percentile of what finished tasks needed plus
  25 % of what they cost (`CostModel`). What a task needed is more than it cost: the loop
  makes a call only when the call's worst case fits what is left of the grant (at least the
  opening floor: its prompt and a 64-token reply), so a task needed, at its costliest call,
  what it had spent before that call plus the larger of the call and the floor
  (`needed_for`). It starts only when what is left covers that;
  it is granted what is left shared among the tasks that can start now, never less than the
  expected cost, never more than its own limit;
- when nothing of the batch runs and what is left cannot cover the expected cost, no task
  starts: the rest are "not run: budget exhausted", and running the batch again with more
  budget runs them.

With `--per-task-budget-*` the user chose each task's allocation: it is granted in full or not
at all, and nothing is learned. A dimension the batch does not cap (tokens under a USD cap)
is granted the task's own limit, or no limit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from journeyman.economics.ledger import Amount

QUANTILE = 0.9
"""Which quantile of finished tasks' costs a task is expected to need."""
MARGIN = 1.25
"""Factor on that quantile: the margin a task's start needs above it."""


@dataclass(frozen=True)
class TaskCost:
    """What one finished task cost, and what its grant had to hold for it to get there."""

    cost: Amount
    needed: Amount


def needed_for(calls: list[Amount], floor: Amount, before: Amount | None = None) -> Amount:
    """What a grant had to hold for a task whose model calls cost `calls` (in order), after
    `before` spent by earlier attempts: at each call, what was spent before it plus the larger
    of the call and the `floor` (the least worst case the loop lets a call go out with)."""
    spent_tokens, spent_usd = (before.tokens or 0, before.usd or 0.0) if before else (0, 0.0)
    need_tokens, need_usd = spent_tokens, spent_usd
    for call in calls:
        need_tokens = max(need_tokens, spent_tokens + max(call.tokens or 0, floor.tokens or 0))
        need_usd = max(need_usd, spent_usd + max(call.usd or 0.0, floor.usd or 0.0))
        spent_tokens += call.tokens or 0
        spent_usd += call.usd or 0.0
    return Amount(need_tokens, need_usd)


@dataclass
class CostModel:
    """What finished tasks cost and needed, and what the next one is expected to need."""

    quantile: float = QUANTILE
    margin: float = MARGIN
    finished: list[TaskCost] = field(default_factory=list)

    def record(self, cost: Amount, needed: Amount | None = None) -> None:
        self.finished.append(TaskCost(cost, needed or cost))

    def expected(self) -> Amount | None:
        """What a task is expected to need, or None before any task finished."""
        if not self.finished:
            return None
        q = self.quantile
        extra = self.margin - 1.0
        needed_tokens = _quantile([t.needed.tokens or 0 for t in self.finished], q)
        cost_tokens = _quantile([t.cost.tokens or 0 for t in self.finished], q)
        needed_usd = _quantile([t.needed.usd or 0.0 for t in self.finished], q)
        cost_usd = _quantile([t.cost.usd or 0.0 for t in self.finished], q)
        return Amount(
            tokens=math.ceil(needed_tokens + extra * cost_tokens),
            usd=needed_usd + extra * cost_usd,
        )

    def explain(self) -> str:
        """How the expected need is reckoned, for messages."""
        return (
            f"the {round(self.quantile * 100)}th percentile of what the {len(self.finished)} "
            f"finished task(s) needed, plus {round((self.margin - 1) * 100)} % of their cost"
        )


def _quantile(values: list[float] | list[int], q: float) -> float:
    """The nearest-rank quantile (the largest value for a high quantile of few samples)."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q * len(ordered)))
    return float(ordered[rank - 1])


@dataclass(frozen=True)
class GrantRequest:
    """What the scheduler knows when it considers starting one task."""

    left: Amount
    """What the ledger could still grant (None in a dimension: not limited)."""
    limit: Amount
    """The task's own remaining limit (per-task budget or its `limits`, less what it spent);
    None: none."""
    floor: Amount
    """What its first model call costs at least."""
    expected: Amount | None
    """`CostModel.expected()`, or None before the first task finished."""
    running: int
    """Tasks of the batch running now."""
    startable: int
    """Tasks that could start now (pending, within the free parallel slots), this one
    included."""
    fixed: bool = False
    """The user fixed each task's allocation (`--per-task-budget-*`): all of it or nothing."""


def plan_grant(request: GrantRequest) -> Amount | None:
    """The grant for the task, or None when it should not start now."""
    capped = request.left.tokens is not None or request.left.usd is not None
    if capped and request.expected is None and request.running and not request.fixed:
        return None  # nothing is known yet: the first task runs alone, allowed what is left
    tokens = _dimension(
        request,
        None if request.left.tokens is None else float(request.left.tokens),
        None if request.limit.tokens is None else float(request.limit.tokens),
        float(request.floor.tokens or 0),
        None if request.expected is None else float(request.expected.tokens or 0),
    )
    usd = _dimension(
        request,
        request.left.usd,
        request.limit.usd,
        request.floor.usd or 0.0,
        None if request.expected is None else request.expected.usd,
    )
    if tokens is False or usd is False:
        return None
    return Amount(None if tokens is None else math.floor(tokens), usd)


def _dimension(
    request: GrantRequest,
    left: float | None,
    limit: float | None,
    floor: float,
    expected: float | None,
) -> float | bool | None:
    """One dimension's grant: a number, None (not limited), or False (cannot start)."""
    if left is None:  # the batch does not cap it: the task's own limit, if any
        return limit
    if request.fixed and limit is not None:
        need = grant = limit
    elif expected is None:
        need = floor
        grant = left if limit is None else min(left, limit)
    else:
        need = max(expected, floor)
        if limit is not None:
            need = min(need, limit)  # a task with a lower limit of its own needs only that
        share = left / max(1, request.startable)
        grant = max(need, share)
        if limit is not None:
            grant = min(grant, limit)
    if left < need or grant < floor or grant <= 0:
        return False
    return min(grant, left)


__all__ = [
    "MARGIN",
    "QUANTILE",
    "CostModel",
    "GrantRequest",
    "TaskCost",
    "needed_for",
    "plan_grant",
]
