"""The Ray executor: a batch's tasks run as Ray tasks on a cluster, under one ledger.

`RayExecutor(address, max_parallel)` connects this process to a Ray cluster (or, without an
address and without `RAY_ADDRESS`, starts a private one on this machine for the batch), checks
that every node runs this journeyman, Python minor and Ray (`check_nodes`), and runs each
`TaskJob` as a Ray task that asks for `cpus_per_task` CPUs. journeyman's own code travels to the
workers in the tasks' `runtime_env` (`py_modules`); its dependencies must be installed on each
node. API keys are never shipped: a worker reads them from its own environment (the one
`ray start` was run in on its node).

Nothing but Ray is shared with a worker. The driver prepares the task's workspace copy and
owns the batch's session store; for each attempt it packs the copy (`travel.pack_workspace`: a
git bundle plus what differs from its commit, or a tar, size-limited) into Ray's object store,
with the session's rows when the task resumes. The worker rebuilds both in a temp folder of its
own (its workspace, its session store), runs `run_job` there, and sends back a `WorkerReply`:
the outcome, carrying the session's rows (`TaskOutcome.rows`; `cost_usd` and `tokens` are the
worker's own count of the attempt), and the workspace's changes. The driver applies the changes
to its copy and merges the rows into its store (`session.transfer.merge_session`: idempotent, a
conflicting row is an error), so the scheduler settles from the store as it does locally.

A worker that dies mid-task (its process killed, its node lost) takes that attempt's rows with
it: Ray reports the death and the same shipment is sent again, so the task starts over from the
state the batch's store and workspace copy hold (from scratch for a new task), on whichever
worker Ray picks. A second death ends the task as an infrastructure error (`journeyman batch
--resume` may try it again).

The batch's ledger lives in a Ray actor (`batch.ray_ledger.RayLedger`), so the cap holds for
every node.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import ray
from ray import exceptions as ray_errors
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from journeyman.batch.job import Status, TaskJob, TaskOutcome, run_job
from journeyman.batch.ray_ledger import RayLedger
from journeyman.batch.task_file import is_git_url
from journeyman.batch.travel import (
    MAX_WORKSPACE_BYTES,
    Snapshot,
    TravelError,
    WorkspaceChanges,
    WorkspacePack,
    apply_changes,
    collect_changes,
    pack_workspace,
    snapshot,
    unpack_workspace,
)
from journeyman.core.errors import ConfigurationError
from journeyman.core.result import FinishReason
from journeyman.session.transfer import (
    SessionMergeError,
    SessionRows,
    export_session,
    merge_session,
    with_workspace,
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

RUNNING = "running"
"""What a Ray task yields first: its attempt started on a worker."""

WORKER_RETRIES = 1
"""Times a task is submitted again after its worker died (the issue: retried once)."""

NODE_CHECK_TIMEOUT_S = 120.0
"""How long the version check waits for a node's answer (a node starts a worker for it)."""

SCRATCH_PREFIX = "jm-task-"
"""A worker's temp folder for one attempt: `jm-task-<pid>-<random>` in the node's temp dir."""

MAX_WORKSPACE_ENV = "JOURNEYMAN_RAY_MAX_WORKSPACE_MB"
"""Environment variable of the driver: the limit, in MB, on a packed workspace (and on the
changes a task sends back); `travel.MAX_WORKSPACE_BYTES` when unset."""

_DIED = (
    ray_errors.WorkerCrashedError,
    ray_errors.NodeDiedError,
    ray_errors.LocalRayletDiedError,
    ray_errors.ObjectLostError,
    ray_errors.OutOfMemoryError,
)
"""What Ray raises when the process or node running a task went away before it answered."""


# --------------------------------------------------------------------------- the executor


@dataclass(frozen=True)
class Identity:
    """What must match between the driver and a worker for a task to run there."""

    journeyman: str
    python: str
    ray: str

    def differences(self, worker: Identity) -> list[str]:
        """Lines like "journeyman 0.1.0 here, 0.2.0 on the worker", ... (empty when they match)."""
        return [
            f"{name} {mine} on the driver, {theirs} on the worker"
            for name, mine, theirs in (
                ("journeyman", self.journeyman, worker.journeyman),
                ("Python", self.python, worker.python),
                ("Ray", self.ray, worker.ray),
            )
            if mine != theirs
        ]


