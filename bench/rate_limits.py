"""Batch wall time with and without 429s, before and after the shared rate limiter.

Scope
    `journeyman batch` as a user runs it (the CLI in a subprocess, the local executor with
    ``--max-parallel`` worker processes) on ``--tasks`` tasks of ``--steps`` file writes each
    (so ``steps + 1`` model calls a task), against the fake OpenAI server running in this
    process. Every reply takes ``--latency`` seconds (a model's time to answer; 429s come back
    at once). Two loads: 0 % 429s, and 11 % (every 9th request answered 429 with Retry-After
    ``--retry-after`` s). Two trees: ``--before`` (a source folder, e.g. an export of the commit
    before the change: ``git archive <commit> src | tar -x -C /tmp/before``) and this tree.
    Runs are interleaved (before 0 %, after 0 %, before 11 %, after 11 %) ``--repeat`` times;
    the median wall of each is printed, with 11 % / 0 % for each tree, and how many 429s the
    server sent. Figures are printed, never asserted (tests assert behaviour:
    `tests/batch/test_batch_cli.py`).

Usage (from the repository root)
    .venv/bin/python bench/rate_limits.py --before /tmp/before/src
    .venv/bin/python bench/rate_limits.py --only after --repeat 3 --json
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.batch.support import model, task_text, tasks_for, write_tasks_file  # noqa: E402
from tests.fakes.openai_server import FakeOpenAIServer  # noqa: E402
from tests.fakes.script import RecordedRequest, ScriptItem, error  # noqa: E402
from tests.support.cli import clean_env  # noqa: E402


class SlowModel:
    """The batch tests' model, each reply after `latency` s; every `every`-th request a 429."""

    def __init__(self, latency: float, every: int | None, retry_after: float) -> None:
        self.latency = latency
        self.every = every
        self.retry_after = retry_after
        self.requests = 0
        self.limited = 0
        self._lock = threading.Lock()

    def __call__(self, request: RecordedRequest) -> ScriptItem:
        with self._lock:
            self.requests += 1
            limited = self.every is not None and self.requests % self.every == 0
            self.limited += limited
        if limited:
            return error(429, retry_after=self.retry_after)
        time.sleep(self.latency)
        return model(request)


def run_once(src: Path, args: argparse.Namespace, every: int | None, work: Path) -> dict[str, Any]:
    """One batch through the CLI of the tree at `src`; its wall time and the server's counts."""
    fake = SlowModel(args.latency, every, args.retry_after)
    with FakeOpenAIServer(default=fake) as server:
        tasks = tasks_for(work, [task_text(args.steps, name=f"t{i}") for i in range(args.tasks)])
        tasks_file = write_tasks_file(work / "tasks.jsonl", tasks)
        env = clean_env(
            OPENAI_API_KEY="sk-bench", OPENAI_BASE_URL=server.base_url, PYTHONPATH=str(src)
        )
        command = [sys.executable, "-m", "journeyman", "batch", str(tasks_file)]
        command += ["--out", str(work / "out"), "--session-dir", str(work / "sessions")]
        command += ["--model", "gpt-4.1-mini", "--price-per-mtok", "0,1000", "--no-verify"]
        command += ["--sandbox", "local", "--max-parallel", str(args.parallel), "-o", "json"]
        started = time.monotonic()
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
        wall = time.monotonic() - started
    summary = json.loads(done.stdout) if done.stdout.strip() else {}
    return {
        "wall_s": wall,
        "exit": done.returncode,
        "succeeded": summary.get("succeeded"),
        "requests": fake.requests,
        "429s": fake.limited,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="source folder of the tree to compare with")
    parser.add_argument("--only", choices=["before", "after"])
    parser.add_argument("--tasks", type=int, default=16)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--parallel", type=int, default=4)
    parser.add_argument("--latency", type=float, default=1.0, help="seconds a reply takes")
    parser.add_argument("--retry-after", type=float, default=0.5)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    trees = {"before": args.before, "after": ROOT / "src"}
    if args.only:
        trees = {args.only: trees[args.only]}
    if trees.get("before") is None:
        trees.pop("before", None)
    runs: dict[str, list[dict[str, Any]]] = {}
    for _ in range(args.repeat):
        for load, every in (("0%", None), ("11%", 9)):
            for name, src in trees.items():
                with tempfile.TemporaryDirectory(prefix="bench-rl-") as tmp:
                    result = run_once(src, args, every, Path(tmp))
                runs.setdefault(f"{name} {load}", []).append(result)
                print(f"{name:6} {load:>4}: {result}", file=sys.stderr, flush=True)
    table = {
        label: {
            "median_wall_s": round(statistics.median(r["wall_s"] for r in results), 2),
            "429s": [r["429s"] for r in results],
            "succeeded": [r["succeeded"] for r in results],
        }
        for label, results in runs.items()
    }
    for name in trees:
        zero, eleven = table[f"{name} 0%"], table[f"{name} 11%"]
        table[f"{name} ratio"] = {
            "11%/0%": round(eleven["median_wall_s"] / zero["median_wall_s"], 2)
        }
    if args.json:
        print(json.dumps(table, indent=2))
    else:
        for label, row in table.items():
            print(f"{label:14} {row}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
