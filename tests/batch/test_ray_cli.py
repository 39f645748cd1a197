"""`journeyman batch --executor ray` as a user runs it, on a real local Ray cluster."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from journeyman.batch.job import session_spending
from journeyman.batch.ray_executor import PID_DIR_ENV
from journeyman.session.store import SessionStore
from tests.batch.support import model, task_text, tasks_for, write_tasks_file
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import RecordedRequest, ScriptItem, hang
from tests.support.cli import clean_env, journeyman
from tests.support.ray_cluster import RAY_ENV, LocalRayCluster

pytestmark = pytest.mark.slow

KEY = "sk-test-ray-cli"


@pytest.fixture(scope="module")
def pid_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("worker-pids")


@pytest.fixture(scope="module")
def cluster(pid_dir: Path) -> Iterator[LocalRayCluster]:
    nowhere = "http://127.0.0.1:9/v1"  # a call not pointed at the fake server fails fast
    env = clean_env(OPENAI_API_KEY=KEY, OPENAI_BASE_URL=nowhere, **{PID_DIR_ENV: str(pid_dir)})
    with LocalRayCluster(env) as running:
        yield running


def env_for(**extra: str) -> dict[str, str]:
    """The batch's own environment: the cluster's workers have their own key."""
    env = clean_env(**{"OPENAI_API_KEY": "sk-driver-only", **RAY_ENV, **extra})
    env.pop("RAY_ADDRESS", None)
    return env


def batch_args(tmp_path: Path, server: FakeOpenAIServer, *extra: str) -> list[str]:
    tasks = tasks_for(tmp_path, [task_text(1 + i % 2, name=f"[task-{i + 1}]") for i in range(6)])
    tasks_file = write_tasks_file(tmp_path / "tasks.jsonl", tasks)
    return [
        "batch", str(tasks_file),
        "--out", str(tmp_path / "out"),
        "--session-dir", str(tmp_path / "sessions"),
        "--model", "gpt-4.1-mini",
        "--base-url", server.base_url,
        "--price-per-mtok", "0,1000",
        "--no-verify",
        "--sandbox", "local",
        "--max-parallel", "2",
        "--global-budget-usd", "1",
        "--executor", "ray",
        *extra,
    ]  # fmt: skip


def rows(tmp_path: Path) -> list[dict[str, object]]:
    text = (tmp_path / "out" / "results.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


def stored_usd(tmp_path: Path, results: list[dict[str, object]]) -> float:
    store = SessionStore(tmp_path / "sessions")
    try:
        return sum(session_spending(store, str(r["session_id"])).usd for r in results)
    finally:
        store.close()


class KillWorkerOnce:
    """The batch tests' model; the Ray worker running `victim` is killed (SIGKILL) when that
    task's second request arrives, after its first step was persisted."""

    def __init__(self, pid_dir: Path, victim: str) -> None:
        self.pid_dir = pid_dir
        self.victim = victim
        self.killed: int | None = None
        self._lock = threading.Lock()
        for stale in pid_dir.glob("*.pid"):
            stale.unlink()

    def __call__(self, request: RecordedRequest) -> ScriptItem:
        messages = request.json["messages"]
        first = json.dumps(next(m for m in messages if m["role"] == "user")["content"])
        results = sum(1 for m in messages if m["role"] == "tool")
        with self._lock:
            if f"[{self.victim}]" in first and results == 1 and self.killed is None:
                for pid_file in self.pid_dir.glob("*.pid"):
                    pid, task_id = pid_file.read_text().split()
                    if task_id == self.victim:
                        self.killed = int(pid)
                        os.kill(self.killed, signal.SIGKILL)
                        return hang(5)
        return model(request)


def test_a_batch_on_a_ray_cluster_survives_a_killed_worker(
    cluster: LocalRayCluster, pid_dir: Path, tmp_path: Path
) -> None:
    killer = KillWorkerOnce(pid_dir, "task-3")
    with FakeOpenAIServer(default=killer) as server:
        args = batch_args(tmp_path, server, "--ray-address", cluster.address)
        done = journeyman(*args, env=env_for())
    assert done.returncode == 0, done.stderr
    assert killer.killed is not None
    assert "6 succeeded, 0 failed" in done.stdout
    assert "Traceback" not in done.stderr and "raylet" not in done.stdout + done.stderr
    results = rows(tmp_path)
    assert sorted(str(r["id"]) for r in results) == [f"task-{i}" for i in range(1, 7)]
    assert all(r["status"] == "succeeded" for r in results)
    stored = stored_usd(tmp_path, results)
    assert sum(float(r["cost_usd"]) for r in results) == pytest.approx(stored)  # type: ignore[arg-type]
    assert stored <= 1.0
    # task-3 paid for its first step once and its second once: like any 2-step task here
    by_id = {r["id"]: r for r in results}
    assert by_id["task-3"]["cost_usd"] == pytest.approx(by_id["task-1"]["cost_usd"])


