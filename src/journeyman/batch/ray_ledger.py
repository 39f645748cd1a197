"""A batch ledger inside a Ray actor, so that every node of a cluster draws on one cap.

`RayLedger.start(cap)` starts the actor on this process's node for one batch (it lives and dies
with the batch's process); `RayLedger.start(cap, name=NAME)` (`--ledger NAME`) registers it
under that name as a detached actor, reused by every batch or eval that names it and kept
until the cluster stops, so they share one budget. The `RayLedger` returned is the actor's
synchronous proxy (a `batch.ledgers.LedgerClient`); it pickles with the actor's handle, so a
worker given one reports its spend per model call to the same ledger.
"""

from __future__ import annotations

from typing import Any

import ray
from ray import exceptions as ray_errors
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from journeyman.batch.ledgers import LedgerBook, LedgerClient, LedgerError
from journeyman.core.errors import AgentError, ConfigurationError
from journeyman.economics.ledger import Amount, LedgerStats, Reservation

ACTOR_NAMESPACE = "journeyman"
"""The Ray namespace of named ledgers (so any driver finds them by name alone)."""


class _LedgerActor:
    """A `LedgerBook` hosted by a Ray actor (one method runs at a time)."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._book: LedgerBook | None = None

    def join(self, account: str, cap: Amount, already: Amount) -> None:
        if self._book is None:
            self._book = LedgerBook.open(self._name, account, cap)
        self._book.join(account, cap, already)

    def reserve(self, account: str, holder: str, grant: Amount) -> Reservation:
        return self._opened().reserve(account, holder, grant)

    def report(self, reservation: Reservation, used: Amount, run: str = "") -> None:
        self._opened().report(reservation, used, run)

    def settle(self, reservation: Reservation, used: Amount) -> Amount:
        return self._opened().settle(reservation, used)

    def available(self) -> Amount:
        return self._opened().pool.available()

    def stats(self) -> LedgerStats:
        return self._opened().pool.stats()

    def account(self, account: str) -> Amount:
        return self._opened().account(account)

    def _opened(self) -> LedgerBook:
        if self._book is None:
            raise LedgerError(f"ledger {self._name!r}: no batch has joined it yet")
        return self._book


class RayLedger:
    """The proxy of a ledger actor (a `LedgerClient`); pickles with the actor's handle."""

    def __init__(self, actor: Any, name: str) -> None:
        self._actor = actor
        self.name = name

    @classmethod
    def start(cls, *, name: str | None = None) -> RayLedger:
        """Start the ledger actor on this node, or, with `name`, reuse the detached one of that
        name (started now if none runs)."""
        if not ray.is_initialized():
            raise ConfigurationError(
                "the Ray ledger needs a Ray connection; create the RayExecutor first"
            )
        options: dict[str, Any] = {
            "num_cpus": 0,  # never takes a task's slot
            "max_restarts": 0,  # a restarted actor would have forgotten every reservation
            "scheduling_strategy": NodeAffinitySchedulingStrategy(
                ray.get_runtime_context().get_node_id(), soft=False
            ),
        }
        label = "the batch's ledger (a Ray actor)"
        if name is not None:
            options.update(
                name=name, namespace=ACTOR_NAMESPACE, get_if_exists=True, lifetime="detached"
            )
            label = f"Ray ledger {name!r}"
        actor = ray.remote(_LedgerActor).options(**options).remote(name or "batch")
        return cls(actor, label)

    def join(self, account: str, cap: Amount, already: Amount) -> None:
        _call(self._actor.join.remote(account, cap, already), self.name)

    def reserve(self, account: str, holder: str, grant: Amount) -> Reservation:
        reservation: Reservation = _call(
            self._actor.reserve.remote(account, holder, grant), self.name
        )
        return reservation

    def report(self, reservation: Reservation, used: Amount, run: str = "") -> None:
        _call(self._actor.report.remote(reservation, used, run), self.name)

    def settle(self, reservation: Reservation, used: Amount) -> Amount:
        returned: Amount = _call(self._actor.settle.remote(reservation, used), self.name)
        return returned

    def available(self) -> Amount:
        available: Amount = _call(self._actor.available.remote(), self.name)
        return available

    def stats(self) -> LedgerStats:
        stats: LedgerStats = _call(self._actor.stats.remote(), self.name)
        return stats

    def account(self, account: str) -> Amount:
        spent: Amount = _call(self._actor.account.remote(account), self.name)
        return spent

    def for_workers(self) -> LedgerClient | None:
        return self

    def describe(self) -> str:
        return self.name

    def stop(self) -> None:
        """End the actor (a named ledger is otherwise kept until the cluster stops)."""
        ray.kill(self._actor)


def _call(ref: Any, name: str) -> Any:
    """The value of an actor call; the ledger's own errors are raised as themselves."""
    try:
        return ray.get(ref)
    except ray_errors.RayTaskError as error:
        if isinstance(error.cause, AgentError):
            raise error.cause from None
        raise
    except ray_errors.RayActorError as error:
        raise LedgerError(
            f"{name} is gone: {error}; the batch cannot reserve or settle anything more, so it "
            "stops (rerun it with --resume)"
        ) from None


__all__ = ["ACTOR_NAMESPACE", "RayLedger"]
