"""The reservation ledger: sizing (reserve, fair share, 60 % cap, minimum), settlement, and no
overspend under concurrent reservations."""

from __future__ import annotations

import asyncio
import json
import random
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from journeyman.economics.ledger import (
    AllocationRefused,
    Amount,
    BudgetLedger,
    LedgerPolicy,
)


def test_owner_reserve_is_held_back_and_one_holder_takes_at_most_60_percent() -> None:
    ledger = BudgetLedger(Amount(tokens=200_000))
    assert ledger.available() == Amount(tokens=150_000)  # 25 % kept for the owner
    first = ledger.reserve("a")
    assert first.granted.tokens == 90_000  # 60 % of the 150K that remains
    second = ledger.reserve("b")
    assert second.granted.tokens == 36_000  # 60 % of the 60K left


def test_fair_share_divides_what_remains_among_the_sharers() -> None:
    ledger = BudgetLedger(Amount(tokens=100_000, usd=1.0), LedgerPolicy(reserve_share=0.0))
    grants = [ledger.reserve(f"c{i}", sharers=4 - i).granted for i in range(4)]
    # the last one alone is still held to 60 % of what remains
    assert [g.tokens for g in grants] == [25_000, 25_000, 25_000, 15_000]
    assert [round(g.usd or 0, 6) for g in grants] == [0.25, 0.25, 0.25, 0.15]


def test_request_caps_the_grant_and_small_requests_are_honoured() -> None:
    ledger = BudgetLedger(Amount(usd=1.0), LedgerPolicy(min_usd=0.2))
    assert ledger.reserve("a", request=Amount(usd=0.1)).granted.usd == pytest.approx(0.1)


def test_minimum_is_granted_first_come_then_refused_with_a_clear_message() -> None:
    ledger = BudgetLedger(Amount(usd=1.0), LedgerPolicy(min_usd=0.15))
    grants = []
    for i in range(6):
        try:
            grants.append(ledger.reserve(f"child-{i}", sharers=6 - i).granted.usd)
        except AllocationRefused as refused:
            assert "no USD allocation left for child-" in refused.message
            assert refused.details["error"] == "allocation_refused"
    assert grants == pytest.approx([0.15] * 4)
    assert sum(grants) <= 0.75


def test_a_holders_floor_raises_its_grant_and_below_it_nothing_is_granted() -> None:
    ledger = BudgetLedger(Amount(usd=0.04, tokens=100_000), LedgerPolicy(reserve_share=0.0))
    floor = Amount(tokens=2_600, usd=0.009)
    # an even split among 8 ($0.005) could not pay for one call: raised to the floor
    first = ledger.reserve("a", sharers=8, floor=floor).granted
    assert first.usd == pytest.approx(0.009)
    grants = [first]
    with pytest.raises(AllocationRefused) as refused:
        for i in range(8):
            grants.append(ledger.reserve(f"b{i}", sharers=7 - i, floor=floor).granted)
    assert all((g.usd or 0) >= 0.009 for g in grants)
    assert refused.value.below_floor
    assert "left, a call needs about $0.0090" in refused.value.message
    # asking for less than the floor is refused too, even from a pool without a USD limit
    unlimited = BudgetLedger(Amount(tokens=100_000))
    with pytest.raises(AllocationRefused) as asked_too_little:
        unlimited.reserve("c", request=Amount(usd=0.001), floor=floor)
    assert "its own limit is $0.0010, a call needs about $0.0090" in asked_too_little.value.message


def test_settle_returns_unused_budget_and_counts_spending() -> None:
    ledger = BudgetLedger(Amount(tokens=1_000), LedgerPolicy(reserve_share=0.0, max_share=1.0))
    held = ledger.reserve("a")
    assert ledger.available() == Amount(tokens=0)
    returned = ledger.settle(held, Amount(tokens=300))
    assert returned == Amount(tokens=700)
    assert ledger.available() == Amount(tokens=700)
    assert ledger.settle(held, Amount(tokens=300)) == Amount()  # settling twice is a no-op
    stats = ledger.stats()
    assert stats.spent.tokens == 300 and stats.reserved.tokens == 0
    assert stats.open_reservations == 0


def test_owner_charges_shrink_what_holders_can_reserve() -> None:
    ledger = BudgetLedger(Amount(usd=1.0))
    ledger.charge(Amount(usd=0.5))
    assert ledger.available().usd == pytest.approx(0.5)  # past the 0.75 pool: total - spent
    ledger.charge(Amount(usd=0.5))
    with pytest.raises(AllocationRefused):
        ledger.reserve("late")


def test_overspend_by_a_holder_is_reported() -> None:
    ledger = BudgetLedger(Amount(tokens=1_000))
    held = ledger.reserve("a", request=Amount(tokens=100))
    ledger.settle(held, Amount(tokens=130))
    assert ledger.stats().overspend.tokens == 30


def test_unlimited_dimensions_grant_the_request_or_no_limit() -> None:
    ledger = BudgetLedger(Amount(usd=1.0))
    granted = ledger.reserve("a").granted
    assert granted.tokens is None and granted.usd == pytest.approx(0.45)
    assert BudgetLedger(Amount()).reserve("b", request=Amount(tokens=5)).granted == Amount(5)


def test_bad_policy_is_rejected() -> None:
    with pytest.raises(ValueError, match="max_share"):
        LedgerPolicy(max_share=0.0)
    with pytest.raises(ValueError, match="reserve_share"):
        LedgerPolicy(reserve_share=1.0)


