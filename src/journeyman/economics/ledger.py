"""One reservation ledger for a shared budget of tokens and US dollars.

Whoever owns a budget (a root run, a batch) opens a `BudgetLedger` over it; every holder that
will spend from it (a subagent, a batch task) reserves an allocation *before* it starts and
settles it when it ends, which returns what it did not use. The owner's own spending outside
any reservation is recorded with `charge`.

How an allocation is sized (the seed's dynamic budget pool):
  - the owner keeps a reserve (default 25 % of the total) that holders cannot draw on, so it can
    still act (e.g. write its synthesis) after they finish;
  - what remains is shared among the holders still to draw on it (`sharers`): the fair share is
    `remaining / sharers`, raised to the minimum useful allocation when it falls below it;
  - no holder takes more than a share of what remains (default 60 %), so a first holder never
    starves the ones after it;
  - an allocation that cannot reach the minimum is refused (`AllocationRefused`);
  - a holder may bring its own floor (`reserve(..., floor=)`): the least its first model call
    costs (`loop.call_budget.opening_call_floor`). Below it a grant would be spent on nothing,
    so it is refused even when the holder asks for less.

Reservation is atomic (one lock; no method awaits), so holders started concurrently from
threads or from one event loop can never together reserve more than the pool holds.

A holder may report what it has spent so far while it runs (`report`, a running total): the
pool shows it as in flight, and settles the reservation at no less than the last report, so a
holder that dies before its spending is counted elsewhere is still charged what it said.
`to_state`/`from_state` give the whole pool as JSON values, for a pool kept outside the process
(the batch's Redis ledger).
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from typing import Any

from journeyman.core.errors import AgentError, ErrorCategory

DEFAULT_RESERVE_SHARE = 0.25
"""Share of the total the owner keeps for itself (seed: 50K of a 200K parent budget)."""
DEFAULT_MAX_SHARE = 0.60
"""Largest share of what remains that one holder may take (seed: never more than 60 %)."""
ROUNDING = 1e-9
"""Relative difference below which two USD sums count as equal (float addition drifts)."""


@dataclass(frozen=True)
class Amount:
    """Tokens and US dollars; None in a dimension means "not limited" (for a total or a grant)
    or "nothing spent" (for a usage)."""

    tokens: int | None = None
    usd: float | None = None

    def __str__(self) -> str:
        parts = []
        if self.tokens is not None:
            parts.append(f"{self.tokens:,} tokens")
        if self.usd is not None:
            parts.append(f"${self.usd:.4f}")
        return " and ".join(parts) or "no limit"


@dataclass(frozen=True)
class LedgerPolicy:
    """How allocations are sized."""

    reserve_share: float = DEFAULT_RESERVE_SHARE
    """Share of the total held back for the owner; holders never draw on it."""
    max_share: float = DEFAULT_MAX_SHARE
    """Largest share of what remains that one allocation may take."""
    min_tokens: int = 1
    """Smallest token allocation worth starting a holder with; below it the request is refused."""
    min_usd: float = 0.0
    """Smallest USD allocation worth starting a holder with; below it the request is refused."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.reserve_share < 1.0:
            raise ValueError(f"reserve_share must be in [0, 1), got {self.reserve_share}")
        if not 0.0 < self.max_share <= 1.0:
            raise ValueError(f"max_share must be in (0, 1], got {self.max_share}")
        if self.min_tokens < 0 or self.min_usd < 0:
            raise ValueError("min_tokens and min_usd must not be negative")


class AllocationRefused(AgentError):
    """The pool cannot give a holder the smallest allocation worth starting it with."""

    default_category = ErrorCategory.BUDGET

    @property
    def below_floor(self) -> bool:
        """Refused because what is left cannot fund the holder's first call."""
        return bool(self.details.get("below_floor"))


@dataclass(frozen=True)
class Reservation:
    """An allocation held by one holder until it is settled."""

    id: int
    holder: str
    granted: Amount
    """What the holder may spend: give it as its own limits."""


