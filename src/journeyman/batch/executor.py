"""Where task attempts run. `Executor` is the seam: the scheduler hands it `TaskJob`s and
awaits `TaskOutcome`s; `LocalExecutor` runs them in worker processes on this machine, the Ray
executor (`journeyman.batch.ray_executor`) on a cluster.

Local workers are separate processes, each with a pipe of its own, reused from task to task.
A task that crashes its worker (a segfault, an `os._exit`, kill -9, the OOM killer) ends as an
infrastructure error the batch retries; only that task: the other workers go on with theirs,
and a fresh process takes the dead one's place at the next task. A worker whose batch process
dies (kill -9) stops too, so a resumed batch never finds its sessions held by orphans.

An executor also says how its workers reach the batch's shared rate limiter
(`rate_limiter()`): the local one serves it from this process on 127.0.0.1
(`rate_limit_service`), the Ray one from a named actor on the cluster.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import Protocol, runtime_checkable

from journeyman.batch.job import TaskJob, TaskOutcome, run_job
from journeyman.batch.rate_limit_service import RateLimitService, SocketBackend
from journeyman.core.environ_block import wipe_unlisted
from journeyman.core.errors import ConfigurationError
from journeyman.core.result import FinishReason

ORPHAN_POLL_S = 0.5
"""How often a local worker checks that its batch process is still alive."""
STOP_GRACE_S = 30.0
"""How long a closing executor lets running workers end at their last step before killing them."""


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
        self._workers = WorkerPool() if processes else None
        self._threads = ThreadPoolExecutor(
            max_workers=max_parallel, thread_name_prefix="batch-task"
        )
        """Runs the attempts (threads mode), or waits on the workers' pipes (processes)."""
        self._limits: RateLimitService | None = None
        self._lock = threading.Lock()

    def rate_limiter(self) -> SocketBackend:
        """How workers reach the batch's rate limiter (served from this process)."""
        with self._lock:
            if self._limits is None:
                self._limits = RateLimitService()
            return self._limits.backend

    def worker_pids(self) -> dict[int, str]:
        """The process id of each worker running a task, with the task's id."""
        return {} if self._workers is None else self._workers.busy()

    async def run(self, job: TaskJob, on_running: Callable[[], None] | None = None) -> TaskOutcome:
        loop = asyncio.get_running_loop()
        if on_running is not None:  # never more jobs than workers: it starts at once
            on_running()
        if self._workers is None:
            return await loop.run_in_executor(self._threads, run_job, job)
        started = time.monotonic()
        outcome = await loop.run_in_executor(self._threads, self._workers.run, job)
        if outcome is None:
            return worker_died(job, time.monotonic() - started, "its worker process died")
        return outcome

    async def close(self) -> None:
        """Stop the workers, the waiting threads and the rate limiter's service (a later
        `run` starts fresh ones)."""
        workers, threads = self._workers, self._threads
        self._workers = WorkerPool() if self.processes else None
        self._threads = ThreadPoolExecutor(
            max_workers=self.max_parallel, thread_name_prefix="batch-task"
        )
        if workers is not None:
            await asyncio.to_thread(workers.close)
        await asyncio.to_thread(threads.shutdown, wait=True, cancel_futures=True)
        with self._lock:
            limits, self._limits = self._limits, None
        if limits is not None:
            limits.close()


class _WorkerDied(Exception):
    """The worker's process ended before it sent the attempt's outcome."""


class _Worker:
    """One worker process and the pipe the batch talks to it through."""

    def __init__(self) -> None:
        context = multiprocessing.get_context("spawn")
        ours, theirs = context.Pipe()
        self.process: BaseProcess = context.Process(
            target=_serve, args=(theirs, os.getpid()), name="batch-worker"
        )
        self.process.start()
        theirs.close()
        self.conn: Connection = ours
        self.task_id: str | None = None

    def call(self, job: TaskJob) -> TaskOutcome:
        """Run `job` in this worker and wait for its outcome (`_WorkerDied` if it dies)."""
        self.task_id = job.task.id
        try:
            self.conn.send(job)
            ready = wait([self.conn, self.process.sentinel])
            if self.conn in ready:
                outcome: TaskOutcome = self.conn.recv()
                return outcome
        except (EOFError, OSError):
            pass
        finally:
            self.task_id = None
        raise _WorkerDied

    def stop(self, *, interrupt: bool = False, grace_s: float = 5.0) -> None:
        """End the process: asked to (idle), interrupted (running: its session stops at its
        last step, as on Ctrl-C), killed when it does not go within `grace_s`."""
        try:
            if interrupt and self.process.pid is not None and self.process.is_alive():
                os.kill(self.process.pid, signal.SIGINT)
            elif not interrupt:
                self.conn.send(None)
        except (OSError, ValueError):
            pass
        self.process.join(grace_s)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(5)
        self.conn.close()


class WorkerPool:
    """Worker processes started as needed, each running one attempt at a time; a dead one
    fails only the attempt it ran and is replaced at the next."""

    def __init__(self) -> None:
        self._idle: list[_Worker] = []
        self._busy: set[_Worker] = set()
        self._lock = threading.Lock()
        self._closed = False

    def run(self, job: TaskJob) -> TaskOutcome | None:
        """`job`'s outcome, or None when its worker died (blocking: call it in a thread)."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the batch's workers are stopped")
            worker = self._idle.pop() if self._idle else None
        worker = worker or _Worker()
        with self._lock:
            self._busy.add(worker)
        try:
            outcome = worker.call(job)
        except BaseException as error:  # dead, or the job could not be sent: never reused
            with self._lock:
                self._busy.discard(worker)
            worker.stop(grace_s=0 if isinstance(error, _WorkerDied) else 5.0)
            if isinstance(error, _WorkerDied):
                return None
            raise
        with self._lock:
            self._busy.discard(worker)
            if not self._closed:
                self._idle.append(worker)
                return outcome
        worker.stop()
        return outcome

    def busy(self) -> dict[int, str]:
        with self._lock:
            return {w.process.pid: w.task_id for w in self._busy if w.process.pid and w.task_id}

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            busy = list(self._busy)
        for worker in idle:
            worker.stop()
        for worker in busy:
            worker.stop(interrupt=True, grace_s=STOP_GRACE_S)


def _serve(conn: Connection, parent_pid: int) -> None:
    """A worker process: attempts in, outcomes out, until told to stop or its batch is gone."""
    _stop_with_parent(parent_pid)
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError, KeyboardInterrupt):
            return
        if job is None:
            return
        started = time.monotonic()
        try:
            outcome = run_job(job)
        except BaseException:  # interrupted (Ctrl-C, the batch closing): say so, then go
            conn.send(worker_died(job, time.monotonic() - started, "its worker was stopped"))
            return
        conn.send(outcome)


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
    """At a worker's start: exit when the batch process is gone; show commands no credential
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


__all__ = ["Executor", "LocalExecutor", "WorkerPool", "make_executor", "worker_died"]
