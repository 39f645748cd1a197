"""Execution economics: what a run has consumed, how close it is to its limits, and what that
means for the next turn (nothing, a nudge, fewer tool calls, text only, or a stop).

Enforcement is graduated by the fraction of the most-used limit:
  < 70 % NONE · 70–90 % WARN · 90–95 % RESTRICTED · 95–100 % HARD · ≥ 100 % EXHAUSTED
and what each level does depends on the mode (STRICT, ADVISORY, SOFT) and the limit.

Token accounting keeps a baseline: `incremental_tokens = total_tokens - baseline`. The budget
is enforced on the incremental count, and compaction moves the baseline
(`update_baseline(tokens_after)`) so tokens that compaction removed stop counting against it
(never so that the count goes up).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum
from typing import Any

from journeyman.core.messages import Usage
from journeyman.economics.choices import BudgetMode as BudgetMode
from journeyman.economics.phases import WorkPhase


class EnforcementLevel(StrEnum):
    NONE = "none"
    WARN = "warn"
    RESTRICTED = "restricted"
    HARD = "hard"
    EXHAUSTED = "exhausted"

    @property
    def rank(self) -> int:
        return _LEVEL_ORDER.index(self)


_LEVEL_ORDER = list(EnforcementLevel)


class BudgetKind(StrEnum):
    TOKENS = "tokens"
    USD = "usd"
    ITERATIONS = "iterations"
    DURATION = "duration"

    @property
    def noun(self) -> str:
        """How messages name this budget: "token", "cost", "turn", "time"."""
        return _KIND_WORDS[self]


PHASE_RESERVES: dict[WorkPhase, float] = {
    WorkPhase.EXPLORATION: 0.30,
    WorkPhase.PLANNING: 0.10,
    WorkPhase.ACTING: 0.45,
    WorkPhase.VERIFYING: 0.15,
    WorkPhase.WRAPUP: 0.05,
}

WARN_AT = 0.70
RESTRICT_AT = 0.90
HARD_AT = 0.95


def level_for(fraction: float) -> EnforcementLevel:
    if fraction >= 1.0:
        return EnforcementLevel.EXHAUSTED
    if fraction >= HARD_AT:
        return EnforcementLevel.HARD
    if fraction >= RESTRICT_AT:
        return EnforcementLevel.RESTRICTED
    if fraction >= WARN_AT:
        return EnforcementLevel.WARN
    return EnforcementLevel.NONE


@dataclass(frozen=True)
class BudgetLimits:
    max_total_tokens: int | None = None
    """Tokens (input + output, counted from the baseline) the run may consume."""
    max_usd: float | None = None
    """US dollars the run may spend."""
    max_iterations: int | None = None
    """Model turns the run may take."""
    max_duration_s: float | None = None
    """Wall-clock seconds the run may last."""


@dataclass(frozen=True)
class BudgetStatus:
    """The verdict for the next turn."""

    level: EnforcementLevel
    fraction: float
    """Used fraction of the limit that is closest to exhaustion (0 when there are no limits)."""
    driver: BudgetKind | None
    """Which limit the level comes from."""
    fractions: dict[BudgetKind, float]
    stop: bool = False
    """The run must end now with a capacity finish reason."""
    text_only: bool = False
    """Tools are withheld from the next request."""
    max_tool_calls: int | None = None
    """Tool calls of the next turn beyond this many are not run."""
    nudge: str | None = None


@dataclass(frozen=True)
class ExtensionRequest:
    can_request: bool
    extensions_granted: int
    max_extensions: int
    cooldown_remaining_s: float
    additional_tokens: int
    additional_usd: float
    reason: str
    refusal: str | None = None
    """Why `can_request` is False."""


@dataclass(frozen=True)
class EconomicsTuning:
    max_extensions: int = 3
    extension_cooldown_s: float = 120.0
    restricted_tool_calls: int = 1
    """Tool calls run per turn at the RESTRICTED level."""
    continuation_min_calls: int = 3
    """Estimated calls that must still fit for a new task to start at 70–90 %."""


@dataclass
class CallRecord:
    index: int
    model: str
    usage: Usage
    cost_usd: float | None
    latency_s: float
    phase: WorkPhase | None


@dataclass
class ExecutionEconomics:
    """Budget accounting and enforcement for one session (it outlives single runs)."""

    limits: BudgetLimits = field(default_factory=BudgetLimits)
    mode: BudgetMode = BudgetMode.STRICT
    tuning: EconomicsTuning = field(default_factory=EconomicsTuning)
    clock: Callable[[], float] = time.monotonic

    usage: Usage = field(default_factory=Usage)
    cost_usd: float | None = 0.0
    """Cumulative cost; None once any call could not be priced."""
    calls: int = 0
    iterations: int = 0
    baseline_tokens: int = 0
    extensions_granted: int = 0
    phase_tokens: dict[WorkPhase, int] = field(default_factory=dict)
    _started_at: float | None = None
    _last_extension_at: float | None = None
    _baseline_refined: bool = False
    _reported_reserves: set[WorkPhase] = field(default_factory=set)

    # --- accounting ---------------------------------------------------------------------

    def start(self, already_elapsed_s: float = 0.0) -> None:
        """Start (or restart, for a new run of the session) the wall clock."""
        self._started_at = self.clock() - already_elapsed_s

    def snapshot(self) -> dict[str, Any]:
        """Everything needed to continue this accounting in another process."""
        since_extension = (
            None if self._last_extension_at is None else self.clock() - self._last_extension_at
        )
        return {
            "limits": asdict(self.limits),
            "usage": self.usage.to_dict(),
            "cost_usd": self.cost_usd,
            "calls": self.calls,
            "iterations": self.iterations,
            "baseline_tokens": self.baseline_tokens,
            "baseline_refined": self._baseline_refined,
            "extensions_granted": self.extensions_granted,
            "seconds_since_extension": since_extension,
            "phase_tokens": {k.value: v for k, v in self.phase_tokens.items()},
            "reported_reserves": sorted(p.value for p in self._reported_reserves),
            "elapsed_s": self.elapsed_s,
        }

    def restore(self, data: dict[str, Any]) -> None:
        """Load a `snapshot`; the wall clock continues from the saved elapsed time."""
        self.limits = BudgetLimits(**data["limits"])
        self.usage = Usage.from_dict(data["usage"])
        self.cost_usd = data["cost_usd"]
        self.calls = data["calls"]
        self.iterations = data["iterations"]
        self.baseline_tokens = data["baseline_tokens"]
        self._baseline_refined = data["baseline_refined"]
        self.extensions_granted = data["extensions_granted"]
        since = data["seconds_since_extension"]
        self._last_extension_at = None if since is None else self.clock() - since
        self.phase_tokens = {WorkPhase(k): v for k, v in data["phase_tokens"].items()}
        self._reported_reserves = {WorkPhase(p) for p in data["reported_reserves"]}
        self.start(data["elapsed_s"])

    @property
    def elapsed_s(self) -> float:
        return 0.0 if self._started_at is None else self.clock() - self._started_at

    @property
    def total_tokens(self) -> int:
        return self.usage.total_tokens

    @property
    def incremental_tokens(self) -> int:
        return max(0, self.total_tokens - self.baseline_tokens)

    @property
    def usage_fraction(self) -> float:
        """Used fraction of the token budget (incremental tokens / limit); 0 without a limit."""
        limit = self.limits.max_total_tokens
        return self.incremental_tokens / limit if limit else 0.0

    @property
    def baseline_refined(self) -> bool:
        """Whether a call has reported its prompt yet: until then the next call's prompt
        becomes the baseline, and only its reply counts against the token budget."""
        return self._baseline_refined

    def set_baseline(self, tokens: int) -> None:
        """Tokens that do not count against the budget (the fixed prompt at start)."""
        self.baseline_tokens = max(0, tokens)

    def update_baseline(self, tokens_after: int) -> None:
        """After compaction: at most the compacted context (`tokens_after`) keeps counting.

        Compaction only ever lowers the count: an early one, whose compacted context is larger
        than what the run has counted so far (its first prompt is the baseline), leaves the
        count where it was instead of raising it to the context's size."""
        counted = min(self.incremental_tokens, max(0, tokens_after))
        self.baseline_tokens = max(0, self.total_tokens - counted)

    def record_call(
        self,
        usage: Usage,
        cost_usd: float | None,
        *,
        model: str = "",
        latency_s: float = 0.0,
        phase: WorkPhase | None = None,
    ) -> CallRecord:
        if self.calls == 0:
            self.cost_usd = cost_usd
        elif self.cost_usd is not None:
            self.cost_usd = None if cost_usd is None else self.cost_usd + cost_usd
        counted_before = self.incremental_tokens
        self.usage = self.usage + usage
        self.calls += 1
        if not self._baseline_refined:
            # the first real prompt size replaces the estimate made from the system prompt
            self._baseline_refined = True
            self.baseline_tokens = usage.total_input_tokens
        if phase is not None:
            # a phase spends what this call added to the budget, never baseline tokens
            spent = max(0, self.incremental_tokens - counted_before)
            self.phase_tokens[phase] = self.phase_tokens.get(phase, 0) + spent
        return CallRecord(self.calls, model, usage, cost_usd, latency_s, phase)

    def record_iteration(self) -> None:
        self.iterations += 1

    # --- enforcement --------------------------------------------------------------------

    def fractions(self) -> dict[BudgetKind, float]:
        lim = self.limits
        out: dict[BudgetKind, float] = {}
        if lim.max_total_tokens:
            out[BudgetKind.TOKENS] = self.usage_fraction
        if lim.max_usd and self.cost_usd is not None:
            out[BudgetKind.USD] = self.cost_usd / lim.max_usd
        if lim.max_iterations:
            out[BudgetKind.ITERATIONS] = self.iterations / lim.max_iterations
        if lim.max_duration_s:
            out[BudgetKind.DURATION] = self.elapsed_s / lim.max_duration_s
        return out

    def check(self) -> BudgetStatus:
        """The level and its consequences for the next turn, per the mode's rules."""
        fractions = self.fractions()
        enforced = {k: f for k, f in fractions.items() if self._counts(k)}
        if not enforced:
            return BudgetStatus(EnforcementLevel.NONE, 0.0, None, fractions)
        driver = max(enforced, key=lambda k: enforced[k])
        fraction = enforced[driver]
        level = level_for(fraction)
        status = BudgetStatus(level, fraction, driver, fractions)
        if level is EnforcementLevel.NONE:
            return status
        nudge = self._nudge(driver, fraction)
        if self.mode is BudgetMode.ADVISORY:
            return replace(status, nudge=nudge)
        # STRICT
        if level is EnforcementLevel.EXHAUSTED:
            return replace(status, stop=True, nudge=nudge)
        # iteration and duration limits stop hard at 100 % and only warn before that; tool
        # restrictions come from the spend limits, whichever limit drives the nudge
        spend = max(
            (f for k, f in enforced.items() if k in (BudgetKind.TOKENS, BudgetKind.USD)),
            default=0.0,
        )
        spend_level = level_for(spend)
        return replace(
            status,
            text_only=spend_level is EnforcementLevel.HARD,
            max_tool_calls=(
                self.tuning.restricted_tool_calls
                if spend_level is EnforcementLevel.RESTRICTED
                else None
            ),
            nudge=nudge,
        )

    def _counts(self, kind: BudgetKind) -> bool:
        if self.mode is BudgetMode.SOFT:
            return False
        return not (self.mode is BudgetMode.ADVISORY and kind is BudgetKind.DURATION)

    def _nudge(self, driver: BudgetKind, fraction: float) -> str:
        remaining = max(0.0, 1.0 - fraction)
        what = driver.noun
        if remaining < 0.05:
            text = (
                f"Your {what} budget is all but gone ({fraction:.0%} used). Stop exploring: "
                "finish the change you are making, say what is done and what is not, and end."
            )
        elif remaining < 0.15:
            text = (
                f"Only {remaining:.0%} of your {what} budget is left. Spend it on the most "
                "important unfinished work and skip anything optional."
            )
        else:
            text = f"You have used {fraction:.0%} of your {what} budget. Keep each step lean."
        reserve = self.spent_reserve()
        if reserve is not None:
            text += (
                f" The {reserve.value} phase has used its {PHASE_RESERVES[reserve]:.0%} share "
                "of the budget; move on to the next phase."
            )
        return text

    def spent_reserve(self) -> WorkPhase | None:
        """A phase that has just used up its reserved share of the token budget (once each)."""
        limit = self.limits.max_total_tokens
        if not limit:
            return None
        for phase, share in PHASE_RESERVES.items():
            if phase in self._reported_reserves:
                continue
            if self.phase_tokens.get(phase, 0) >= share * limit:
                self._reported_reserves.add(phase)
                return phase
        return None

    def allow_task_continuation(self) -> bool:
        """Whether a new task may start on this budget (stricter than `check`)."""
        if self.mode is BudgetMode.SOFT:
            return True
        fraction = max(self.fractions().values(), default=0.0)
        if fraction < WARN_AT:
            return True
        if fraction <= RESTRICT_AT:
            return self.estimated_remaining_calls() >= self.tuning.continuation_min_calls
        return self.mode is not BudgetMode.STRICT

    def estimated_remaining_calls(self) -> float:
        """How many more calls of the average size fit in the token budget (inf if none)."""
        limit = self.limits.max_total_tokens
        if not limit or self.calls == 0:
            return float("inf")
        per_call = max(1.0, self.incremental_tokens / self.calls)
        return max(0.0, limit - self.incremental_tokens) / per_call

    # --- extensions ---------------------------------------------------------------------

    def request_extension(
        self, *, additional_tokens: int = 0, additional_usd: float = 0.0, reason: str = ""
    ) -> ExtensionRequest:
        cooldown = 0.0
        if self._last_extension_at is not None:
            waited = self.clock() - self._last_extension_at
            cooldown = max(0.0, self.tuning.extension_cooldown_s - waited)
        refusal = None
        if self.extensions_granted >= self.tuning.max_extensions:
            refusal = f"all {self.tuning.max_extensions} extensions have been granted already"
        elif cooldown > 0:
            refusal = f"extensions need {self.tuning.extension_cooldown_s:g} s between them"
        return ExtensionRequest(
            can_request=refusal is None,
            extensions_granted=self.extensions_granted,
            max_extensions=self.tuning.max_extensions,
            cooldown_remaining_s=cooldown,
            additional_tokens=additional_tokens,
            additional_usd=additional_usd,
            reason=reason,
            refusal=refusal,
        )

    def record_extension(self, additional_tokens: int = 0, additional_usd: float = 0.0) -> None:
        lim = self.limits
        self.limits = replace(
            lim,
            max_total_tokens=(lim.max_total_tokens + additional_tokens)
            if lim.max_total_tokens
            else lim.max_total_tokens,
            max_usd=(lim.max_usd + additional_usd) if lim.max_usd else lim.max_usd,
        )
        self.extensions_granted += 1
        self._last_extension_at = self.clock()


_KIND_WORDS = {
    BudgetKind.TOKENS: "token",
    BudgetKind.USD: "cost",
    BudgetKind.ITERATIONS: "turn",
    BudgetKind.DURATION: "time",
}
