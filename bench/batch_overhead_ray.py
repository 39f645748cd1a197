"""Scheduling overhead per task of the batch executors: local processes and a Ray cluster.

Scope
    The executors alone (no scheduler, ledger or workspace copies): the wall time per task
    minus the task's own `run_job` time, local processes next to a one-node Ray cluster on
    this machine (its start-up not counted). The two run one after the other, not
    interleaved.

What runs
    ``--tasks`` trivial tasks (the fake OpenAI server answers each task's one model call with
    `finish`) go through an executor, first the local one (worker processes on this machine),
    then the Ray one on a real one-node cluster started for the benchmark (``ray start --head``
    on 127.0.0.1, ``--cpus`` CPUs; its start-up is not counted). Each executor runs the batch
    with ``--parallel`` tasks at a time (1 by default, so nothing overlaps and the figure is
    clean) after one warm-up task that starts its workers.

    With ``--workspace-kb N`` each task's workspace holds a file of N KB (random bytes, so
    nothing compresses): the Ray executor packs it into the object store, the worker unpacks
    it, and the session's rows come back to be merged into the driver's store.

    For each executor it prints the wall time per task and the time `run_job` itself took in the
    worker (the outcome's `duration_s`: the agent's run, its session store, the fake model);
    the difference, wall minus worker time, divided by the tasks and multiplied by the
    parallelism, is the scheduling overhead per task: shipping the job, queueing it, starting
    it in a worker, returning the outcome.

Usage (from the repository root)
    .venv/bin/python bench/batch_overhead_ray.py                 # 50 tasks, 1 at a time
    .venv/bin/python bench/batch_overhead_ray.py --parallel 2 --json

Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import reply
from tests.support.cli import clean_env
from tests.support.ray_cluster import RAY_ENV, LocalRayCluster

from journeyman.batch.executor import Executor, LocalExecutor
from journeyman.batch.job import TaskJob, session_id_for
from journeyman.batch.tasks import BatchTask

KEY = "sk-bench"


def trivial_jobs(
    root: Path, server: FakeOpenAIServer, count: int, batch: str, workspace_kb: int = 0
) -> list[TaskJob]:
    jobs = []
    for index in range(count):
        task_id = f"t{index}"
        workspace = root / batch / task_id
        workspace.mkdir(parents=True)
        if workspace_kb:
            (workspace / "data.bin").write_bytes(os.urandom(workspace_kb * 1024))
        jobs.append(
            TaskJob(
                batch_id=batch,
                task=BatchTask(id=task_id, task="finish at once", workspace="."),
                workspace_dir=str(workspace),
                store_path=str(root / batch / "sessions"),
                session_id=session_id_for(batch, task_id, 1),
                model="gpt-4.1-mini",
                base_url=server.base_url,
                provider="openai",
                mode="react",
                verify=None,
                granted_tokens=None,
                granted_usd=None,
                attempt=1,
                resume=True,
                config={"price_per_mtok": (1.0, 1.0), "verify": False, "sandbox": "local"},
            )
        )
    return jobs


async def measure(executor: Executor, jobs: list[TaskJob], parallel: int) -> dict[str, float]:
    warm, timed = jobs[0], jobs[1:]
    first = await executor.run(warm)
    assert first.status == "succeeded", first
    limit = asyncio.Semaphore(parallel)

    async def one(job: TaskJob) -> float:
        async with limit:
            outcome = await executor.run(job)
            assert outcome.status == "succeeded", outcome
            return outcome.duration_s

    started = time.perf_counter()
    durations = await asyncio.gather(*(one(job) for job in timed))
    wall = time.perf_counter() - started
    await executor.close()
    tasks = len(timed)
    in_worker = sum(durations)
    return {
        "tasks": tasks,
        "wall_ms_per_task": wall / tasks * 1000,
        "worker_ms_per_task": in_worker / tasks * 1000,
        "overhead_ms_per_task": (wall * parallel - in_worker) / tasks * 1000,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=50)
    parser.add_argument("--parallel", type=int, default=1)
    parser.add_argument("--cpus", type=int, default=2)
    parser.add_argument("--only", choices=["local", "ray"])
    parser.add_argument("--workspace-kb", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    os.environ["OPENAI_API_KEY"] = KEY  # the local workers' environment
    os.environ.update(RAY_ENV)
    results: dict[str, Any] = {
        "tasks": args.tasks,
        "parallel": args.parallel,
        "workspace_kb": args.workspace_kb,
    }
    finish = reply(tool_calls=[("finish", {"summary": "done"})])
    with (
        tempfile.TemporaryDirectory(prefix="jm-batch-bench-") as tmp,
        FakeOpenAIServer(default=finish) as server,
    ):
        root = Path(tmp)
        count = args.tasks + 1
        if args.only in (None, "local"):
            jobs = trivial_jobs(root, server, count, "local", args.workspace_kb)
            results["local"] = asyncio.run(
                measure(LocalExecutor(args.parallel), jobs, args.parallel)
            )
        if args.only in (None, "ray"):
            import ray

            from journeyman.batch.ray_executor import RayExecutor

            with LocalRayCluster(clean_env(OPENAI_API_KEY=KEY), num_cpus=args.cpus) as cluster:
                jobs = trivial_jobs(root, server, count, "ray", args.workspace_kb)
                executor = RayExecutor(cluster.address, args.parallel)
                try:
                    results["ray"] = asyncio.run(measure(executor, jobs, args.parallel))
                finally:
                    if ray.is_initialized():
                        ray.shutdown()
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(
        f"{args.tasks} trivial tasks, {args.parallel} at a time, "
        f"workspaces of {args.workspace_kb} KB"
    )
    print(f"{'executor':<10}{'wall/task':>12}{'in worker':>12}{'overhead/task':>16}")
    for name in ("local", "ray"):
        row = results.get(name)
        if row:
            print(
                f"{name:<10}{row['wall_ms_per_task']:>10.1f}ms{row['worker_ms_per_task']:>10.1f}ms"
                f"{row['overhead_ms_per_task']:>14.1f}ms"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