def this_identity() -> Identity:
    """This process's journeyman version, Python minor version and Ray version."""
    from journeyman.core.package import package_version

    return Identity(package_version(), "{}.{}".format(*sys.version_info[:2]), ray.__version__)


def version_mismatch(driver: Identity, worker: Identity, where: str) -> str | None:
    """The refusal for a worker whose versions differ from the driver's (None: they match)."""
    differences = driver.differences(worker)
    if not differences:
        return None
    return (
        f"version mismatch between the driver and {where}: "
        + "; ".join(differences)
        + ". Install the same journeyman, Python minor version and Ray on every node "
        "(see docs/distributed.md)"
    )


@dataclass(frozen=True)
class Shipment:
    """One attempt on its way to a worker (its workspace travels beside it, in the object
    store)."""

    job: TaskJob
    """The driver's job: its workspace and store paths are the driver's, never used there."""
    seed: SessionRows | None
    """The session's rows in the batch's store (a resumed task), to continue from."""
    driver: Identity
    max_bytes: int
    """Limit on the changes the worker sends back."""


@dataclass(frozen=True)
class WorkerReply:
    """What a worker sends back: the outcome (with the session's rows) and the workspace's
    changes."""

    outcome: TaskOutcome
    changes: WorkspaceChanges | None


def _run_on_worker(shipment: Shipment, pack: WorkspacePack) -> Iterator[str | WorkerReply]:
    """The Ray task: run one attempt where Ray placed it, in a temp folder of the worker's own
    (its workspace and its session store), removed when the attempt ends. It yields `RUNNING`
    as it starts (the driver then counts it as running, no longer queued for a CPU), then its
    reply.

    The attempt runs in a thread of its own. When Ray tears the task down (its batch process
    died or stopped it), it interrupts the worker's main thread; the worker then removes its
    folder and exits at once (the attempt's rows go with it: the batch sends the task again,
    from the state its own store and workspace copy hold)."""
    yield RUNNING
    job = shipment.job
    refused = version_mismatch(shipment.driver, this_identity(), f"the worker on {_node()}")
    if refused is not None:
        yield WorkerReply(_refused(job, "infra_error", refused), None)
        return
    _sweep_leftovers()
    scratch = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-"))
    try:
        try:
            workspace, usage_from, before = _unpack(shipment, pack, scratch)
        except TravelError as error:  # e.g. no git on this node, or its disk full
            message = f"task {job.task.id}: on {_node()}: {error.message}"
            yield WorkerReply(_refused(job, "infra_error", message), None)
            return
        local = replace(job, workspace_dir=str(workspace), store_path=str(scratch / "sessions"))
        outcome = _attempt(local, scratch)
        rows = _exported(local, usage_from)
        try:
            changes = collect_changes(workspace, before, pack.head, shipment.max_bytes)
        except TravelError as error:
            failed = replace(outcome, status="failed", error=f"task {job.task.id}: {error.message}")
            yield WorkerReply(replace(failed, rows=rows), None)
            return
        yield WorkerReply(replace(outcome, rows=rows), changes)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _sweep_leftovers() -> None:
    """Remove the temp folders of this machine's workers that were killed mid-task (a killed
    process cannot clean up after itself): `jm-task-<pid>-*` whose process is gone."""
    for folder in Path(tempfile.gettempdir()).glob(f"{SCRATCH_PREFIX}*-*"):
        pid = folder.name[len(SCRATCH_PREFIX) :].split("-", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
        except OSError:
            continue  # alive, someone else's


def _unpack(shipment: Shipment, pack: WorkspacePack, scratch: Path) -> tuple[Path, int, Snapshot]:
    """The workspace rebuilt under `scratch`, the session seeded into the worker's store."""
    from journeyman.session.store import SessionStore

    workspace = scratch / "workspace"
    unpack_workspace(pack, workspace)
    usage_from = 0
    if shipment.seed is not None:
        store = SessionStore(scratch / "sessions")
        try:
            merge_session(store, with_workspace(shipment.seed, str(workspace)))
        finally:
            store.close()
        usage_from = len(shipment.seed.usage)
    return workspace, usage_from, snapshot(workspace)


def _exported(job: TaskJob, usage_from: int) -> SessionRows | None:
    from journeyman.session.store import SessionNotFoundError, SessionStore

    store = SessionStore(Path(job.store_path))
    try:
        return export_session(store, job.session_id, usage_from=usage_from)
    except SessionNotFoundError:
        return None  # it never started (refused before its first step)
    finally:
        store.close()


def _attempt(job: TaskJob, scratch: Path) -> TaskOutcome:
    """`run_job` in a thread, the main thread left free to take Ray's interrupt."""
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
        shutil.rmtree(scratch, ignore_errors=True)
        os._exit(1)
    _forget(pid_file)
    if not ended:
        raise RuntimeError(f"task {job.task.id}: its attempt ended without an outcome")
    return ended[0]


def _refused(job: TaskJob, status: Status, message: str) -> TaskOutcome:
    return TaskOutcome(
        task_id=job.task.id,
        session_id=job.session_id,
        status=status,
        finish_reason=(
            FinishReason.INTERNAL_ERROR.value if status == "infra_error" else "setup_failed"
        ),
        cost_usd=0.0,
        tokens=0,
        duration_s=0.0,
        iterations=0,
        verify_passed=None,
        error=message,
    )


def _node() -> str:
    with contextlib.suppress(Exception):
        return f"node {ray.get_runtime_context().get_node_id()[:12]} ({socket.gethostname()})"
    return socket.gethostname()


def _forget(pid_file: Path | None) -> None:
    if pid_file is not None:
        with contextlib.suppress(OSError):
            pid_file.unlink()


def _identity_on_node() -> tuple[Identity, str]:
    return this_identity(), _node()


def journeyman_runtime_env() -> dict[str, Any]:
    """The `runtime_env` that carries this journeyman's own code to every worker (its
    dependencies must be installed on each node)."""
    import journeyman

    package = Path(journeyman.__file__).parent
    return {"py_modules": [str(package)], "excludes": ["__pycache__", "*.pyc"]}


def max_workspace_bytes() -> int:
    """The limit on a packed workspace: JOURNEYMAN_RAY_MAX_WORKSPACE_MB, else the default."""
    value = os.environ.get(MAX_WORKSPACE_ENV)
    if not value:
        return MAX_WORKSPACE_BYTES
    try:
        megabytes = float(value)
    except ValueError:
        megabytes = -1.0
    if not megabytes > 0:
        raise ConfigurationError(
            f"{MAX_WORKSPACE_ENV} must be a positive number of MB, not {value!r}"
        )
    return int(megabytes * 1024 * 1024)


class RayExecutor:
    """Runs a batch's jobs as Ray tasks, at most `max_parallel` at once. Nothing but Ray is
    shared with the workers: each job's workspace and session travel to its worker, and its
    rows and changes come back into the batch's store and workspace copy."""

    def __init__(
        self,
        address: str | None,
        max_parallel: int,
        *,
        cpus_per_task: float = 1.0,
        worker_retries: int = WORKER_RETRIES,
        ship_code: bool = True,
        prefer_nodes_with: str | None = None,
        max_bytes: int | None = None,
        check_versions: bool = True,
    ) -> None:
        """`prefer_nodes_with`: a custom Ray resource; each attempt goes to a live node that
        has it (in turn, with soft node affinity), elsewhere when none is alive. `ship_code`:
        carry journeyman's code in the job's `runtime_env` when this executor connects (a
        process that connected to Ray itself passes `journeyman_runtime_env()` to `ray.init`).
        `max_bytes`: the limit on a packed workspace. `check_versions`: `check_nodes` now."""
        if max_parallel < 1:
            raise ConfigurationError(f"--max-parallel must be at least 1, got {max_parallel}")
        if cpus_per_task <= 0:
            raise ConfigurationError(f"CPUs per task must be positive, got {cpus_per_task}")
        self.max_parallel = max_parallel
        self.cpus_per_task = cpus_per_task
        self.worker_retries = worker_retries
        self.address = address
        self.max_bytes = max_workspace_bytes() if max_bytes is None else max_bytes
        self.runtime_env = journeyman_runtime_env() if ship_code else None
        self.identity = this_identity()
        self._owns_connection = _connect(address, self.runtime_env)
        self._options: dict[str, Any] = {
            "num_cpus": cpus_per_task,
            "max_retries": 0,  # a dead worker's task is sent again here, from the batch's state
        }
        self._function = ray.remote(_run_on_worker)
        self._remote = self._function.options(**self._options)
        self.prefer_nodes_with = prefer_nodes_with
        self._turn = 0
        self._slots: tuple[asyncio.AbstractEventLoop, asyncio.Semaphore] | None = None
        if check_versions:
            self.check_nodes()
        self.worker_deaths = 0
        """Attempts lost to a worker that died (each was sent again, or ended the task)."""

    def ledger(self, name: str | None = None) -> RayLedger:
        """The batch's ledger, hosted where every node can reach it (`--ledger NAME`: the
        named one every batch on the cluster naming it shares)."""
        return RayLedger.start(name=name)

    def check_nodes(self) -> None:
        """Refuse (`ConfigurationError`) when a node of the cluster runs other versions of
        journeyman, Python or Ray than this process, or cannot import journeyman at all: one
        small task on each live node, before the first task of the batch."""
        probe = ray.remote(_identity_on_node)
        refs = []
        for node in ray.nodes():  # type: ignore[no-untyped-call]
            if not node.get("Alive"):
                continue
            strategy = NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)
            options: dict[str, Any] = {"num_cpus": 0, "scheduling_strategy": strategy}
            refs.append((node, probe.options(**options).remote()))
        for node, ref in refs:
            where = f"the node {node['NodeID'][:12]} ({node.get('NodeManagerAddress', '?')})"
            try:
                identity, _ = ray.get(ref, timeout=NODE_CHECK_TIMEOUT_S)
            except (ray_errors.RayError, TimeoutError) as error:
                cause = error.cause if isinstance(error, ray_errors.RayTaskError) else error
                raise ConfigurationError(
                    f"journeyman cannot run on {where}: {_first_line(cause)}; install "
                    'journeyman\'s dependencies there (pip install "journeyman[ray]"), see '
                    "docs/distributed.md"
                ) from None
            refused = version_mismatch(self.identity, identity, where)
            if refused is not None:
                raise ConfigurationError(refused)

    def rate_limiter(self) -> Any:
        """How workers reach the cluster's shared rate limiter (a named actor)."""
        from journeyman.batch.ray_rate_limits import shared_backend

        return shared_backend()

    async def run(self, job: TaskJob, on_running: Callable[[], None] | None = None) -> TaskOutcome:
        loop = asyncio.get_running_loop()
        if self._slots is None or self._slots[0] is not loop:  # one semaphore per event loop
            self._slots = (loop, asyncio.Semaphore(self.max_parallel))
        async with self._slots[1]:
            return await self._run(job, on_running or (lambda: None))

    async def _run(self, job: TaskJob, on_running: Callable[[], None]) -> TaskOutcome:
        started = time.monotonic()
        try:
            shipment, pack = await asyncio.to_thread(self._ship, job)
        except TravelError as error:  # it names the task
            return _refused(job, "failed", error.message)
        deaths: list[str] = []
        while True:
            # a dead worker's attempt is lost with it: the same shipment starts it over
            # after a death, anywhere Ray picks: the preferred node may be the one just lost
            placement = {} if deaths else await asyncio.to_thread(self._placement)
            remote = self._function.options(**self._options, **placement)
            ref: Any = remote.remote(shipment, pack)  # a stream: RUNNING, then the reply
            try:
                await (await ref.__anext__())  # RUNNING: a worker took it
                on_running()
                reply: WorkerReply = await (await ref.__anext__())
            except asyncio.CancelledError:
                ray.cancel(ref, force=True)  # the batch is stopping: free the worker at once
                raise
            except _DIED as died:
                self.worker_deaths += 1
                deaths.append(_first_line(died))
                if len(deaths) > self.worker_retries:
                    message = (
                        f"the Ray worker running task {job.task.id} died {len(deaths)} times "
                        f"(last: {deaths[-1]}); rerun the batch with --resume to try it again"
                    )
                    return await self._lost(job, message, started)
                continue
            except ray_errors.RayError as error:
                cause = error.cause if isinstance(error, ray_errors.RayTaskError) else error
                message = (
                    f"Ray could not run task {job.task.id}: {_first_line(cause)} (are "
                    "journeyman's dependencies installed on every node? see docs/distributed.md)"
                )
                return await self._lost(job, message, started)
            return await asyncio.to_thread(self._bring_back, job, reply)

    def _placement(self) -> dict[str, Any]:
        """Where the next attempt goes: a live node with `prefer_nodes_with`, when one is."""
        if self.prefer_nodes_with is None:
            return {}
        nodes = [
            node["NodeID"]
            for node in ray.nodes()  # type: ignore[no-untyped-call]
            if node.get("Alive") and node.get("Resources", {}).get(self.prefer_nodes_with)
        ]
        if not nodes:
            return {}
        self._turn += 1
        node = nodes[self._turn % len(nodes)]
        return {"scheduling_strategy": NodeAffinitySchedulingStrategy(node, soft=True)}

    def _ship(self, job: TaskJob) -> tuple[Shipment, Any]:
        """The job's shipment and its workspace put in the object store."""
        from journeyman.session.store import SessionNotFoundError, SessionStore

        url = job.task.workspace if is_git_url(job.task.workspace) else None
        pack = pack_workspace(
            Path(job.workspace_dir), f"task {job.task.id}: its workspace", self.max_bytes, url=url
        )
        store = SessionStore(Path(job.store_path), check_integrity=False)
        try:
            seed: SessionRows | None = export_session(store, job.session_id)
        except SessionNotFoundError:
            seed = None
        finally:
            store.close()
        shipment = Shipment(job, seed, self.identity, self.max_bytes)
        return shipment, ray.put(pack)

    def _bring_back(self, job: TaskJob, reply: WorkerReply) -> TaskOutcome:
        """The worker's changes into the driver's workspace copy, then its rows into the
        batch's store; a conflict ends the attempt as an infrastructure error, saying why."""
        from journeyman.session.store import SessionStore

        outcome = reply.outcome
        try:
            if reply.changes is not None:
                apply_changes(reply.changes, Path(job.workspace_dir))
            if outcome.rows is not None:
                store = SessionStore(Path(job.store_path), check_integrity=False)
                try:
                    merge_session(store, with_workspace(outcome.rows, job.workspace_dir))
                finally:
                    store.close()
        except (TravelError, SessionMergeError) as error:
            return replace(
                outcome,
                status="infra_error",
                finish_reason=FinishReason.INTERNAL_ERROR.value,
                error=f"task {job.task.id}: its worker's results could not be brought back: "
                f"{error.message}",
            )
        return outcome

    async def _lost(self, job: TaskJob, message: str, started: float) -> TaskOutcome:
        """The outcome of a task Ray could not bring to its end (what its lost attempts spent
        died with their workers: nothing of theirs reached the batch's store)."""
        return replace(_refused(job, "infra_error", message), duration_s=time.monotonic() - started)

    async def close(self) -> None:
        if self._owns_connection and ray.is_initialized():
            ray.shutdown()
            self._owns_connection = False


def _connect(address: str | None, runtime_env: dict[str, Any] | None) -> bool:
    """Connect this process to Ray, with `runtime_env` for every task of this job (Ray takes a
    local folder to upload only there); True when it was not connected before (so closing the
    executor disconnects it, and stops the private cluster it started). A process already
    connected keeps the runtime_env it connected with."""
    if ray.is_initialized():
        return False
    options: dict[str, Any] = {
        "runtime_env": runtime_env,
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


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0][:300] if text else type(error).__name__


__all__ = [
    "MAX_WORKSPACE_ENV",
    "PID_DIR_ENV",
    "Identity",
    "RayExecutor",
    "RayLedger",
    "Shipment",
    "WorkerReply",
    "journeyman_runtime_env",
    "this_identity",
    "version_mismatch",
]
