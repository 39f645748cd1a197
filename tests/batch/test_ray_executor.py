"""The Ray executor on a real local cluster: a batch of 8 tasks on the fake OpenAI server, one
worker process killed mid-task, against the same batch on the local executor. Each task's
workspace and session travel to its worker and back (the workers' temp folders are their own)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import ray

from journeyman.batch.executor import LocalExecutor
from journeyman.batch.job import TaskJob, TaskOutcome, session_id_for
from journeyman.batch.ray_executor import (
    PID_DIR_ENV,
    RayExecutor,
    RayLedger,
    journeyman_runtime_env,
)
from journeyman.batch.runner import batch_ledger
from journeyman.batch.scheduler import Scheduler
from journeyman.batch.task_file import BatchTask
from journeyman.batch.workspaces import prepare_workspace
from journeyman.core.errors import ConfigurationError
from journeyman.economics.ledger import Amount
from journeyman.session.store import SessionStore
from tests.batch.support import model as batch_model
from tests.batch.support import settings_for, task_text, tasks_for
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import RecordedRequest, ScriptItem, hang, reply
from tests.support.cli import clean_env
from tests.support.git_daemon import serve_git
from tests.support.ray_cluster import LocalRayCluster, ray_environment

pytestmark = pytest.mark.slow

KEY = "sk-test-ray-workers"
PRICE = (0.0, 1000.0)
"""USD per million input and output tokens: each of the fake's 12 + 7 token replies costs $0.007."""
TASKS = 8
CAP_USD = 1.0
TASK_MARK = re.compile(r"\[task (t\d+)\]")


@pytest.fixture(scope="module")
def pid_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("worker-pids")


@pytest.fixture(scope="module")
def worker_tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("worker-tmp")


@pytest.fixture(scope="module")
def cluster(pid_dir: Path, worker_tmp: Path) -> Iterator[LocalRayCluster]:
    """The workers find the API key in their own environment, as on a real node."""
    # a call the test forgot to point at its fake server fails fast, never leaves the machine
    nowhere = "http://127.0.0.1:9/v1"
    env = clean_env(
        OPENAI_API_KEY=KEY,
        OPENAI_BASE_URL=nowhere,
        TMPDIR=str(worker_tmp),
        **{PID_DIR_ENV: str(pid_dir)},
    )
    with LocalRayCluster(env) as running, ray_environment():
        ray.init(
            address=running.address,
            log_to_driver=False,
            include_dashboard=False,
            runtime_env=journeyman_runtime_env(),
        )
        try:
            yield running
        finally:
            ray.shutdown()


class Model:
    """Answers every task alike, whatever order their requests interleave in: first a
    write_file call, then finish. With `victim`, the worker running that task is killed
    (SIGKILL) when its second request arrives, after its first step was persisted."""

    def __init__(self, pid_dir: Path, victim: str | None = None) -> None:
        self.pid_dir = pid_dir
        self.victim = victim
        self.killed: int | None = None
        self.requests: dict[str, int] = {}
        self._lock = threading.Lock()

    def __call__(self, request: RecordedRequest) -> ScriptItem:
        messages = request.json["messages"]
        users = [m for m in messages if m["role"] == "user"]
        found = TASK_MARK.search(json.dumps(users[0]["content"]))
        assert found, "the task's marker should be in its first user message"
        task_id = found.group(1)
        results = sum(1 for m in messages if m["role"] == "tool")
        with self._lock:
            self.requests[task_id] = self.requests.get(task_id, 0) + 1
            kill = task_id == self.victim and results == 1 and self.killed is None
            if kill:
                pid_file = self.pid_dir / f"{session_id_for('b1', task_id, 1)}.pid"
                self.killed = int(pid_file.read_text().split()[0])
                os.kill(self.killed, signal.SIGKILL)
        if kill:
            return hang(5)  # nobody is left to read the answer
        if results == 0:
            return reply(tool_calls=[("write_file", {"path": "out.txt", "content": task_id})])
        return reply(tool_calls=[("finish", {"summary": f"wrote out.txt for {task_id}"})])


