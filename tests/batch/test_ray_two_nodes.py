"""A batch on a real two-node Ray cluster on this machine, with nothing shared between the nodes
but Ray: the head (where the batch runs, its store and workspace copies) and a second node with
its own temp folder, HOME and session folder, which is killed (every process, at once) in the
middle of the batch. Neither node is given journeyman's source path: the code reaches the
workers in the job's runtime_env.

Each node calls the fake model with its own API key, so the server tells which node made each
call; every 10th call is answered 429, which pauses the calls of that key (the cluster's shared
rate limiter) and is waited out inside the attempt. Every task must end exactly once, under the cap,
with every session in the driver's store and the same results as the local executor's."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import ray

from journeyman.batch.executor import LocalExecutor
from journeyman.batch.job import session_id_for
from journeyman.batch.ray_executor import PID_DIR_ENV, RayExecutor, journeyman_runtime_env
from journeyman.batch.runner import batch_ledger
from journeyman.batch.scheduler import BatchSummary, Scheduler
from journeyman.session.store import SessionStore
from tests.batch.support import model as batch_model
from tests.batch.support import settings_for, task_text, tasks_for
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import RecordedRequest, Reply, ScriptItem, error, hang
from tests.support.cli import clean_env
from tests.support.ray_cluster import LocalRayCluster, LocalRayNode, ray_environment

pytestmark = pytest.mark.slow

HEAD_KEY = "sk-test-head-node"
SECOND_KEY = "sk-test-second-node"
TASKS = 24
CAP_USD = 1.0
PER_TASK_USD = 0.1
KILL_AT_CALL = 14
"""The second node's call at which it is killed (each task makes 2 to 4)."""
USD_PER_OUTPUT_TOKEN = 0.001
THROTTLE_EVERY = 10
"""Every 10th call gets a 429 (10 %): its calls wait and go again, no attempt ends."""


def texts() -> list[str]:
    return [task_text(steps=1 + i % 3, out=5 + i % 7, name=f"[task-{i + 1}]") for i in range(TASKS)]


def node_env(root: Path, key: str) -> dict[str, str]:
    """A node's own environment: its HOME, temp dir and session folder, its API key, and no
    path to journeyman's source."""
    for name in ("home", "tmp", "sessions", "pids"):
        (root / name).mkdir(parents=True)
    env = clean_env(
        HOME=str(root / "home"),
        TMPDIR=str(root / "tmp"),
        JOURNEYMAN_SESSION_DIR=str(root / "sessions"),
        OPENAI_API_KEY=key,
        OPENAI_BASE_URL="http://127.0.0.1:9/v1",  # a call not pointed at the fake goes nowhere
        **{PID_DIR_ENV: str(root / "pids")},
    )
    env.pop("PYTHONPATH", None)
    return env


