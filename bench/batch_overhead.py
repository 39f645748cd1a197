"""Batch figures: the scheduling overhead per task, and spend against the cap.

What runs
    * overhead: 50 trivial tasks (the fake OpenAI server answers each with one `finish` call at
      once) through the batch scheduler on each executor of ``EXECUTORS``, one task at a time
      (``--max-parallel 1``) and four at a time. Each task's own run (``run_job``: the agent,
      its provider calls, its session writes) is timed inside the worker and reported back in
      its outcome. Then

          scheduling overhead per task = (batch wall time - summed run_job times) / tasks

      at parallel 1: everything the batch adds around a task — reserving and settling its
      allocation, copying its workspace, reading its spending back from the store, handing the
      job to a worker and the outcome back, appending its results row. At parallel 4 the
      wall time per task is printed (the machine's cores bound it).
    * cap: 100 random batches (1-8 tasks of 0-5 steps, 5-120 output tokens a reply, a random
      cap of $0.05-1.50, per-task budgets or fair shares, 1-4 in parallel; the same generator
      as the tests) on threads; printed: spend / cap (max and mean), overspend, batches that
      ran out of budget.

    Add an executor by adding a factory to ``EXECUTORS`` (name -> callable(max_parallel)).
    The Ray executor is added when Ray is installed (``--no-ray`` leaves it out): it runs on a
    real one-node cluster started for the benchmark on 127.0.0.1 with 2 CPUs (its start-up is
    not counted), with the batch's ledger in a Ray actor as `journeyman batch` has it.

Usage (from the repository root)
    .venv/bin/python bench/batch_overhead.py                  # --tasks 50 --batches 100
    .venv/bin/python bench/batch_overhead.py --only overhead --json

Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.batch.support import (  # noqa: E402
    model,
    random_batch,
    settings_for,
    task_text,
    tasks_for,
)
from tests.fakes.openai_server import FakeOpenAIServer  # noqa: E402

from journeyman.batch.executor import Executor, LocalExecutor  # noqa: E402
from journeyman.batch.job import TaskOutcome  # noqa: E402
from journeyman.batch.scheduler import Scheduler, open_ledger  # noqa: E402

EXECUTORS: dict[str, Callable[[int], Executor]] = {
    "local (processes)": lambda parallel: LocalExecutor(parallel),
    "local (threads)": lambda parallel: LocalExecutor(parallel, processes=False),
}


class Timed:
    """Wraps an executor and keeps the outcomes (their `duration_s` is the worker's own)."""

    def __init__(self, inner: Executor) -> None:
        self.inner = inner
        self.max_parallel = inner.max_parallel
        self.outcomes: list[TaskOutcome] = []

    async def run(self, job: Any) -> TaskOutcome:
        outcome = await self.inner.run(job)
        self.outcomes.append(outcome)
        return outcome

    async def close(self) -> None:
        await self.inner.close()


def hosted_ledger(executor: Executor, settings: Any, tasks: int) -> Any:
    """The ledger the executor hosts (Ray: an actor on the cluster), as the runner uses it."""
    hosted = getattr(executor, "ledger", None)
    if not callable(hosted):
        return None
    template = open_ledger(settings, tasks)
    return hosted(template.total, template.policy)


def add_ray_cluster(stack: contextlib.ExitStack) -> None:
    """A real one-node Ray cluster on 127.0.0.1 (2 CPUs) and the Ray executor on it."""
    try:
        from journeyman.batch.ray_executor import RayExecutor
    except ImportError:
        print("ray is not installed: no Ray column (install journeyman[ray])", file=sys.stderr)
        return
    from tests.support.cli import clean_env
    from tests.support.ray_cluster import RAY_ENV, LocalRayCluster

    os.environ.update(RAY_ENV)
    cluster = stack.enter_context(LocalRayCluster(clean_env(OPENAI_API_KEY="sk-bench")))
    EXECUTORS["ray (1-node cluster)"] = lambda parallel: RayExecutor(cluster.address, parallel)


def overhead(tasks: int, workdir: Path) -> list[dict[str, Any]]:
    rows = []
    with FakeOpenAIServer(default=model) as server:
        for name, factory in EXECUTORS.items():
            for parallel in (1, 4):
                root = workdir / f"{name.split()[0]}-{len(rows)}"
                root.mkdir()
                batch = tasks_for(root, [task_text(0, name=f"t{i}") for i in range(tasks)])
                settings = settings_for(root, server, batch_id=f"bench-{len(rows)}")
                warm = Timed(factory(parallel))
                ledger = hosted_ledger(warm.inner, settings, parallel)
                asyncio.run(Scheduler(batch[:parallel], settings, warm, ledger=ledger).run())
                settings.batch_id += "-timed"
                executor = Timed(warm.inner)
                ledger = hosted_ledger(warm.inner, settings, tasks)
                started = time.perf_counter()
                summary = asyncio.run(Scheduler(batch, settings, executor, ledger=ledger).run())
                wall = time.perf_counter() - started
                asyncio.run(executor.close())
                inside = sum(o.duration_s for o in executor.outcomes)
                rows.append(
                    {
                        "executor": name,
                        "parallel": parallel,
                        "tasks": tasks,
                        "succeeded": summary.count("succeeded"),
                        "wall_s": round(wall, 3),
                        "wall_per_task_ms": round(wall / tasks * 1000, 1),
                        "run_job_median_ms": round(
                            statistics.median(o.duration_s for o in executor.outcomes) * 1000, 1
                        ),
                        "overhead_per_task_ms": round((wall - inside) / tasks * 1000, 1)
                        if parallel == 1
                        else None,
                    }
                )
    return rows


def cap(batches: int, workdir: Path, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    ratios, overspend, exhausted, tasks = [], 0.0, 0, 0
    with FakeOpenAIServer(default=model) as server:
        for index in range(batches):
            batch, settings, parallel = random_batch(rng, workdir, server, index)
            executor = LocalExecutor(parallel, processes=False)
            summary = asyncio.run(Scheduler(batch, settings, executor).run())
            asyncio.run(executor.close())
            assert settings.global_usd is not None
            ratios.append((summary.spent.usd or 0.0) / settings.global_usd)
            overspend += summary.overspend.usd or 0.0
            exhausted += summary.budget_exhausted
            tasks += len(batch)
    return {
        "batches": batches,
        "tasks": tasks,
        "max_spend_over_cap": round(max(ratios), 4),
        "mean_spend_over_cap": round(statistics.fmean(ratios), 4),
        "batches_over_cap": sum(1 for r in ratios if r > 1.0 + 1e-9),
        "overspend_usd": overspend,
        "budget_exhausted_batches": exhausted,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=50)
    parser.add_argument("--batches", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1400)
    parser.add_argument("--only", choices=["overhead", "cap"])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--no-ray", action="store_true", help="leave out the Ray executor")
    args = parser.parse_args()
    os.environ.setdefault("OPENAI_API_KEY", "sk-bench")
    os.environ["JOURNEYMAN_EDIT_TOOL"] = "edit_file"
    os.environ.pop("OPENAI_BASE_URL", None)
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="jm-batch-bench-") as tmp:
        work = Path(tmp)
        os.environ.setdefault("JOURNEYMAN_CACHE_DIR", str(work / "cache"))
        if args.only in (None, "overhead"):
            (work / "overhead").mkdir()
            with contextlib.ExitStack() as stack:
                if not args.no_ray:
                    add_ray_cluster(stack)
                figures["overhead"] = overhead(args.tasks, work / "overhead")
        if args.only in (None, "cap"):
            (work / "cap").mkdir()
            figures["cap"] = cap(args.batches, work / "cap", args.seed)
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    for row in figures.get("overhead", []):
        extra = (
            f", scheduling overhead {row['overhead_per_task_ms']} ms/task"
            if row["overhead_per_task_ms"] is not None
            else ""
        )
        print(
            f"{row['executor']:<18} parallel {row['parallel']}: {row['tasks']} tasks in "
            f"{row['wall_s']} s ({row['wall_per_task_ms']} ms/task; run_job median "
            f"{row['run_job_median_ms']} ms{extra})"
        )
    if "cap" in figures:
        c = figures["cap"]
        print(
            f"cap: {c['batches']} random batches ({c['tasks']} tasks): spend/cap max "
            f"{c['max_spend_over_cap']}, mean {c['mean_spend_over_cap']}; batches over the cap "
            f"{c['batches_over_cap']}; overspend ${c['overspend_usd']:.6f}; "
            f"{c['budget_exhausted_batches']} ran out of budget"
        )


if __name__ == "__main__":
    main()
