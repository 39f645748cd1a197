"""The Ray executor: a batch's tasks run as Ray tasks on a cluster, under one ledger.

`RayExecutor(address, max_parallel)` connects this process to a Ray cluster (or, without an
address and without `RAY_ADDRESS`, starts a private one on this machine for the batch) and runs
each `TaskJob` as a Ray task that asks for `cpus_per_task` CPUs and calls `run_job` on the
worker. API keys are never shipped: a worker reads them from its own environment (the one
`ray start` was run in on its node).

Where a task's session lives: in the batch's own store (`job.store_path`), which every worker
opens directly. This needs the store and the batch's output folder (where the task's workspace
copy is) on a filesystem all nodes share at the same path; it is what lets a task whose worker
died be resumed, on any node, from the last step the dead worker persisted. Shipping the rows
back with the result would lose exactly those steps with the dead node.

A worker that dies mid-task (its process killed, its node lost) is detected by Ray; the task is
submitted once more, resuming its session, and its spend is counted from the store over both
attempts, so nothing is charged twice and nothing persisted is missed. A second death ends the
task as an infrastructure error (`journeyman batch --resume` may try it again).

`RayLedger.start` puts the one `economics.ledger.BudgetLedger` of the batch inside a Ray actor
on the batch's own node; the `RayLedger` it returns is the actor's synchronous proxy (the
scheduler's `LedgerClient`), usable from the driver and from any worker, so the cap holds for
every node.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import ray
from ray import exceptions as ray_errors
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from journeyman.batch.job import Spending, TaskJob, TaskOutcome, run_job, session_spending
from journeyman.core.errors import AgentError, ConfigurationError
from journeyman.core.result import FinishReason
from journeyman.economics.ledger import (
    Amount,
    BudgetLedger,
    LedgerPolicy,
    LedgerStats,
    Reservation,
)

_log = logging.getLogger("journeyman.batch.ray")

PID_DIR_ENV = "JOURNEYMAN_RAY_PID_DIR"
"""When set in a worker's environment, the worker writes `<session id>.pid` (its process id,
then the task id, one a line) into that folder while it runs a task, so an operator can see
which process runs which task."""

PROBE_TIMEOUT_S = 5.0
"""How long to wait for the head node to accept a connection before refusing its address."""

JOIN_POLL_S = 0.2
"""How often a worker's main thread wakes while the attempt runs (to take Ray's interrupt)."""

WORKER_RETRIES = 1
"""Times a task is submitted again after its worker died (the issue: retried once)."""

_DIED = (
    ray_errors.WorkerCrashedError,
    ray_errors.NodeDiedError,
    ray_errors.LocalRayletDiedError,
    ray_errors.ObjectLostError,
    ray_errors.OutOfMemoryError,
)
"""What Ray raises when the process or node running a task went away before it answered."""


# --------------------------------------------------------------------------- the ledger


class _LedgerActor:
    """The batch's `BudgetLedger`, hosted by a Ray actor (one method runs at a time)."""

    def __init__(self, total: Amount, policy: LedgerPolicy) -> None:
        self._ledger = BudgetLedger(total, policy)

    def reserve(
        self, holder: str, sharers: int, request: Amount | None, floor: Amount | None = None
    ) -> Reservation:
        return self._ledger.reserve(holder, sharers=sharers, request=request, floor=floor)

    def settle(self, reservation: Reservation, used: Amount) -> Amount:
        return self._ledger.settle(reservation, used)

    def charge(self, used: Amount) -> None:
        self._ledger.charge(used)

    def available(self) -> Amount:
        return self._ledger.available()

    def stats(self) -> LedgerStats:
        return self._ledger.stats()


class RayLedger:
    """The batch's ledger as every node sees it: a synchronous proxy of the ledger actor, with
    `BudgetLedger`'s methods (the scheduler's `LedgerClient`). It pickles (the actor handle
    travels with it), so a Ray task given one reserves from the same pool."""

    def __init__(self, actor: Any) -> None:
        self._actor = actor

    @classmethod
    def start(
        cls, total: Amount, policy: LedgerPolicy | None = None, *, name: str | None = None
    ) -> RayLedger:
        """Start the ledger actor on this process's node (it lives and dies with the batch's
        process). With `name`, the actor is registered under it and one of that name already
        running is reused, so several batch processes on one cluster can share one cap."""
        _require_connection()
        options: dict[str, Any] = {
            "num_cpus": 0,  # never takes a task's slot
            "max_restarts": 0,  # a restarted actor would have forgotten every reservation
            "scheduling_strategy": NodeAffinitySchedulingStrategy(
                ray.get_runtime_context().get_node_id(), soft=False
            ),
        }
        if name is not None:
            options.update(name=name, get_if_exists=True)
        policy = policy or LedgerPolicy()
        return cls(ray.remote(_LedgerActor).options(**options).remote(total, policy))

    def reserve(
        self,
        holder: str,
        sharers: int = 1,
        request: Amount | None = None,
        floor: Amount | None = None,
    ) -> Reservation:
        """Reserve an allocation for `holder` (raises `AllocationRefused` when the pool cannot
        give the smallest one)."""
        reservation: Reservation = _call(
            self._actor.reserve.remote(holder, sharers, request, floor)
        )
        return reservation

    def settle(self, reservation: Reservation, used: Amount) -> Amount:
        returned: Amount = _call(self._actor.settle.remote(reservation, used))
        return returned

    def charge(self, used: Amount) -> None:
        _call(self._actor.charge.remote(used))

    def available(self) -> Amount:
        available: Amount = _call(self._actor.available.remote())
        return available

    def stats(self) -> LedgerStats:
        stats: LedgerStats = _call(self._actor.stats.remote())
        return stats