class TwoNodeModel:
    """The batch tests' model, counting calls per node (by API key) and what they would bill;
    at the second node's `KILL_AT_CALL`th call the whole node is killed."""

    def __init__(self, second: LocalRayNode | None) -> None:
        self.second = second
        self.calls: Counter[str] = Counter()
        self.billed_usd = 0.0
        self.killed_at: float | None = None
        self.in_flight_at_kill = 0
        self.head_calls_after_kill = 0
        self.throttled = 0
        self.on_second: set[str] = set()
        self.restarted: dict[str, float] = {}
        """Task that had called from the second node → seconds from the kill to its first
        call on the head from scratch (lost with the node, or cut by a 429 at its first call)."""
        self._lock = threading.Lock()

    def __call__(self, request: RecordedRequest) -> ScriptItem:
        key = request.headers.get("authorization", "").removeprefix("Bearer ")
        who = {HEAD_KEY: "head", SECOND_KEY: "second"}.get(key, "unknown")
        messages = request.json["messages"]
        first = json.dumps(next(m for m in messages if m["role"] == "user")["content"])
        task = first.split("]", 1)[0]
        with self._lock:
            self.calls[who] += 1
            if who == "second":
                self.on_second.add(task)
            starts_over = self.killed_at is not None and who == "head" and task in self.on_second
            if starts_over and not any(m["role"] == "tool" for m in messages):
                self.restarted[task] = time.monotonic() - self.killed_at
            throttled = sum(self.calls.values()) % THROTTLE_EVERY == 0
            self.throttled += throttled
            if self.killed_at is not None and who == "head":
                self.head_calls_after_kill += 1

            kill = (
                who == "second"
                and self.second is not None
                and self.killed_at is None
                and self.calls[who] == KILL_AT_CALL
            )
            if kill:
                assert self.second is not None
                self.killed_at = time.monotonic()
                self.second.kill()  # its workers, raylet and object store, all at once
        if kill:
            return hang(5)  # nobody is left to read the answer
        if throttled:  # the task's attempt ends; it resumes from the driver's store later
            return error(429, retry_after=0.05)
        item = batch_model(request)
        if isinstance(item, Reply) and item.usage is not None:
            with self._lock:
                self.billed_usd += item.usage.output_tokens * USD_PER_OUTPUT_TOKEN
        return item


def run(executor: RayExecutor | LocalExecutor, root: Path, server: FakeOpenAIServer) -> Any:
    tasks = tasks_for(root, texts())
    settings = settings_for(root, server, global_usd=CAP_USD, per_task_usd=PER_TASK_USD)
    settings = replace(settings, keep="all")  # the workspaces are compared below
    ledger = batch_ledger(settings, executor)

    async def go() -> BatchSummary:
        try:
            return await Scheduler(tasks, settings, executor, ledger=ledger).run()
        finally:
            await executor.close()

    return asyncio.run(go())


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[LocalRayCluster, LocalRayNode]]:
    """The head (1 CPU) and the second node (2 CPUs, resource `second`), stopped whatever
    happens."""
    head = LocalRayCluster(node_env(tmp_path / "head-node", HEAD_KEY), num_cpus=1)
    second = LocalRayNode(
        head, node_env(tmp_path / "second-node", SECOND_KEY), num_cpus=2, resources='{"second": 2}'
    )
    with ray_environment():
        try:
            head.start()
            second.start()
            ray.init(
                address=head.address,
                log_to_driver=False,
                include_dashboard=False,
                runtime_env=journeyman_runtime_env(),
            )
            yield head, second
        finally:
            ray.shutdown()
            second.stop()
            head.stop()


def workspace_files(root: Path) -> dict[str, dict[str, str]]:
    found: dict[str, dict[str, str]] = {}
    for folder in sorted((root / "out" / "workspaces").iterdir()):
        if folder.is_dir() and not folder.name.startswith("."):
            found[folder.name] = {
                p.relative_to(folder).as_posix(): p.read_text()
                for p in sorted(folder.rglob("*"))
                if p.is_file()
            }
    return found


def outline(summary: BatchSummary) -> list[tuple[object, ...]]:
    return sorted(
        (r.id, r.status, r.finish_reason, round(r.cost_usd, 9), r.tokens) for r in summary.results
    )


