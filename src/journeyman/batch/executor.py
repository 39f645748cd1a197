"""Where task attempts run. `Executor` is the seam: the scheduler hands it `TaskJob`s and
awaits `TaskOutcome`s; `LocalExecutor` runs them in worker processes on this machine, the Ray
executor (`journeyman.batch.ray_executor`) on a cluster.

Local workers are separate processes, reused from task to task: a task that crashes its
worker (a segfault, an `os._exit`, the OOM killer) ends as an infrastructure error the batch
retries, and the batch goes on with a fresh pool. A worker whose batch process dies (kill -9)
stops too, so a resumed batch never finds its sessions held by orphans.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Protocol, runtime_checkable

from journeyman.batch.job import TaskJob, TaskOutcome, run_job
from journeyman.core.environ_block import wipe_unlisted
from journeyman.core.errors import ConfigurationError
from journeyman.core.result import FinishReason

ORPHAN_POLL_S = 0.5
"""How often a local worker checks that its batch process is still alive."""


@runtime_checkable
class Executor(Protocol):
    """Runs task attempts, at most `max_parallel` at a time."""

    max_parallel: int

    async def run(self, job: TaskJob) -> TaskOutcome:
        """Run one attempt to its end; a worker that dies gives an `infra_error` outcome.

        An executor whose attempts may wait for a worker also takes an `on_running` keyword
        (a callable of no argument), which it calls when the attempt starts on one, so the
        batch counts it as running rather than queued (`scheduler.run_reporting_start`)."""
        ...

    async def close(self) -> None:
        """Stop the workers (attempts still running are abandoned)."""
        ...


class LocalExecutor:
    """Worker processes on this machine (threads with `processes=False`, for tests and
    benchmarks of the scheduler itself)."""

    def __init__(self, max_parallel: int, *, processes: bool = True) -> None:
        if max_parallel < 1:
            raise ConfigurationError(f"--max-parallel must be at least 1, not {max_parallel}")
        self.max_parallel = max_parallel
        self.processes = processes
        self._pool: ProcessPoolExecutor | ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def _current_pool(self) -> ProcessPoolExecutor | ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                if self.processes:
                    self._pool = ProcessPoolExecutor(
                        max_workers=self.max_parallel,
                        mp_context=multiprocessing.get_context("spawn"),
                        initializer=_stop_with_parent,
                        initargs=(os.getpid(),),
                    )
                else:
                    self._pool = ThreadPoolExecutor(
                        max_workers=self.max_parallel, thread_name_prefix="batch-task"
                    )
            return self._pool

    async def run(self, job: TaskJob, on_running: Callable[[], None] | None = None) -> TaskOutcome:
        pool = self._current_pool()
        started = time.monotonic()
        if on_running is not None:  # never more jobs than workers: it starts at once
            on_running()
        try:
            future = asyncio.wrap_future(pool.submit(run_job, job))
            return await future
        except BrokenProcessPool:
            self._discard(pool)
            return worker_died(job, time.monotonic() - started, "its worker process died")

    def _discard(self, pool: ProcessPoolExecutor | ThreadPoolExecutor) -> None:
        with self._lock:
            if self._pool is pool:
                self._pool = None
        pool.shutdown(wait=False, cancel_futures=True)

    async def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            await asyncio.to_thread(pool.shutdown, wait=True, cancel_futures=True)


def worker_died(job: TaskJob, duration_s: float, why: str) -> TaskOutcome:
    """The outcome of an attempt whose worker went away before it reported."""
    return TaskOutcome(
        task_id=job.task.id,
        session_id=job.session_id,
        status="infra_error",
        finish_reason=FinishReason.INTERNAL_ERROR.value,
        cost_usd=0.0,
        tokens=0,
        duration_s=duration_s,
        iterations=0,
        verify_passed=None,
        error=f"task {job.task.id}: {why}; the batch retries it from its last saved step",
    )


def _stop_with_parent(parent_pid: int) -> None:
    """Worker initializer: exit when the batch process is gone; show commands no credential
    in this worker's /proc environ (see `core.environ_block`)."""
    wipe_unlisted()

    def watch() -> None:
        while True:
            time.sleep(ORPHAN_POLL_S)
            if os.getppid() != parent_pid:
                os._exit(1)

    threading.Thread(target=watch, name="batch-parent-watch", daemon=True).start()


def make_executor(
    name: str,
    *,
    max_parallel: int,
    ray_address: str | None = None,
    cpus_per_task: float | None = None,
) -> Executor:
    """The executor called `name`: "local" or "ray". `cpus_per_task` (Ray only; None: one) is
    the CPUs each task asks the cluster for."""
    if cpus_per_task is not None and not cpus_per_task > 0:
        raise ConfigurationError(
            f"--cpus-per-task must be more than 0, got {cpus_per_task:g} (e.g. 0.5, 1 or 2)"
        )
    if name == "local":
        if ray_address is not None:
            raise ConfigurationError("--ray-address goes with --executor ray")
        if cpus_per_task is not None:
            raise ConfigurationError(
                "--cpus-per-task goes with --executor ray (it is the CPUs each task asks the "
                "cluster for); the local executor runs --max-parallel worker processes that "
                "share this machine's CPUs. Drop it, or add --executor ray"
            )
        return LocalExecutor(max_parallel)
    if name == "ray":
        try:
            from journeyman.batch.ray_executor import (  # type: ignore[import-not-found,unused-ignore]
                RayExecutor,
            )
        except ImportError as error:
            raise ConfigurationError(
                f"--executor ray needs Ray: install journeyman[ray] ({error})"
            ) from None
        executor: Executor = RayExecutor(
            ray_address, max_parallel, cpus_per_task=1.0 if cpus_per_task is None else cpus_per_task
        )
        return executor
    raise ConfigurationError(f"unknown executor {name!r}; use local or ray")


__all__ = ["Executor", "LocalExecutor", "make_executor", "worker_died"]