@dataclass(frozen=True)
class LedgerStats:
    total: Amount
    spent: Amount
    """Settled spending plus the owner's own charges."""
    reserved: Amount
    """Held by reservations not yet settled."""
    overspend: Amount
    """Spending by holders beyond their grants (a holder whose last call overshot its limit)."""
    open_reservations: int
    in_flight: Amount = Amount(0, 0.0)
    """What holders not yet settled have reported spending (part of `reserved`, not of
    `spent`)."""


@dataclass
class _Dimension:
    """One budget dimension (tokens or USD) of the pool."""

    total: float | None
    spent: float = 0.0
    reserved: float = 0.0
    overspend: float = 0.0

    def available(self, reserve_share: float) -> float:
        if self.total is None:
            return math.inf
        holders_pool = self.total * (1.0 - reserve_share)
        # the owner's own spending may already have eaten into what holders could have had
        return max(0.0, min(holders_pool, self.total - self.spent) - self.reserved)

    def grant(
        self,
        *,
        reserve_share: float,
        max_share: float,
        sharers: int,
        minimum: float,
        floor: float,
        request: float | None,
    ) -> float | None:
        """The allocation for one holder, or None when the minimum or the floor cannot be
        met."""
        remaining = self.available(reserve_share)
        if request is not None:
            minimum = min(minimum, request)  # a holder that asks for less gets what it asked
        minimum = max(minimum, floor)  # ... but never less than its first call needs
        if math.isinf(remaining):
            # an unlimited dimension grants what was asked, or no limit
            return None if request is not None and request < floor else request
        ceiling = remaining * max_share
        fair = max(remaining / max(1, sharers), minimum)
        amount = min(fair, ceiling)
        if request is not None:
            amount = min(amount, request)
        if amount < minimum or amount <= 0.0:
            return None
        return amount