def test_a_batch_on_two_nodes_survives_losing_one_and_matches_the_local_executor(
    cluster: tuple[LocalRayCluster, LocalRayNode],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    head, second = cluster
    driver = tmp_path / "driver"
    driver.mkdir()
    on_ray = TwoNodeModel(second)
    started = time.monotonic()
    with FakeOpenAIServer(default=on_ray) as server:
        executor = RayExecutor(head.address, max_parallel=3, prefer_nodes_with="second")
        summary = run(executor, driver, server)
    wall = time.monotonic() - started

    # the second node took tasks, was killed mid-batch, and the head finished the rest
    assert on_ray.killed_at is not None, (dict(on_ray.calls), summary.line())
    # calls the node's other workers had already sent when it was killed may be read just after
    # (a loaded machine): at most one more per task it was running
    assert KILL_AT_CALL <= on_ray.calls["second"] < KILL_AT_CALL + 3  # max_parallel
    assert on_ray.head_calls_after_kill > 0
    assert second.killed and second.alive(second.killed) == []
    assert executor.worker_deaths >= 1
    assert on_ray.throttled >= TASKS // 4
    # a 429 pauses the calls of the provider's key for its Retry-After: it ends no attempt (a
    # task tried again is one whose worker died, when Ray was slow to say so under load)
    assert sum(r.attempts > 1 for r in summary.results) <= executor.worker_deaths
    assert on_ray.restarted, "a task the second node was running should start over on the head"

    # every task exactly once, all done, under the cap
    results = [json.loads(line) for line in (driver / "out" / "results.jsonl").open()]
    assert sorted(r["id"] for r in results) == sorted(f"task-{i}" for i in range(1, TASKS + 1))
    assert summary.all_succeeded
    assert summary.spent.usd is not None and summary.spent.usd <= CAP_USD
    assert summary.overspend.usd == 0
    assert on_ray.billed_usd <= CAP_USD  # what the provider billed, lost calls included

    # every session in the driver's store, once, with no row twice
    store = SessionStore(driver / "sessions")
    try:
        sessions = {s.record.id: s for s in store.list_sessions()}
        assert set(sessions) == {
            session_id_for("batch-test", f"task-{i}", 1) for i in range(1, TASKS + 1)
        }
        for index in range(TASKS):
            sid = session_id_for("batch-test", f"task-{index + 1}", 1)
            assert sessions[sid].finish_reason == "completed"
            calls = [row.call_index for row in store.usage_rows(sid)]
            steps = 1 + index % 3
            assert sorted(calls) == list(range(1, steps + 2)), (sid, calls)
            assert sessions[sid].record.workspace == str(
                driver / "out" / "workspaces" / f"task-{index + 1}" / "attempt-1"
            )
        stored_usd = sum(row.cost_usd or 0.0 for row in store.usage_rows())
    finally:
        store.close()
    # the ledger counts the store and, beyond it, what the lost attempts reported per call
    lost = on_ray.billed_usd - stored_usd
    unseen = on_ray.billed_usd - summary.spent.usd
    assert summary.spent.usd >= stored_usd - 1e-9 and unseen >= -1e-9
    if lost > 1e-9:
        assert unseen < lost, (lost, unseen)
    # the second node kept nothing of its own outside its temp folder
    assert not list((tmp_path / "second-node" / "sessions").iterdir())
    assert not list((tmp_path / "second-node" / "home").rglob("journeyman.db"))

    # the same batch on the local executor ends the same way, at the same cost, same files
    local_root = tmp_path / "local"
    local_root.mkdir()
    monkeypatch.setenv("OPENAI_API_KEY", HEAD_KEY)
    with FakeOpenAIServer(default=TwoNodeModel(None)) as server:
        local = run(LocalExecutor(3), local_root, server)
    assert outline(summary) == outline(local)
    assert stored_usd == pytest.approx(local.spent.usd, rel=1e-9)
    assert workspace_files(driver) == workspace_files(local_root)
    print(
        f"\ntwo nodes: {TASKS} tasks in {wall:.1f} s, calls {dict(on_ray.calls)}, "
        f"{executor.worker_deaths} attempts lost with the node; tasks of the second node "
        f"started from scratch on the head "
        f"{sorted(round(t, 1) for t in on_ray.restarted.values())} s after the kill; "
        f"{on_ray.throttled} calls answered 429; spent ${summary.spent.usd:.4f} "
        f"of ${CAP_USD:.2f} (billed ${on_ray.billed_usd:.4f}, ${lost:.4f} of it by lost attempts, "
        f"${unseen:.4f} of that not seen by the ledger)"
    )