def jobs(root: Path, server: FakeOpenAIServer) -> list[TaskJob]:
    SessionStore(root / "sessions").close()  # the batch creates its store before any task
    made = []
    for index in range(TASKS):
        task_id = f"t{index}"
        workspace = root / "ws" / task_id
        workspace.mkdir(parents=True)
        task = BatchTask(id=task_id, task=f"[task {task_id}] write out.txt", workspace=".")
        made.append(
            TaskJob(
                batch_id="b1",
                task=task,
                workspace_dir=str(workspace),
                store_path=str(root / "sessions"),
                session_id=session_id_for("b1", task_id, 1),
                model="gpt-4.1-mini",
                base_url=server.base_url,
                provider="openai",
                mode="react",
                verify=None,
                granted_tokens=None,
                granted_usd=None,
                attempt=1,
                resume=True,
                config={"price_per_mtok": PRICE, "verify": False, "sandbox": "local"},
            )
        )
    return made


async def run_batch(
    executor: RayExecutor | LocalExecutor, batch: list[TaskJob], ledger: RayLedger
) -> list[TaskOutcome]:
    """What the scheduler does around the executor: reserve, run with the grant, settle."""

    async def one(job: TaskJob, left: int) -> TaskOutcome:
        del left
        reservation = ledger.reserve("b1", job.task.id, Amount(usd=0.1))
        granted = replace(job, granted_usd=reservation.granted.usd)
        outcome = await executor.run(granted)
        ledger.settle(reservation, Amount(tokens=outcome.tokens, usd=outcome.cost_usd))
        return outcome

    try:
        outcomes = await asyncio.gather(*(one(job, len(batch) - i) for i, job in enumerate(batch)))
    finally:
        await executor.close()
    return sorted(outcomes, key=lambda o: o.task_id)


def joined(ledger: RayLedger) -> RayLedger:
    """`ledger` with the test's batch joined under the test's cap."""
    ledger.join("b1", Amount(usd=CAP_USD), Amount(0, 0.0))
    return ledger


def store_spending(root: Path) -> tuple[float, dict[str, str | None]]:
    store = SessionStore(root / "sessions")
    try:
        usd = sum(row.cost_usd or 0.0 for row in store.usage_rows())
        reasons = {s.record.id: s.finish_reason for s in store.list_sessions()}
    finally:
        store.close()
    return usd, reasons