def _call(ref: Any) -> Any:
    """The value of an actor call; the ledger's own errors are raised as themselves."""
    try:
        return ray.get(ref)
    except ray_errors.RayTaskError as error:
        if isinstance(error.cause, AgentError):
            raise error.cause from None
        raise
    except ray_errors.RayActorError as error:
        raise AgentError(
            f"the batch's budget ledger (a Ray actor) is gone: {error}; the batch cannot "
            "reserve or settle anything more, so it stops (rerun it with --resume)"
        ) from None


# --------------------------------------------------------------------------- the executor


def _run_on_worker(job: TaskJob) -> TaskOutcome:
    """The Ray task: run one attempt where Ray placed it.

    The attempt runs in a thread of its own. When Ray tears the task down (its batch process
    died or stopped it), it interrupts the worker's main thread; the worker then exits at once,
    leaving the session as its last persisted step left it, so that a resumed batch continues
    it. Letting the interrupt reach the agent would record the task as cancelled by a user,
    which a resumed batch rightly never runs again."""
    pid_dir = os.environ.get(PID_DIR_ENV)
    pid_file = Path(pid_dir) / f"{job.session_id}.pid" if pid_dir else None
    if pid_file is not None:
        pid_file.parent.mkdir(parents=True, exist_ok=True)
        pid_file.write_text(f"{os.getpid()}\n{job.task.id}\n")
    ended: list[TaskOutcome] = []
    attempt = threading.Thread(
        target=lambda: ended.append(run_job(job)), name=f"task-{job.task.id}", daemon=True
    )
    try:
        attempt.start()
        while attempt.is_alive():
            attempt.join(JOIN_POLL_S)  # a timed wait lets Ray's interrupt through
    except BaseException:
        _forget(pid_file)
        os._exit(1)
    _forget(pid_file)
    if not ended:
        raise RuntimeError(f"task {job.task.id}: its attempt ended without an outcome")
    return ended[0]


def _forget(pid_file: Path | None) -> None:
    if pid_file is not None:
        with contextlib.suppress(OSError):
            pid_file.unlink()


class RayExecutor:
    """Runs a batch's jobs as Ray tasks, at most `max_parallel` at once."""

    def __init__(
        self,
        address: str | None,
        max_parallel: int,
        *,
        cpus_per_task: float = 1.0,
        worker_retries: int = WORKER_RETRIES,
    ) -> None:
        if max_parallel < 1:
            raise ConfigurationError(f"--max-parallel must be at least 1, got {max_parallel}")
        if cpus_per_task <= 0:
            raise ConfigurationError(f"CPUs per task must be positive, got {cpus_per_task}")
        self.max_parallel = max_parallel
        self.cpus_per_task = cpus_per_task
        self.worker_retries = worker_retries
        self.address = address
        self._owns_connection = _connect(address)
        self._remote = ray.remote(_run_on_worker).options(
            num_cpus=cpus_per_task,
            max_retries=0,  # a dead worker is retried here, resuming its session
        )
        self._slots: tuple[asyncio.AbstractEventLoop, asyncio.Semaphore] | None = None
        self.worker_deaths = 0
        """Attempts lost to a worker that died (each was retried once, or ended the task)."""

    def ledger(self, total: Amount, policy: LedgerPolicy | None = None) -> RayLedger:
        """The batch's ledger, hosted where every node can reach it."""
        return RayLedger.start(total, policy)

    def rate_limiter(self) -> Any:
        """How workers reach the cluster's shared rate limiter (a named actor)."""
        from journeyman.batch.ray_rate_limits import shared_backend

        return shared_backend()

    async def run(self, job: TaskJob) -> TaskOutcome:
        loop = asyncio.get_running_loop()
        if self._slots is None or self._slots[0] is not loop:  # one semaphore per event loop
            self._slots = (loop, asyncio.Semaphore(self.max_parallel))
        async with self._slots[1]:
            return await self._run(job)

    async def _run(self, job: TaskJob) -> TaskOutcome:
        started = time.monotonic()
        baseline = await asyncio.to_thread(_spent, job)
        attempt_job = job
        deaths: list[str] = []
        while True:
            ref = self._remote.remote(attempt_job)
            try:
                outcome: TaskOutcome = await ref
            except asyncio.CancelledError:
                ray.cancel(ref, force=True)  # the batch is stopping: free the session at once
                raise
            except _DIED as died:
                self.worker_deaths += 1
                deaths.append(_first_line(died))
                if len(deaths) > self.worker_retries:
                    message = (
                        f"the Ray worker running task {job.task.id} died {len(deaths)} times "
                        f"(last: {deaths[-1]}); rerun the batch with --resume to try it again"
                    )
                    return await self._lost(job, baseline, message, started)
                attempt_job = replace(job, resume=True)
                continue
            except ray_errors.RayError as error:
                cause = error.cause if isinstance(error, ray_errors.RayTaskError) else error
                message = (
                    f"Ray could not run task {job.task.id}: {_first_line(cause)} (is journeyman, "
                    "at the driver's version, installed on every node? see docs/distributed.md)"
                )
                return await self._lost(job, baseline, message, started)
            if deaths:
                # the dead attempt's persisted steps count too, once: read both from the store
                spent = await asyncio.to_thread(_spent, job)
                outcome = replace(
                    outcome,
                    cost_usd=max(0.0, spent.usd - baseline.usd),
                    tokens=max(0, spent.tokens - baseline.tokens),
                    duration_s=time.monotonic() - started,
                )
            return outcome

    async def _lost(
        self, job: TaskJob, baseline: Spending, message: str, started: float
    ) -> TaskOutcome:
        """The outcome of a task Ray could not bring to its end, with what it spent."""
        spent = await asyncio.to_thread(_spent, job)
        return TaskOutcome(
            task_id=job.task.id,
            session_id=job.session_id,
            status="infra_error",
            finish_reason=FinishReason.INTERNAL_ERROR.value,
            cost_usd=max(0.0, spent.usd - baseline.usd),
            tokens=max(0, spent.tokens - baseline.tokens),
            duration_s=time.monotonic() - started,
            iterations=0,
            verify_passed=None,
            error=message,
        )

    async def close(self) -> None:
        if self._owns_connection and ray.is_initialized():
            ray.shutdown()
            self._owns_connection = False


