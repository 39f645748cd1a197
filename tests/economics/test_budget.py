"""Behaviour of ExecutionEconomics: levels, per-mode consequences, nudges, baseline accounting,
extensions, the task-continuation gate and phase reserves."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from journeyman.core.messages import Usage
from journeyman.economics.budget import (
    PHASE_RESERVES,
    BudgetKind,
    BudgetLimits,
    BudgetMode,
    BudgetStatus,
    EconomicsTuning,
    EnforcementLevel,
    ExecutionEconomics,
    level_for,
)
from journeyman.economics.phases import WorkPhase

NONE = EnforcementLevel.NONE
WARN = EnforcementLevel.WARN
RESTRICTED = EnforcementLevel.RESTRICTED
HARD = EnforcementLevel.HARD
EXHAUSTED = EnforcementLevel.EXHAUSTED

LEVEL_BOUNDARIES: list[tuple[float, EnforcementLevel]] = [
    (0.0, NONE),
    (0.699, NONE),
    (0.70, WARN),
    (0.8999, WARN),
    (0.90, RESTRICTED),
    (0.9499, RESTRICTED),
    (0.95, HARD),
    (0.9999, HARD),
    (1.0, EXHAUSTED),
    (1.5, EXHAUSTED),
]

TOKEN_LIMIT = 10_000


class FakeClock:
    def __init__(self, start: float = 0.0) -> None:
        self.now = [start]

    @property
    def clock(self) -> Callable[[], float]:
        now = self.now
        return lambda: now[0]

    def advance(self, seconds: float) -> None:
        self.now[0] += seconds


def make(
    *,
    mode: BudgetMode = BudgetMode.STRICT,
    clock: FakeClock | None = None,
    tuning: EconomicsTuning | None = None,
    max_total_tokens: int | None = None,
    max_usd: float | None = None,
    max_iterations: int | None = None,
    max_duration_s: float | None = None,
) -> ExecutionEconomics:
    clk = clock or FakeClock()
    return ExecutionEconomics(
        limits=BudgetLimits(max_total_tokens, max_usd, max_iterations, max_duration_s),
        mode=mode,
        tuning=tuning or EconomicsTuning(),
        clock=clk.clock,
    )


def with_tokens(
    used: int,
    *,
    limit: int = TOKEN_LIMIT,
    mode: BudgetMode = BudgetMode.STRICT,
    phase: WorkPhase | None = None,
) -> ExecutionEconomics:
    """An economics object whose incremental token count is exactly `used`.

    The first (empty) call pins the baseline at 0, the second carries the usage.
    """
    econ = make(mode=mode, max_total_tokens=limit)
    econ.record_call(Usage(), 0.0)
    assert econ.baseline_tokens == 0
    if used:
        econ.record_call(Usage(input_tokens=used), 0.0, phase=phase)
    assert econ.incremental_tokens == used
    return econ


def assert_nudge_only(status: BudgetStatus) -> None:
    assert status.nudge
    assert not status.stop
    assert not status.text_only
    assert status.max_tool_calls is None


def assert_quiet(status: BudgetStatus) -> None:
    assert status.level is NONE
    assert status.nudge is None
    assert not status.stop
    assert not status.text_only
    assert status.max_tool_calls is None


# --- levels -------------------------------------------------------------------------------


@pytest.mark.parametrize(("fraction", "level"), LEVEL_BOUNDARIES)
def test_level_for_boundaries(fraction: float, level: EnforcementLevel) -> None:
    assert level_for(fraction) is level


@pytest.mark.parametrize(("fraction", "level"), LEVEL_BOUNDARIES)
def test_token_limit_levels_match_level_for(fraction: float, level: EnforcementLevel) -> None:
    used = round(fraction * TOKEN_LIMIT)
    econ = with_tokens(used)
    assert econ.usage_fraction == pytest.approx(fraction)
    status = econ.check()
    assert status.level is level
    assert status.driver is BudgetKind.TOKENS
    assert status.fraction == pytest.approx(fraction)
    assert status.fractions == {BudgetKind.TOKENS: pytest.approx(fraction)}


def test_level_rank_orders_levels() -> None:
    ranks = [lvl.rank for lvl in (NONE, WARN, RESTRICTED, HARD, EXHAUSTED)]
    assert ranks == sorted(ranks) == list(range(5))


def test_no_limits_means_no_level_and_no_driver() -> None:
    econ = make()
    econ.record_call(Usage(input_tokens=10**9, output_tokens=10**9), 1000.0)
    for _ in range(1000):
        econ.record_iteration()
    status = econ.check()
    assert_quiet(status)
    assert status.driver is None
    assert status.fraction == 0.0
    assert status.fractions == {}


# --- STRICT consequences ------------------------------------------------------------------


@pytest.mark.parametrize("used", [0, 6_999])
def test_strict_below_warn_is_quiet(used: int) -> None:
    assert_quiet(with_tokens(used).check())


@pytest.mark.parametrize("used", [7_000, 8_999])
def test_strict_tokens_warn_nudges_only(used: int) -> None:
    status = with_tokens(used).check()
    assert status.level is WARN
    assert_nudge_only(status)


@pytest.mark.parametrize("used", [9_000, 9_499])
def test_strict_tokens_restricted_limits_tool_calls(used: int) -> None:
    status = with_tokens(used).check()
    assert status.level is RESTRICTED
    assert status.max_tool_calls == EconomicsTuning().restricted_tool_calls == 1
    assert not status.text_only
    assert not status.stop
    assert status.nudge


def test_strict_restricted_tool_calls_follow_tuning() -> None:
    econ = make(max_total_tokens=TOKEN_LIMIT, tuning=EconomicsTuning(restricted_tool_calls=4))
    econ.record_call(Usage(), 0.0)
    econ.record_call(Usage(output_tokens=9_200), 0.0)
    assert econ.check().max_tool_calls == 4


@pytest.mark.parametrize("used", [9_500, 9_999])
def test_strict_tokens_hard_is_text_only(used: int) -> None:
    status = with_tokens(used).check()
    assert status.level is HARD
    assert status.text_only
    assert status.max_tool_calls is None
    assert not status.stop
    assert status.nudge


@pytest.mark.parametrize("used", [10_000, 15_000])
def test_strict_tokens_exhausted_stops(used: int) -> None:
    status = with_tokens(used).check()
    assert status.level is EXHAUSTED
    assert status.stop
    assert status.nudge


@pytest.mark.parametrize(
    ("usd", "level"),
    [(0.5, NONE), (0.75, WARN), (0.92, RESTRICTED), (0.97, HARD), (1.0, EXHAUSTED)],
)
def test_strict_usd_is_enforced_like_tokens(usd: float, level: EnforcementLevel) -> None:
    econ = make(max_usd=1.0)
    econ.record_call(Usage(input_tokens=1), usd)
    status = econ.check()
    assert status.level is level
    assert status.driver is (BudgetKind.USD if usd else None)
    assert status.max_tool_calls == (1 if level is RESTRICTED else None)
    assert status.text_only is (level is HARD)
    assert status.stop is (level is EXHAUSTED)


@pytest.mark.parametrize(
    ("iterations", "level"),
    [(13, NONE), (14, WARN), (18, RESTRICTED), (19, HARD), (20, EXHAUSTED), (25, EXHAUSTED)],
)
def test_strict_iterations_nudge_then_stop_never_restrict(
    iterations: int, level: EnforcementLevel
) -> None:
    econ = make(max_iterations=20)
    for _ in range(iterations):
        econ.record_iteration()
    status = econ.check()
    assert status.level is level
    assert not status.text_only
    assert status.max_tool_calls is None
    if level is NONE:
        assert_quiet(status)
        return
    assert status.driver is BudgetKind.ITERATIONS
    assert status.nudge
    assert "turn budget" in status.nudge
    assert status.stop is (level is EXHAUSTED)


@pytest.mark.parametrize(
    ("elapsed", "level"),
    [(69.0, NONE), (70.0, WARN), (92.0, RESTRICTED), (96.0, HARD), (100.0, EXHAUSTED)],
)
def test_strict_duration_nudge_then_stop_never_restrict(
    elapsed: float, level: EnforcementLevel
) -> None:
    clock = FakeClock(1_000.0)
    econ = make(clock=clock, max_duration_s=100.0)
    econ.start()
    clock.advance(elapsed)
    assert econ.elapsed_s == pytest.approx(elapsed)
    status = econ.check()
    assert status.level is level
    assert not status.text_only
    assert status.max_tool_calls is None
    if level is NONE:
        assert_quiet(status)
        return
    assert status.driver is BudgetKind.DURATION
    assert status.nudge
    assert "time budget" in status.nudge
    assert status.stop is (level is EXHAUSTED)


def test_duration_does_not_run_before_start() -> None:
    clock = FakeClock()
    econ = make(clock=clock, max_duration_s=10.0)
    clock.advance(1_000.0)
    assert econ.elapsed_s == 0.0
    assert econ.check().level is NONE
    econ.start()
    clock.advance(5.0)
    assert econ.elapsed_s == pytest.approx(5.0)


# --- ADVISORY and SOFT --------------------------------------------------------------------


@pytest.mark.parametrize("used", [7_000, 9_200, 9_700, 10_000, 15_000])
def test_advisory_tokens_nudge_but_never_enforce(used: int) -> None:
    status = with_tokens(used, mode=BudgetMode.ADVISORY).check()
    assert status.level is level_for(used / TOKEN_LIMIT)
    assert_nudge_only(status)


def test_advisory_iterations_nudge_but_never_stop() -> None:
    econ = make(mode=BudgetMode.ADVISORY, max_iterations=10)
    for _ in range(15):
        econ.record_iteration()
    status = econ.check()
    assert status.level is EXHAUSTED
    assert_nudge_only(status)


def test_advisory_ignores_duration_entirely() -> None:
    clock = FakeClock()
    econ = make(mode=BudgetMode.ADVISORY, clock=clock, max_duration_s=10.0)
    econ.start()
    clock.advance(15.0)  # 150 %
    status = econ.check()
    assert_quiet(status)
    assert status.driver is None


def test_advisory_duration_never_drives_a_token_nudge() -> None:
    clock = FakeClock()
    econ = make(
        mode=BudgetMode.ADVISORY, clock=clock, max_duration_s=10.0, max_total_tokens=TOKEN_LIMIT
    )
    econ.start()
    econ.record_call(Usage(), 0.0)
    econ.record_call(Usage(output_tokens=7_500), 0.0)
    clock.advance(20.0)  # duration 200 %, tokens 75 %
    status = econ.check()
    assert status.driver is BudgetKind.TOKENS
    assert status.level is WARN
    assert status.nudge is not None
    assert "token budget" in status.nudge
    assert "time" not in status.nudge
    assert_nudge_only(status)


@pytest.mark.parametrize("used", [0, 7_000, 9_200, 9_700, 10_000, 15_000])
def test_soft_never_nudges_or_stops(used: int) -> None:
    status = with_tokens(used, mode=BudgetMode.SOFT).check()
    assert_quiet(status)
    # usage is still tracked
    assert status.fractions[BudgetKind.TOKENS] == pytest.approx(used / TOKEN_LIMIT)


def test_soft_ignores_every_kind_of_limit() -> None:
    clock = FakeClock()
    econ = make(
        mode=BudgetMode.SOFT,
        clock=clock,
        max_total_tokens=100,
        max_usd=0.01,
        max_iterations=1,
        max_duration_s=1.0,
    )
    econ.start()
    econ.record_call(Usage(), 0.0)
    econ.record_call(Usage(input_tokens=1_000), 5.0)
    for _ in range(5):
        econ.record_iteration()
    clock.advance(50.0)
    status = econ.check()
    assert_quiet(status)
    assert set(status.fractions) == set(BudgetKind)


# --- nudge wording ------------------------------------------------------------------------


def test_nudge_wording_has_three_buckets_by_remaining() -> None:
    lean = with_tokens(7_500).check().nudge  # 25 % left
    short = with_tokens(9_000).check().nudge  # 10 % left
    critical = with_tokens(9_700).check().nudge  # 3 % left
    assert lean is not None and short is not None and critical is not None
    assert len({lean, short, critical}) == 3

    assert "You have used 75% of your token budget" in lean
    assert "lean" in lean

    assert "Only 10% of your token budget is left" in short
    assert "most important unfinished work" in short

    assert "token budget is all but gone (97% used)" in critical
    assert "Stop exploring" in critical


@pytest.mark.parametrize(
    ("used", "fragment"),
    [
        (8_500, "You have used 85%"),  # exactly 15 % left: not yet "< 15 %"
        (8_600, "Only 14%"),
        (9_500, "Only 5%"),  # exactly 5 % left: not yet "< 5 %"
        (9_600, "all but gone (96% used)"),
        (12_000, "all but gone (120% used)"),
    ],
)
def test_nudge_bucket_edges(used: int, fragment: str) -> None:
    nudge = with_tokens(used).check().nudge
    assert nudge is not None
    assert fragment in nudge


@pytest.mark.parametrize(
    ("limits", "noun"),
    [
        (BudgetLimits(max_usd=1.0), "cost budget"),
        (BudgetLimits(max_iterations=4), "turn budget"),
    ],
)
def test_nudge_names_the_driving_budget(limits: BudgetLimits, noun: str) -> None:
    econ = make(max_usd=limits.max_usd, max_iterations=limits.max_iterations)
    econ.record_call(Usage(), 0.8)
    for _ in range(3):
        econ.record_iteration()
    nudge = econ.check().nudge
    assert nudge is not None
    assert noun in nudge


# --- driver -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tokens", "usd", "iterations", "elapsed", "driver"),
    [
        (0.80, 0.50, 0.30, 0.20, BudgetKind.TOKENS),
        (0.50, 0.80, 0.30, 0.20, BudgetKind.USD),
        (0.50, 0.30, 0.80, 0.20, BudgetKind.ITERATIONS),
        (0.50, 0.30, 0.20, 0.80, BudgetKind.DURATION),
        (0.10, 0.20, 0.30, 0.40, BudgetKind.DURATION),
    ],
)
def test_driver_is_the_limit_closest_to_exhaustion(
    tokens: float, usd: float, iterations: float, elapsed: float, driver: BudgetKind
) -> None:
    clock = FakeClock()
    econ = make(
        clock=clock,
        max_total_tokens=1_000,
        max_usd=10.0,
        max_iterations=10,
        max_duration_s=100.0,
    )
    econ.start()
    econ.record_call(Usage(), 0.0)
    econ.record_call(Usage(output_tokens=round(tokens * 1_000)), usd * 10.0)
    for _ in range(round(iterations * 10)):
        econ.record_iteration()
    clock.advance(elapsed * 100.0)
    status = econ.check()
    assert status.fractions == {
        BudgetKind.TOKENS: pytest.approx(tokens),
        BudgetKind.USD: pytest.approx(usd),
        BudgetKind.ITERATIONS: pytest.approx(iterations),
        BudgetKind.DURATION: pytest.approx(elapsed),
    }
    assert status.driver is driver
    assert status.fraction == pytest.approx(max(tokens, usd, iterations, elapsed))
    assert status.level is level_for(status.fraction)


@pytest.mark.parametrize(
    ("tokens_used", "iterations", "expect_text_only", "expect_max_calls"),
    [(9_600, 97, True, None), (9_100, 93, False, 1)],
)
def test_more_used_iteration_limit_does_not_lift_token_restrictions(
    tokens_used: int, iterations: int, expect_text_only: bool, expect_max_calls: int | None
) -> None:
    econ = make(max_total_tokens=TOKEN_LIMIT, max_iterations=100)
    econ.record_call(Usage(), 0.0)
    econ.record_call(Usage(output_tokens=tokens_used), 0.0)
    for _ in range(iterations):
        econ.record_iteration()
    status = econ.check()
    # tokens alone would give text_only (96 %) / one tool call (91 %)
    assert with_tokens(tokens_used).check().text_only is expect_text_only
    assert status.text_only is expect_text_only
    assert status.max_tool_calls == expect_max_calls


# --- cost ---------------------------------------------------------------------------------


def test_cost_accumulates_and_drives_usd_fraction() -> None:
    econ = make(max_usd=2.0)
    econ.record_call(Usage(input_tokens=10), 0.25)
    econ.record_call(Usage(input_tokens=10), 0.75)
    assert econ.cost_usd == pytest.approx(1.0)
    assert econ.fractions() == {BudgetKind.USD: pytest.approx(0.5)}


def test_unknown_first_price_drops_usd_from_fractions() -> None:
    econ = make(max_usd=1.0)
    econ.record_call(Usage(input_tokens=10), None)
    econ.record_call(Usage(input_tokens=10), 5.0)
    assert econ.cost_usd is None
    assert BudgetKind.USD not in econ.fractions()
    assert econ.check().level is NONE


def test_unknown_later_price_makes_cost_unknown_for_good() -> None:
    econ = make(max_usd=1.0, max_iterations=10)
    econ.record_call(Usage(input_tokens=10), 0.5)
    assert econ.fractions()[BudgetKind.USD] == pytest.approx(0.5)
    econ.record_call(Usage(input_tokens=10), None)
    econ.record_call(Usage(input_tokens=10), 0.9)
    assert econ.cost_usd is None
    assert set(econ.fractions()) == {BudgetKind.ITERATIONS}


# --- baseline -----------------------------------------------------------------------------


def test_set_baseline_clamps_and_is_refined_by_first_call() -> None:
    econ = make(max_total_tokens=TOKEN_LIMIT)
    econ.set_baseline(-5)
    assert econ.baseline_tokens == 0
    econ.set_baseline(1_200)  # the estimate from the system prompt
    assert econ.baseline_tokens == 1_200
    assert econ.incremental_tokens == 0  # never negative

    econ.record_call(Usage(input_tokens=500, output_tokens=300, cache_read_tokens=1_500), 0.0)
    # the first call's whole prompt (cache included) replaces the estimate
    assert econ.baseline_tokens == 2_000
    assert econ.total_tokens == 2_300
    assert econ.incremental_tokens == 300
    assert econ.usage_fraction == pytest.approx(0.03)

    econ.record_call(Usage(input_tokens=2_300, output_tokens=200), 0.0)
    assert econ.baseline_tokens == 2_000  # refined only once
    assert econ.incremental_tokens == 300 + 2_500
    assert econ.usage_fraction == pytest.approx(0.28)


def test_set_baseline_after_first_call_is_kept() -> None:
    econ = make(max_total_tokens=TOKEN_LIMIT)
    econ.record_call(Usage(input_tokens=1_000, output_tokens=100), 0.0)
    econ.set_baseline(500)
    econ.record_call(Usage(input_tokens=1_100, output_tokens=100), 0.0)
    assert econ.baseline_tokens == 500
    assert econ.incremental_tokens == 2_300 - 500


def test_usage_fraction_is_zero_without_a_token_limit() -> None:
    econ = make()
    econ.record_call(Usage(), 0.0)
    econ.record_call(Usage(input_tokens=50_000), 0.0)
    assert econ.incremental_tokens == 50_000
    assert econ.usage_fraction == 0.0


def test_update_baseline_keeps_only_the_compacted_context() -> None:
    econ = make(max_total_tokens=100_000)
    econ.record_call(Usage(input_tokens=5_000, output_tokens=500), 0.0)
    econ.record_call(Usage(input_tokens=30_000, output_tokens=500), 0.0)
    econ.record_call(Usage(input_tokens=50_000, output_tokens=500), 0.0)
    assert econ.total_tokens == 86_500
    assert econ.incremental_tokens == 81_500
    assert econ.check().level is WARN

    econ.update_baseline(tokens_after=6_000)
    assert econ.baseline_tokens == 80_500
    assert econ.incremental_tokens == 6_000
    assert econ.check().level is NONE

    econ.record_call(Usage(input_tokens=6_000, output_tokens=400), 0.0)
    assert econ.incremental_tokens == 6_000 + 6_400
    assert econ.usage_fraction == pytest.approx(0.124)
    assert econ.total_tokens == 86_500 + 6_400  # cumulative total is untouched


def test_update_baseline_edges() -> None:
    econ = make(max_total_tokens=TOKEN_LIMIT)
    econ.record_call(Usage(input_tokens=1_000, output_tokens=1_000), 0.0)
    econ.update_baseline(tokens_after=0)
    assert econ.incremental_tokens == 0
    econ.update_baseline(tokens_after=-10)
    assert econ.incremental_tokens == 0
    econ.update_baseline(tokens_after=10**6)  # more than is counted: the count stays
    assert econ.baseline_tokens == 2_000
    assert econ.incremental_tokens == 0


def test_an_early_compaction_never_raises_the_count() -> None:
    econ = make(max_total_tokens=TOKEN_LIMIT)
    econ.record_call(Usage(input_tokens=3_000, output_tokens=20), 0.0)
    assert econ.incremental_tokens == 20  # the first prompt is the baseline
    econ.update_baseline(tokens_after=3_020)  # the compacted context is bigger than the count
    assert econ.incremental_tokens == 20
    assert econ.baseline_tokens == 3_000
    econ.record_call(Usage(input_tokens=3_020, output_tokens=30), 0.0)
    assert econ.incremental_tokens == 20 + 3_050


CONTEXT_START = 5_000
CONTEXT_GROWTH = 2_000
COMPACT_EVERY = 10
RUN_CALLS = 60
RUN_TOKEN_LIMIT = 400_000


def simulate_compacting_run(*, update_baseline: bool) -> tuple[int | None, int, float]:
    """60 calls; the context grows 2k per call and compaction shrinks it to 5k every 10 calls.

    Each call's input is the whole context (output 200). Before each call the loop asks
    `check()`; returns (the call that found HARD or worse, or None; calls made; peak fraction).
    """
    econ = make(max_total_tokens=RUN_TOKEN_LIMIT)
    econ.set_baseline(CONTEXT_START)
    context = CONTEXT_START
    peak = 0.0
    for call in range(1, RUN_CALLS + 1):
        status = econ.check()
        peak = max(peak, status.fraction)
        if status.level.rank >= HARD.rank:
            return call, call - 1, peak
        econ.record_call(Usage(input_tokens=context, output_tokens=200), 0.0)
        context += CONTEXT_GROWTH
        if call % COMPACT_EVERY == 0:
            context = CONTEXT_START
            if update_baseline:
                econ.update_baseline(tokens_after=context)
    peak = max(peak, econ.check().fraction)
    return None, RUN_CALLS, peak


def test_compaction_baseline_prevents_premature_text_only() -> None:
    tripped, made, peak = simulate_compacting_run(update_baseline=True)
    assert tripped is None
    assert made == RUN_CALLS
    assert peak < 0.70  # never even warned


def test_without_baseline_update_the_same_run_hits_hard_early() -> None:
    tripped, made, peak = simulate_compacting_run(update_baseline=False)
    # after call 28 the count is 376,600 (94.2 %), after call 29 it is 397,800 (99.5 %):
    # the check before call 30 finds HARD, half-way through the run
    assert tripped == 30
    assert made == 29
    assert peak >= 0.95


# --- extensions ---------------------------------------------------------------------------


def test_extension_request_fields_and_record_extension() -> None:
    clock = FakeClock()
    econ = make(clock=clock, max_total_tokens=TOKEN_LIMIT, max_usd=1.0)
    econ.record_call(Usage(), 0.0)
    econ.record_call(Usage(output_tokens=9_600), 0.5)
    assert econ.check().level is HARD

    req = econ.request_extension(additional_tokens=5_000, additional_usd=0.5, reason="tests")
    assert req.can_request
    assert req.extensions_granted == 0
    assert req.max_extensions == 3
    assert req.cooldown_remaining_s == 0.0
    assert (req.additional_tokens, req.additional_usd, req.reason) == (5_000, 0.5, "tests")
    assert req.refusal is None

    econ.record_extension(additional_tokens=5_000, additional_usd=0.5)
    assert econ.limits.max_total_tokens == 15_000
    assert econ.limits.max_usd == pytest.approx(1.5)
    assert econ.extensions_granted == 1
    assert econ.check().level is NONE  # 64 % of the tokens, 33 % of the money


def test_record_extension_leaves_unset_limits_unset() -> None:
    econ = make(max_iterations=5)
    econ.record_extension(additional_tokens=1_000, additional_usd=1.0)
    assert econ.limits.max_total_tokens is None
    assert econ.limits.max_usd is None
    assert econ.limits.max_iterations == 5
    assert econ.extensions_granted == 1


def test_extension_cooldown_and_maximum() -> None:
    clock = FakeClock(50.0)
    econ = make(clock=clock, max_total_tokens=TOKEN_LIMIT)

    econ.record_extension(additional_tokens=1_000)
    req = econ.request_extension(additional_tokens=1_000)
    assert not req.can_request
    assert req.extensions_granted == 1
    assert req.cooldown_remaining_s == pytest.approx(120.0)
    assert req.refusal is not None
    assert "120 s" in req.refusal

    clock.advance(119.0)
    req = econ.request_extension(additional_tokens=1_000)
    assert not req.can_request
    assert req.cooldown_remaining_s == pytest.approx(1.0)

    clock.advance(1.0)
    req = econ.request_extension(additional_tokens=1_000)
    assert req.can_request
    assert req.cooldown_remaining_s == 0.0
    assert req.refusal is None
    econ.record_extension(additional_tokens=1_000)

    clock.advance(120.0)
    assert econ.request_extension().can_request
    econ.record_extension(additional_tokens=1_000)
    assert econ.extensions_granted == 3
    assert econ.limits.max_total_tokens == TOKEN_LIMIT + 3_000

    clock.advance(10_000.0)  # cooldown long over: only the maximum refuses
    req = econ.request_extension(additional_tokens=1_000)
    assert not req.can_request
    assert req.extensions_granted == 3
    assert req.max_extensions == 3
    assert req.cooldown_remaining_s == 0.0
    assert req.refusal is not None
    assert "all 3 extensions" in req.refusal


def test_extension_tuning_is_honoured() -> None:
    clock = FakeClock()
    econ = make(
        clock=clock,
        max_total_tokens=TOKEN_LIMIT,
        tuning=EconomicsTuning(max_extensions=1, extension_cooldown_s=5.0),
    )
    econ.record_extension(additional_tokens=1)
    clock.advance(4.0)
    req = econ.request_extension()
    assert req.max_extensions == 1
    assert not req.can_request
    assert req.refusal is not None
    assert "all 1 extensions" in req.refusal


# --- task continuation gate ---------------------------------------------------------------


def test_continuation_below_warn_is_always_allowed() -> None:
    econ = with_tokens(6_900)  # 2 calls, avg 3450 tokens: fewer than 3 calls still fit
    assert econ.estimated_remaining_calls() < 3
    assert econ.allow_task_continuation()
    assert make().allow_task_continuation()  # no limits at all


def test_continuation_between_warn_and_restrict_needs_three_more_calls() -> None:
    few = with_tokens(8_000)  # 2 calls averaging 4000: 0.5 calls fit
    assert few.estimated_remaining_calls() == pytest.approx(0.5)
    assert not few.allow_task_continuation()

    many = make(max_total_tokens=TOKEN_LIMIT)
    many.record_call(Usage(), 0.0)
    for _ in range(80):
        many.record_call(Usage(output_tokens=100), 0.0)
    assert many.usage_fraction == pytest.approx(0.80)
    assert many.estimated_remaining_calls() >= 3
    assert many.allow_task_continuation()


def test_continuation_min_calls_follows_tuning() -> None:
    econ = make(max_total_tokens=TOKEN_LIMIT)
    econ.record_call(Usage(), 0.0)
    for _ in range(4):
        econ.record_call(Usage(output_tokens=1_875), 0.0)  # 7500 over 5 calls: 1500 per call
    assert econ.usage_fraction == pytest.approx(0.75)
    assert econ.estimated_remaining_calls() == pytest.approx(2_500 / 1_500)
    assert not econ.allow_task_continuation()
    econ.tuning = EconomicsTuning(continuation_min_calls=1)
    assert econ.allow_task_continuation()


@pytest.mark.parametrize(
    ("mode", "allowed"),
    [(BudgetMode.STRICT, False), (BudgetMode.ADVISORY, True), (BudgetMode.SOFT, True)],
)
def test_continuation_above_restrict_depends_on_mode(mode: BudgetMode, allowed: bool) -> None:
    assert with_tokens(9_100, mode=mode).allow_task_continuation() is allowed
    assert with_tokens(12_000, mode=mode).allow_task_continuation() is allowed


def test_continuation_looks_at_iterations_too() -> None:
    econ = make(max_iterations=10)
    for _ in range(10):
        econ.record_iteration()
    assert not econ.allow_task_continuation()


# --- phase reserves -----------------------------------------------------------------------


def test_phase_reserves_match_the_seed_table() -> None:
    # the seed's table (30/10/~45/15/5) adds up to 105 %; the code copies it as is
    reserves = dict(PHASE_RESERVES)
    assert reserves == {
        WorkPhase.EXPLORATION: pytest.approx(0.30),
        WorkPhase.PLANNING: pytest.approx(0.10),
        WorkPhase.ACTING: pytest.approx(0.45),
        WorkPhase.VERIFYING: pytest.approx(0.15),
        WorkPhase.WRAPUP: pytest.approx(0.05),
    }


def test_exploration_reserve_is_reported_once_in_a_nudge() -> None:
    econ = make(max_total_tokens=TOKEN_LIMIT)
    econ.record_call(Usage(), 0.0)
    for _ in range(3):
        econ.record_call(Usage(output_tokens=1_000), 0.0, phase=WorkPhase.EXPLORATION)
    assert econ.phase_tokens[WorkPhase.EXPLORATION] == 3_000  # exactly 30 % of the limit
    assert econ.check().nudge is None  # 30 %: below WARN, nothing to say yet

    econ.record_call(Usage(output_tokens=4_500), 0.0)  # no phase: 75 % in all
    first = econ.check()
    assert first.level is WARN
    assert first.nudge is not None
    assert "exploration phase has used its 30% share" in first.nudge

    second = econ.check()
    assert second.nudge is not None
    assert "exploration" not in second.nudge
    assert "phase" not in second.nudge


def test_spent_reserve_directly() -> None:
    econ = make(max_total_tokens=TOKEN_LIMIT)
    econ.record_call(Usage(), 0.0)
    econ.record_call(Usage(output_tokens=2_999), 0.0, phase=WorkPhase.EXPLORATION)
    assert econ.spent_reserve() is None
    econ.record_call(Usage(output_tokens=1), 0.0, phase=WorkPhase.EXPLORATION)
    assert econ.spent_reserve() is WorkPhase.EXPLORATION
    assert econ.spent_reserve() is None  # once only
    econ.record_call(Usage(output_tokens=10_000), 0.0, phase=WorkPhase.EXPLORATION)
    assert econ.spent_reserve() is None

    econ.record_call(Usage(output_tokens=999), 0.0, phase=WorkPhase.PLANNING)
    assert econ.spent_reserve() is None
    econ.record_call(Usage(output_tokens=1), 0.0, phase=WorkPhase.PLANNING)
    assert econ.spent_reserve() is WorkPhase.PLANNING
    assert econ.spent_reserve() is None


def test_spent_reserve_needs_a_token_limit() -> None:
    econ = make(max_usd=1.0)
    econ.record_call(Usage(), 0.0)
    econ.record_call(Usage(output_tokens=10**6), 0.0, phase=WorkPhase.EXPLORATION)
    assert econ.spent_reserve() is None


def test_phase_reserve_counts_budget_tokens_not_baseline_tokens() -> None:
    econ = make(max_total_tokens=TOKEN_LIMIT)
    econ.record_call(Usage(input_tokens=5_000), 0.0, phase=WorkPhase.EXPLORATION)
    assert econ.incremental_tokens == 0  # nothing of the budget is used yet
    assert econ.spent_reserve() is None