def test_threads_reserving_at_once_never_exceed_the_pool() -> None:
    ledger = BudgetLedger(Amount(tokens=10_000), LedgerPolicy(min_tokens=100))
    granted: list[int] = []
    barrier = threading.Barrier(16)

    def worker(i: int) -> None:
        barrier.wait()
        for _ in range(20):
            try:
                granted.append(ledger.reserve(f"t{i}").granted.tokens or 0)
            except AllocationRefused:
                return

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(granted) <= 7_500
    assert ledger.stats().reserved.tokens == sum(granted)


def run_random_tree(seed: int) -> tuple[float, float]:
    """One random tree of concurrent holders (async tasks with nested children) that spend a
    random part of their grant, sometimes overshooting it by the size of one call the way a
    run's last model call can; a holder's limit enforcement stops it at its grant. Returns
    (total spent, cap)."""
    rng = random.Random(seed)
    cap = rng.uniform(0.5, 5.0)
    ledger = BudgetLedger(
        Amount(usd=cap),
        LedgerPolicy(
            reserve_share=rng.choice([0.0, 0.25, 0.5]),
            max_share=rng.choice([0.3, 0.6, 1.0]),
            min_usd=rng.uniform(0.0, 0.2),
        ),
    )

    async def holder(name: str, depth: int) -> None:
        try:
            held = ledger.reserve(name, sharers=rng.randint(1, 6))
        except AllocationRefused:
            return
        budget = held.granted.usd or 0.0
        spent = 0.0
        while spent < budget:  # each call is priced; the gate stops before the limit
            call = rng.uniform(0.001, 0.05)
            if spent + call > budget:
                break
            spent += call
            await asyncio.sleep(0)
        if depth < 2:
            children = rng.randint(0, 3)
            await asyncio.gather(*(holder(f"{name}.{i}", depth + 1) for i in range(children)))
        ledger.settle(held, Amount(usd=spent))

    async def tree() -> None:
        ledger.charge(Amount(usd=rng.uniform(0, cap / 4)))  # the root's own calls
        await asyncio.gather(*(holder(f"c{i}", 1) for i in range(rng.randint(1, 8))))

    asyncio.run(tree())
    stats = ledger.stats()
    assert stats.open_reservations == 0
    return stats.spent.usd or 0.0, cap


@settings(max_examples=50, deadline=None, derandomize=True)
@given(st.integers(min_value=0, max_value=2**32))
def test_fifty_random_concurrent_trees_never_overspend_the_pool(seed: int) -> None:
    spent, cap = run_random_tree(seed)
    assert spent <= cap + 1e-9


def test_reported_spend_is_in_flight_and_settled_at_no_less() -> None:
    ledger = BudgetLedger(Amount(tokens=1_000, usd=1.0), LedgerPolicy(reserve_share=0.0))
    held = ledger.reserve("a", request=Amount(tokens=400, usd=0.4))
    ledger.report(held, Amount(tokens=100, usd=0.1))
    ledger.report(held, Amount(tokens=50, usd=0.3))  # a running total: never goes back
    assert ledger.stats().in_flight == Amount(tokens=100, usd=0.3)
    assert ledger.stats().spent == Amount(tokens=0, usd=0.0)
    # the holder died before its spending was counted elsewhere: what it reported counts
    ledger.settle(held, Amount(tokens=0, usd=0.0))
    stats = ledger.stats()
    assert stats.spent == Amount(tokens=100, usd=0.3) and stats.in_flight == Amount(0, 0.0)
    ledger.report(held, Amount(tokens=999, usd=0.9))  # settled: ignored
    assert ledger.stats().spent == Amount(tokens=100, usd=0.3)


def test_a_ledger_read_back_from_its_state_goes_on_where_it_was() -> None:
    ledger = BudgetLedger(Amount(usd=1.0), LedgerPolicy(reserve_share=0.0, max_share=1.0))
    first = ledger.reserve("a", request=Amount(usd=0.25))
    ledger.report(first, Amount(usd=0.125))
    second = ledger.reserve("b", request=Amount(usd=0.5))
    ledger.settle(second, Amount(usd=0.375))
    copy = BudgetLedger.from_state(json.loads(json.dumps(ledger.to_state())))
    assert copy.stats() == ledger.stats() and copy.available() == ledger.available()
    third = copy.reserve("c", request=Amount(usd=0.1))
    assert third.id not in (first.id, second.id)
    copy.settle(first, Amount(usd=0.0))
    assert copy.stats().spent == Amount(tokens=0, usd=0.5)


def test_reports_of_separate_runs_add_up_and_survive_the_state() -> None:
    """A holder's process that died after reporting and the one that took the attempt over
    from scratch both spent: the settlement counts their reports added up, each run's own
    running total never going down, also through `to_state`/`from_state` (a Redis ledger)."""
    ledger = BudgetLedger(Amount(10_000, 1.0), LedgerPolicy(reserve_share=0.0))
    held = ledger.reserve("task", request=Amount(5_000, 0.5))
    ledger.report(held, Amount(300, 0.03), "dead-run")
    ledger.report(held, Amount(100, 0.01), "new-run")
    ledger.report(held, Amount(50, 0.005), "new-run")  # a late, smaller report changes nothing
    assert ledger.stats().in_flight == Amount(400, 0.04)
    copy = BudgetLedger.from_state(ledger.to_state())
    assert copy.stats().in_flight == Amount(400, 0.04)
    copy.report(held, Amount(200, 0.02), "new-run")
    copy.settle(held, Amount(200, 0.02))  # the store saw the new run only
    assert copy.stats().spent == Amount(500, pytest.approx(0.05))