@dataclass
class BudgetLedger:
    """A pool of tokens and USD shared by holders that reserve before spending."""

    total: Amount
    policy: LedgerPolicy = field(default_factory=LedgerPolicy)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._tokens = _Dimension(None if self.total.tokens is None else float(self.total.tokens))
        self._usd = _Dimension(self.total.usd)
        self._open: dict[int, Reservation] = {}
        self._reported: dict[int, dict[str, Amount]] = {}
        """Per open reservation, what each run of its holder reported (`report`)."""
        self._next_id = 1

    def reserve(
        self,
        holder: str,
        *,
        sharers: int = 1,
        request: Amount | None = None,
        floor: Amount | None = None,
    ) -> Reservation:
        """Reserve an allocation for `holder`, shared fairly with `sharers - 1` others still to
        come; `request` caps it, `floor` is the least it can do anything with. Raises
        `AllocationRefused` when the pool cannot give it."""
        policy = self.policy
        floor = floor or Amount()
        with self._lock:
            tokens = self._tokens.grant(
                reserve_share=policy.reserve_share,
                max_share=policy.max_share,
                sharers=sharers,
                minimum=float(policy.min_tokens),
                floor=float(floor.tokens or 0),
                request=None
                if request is None or request.tokens is None
                else float(request.tokens),
            )
            usd = self._usd.grant(
                reserve_share=policy.reserve_share,
                max_share=policy.max_share,
                sharers=sharers,
                minimum=policy.min_usd,
                floor=floor.usd or 0.0,
                request=None if request is None else request.usd,
            )
            asked = request or Amount()
            refused = [
                (name, dim, wanted, at_least)
                for name, dim, value, wanted, at_least in (
                    ("token", self._tokens, tokens, asked.tokens, float(floor.tokens or 0)),
                    ("USD", self._usd, usd, asked.usd, floor.usd or 0.0),
                )
                if value is None and (dim.total is not None or wanted is not None)
            ]
            if refused:
                raise self._refusal(holder, sharers, refused)
            granted = Amount(
                tokens=None if tokens is None else math.floor(tokens),
                usd=usd,
            )
            if granted.tokens is not None:
                self._tokens.reserved += granted.tokens
            if granted.usd is not None:
                self._usd.reserved += granted.usd
            reservation = Reservation(self._next_id, holder, granted)
            self._next_id += 1
            self._open[reservation.id] = reservation
            return reservation

    def report(self, reservation: Reservation, used: Amount, run: str = "") -> None:
        """What the holder of `reservation` has spent so far in `run` (a running total, never
        less than that run's earlier report): shown as in flight, and the least its settlement
        counts. Runs add up: a holder's process that died after reporting, and the one that
        took the attempt over from scratch, both spent. A report on a settled reservation is
        ignored."""
        with self._lock:
            if reservation.id not in self._open:
                return
            runs = self._reported.setdefault(reservation.id, {})
            runs[run] = _larger(runs.get(run), used)

    def settle(self, reservation: Reservation, used: Amount) -> Amount:
        """Close `reservation` with what the holder `used`; returns what went back to the pool.
        Settling twice is a no-op (returns nothing). What the holder reported spending counts
        when it is more than `used` (a holder that died before its spending was counted)."""
        with self._lock:
            if self._open.pop(reservation.id, None) is None:
                return Amount()
            used = _larger(_sum_runs(self._reported.pop(reservation.id, {})), used)
            returned_tokens = self._settle(self._tokens, reservation.granted.tokens, used.tokens)
            returned_usd = self._settle(self._usd, reservation.granted.usd, used.usd)
            if not self._open:  # no rounding residue left behind once nothing is held
                self._tokens.reserved = self._usd.reserved = 0.0
        return Amount(
            tokens=None if returned_tokens is None else int(returned_tokens), usd=returned_usd
        )

    def charge(self, used: Amount) -> None:
        """Record the owner's own spending (outside any reservation)."""
        with self._lock:
            self._tokens.spent += used.tokens or 0
            self._usd.spent += used.usd or 0.0

    def available(self) -> Amount:
        """What holders could still reserve, all together, right now."""
        with self._lock:
            tokens = self._tokens.available(self.policy.reserve_share)
            usd = self._usd.available(self.policy.reserve_share)
        return Amount(
            tokens=None if math.isinf(tokens) else math.floor(tokens),
            usd=None if math.isinf(usd) else usd,
        )

    def stats(self) -> LedgerStats:
        with self._lock:
            return LedgerStats(
                total=self.total,
                spent=Amount(int(self._tokens.spent), self._usd.spent),
                reserved=Amount(int(self._tokens.reserved), self._usd.reserved),
                overspend=Amount(int(self._tokens.overspend), self._usd.overspend),
                open_reservations=len(self._open),
                in_flight=Amount(
                    sum(a.tokens or 0 for runs in self._reported.values() for a in runs.values()),
                    sum(a.usd or 0.0 for runs in self._reported.values() for a in runs.values()),
                ),
            )

    def open_reservations(self) -> list[Reservation]:
        """The reservations not yet settled."""
        with self._lock:
            return list(self._open.values())

    def to_state(self) -> dict[str, Any]:
        """The whole pool as JSON values (`from_state` reads it back)."""
        with self._lock:
            return {
                "total": _amount_state(self.total),
                "policy": {
                    "reserve_share": self.policy.reserve_share,
                    "max_share": self.policy.max_share,
                    "min_tokens": self.policy.min_tokens,
                    "min_usd": self.policy.min_usd,
                },
                "dimensions": {
                    name: [dim.spent, dim.reserved, dim.overspend]
                    for name, dim in (("tokens", self._tokens), ("usd", self._usd))
                },
                "open": [
                    {
                        "id": r.id,
                        "holder": r.holder,
                        "granted": _amount_state(r.granted),
                        "reported": {
                            run: _amount_state(amount)
                            for run, amount in self._reported.get(r.id, {}).items()
                        },
                    }
                    for r in self._open.values()
                ],
                "next_id": self._next_id,
            }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> BudgetLedger:
        """The pool `to_state` wrote (a `KeyError`/`TypeError`/`ValueError` when it is not
        one)."""
        total = _amount_from_state(state["total"])
        if total is None:
            raise ValueError("a ledger's state has no total")
        ledger = cls(total, LedgerPolicy(**state["policy"]))
        for name, dim in (("tokens", ledger._tokens), ("usd", ledger._usd)):
            dim.spent, dim.reserved, dim.overspend = (float(v) for v in state["dimensions"][name])
        for item in state["open"]:
            granted = _amount_from_state(item["granted"]) or Amount()
            reservation = Reservation(int(item["id"]), str(item["holder"]), granted)
            ledger._open[reservation.id] = reservation
            reported = item["reported"]
            runs = reported if isinstance(reported, dict) else {"": reported}  # older: one amount
            for run, amount in runs.items():
                parsed = _amount_from_state(amount)
                if parsed is not None:
                    ledger._reported.setdefault(reservation.id, {})[str(run)] = parsed
        ledger._next_id = int(state["next_id"])
        return ledger

    @staticmethod
    def _settle(dim: _Dimension, granted: float | None, used: float | None) -> float | None:
        spent = used or 0.0
        dim.spent += spent
        if granted is None:
            return None
        dim.reserved -= granted
        if spent - granted > ROUNDING * max(1.0, granted):
            dim.overspend += spent - granted
        return max(0.0, granted - spent)

    def _refusal(
        self, holder: str, sharers: int, refused: list[tuple[str, _Dimension, float | None, float]]
    ) -> AllocationRefused:
        """Why `holder` gets nothing: what is left (or what it asked for) is below the floor of
        its first call, or below the smallest allocation the policy starts a holder with."""
        details: dict[str, object] = {"error": "allocation_refused", "holder": holder}
        for name, dim, asked, floor in refused:
            if not floor:
                continue
            grantable = dim.available(self.policy.reserve_share) * self.policy.max_share
            if asked is not None and asked < floor:
                short = f"its own limit is {_show(name, asked)}"
            elif grantable < floor:
                short = f"{_show(name, grantable)} left"
            else:
                continue
            return AllocationRefused(
                f"budget pool: cannot fund {holder}: {short}, a call needs about "
                f"{_show(name, floor)}",
                details={
                    **details,
                    "below_floor": True,
                    "short": short,
                    "needed": _show(name, floor),
                },
            )
        names = " or ".join(name for name, *_ in refused)
        return AllocationRefused(
            f"budget pool: no {names} allocation left for {holder} "
            f"({self._describe_available()} available to share among {sharers}); "
            "finish with what you have, or do the work yourself",
            details=details,
        )

    def _describe_available(self) -> str:
        tokens = self._tokens.available(self.policy.reserve_share)
        usd = self._usd.available(self.policy.reserve_share)
        return str(
            Amount(
                tokens=None if math.isinf(tokens) else math.floor(tokens),
                usd=None if math.isinf(usd) else usd,
            )
        )


def _larger(first: Amount | None, second: Amount) -> Amount:
    """The larger of two spendings, dimension by dimension."""
    if first is None:
        return second
    return Amount(
        tokens=None
        if first.tokens is None and second.tokens is None
        else max(first.tokens or 0, second.tokens or 0),
        usd=None
        if first.usd is None and second.usd is None
        else max(first.usd or 0.0, second.usd or 0.0),
    )


def _sum_runs(runs: dict[str, Amount]) -> Amount | None:
    """What several runs reported, added up (None when none reported)."""
    if not runs:
        return None
    return Amount(
        sum(a.tokens or 0 for a in runs.values()), sum(a.usd or 0.0 for a in runs.values())
    )


def _amount_state(amount: Amount | None) -> list[Any] | None:
    return None if amount is None else [amount.tokens, amount.usd]


def _amount_from_state(value: Any) -> Amount | None:
    if value is None:
        return None
    tokens, usd = value
    return Amount(None if tokens is None else int(tokens), None if usd is None else float(usd))


def _show(dimension: str, value: float) -> str:
    return (
        f"${max(0.0, value):.4f}" if dimension == "USD" else f"{max(0, math.floor(value)):,} tokens"
    )