def test_a_batch_survives_a_killed_worker_and_matches_the_local_executor(
    cluster: LocalRayCluster,
    pid_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    on_ray = Model(pid_dir, victim="t3")
    with FakeOpenAIServer(default=on_ray) as server:
        ledger = joined(RayLedger.start())
        executor = RayExecutor(cluster.address, max_parallel=2)
        ray_outcomes = asyncio.run(run_batch(executor, jobs(tmp_path / "ray", server), ledger))
    assert on_ray.killed is not None, "the victim's worker should have been killed"
    assert executor.worker_deaths == 1

    # every task finished exactly once: one session each, completed, its file written once
    spent_usd, reasons = store_spending(tmp_path / "ray")
    assert sorted(reasons.values()) == ["completed"] * TASKS
    assert [o.status for o in ray_outcomes] == ["succeeded"] * TASKS
    for outcome in ray_outcomes:
        written = tmp_path / "ray" / "ws" / outcome.task_id / "out.txt"
        assert written.read_text() == outcome.task_id
    # the victim's attempt died with its rows: it started over (2 calls) after the 2 it made
    expected_requests = {f"t{i}": 2 for i in range(TASKS)} | {"t3": 4}
    assert on_ray.requests == expected_requests

    # the key came from the workers' environment, and went nowhere else
    assert KEY not in repr(ray_outcomes)
    stored = [p for p in (tmp_path / "ray").rglob("*") if p.is_file()]
    assert stored and not [p for p in stored if KEY.encode() in p.read_bytes()]

    # spend: under the cap, and what the ledger counted is what the store holds, once
    stats = ledger.stats()
    assert stats.open_reservations == 0 and stats.overspend == Amount(tokens=0, usd=0.0)
    assert stats.spent.usd is not None and stats.spent.usd <= CAP_USD
    assert stats.spent.usd == pytest.approx(spent_usd)
    assert sum(o.cost_usd for o in ray_outcomes) == pytest.approx(spent_usd)

    # the same batch on the local executor ends the same way, at the same cost
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with FakeOpenAIServer(default=Model(pid_dir)) as server:
        local_ledger = joined(RayLedger.start())
        local = asyncio.run(
            run_batch(LocalExecutor(2), jobs(tmp_path / "local", server), local_ledger)
        )

    def summary(outcomes: list[TaskOutcome]) -> list[tuple[object, ...]]:
        return [
            (o.task_id, o.status, o.finish_reason, round(o.cost_usd, 9), o.tokens, o.error)
            for o in outcomes
        ]

    assert summary(ray_outcomes) == summary(local)
    assert local_ledger.stats().spent.usd == pytest.approx(stats.spent.usd)


def test_a_task_whose_worker_dies_twice_ends_as_an_infrastructure_error(
    cluster: LocalRayCluster, pid_dir: Path, tmp_path: Path
) -> None:
    class KillEveryTime(Model):
        def __call__(self, request: RecordedRequest) -> ScriptItem:
            self.killed = None  # kill again on the retry's first request
            return super().__call__(request)

    model = KillEveryTime(pid_dir, victim="t0")
    with FakeOpenAIServer(default=model) as server:
        job = jobs(tmp_path, server)[0]
        # the first attempt dies after one step; the retry resumes and dies at its first call
        executor = RayExecutor(cluster.address, max_parallel=1, worker_retries=1)

        async def go() -> TaskOutcome:
            try:
                return await executor.run(job)
            finally:
                await executor.close()

        outcome = asyncio.run(go())
    assert outcome.status == "infra_error"
    assert outcome.error is not None and "died 2 times" in outcome.error
    assert "--resume" in outcome.error
    # what the dead attempts spent died with their workers: nothing of theirs reached the
    # batch's store (counting their calls in flight is the ledger's part)
    assert outcome.cost_usd == 0.0
    assert executor.worker_deaths == 2
    store = SessionStore(tmp_path / "sessions")
    try:
        assert store.list_sessions() == []
    finally:
        store.close()


class KillOnce:
    """The batch tests' model (each task's plan in its text), which also kills, once, the Ray
    worker running `victim` when that task's second request arrives."""

    def __init__(self, pid_dir: Path, batch_id: str, victim: str) -> None:
        self.pid_file = pid_dir / f"{session_id_for(batch_id, victim, 1)}.pid"
        self.victim = victim
        self.killed: int | None = None
        self._lock = threading.Lock()

    def __call__(self, request: RecordedRequest) -> ScriptItem:
        messages = request.json["messages"]
        first = json.dumps(next(m for m in messages if m["role"] == "user")["content"])
        results = sum(1 for m in messages if m["role"] == "tool")
        with self._lock:
            if f"[{self.victim}]" in first and results == 1 and self.killed is None:
                self.killed = int(self.pid_file.read_text().split()[0])
                os.kill(self.killed, signal.SIGKILL)
                return hang(5)
        return batch_model(request)


def test_the_scheduler_runs_a_batch_on_ray_under_its_cap_as_it_does_locally(
    cluster: LocalRayCluster,
    pid_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    texts = [task_text(steps=1 + i % 3, out=5 + i, name=f"[task-{i + 1}]") for i in range(TASKS)]

    def run(executor: RayExecutor | LocalExecutor, root: Path, server: FakeOpenAIServer) -> Any:
        root.mkdir()
        tasks = tasks_for(root, texts)
        settings = settings_for(root, server, global_usd=CAP_USD, per_task_usd=0.1)
        ledger = batch_ledger(settings, executor)

        async def go() -> Any:
            try:
                return await Scheduler(tasks, settings, executor, ledger=ledger).run()
            finally:
                await executor.close()

        return asyncio.run(go())

    killer = KillOnce(pid_dir, "batch-test", victim="task-3")
    with FakeOpenAIServer(default=killer) as server:
        executor = RayExecutor(cluster.address, max_parallel=2)
        on_ray = run(executor, tmp_path / "ray", server)
    assert killer.killed is not None and executor.worker_deaths == 1
    assert on_ray.all_succeeded and len(on_ray.results) == TASKS
    assert on_ray.spent.usd is not None and on_ray.spent.usd <= CAP_USD
    assert on_ray.overspend.usd == 0
    rows = (tmp_path / "ray" / "out" / "results.jsonl").read_text().splitlines()
    assert sorted(json.loads(row)["id"] for row in rows) == sorted(r.id for r in on_ray.results)

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with FakeOpenAIServer(default=batch_model) as server:
        local = run(LocalExecutor(2), tmp_path / "local", server)

    def outline(summary: Any) -> list[tuple[object, ...]]:
        return sorted(
            (r.id, r.status, r.finish_reason, round(r.cost_usd, 9), r.tokens, r.attempts)
            for r in summary.results
        )

    assert outline(on_ray) == outline(local)
    # the same tasks' spending, plus what the killed run of task-3 reported before it died
    # (it started over: both runs were billed, and the ledger counts both)
    killed_calls = on_ray.spent.tokens - local.spent.tokens
    assert 0 < killed_calls <= max(r.tokens for r in on_ray.results if r.id == "task-3")
    assert on_ray.spent.usd >= local.spent.usd - 1e-9


def test_a_task_ray_tears_down_leaves_nothing_on_its_worker_and_nothing_half_merged(
    cluster: LocalRayCluster, pid_dir: Path, worker_tmp: Path, tmp_path: Path
) -> None:
    """Ray interrupts a task whose batch process died (or that it cancels): the worker removes
    its temp folder and exits, its session is never recorded as cancelled by a user, and the
    batch's store holds nothing of that attempt (a resumed batch sends it again)."""
    second_call = threading.Event()

    def stall_on_second_step(request: RecordedRequest) -> ScriptItem:
        if any(m["role"] == "tool" for m in request.json["messages"]):
            second_call.set()
            return hang(30)
        return reply(tool_calls=[("write_file", {"path": "out.txt", "content": "x"})])

    with FakeOpenAIServer(default=stall_on_second_step) as server:
        job = jobs(tmp_path, server)[0]
        executor = RayExecutor(cluster.address, max_parallel=1)
        shipment, pack = executor._ship(job)
        stream = executor._remote.remote(shipment, pack)  # yields "running", then the reply
        assert second_call.wait(60), "the task should have reached its second model call"
        assert list(worker_tmp.glob("jm-task-*")), "the worker should run in its temp folder"
        ray.cancel(stream)  # not forced: Ray interrupts the worker's main thread
        with pytest.raises((ray.exceptions.TaskCancelledError, ray.exceptions.WorkerCrashedError)):
            for ref in stream:
                ray.get(ref, timeout=60)
    deadline = time.monotonic() + 30
    while list(worker_tmp.glob("jm-task-*")) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not list(worker_tmp.glob("jm-task-*"))
    assert not (Path(job.workspace_dir) / "out.txt").exists()
    store = SessionStore(tmp_path / "sessions")
    try:
        assert store.list_sessions() == []
    finally:
        store.close()


def test_a_ray_task_waiting_for_a_cpu_is_not_counted_running(
    cluster: LocalRayCluster, pid_dir: Path, tmp_path: Path
) -> None:
    """Each task asks for both CPUs of the cluster: the second waits for the first to end, and
    the executor says it is running only once a worker took it."""
    plain = Model(pid_dir)

    def slow_first(request: RecordedRequest) -> ScriptItem:
        answered = any(m["role"] == "tool" for m in request.json["messages"])
        if answered and "[task t0]" in json.dumps(request.json["messages"]):
            time.sleep(3)  # t0 holds the cluster's CPUs a while
        return plain(request)

    with FakeOpenAIServer(default=slow_first) as server:
        first, second = jobs(tmp_path, server)[:2]
        executor = RayExecutor(cluster.address, max_parallel=2, cpus_per_task=2.0)
        running: dict[str, float] = {}
        ended: dict[str, float] = {}

        async def one(job: TaskJob, delay: float) -> TaskOutcome:
            await asyncio.sleep(delay)  # t0 is submitted first
            outcome = await executor.run(
                job, on_running=lambda: running.setdefault(job.task.id, time.monotonic())
            )
            ended[job.task.id] = time.monotonic()
            return outcome

        async def both() -> list[TaskOutcome]:
            return list(await asyncio.gather(one(first, 0.0), one(second, 0.5)))

        outcomes = asyncio.run(both())
    assert [o.status for o in outcomes] == ["succeeded", "succeeded"]
    assert running["t1"] - running["t0"] > 2.5  # it waited for t0's CPUs, not counted running
    assert running["t1"] < ended["t1"]


def test_a_node_on_other_versions_is_refused_before_the_first_task_and_by_each_task(
    cluster: LocalRayCluster, tmp_path: Path
) -> None:
    executor = RayExecutor(cluster.address, max_parallel=1, check_versions=False)
    executor.identity = replace(executor.identity, journeyman="9.9.9", python="3.99")
    with pytest.raises(ConfigurationError) as refused:
        executor.check_nodes()
    message = refused.value.message
    assert "version mismatch between the driver and the node" in message
    assert (
        "journeyman 9.9.9 on the driver, " in message and "Python 3.99 on the driver, " in message
    )
    assert "Ray" not in message.split(".", 1)[0]  # the same Ray everywhere: not named

    # a node that joins later is caught by the task itself, which runs nothing
    with FakeOpenAIServer(default=Model(tmp_path)) as server:
        job = jobs(tmp_path, server)[0]
        outcome = asyncio.run(executor.run(job))
        assert server.requests == []
    assert outcome.status == "infra_error" and outcome.error is not None
    assert "version mismatch between the driver and the worker on node" in outcome.error


def test_a_workspace_over_the_limit_fails_its_task_by_name_before_reaching_ray(
    cluster: LocalRayCluster, tmp_path: Path
) -> None:
    with FakeOpenAIServer(default=Model(tmp_path)) as server:
        job = jobs(tmp_path, server)[0]
        (Path(job.workspace_dir) / "data.bin").write_bytes(b"x" * 4096)
        executor = RayExecutor(cluster.address, max_parallel=1, max_bytes=1024)
        outcome = asyncio.run(executor.run(job))
    assert outcome.status == "failed" and outcome.finish_reason == "setup_failed"
    assert outcome.error is not None and outcome.error.startswith("task t0: its workspace is")
    assert "is 4.5 KB packed, over the 1.0 KB limit" in outcome.error


def test_a_repository_given_by_url_is_cloned_on_the_worker(
    cluster: LocalRayCluster, pid_dir: Path, tmp_path: Path
) -> None:
    served = tmp_path / "served" / "project"
    served.mkdir(parents=True)
    for args in (["init", "-q"], ["commit", "-q", "--allow-empty", "-m", "start"]):
        subprocess.run(
            ["git", "-C", str(served), "-c", "user.name=t", "-c", "user.email=t@e", *args],
            check=True,
        )
    head = subprocess.run(
        ["git", "-C", str(served), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    with serve_git(served.parent) as base_url, FakeOpenAIServer(default=Model(pid_dir)) as server:
        job = jobs(tmp_path / "batch", server)[0]
        task = job.task.model_copy(update={"workspace": f"{base_url}/project", "base_commit": head})
        copy = prepare_workspace(task, tmp_path / "workspaces")
        job = replace(job, task=task, workspace_dir=str(copy))
        executor = RayExecutor(cluster.address, max_parallel=1)
        assert ray.get(executor._ship(job)[1]).kind == "url"  # only its URL and commit travel
        outcome = asyncio.run(executor.run(job))
    assert outcome.status == "succeeded", outcome.error
    assert (copy / "out.txt").read_text() == "t0"  # written on the worker's clone, brought back