def _spent(job: TaskJob) -> Spending:
    """What the store says the job's session spent so far (zero before it exists)."""
    from journeyman.session.store import SessionStore

    store = SessionStore(Path(job.store_path))
    try:
        return session_spending(store, job.session_id)
    finally:
        store.close()


def _connect(address: str | None) -> bool:
    """Connect this process to Ray; True when it was not connected before (so closing the
    executor disconnects it, and stops the private cluster it started)."""
    if ray.is_initialized():
        return False
    options: dict[str, Any] = {
        "log_to_driver": False,  # workers' output stays in the cluster's logs, not the CLI's
        "logging_level": logging.WARNING,
        "configure_logging": True,
    }
    if address is None and not os.environ.get("RAY_ADDRESS"):
        # a private instance for this batch, never a cluster that happens to run here
        address = "local"
        options["include_dashboard"] = False
    if address not in (None, "local", "auto"):
        _probe(address)
    try:
        ray.init(address=address, **options)
    except (ConnectionError, RuntimeError, ValueError, TimeoutError) as error:
        where = "a private local instance" if address == "local" else address
        where = where or os.environ.get("RAY_ADDRESS", "RAY_ADDRESS")
        raise ConfigurationError(
            f"cannot connect to the Ray cluster at {where}: {_first_line(error)}; start one "
            "with `ray start --head` and pass its address with --ray-address "
            "(see docs/distributed.md)"
        ) from None
    _quiet_cluster_messages()
    return True


def _quiet_cluster_messages() -> None:
    """Ray's driver prints the cluster's error messages ("a worker died ...") straight to
    stdout, even with `log_to_driver=False`; that would break the CLI's JSON output. They go
    to the `journeyman.batch.ray` logger instead (the task's outcome says what happened)."""
    from ray._private import worker as ray_worker

    def to_logger(data: dict[str, Any], ignore_prefix: bool = False) -> None:
        for line in data.get("lines", ()):
            _log.info("ray %s: %s", data.get("pid", "cluster"), line)

    if hasattr(ray_worker, "print_to_stdstream"):
        ray_worker.print_to_stdstream = to_logger


def _probe(address: str) -> None:
    """Refuse at once an address nothing listens on (Ray itself retries for minutes)."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or "/" in host:
        return  # not host:port (e.g. a ray:// client address): let Ray judge it
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=PROBE_TIMEOUT_S).close()
    except OSError as error:
        raise ConfigurationError(
            f"cannot reach the Ray cluster at {address} ({error.strerror or error}); check "
            "--ray-address (the head node's `ray start --head` prints it) and that this "
            "machine can reach that port"
        ) from None


def _require_connection() -> None:
    if not ray.is_initialized():
        raise ConfigurationError(
            "the Ray ledger needs a Ray connection; create the RayExecutor first"
        )


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0][:300] if text else type(error).__name__


__all__ = ["PID_DIR_ENV", "RayExecutor", "RayLedger"]