def test_kill_9_of_a_ray_batch_then_resume_finishes_every_task_once(
    cluster: LocalRayCluster, tmp_path: Path
) -> None:
    def slow_model(request: RecordedRequest) -> ScriptItem:
        time.sleep(0.2)
        return model(request)

    with FakeOpenAIServer(default=slow_model) as server:
        args = batch_args(tmp_path, server, "--ray-address", cluster.address, "-o", "stream-json")
        process = subprocess.Popen(
            [sys.executable, "-m", "journeyman", *args],
            env=env_for(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        finished_before: list[str] = []
        assert process.stdout is not None
        for line in process.stdout:
            event = json.loads(line)
            if event["type"] == "task_finished":
                finished_before.append(event["task_id"])
                if len(finished_before) == 2:
                    os.kill(process.pid, signal.SIGKILL)
                    break
        process.wait(timeout=30)
        assert process.returncode == -signal.SIGKILL
        requests_at_kill = len(server.requests)
        again = journeyman(*args[:-2], "--resume", env=env_for())
        resumed_requests = server.requests[requests_at_kill:]
    assert again.returncode == 0, again.stderr
    results = rows(tmp_path)
    assert sorted(str(r["id"]) for r in results) == [f"task-{i}" for i in range(1, 7)]
    assert all(r["status"] == "succeeded" for r in results)
    for task_id in finished_before:  # finished before the kill: not run again
        assert not any(f"[{task_id}]" in r.raw_body.decode() for r in resumed_requests)
    stored = stored_usd(tmp_path, results)
    assert sum(float(r["cost_usd"]) for r in results) == pytest.approx(stored)  # type: ignore[arg-type]
    assert stored <= 1.0


def test_without_an_address_the_batch_starts_and_stops_a_private_ray_instance(
    tmp_path: Path,
) -> None:
    ray_tmp = Path(tempfile.mkdtemp(prefix="jmray", dir="/tmp"))  # short: Ray's socket paths
    try:
        with FakeOpenAIServer(default=model) as server:
            env = env_for(RAY_TMPDIR=str(ray_tmp), OPENAI_API_KEY=KEY)
            done = journeyman(*batch_args(tmp_path, server), env=env)
        assert done.returncode == 0, done.stderr
        assert "6 succeeded, 0 failed" in done.stdout
        assert (ray_tmp / "ray").is_dir()  # Ray's files went under RAY_TMPDIR
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)


def test_batches_naming_one_ray_ledger_share_its_cap_and_another_cap_is_refused(
    cluster: LocalRayCluster, tmp_path: Path
) -> None:
    ledger = f"jm-cli-{os.getpid()}"
    summaries = []
    with FakeOpenAIServer(default=model) as server:
        for name in ("one", "two"):
            root = tmp_path / name
            root.mkdir()
            args = batch_args(root, server, "--ray-address", cluster.address, "-o", "json")
            done = journeyman(*args, "--ledger", ledger, env=env_for())
            assert done.returncode == 0, done.stderr
            summaries.append(json.loads(done.stdout))
        first, second = summaries
        both = first["spent_usd"] + second["spent_usd"]
        assert f"(all batches on the ledger: ${both:.4f} of $1.0000" in second["summary"]
        root = tmp_path / "three"
        root.mkdir()
        args = batch_args(root, server, "--ray-address", cluster.address)
        args[args.index("--global-budget-usd") + 1] = "2"
        refused = journeyman(*args, "--ledger", ledger, env=env_for())
    assert refused.returncode == 2, refused.stderr
    assert f"ledger '{ledger}' holds a cap of $1.0000" in refused.stderr
    assert f"set by batch {first['batch_id']}" in refused.stderr
    assert "asks for $2.0000" in refused.stderr and "Traceback" not in refused.stderr
