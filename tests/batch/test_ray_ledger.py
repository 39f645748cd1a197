"""The batch's ledger inside a Ray actor: one pool that every node's workers reserve from, and
a named one (`--ledger NAME`) that several batches share."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest
import ray

from journeyman.batch.ledgers import LedgerCapMismatch
from journeyman.batch.ray_ledger import RayLedger
from journeyman.economics.ledger import AllocationRefused, Amount
from tests.support.cli import clean_env
from tests.support.ray_cluster import LocalRayCluster, ray_environment

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalRayCluster]:
    with LocalRayCluster(clean_env()) as running, ray_environment():
        ray.init(address=running.address, log_to_driver=False, include_dashboard=False)
        try:
            yield running
        finally:
            ray.shutdown()


@ray.remote(num_cpus=0.25)
def spend_from(ledger: RayLedger, holder: str, seed: int, rounds: int) -> tuple[int, float, int]:
    """Reserve, report part of the grant, spend part (sometimes all) of it, settle; what this
    holder spent."""
    rng = random.Random(seed)
    tokens, usd, refused = 0, 0.0, 0
    for turn in range(rounds):
        grant = Amount(tokens=rng.randint(50, 400), usd=rng.uniform(0.01, 0.3))
        try:
            reservation = ledger.reserve("b", f"{holder}-{turn}", grant)
        except AllocationRefused:
            refused += 1
            continue
        granted = reservation.granted
        assert granted.tokens is not None and granted.usd is not None
        used = Amount(
            tokens=rng.randint(0, granted.tokens),
            usd=granted.usd if rng.random() < 0.3 else rng.uniform(0.0, granted.usd),
        )
        ledger.report(reservation, Amount(0, (used.usd or 0.0) / 2))
        ledger.settle(reservation, used)
        tokens += used.tokens or 0
        usd += used.usd or 0.0
    return tokens, usd, refused


def test_concurrent_reservations_from_ray_tasks_never_overspend(cluster: LocalRayCluster) -> None:
    total = Amount(tokens=5_000, usd=2.0)
    ledger = RayLedger.start()
    ledger.join("b", total, Amount(0, 0.0))
    spent = ray.get([spend_from.remote(ledger, f"task{i}", i, 25) for i in range(8)])
    stats = ledger.stats()
    tokens = sum(s[0] for s in spent)
    usd = sum(s[1] for s in spent)
    assert sum(s[2] for s in spent) > 0, "the pool should have run dry and refused some"
    assert stats.open_reservations == 0
    assert stats.spent.tokens == tokens <= 5_000
    assert stats.spent.usd == pytest.approx(usd) and usd <= 2.0 + 1e-9
    assert stats.overspend == Amount(tokens=0, usd=0.0)
    assert ledger.account("b") == stats.spent


def test_a_refusal_reaches_the_caller_as_the_ledgers_own_error(cluster: LocalRayCluster) -> None:
    ledger = RayLedger.start()
    ledger.join("b", Amount(usd=1.0), Amount(0, 0.0))
    first = ledger.reserve("b", "a", Amount(usd=1.0))
    with pytest.raises(AllocationRefused, match="cannot fund b"):
        ledger.reserve("b", "b", Amount(usd=0.5))
    assert ledger.settle(first, Amount(usd=0.25)) == Amount(usd=0.75)
    assert ledger.available() == Amount(usd=0.75)


def test_a_named_ledger_is_shared_under_one_cap_and_another_cap_is_refused(
    cluster: LocalRayCluster,
) -> None:
    one = RayLedger.start(name="jm-shared")
    one.join("batch-a", Amount(tokens=100), Amount(40, 0.0))
    other = RayLedger.start(name="jm-shared")
    other.join("batch-b", Amount(tokens=100), Amount(0, 0.0))
    try:
        assert other.stats().spent.tokens == 40 and other.stats().total == Amount(tokens=100)
        with pytest.raises(LedgerCapMismatch, match="set by batch batch-a; batch batch-c asks"):
            RayLedger.start(name="jm-shared").join("batch-c", Amount(tokens=999), Amount())
    finally:
        one.stop()
