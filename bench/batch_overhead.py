"""Batch figures: the scheduling overhead per task, and spend against the cap.

Scope
    What the batch scheduler adds around each task (reservations, settlement, workspace
    copies, the executor's shipping) on the fake OpenAI server; the task's own agent run is
    timed inside the worker and taken out, so the figure is the scheduler's, not a model's.
    Executors run one after another, not interleaved: compare columns of one run only.

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
    * resume: ``--trials`` runs of the ``journeyman batch`` command (8 tasks, 3 at a time) killed
      with SIGKILL at a random moment (0-0.4 s after a task starts, once 0-6 have finished),
      then run again; printed: tasks lost, finished tasks
      run again, model calls repeated (a call the kill cut off is made again), and the gap
      between what the resumed batch reports spent and what the store holds.
    * cap: 100 random batches (1-8 tasks of 0-5 steps, 5-120 output tokens a reply, a random
      cap of $0.05-1.50, per-task budgets or fair shares, 1-4 in parallel; the same generator
      as the tests) on threads; printed: spend / cap (max and mean), overspend, batches that
      ran out of budget, and how the tasks ended (succeeded, out of budget mid-run, not run).

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
from journeyman.batch.runner import batch_ledger  # noqa: E402
from journeyman.batch.scheduler import Scheduler  # noqa: E402

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
    del tasks
    return batch_ledger(settings, executor)


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
    ended: dict[str, int] = {"succeeded": 0, "out_of_budget": 0, "not_run": 0}
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
            for row in summary.results:
                ended["succeeded"] += row.status == "succeeded"
                ended["out_of_budget"] += row.finish_reason in ("max_budget_usd", "max_tokens")
                ended["not_run"] += row.status == "not_run"
    return {
        "batches": batches,
        "tasks": tasks,
        "max_spend_over_cap": round(max(ratios), 4),
        "mean_spend_over_cap": round(statistics.fmean(ratios), 4),
        "batches_over_cap": sum(1 for r in ratios if r > 1.0 + 1e-9),
        "overspend_usd": overspend,
        "budget_exhausted_batches": exhausted,
        "tasks_succeeded": ended["succeeded"],
        "tasks_out_of_budget": ended["out_of_budget"],
        "tasks_not_run": ended["not_run"],
    }


def resume(trials: int, workdir: Path, seed: int) -> dict[str, Any]:
    """kill -9 of the batch command at a random moment, then the same command again."""
    import signal
    import subprocess

    from tests.batch.support import write_tasks_file
    from tests.support.cli import clean_env

    from journeyman.batch.job import session_spending
    from journeyman.session.store import SessionStore

    rng = random.Random(seed)
    figures = {"trials": trials, "tasks_lost": 0, "tasks_rerun_from_scratch": 0}
    finished_at_kill: list[int] = []
    repeated_calls: list[int] = []
    accounting_gaps: list[float] = []

    def slow(request: Any) -> Any:
        time.sleep(0.05)
        return model(request)

    with FakeOpenAIServer(default=slow) as server:
        env = clean_env(OPENAI_API_KEY="sk-bench", OPENAI_BASE_URL=server.base_url)
        for trial in range(trials):
            root = workdir / f"r{trial}"
            root.mkdir()
            texts = [task_text(3, 20, name=f"r{trial}t{i}") for i in range(8)]
            tasks = tasks_for(root, texts)
            tasks_file = write_tasks_file(root / "tasks.jsonl", tasks)
            args = [
                sys.executable, "-m", "journeyman", "batch", str(tasks_file),
                "--out", str(root / "out"), "--session-dir", str(root / "sessions"),
                "--model", "gpt-4.1-mini", "--price-per-mtok", "0,1000", "--no-verify",
                "--sandbox", "local", "--max-parallel", "3", "--global-budget-usd", "5",
                "-o", "json",
            ]  # fmt: skip
            # killed once a random number of tasks (0-6) has finished, a random moment later
            target = rng.randint(0, 6)
            process = subprocess.Popen(
                [*args[:-1], "stream-json"],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
            assert process.stdout is not None
            finished = 0
            for line in process.stdout:
                event = json.loads(line)
                finished += event["type"] == "task_finished"
                if event["type"] == "task_started" and finished >= target:
                    break
            time.sleep(rng.uniform(0.0, 0.4))
            process.send_signal(signal.SIGKILL)
            process.wait()
            time.sleep(1.0)  # its workers notice and stop
            rows_path = root / "out" / "results.jsonl"
            lines = rows_path.read_text().splitlines() if rows_path.exists() else []
            done_before = {json.loads(line)["id"] for line in lines if line.strip()}
            finished_at_kill.append(len(done_before))
            calls_before = len(server.requests)
            again = subprocess.run(args, env=env, capture_output=True, text=True)
            summary = json.loads(again.stdout)
            rows = [json.loads(line) for line in rows_path.read_text().splitlines()]
            figures["tasks_lost"] += len(tasks) - sum(r["status"] == "succeeded" for r in rows)
            later = server.requests[calls_before:]
            for task in tasks:
                mine = [r for r in server.requests if task.task in r.raw_body.decode()]
                repeated_calls.append(max(0, len(mine) - 4))  # 3 steps + finish
                if task.id in done_before and any(task.task in r.raw_body.decode() for r in later):
                    figures["tasks_rerun_from_scratch"] += 1
            store = SessionStore(root / "sessions")
            stored = sum(session_spending(store, r["session_id"]).usd for r in rows)
            store.close()
            accounting_gaps.append(abs(stored - (summary["spent_usd"] or 0.0)))
    figures.update(
        {
            "finished_at_kill_mean": round(statistics.fmean(finished_at_kill), 2),
            "repeated_model_calls": sum(repeated_calls),
            "repeated_calls_per_trial_max": max(
                sum(repeated_calls[i * 8 : (i + 1) * 8]) for i in range(trials)
            ),
            "max_accounting_gap_usd": max(accounting_gaps),
        }
    )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=50)
    parser.add_argument("--batches", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1400)
    parser.add_argument("--trials", type=int, default=5, help="kill -9 trials of --only resume")
    parser.add_argument("--only", choices=["overhead", "cap", "resume"])
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
        if args.only in (None, "resume"):
            (work / "resume").mkdir()
            figures["resume"] = resume(args.trials, work / "resume", args.seed)
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
            f"{c['budget_exhausted_batches']} ran out of budget; tasks: {c['tasks_succeeded']} "
            f"succeeded, {c['tasks_out_of_budget']} ended out of budget, {c['tasks_not_run']} "
            "not run"
        )
    if "resume" in figures:
        r = figures["resume"]
        print(
            f"resume: {r['trials']} kill -9 trials of 8 tasks: {r['finished_at_kill_mean']} "
            f"finished at the kill on average; after resuming, tasks lost {r['tasks_lost']}, "
            f"finished tasks run again {r['tasks_rerun_from_scratch']}, model calls repeated "
            f"{r['repeated_model_calls']} (at most {r['repeated_calls_per_trial_max']} in one "
            f"trial: calls cut off by the kill); ledger vs store gap "
            f"${r['max_accounting_gap_usd']:.6f}"
        )


if __name__ == "__main__":
    main()
