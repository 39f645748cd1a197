"""Wall time of a 4-worker swarm next to the same subtasks run one at a time.

Scope
    Both sides are the same ``Swarm`` on the same scripted model and the same throwaway
    repository (planning turn, four workers, gates, merges, final check); only the number of
    workers differs. The model's latency is simulated (a fixed delay per reply, no SDK, no
    network), so the figure is what parallel workers save when the model dominates, not a
    real provider's throughput. Runs of the two sides alternate (parallel, one by one,
    parallel, ...; the order flips each round) and the load average is printed before and
    after.

What runs
    A scripted model (``tests.fakes.swarm.RoutedProvider``) whose every reply comes after a
    fixed delay (``--delay``, default 0.25 s), standing in for a real model's latency. The
    goal is planned into four subtasks; each worker reads its file, writes it, and finishes
    (three model replies). The quality gate, the merges and the final check are real (git and
    bash on a throwaway repository under a temporary folder).

    * parallel: ``Swarm(..., SwarmConfig(workers=4))``.
    * one by one: the same swarm with ``workers=1``, so the four subtasks run in turn (same
      planning turn, gates and merges).

    Each is run ``--repeat`` times (default 3), interleaved, and the median wall time printed,
    with the ratio.

Usage (from the repository root)
    .venv/bin/python bench/swarm_wall.py
    .venv/bin/python bench/swarm_wall.py --delay 0.5 --repeat 5 --json

Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT / "src"))
sys.path.insert(0, str(REPO_ROOT))

from tests.fakes.swarm import RoutedProvider, Step, SwarmModel, WorkerScript, git_repo  # noqa: E402

from journeyman.loop.config import AgentConfig  # noqa: E402
from journeyman.swarm.orchestrator import Swarm, SwarmConfig  # noqa: E402
from journeyman.tools.sandbox import SandboxKind  # noqa: E402

SUBTASKS = 4


def read_write_finish(name: str) -> WorkerScript:
    def script(attempt: int, turn: int) -> Step:
        if turn == 0:
            return Step(calls=[("read_file", {"path": name})])
        if turn == 1:
            return Step(calls=[("write_file", {"path": name, "content": f"{name} done\n"})])
        return Step(calls=[("finish", {"summary": f"updated {name}"})])

    return script


def one_run(workers: int, delay_s: float) -> float:
    names = [f"part{n}.txt" for n in range(1, SUBTASKS + 1)]
    model = SwarmModel(
        [{"title": name, "task": f"Update {name}.", "files": [name]} for name in names],
        {f"w{n}": read_write_finish(name) for n, name in enumerate(names, start=1)},
    )
    with tempfile.TemporaryDirectory(prefix="jm-bench-swarm-") as folder:
        root = Path(folder)
        repo = git_repo(root / "repo", {name: "todo\n" for name in names})
        swarm = Swarm(
            RoutedProvider(model, delay_s=delay_s),
            workspace=repo,
            config=SwarmConfig(workers=workers, verify_command="true"),
            agent_config=AgentConfig(session_dir=root / "sessions", sandbox=SandboxKind.LOCAL),
        )
        started = time.perf_counter()
        result = asyncio.run(swarm.run("update every part"))
        elapsed = time.perf_counter() - started
        if not result.success:
            raise SystemExit(f"the benchmark swarm failed: {result.summary()}")
        return elapsed


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--delay", type=float, default=0.25, help="seconds per model reply")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    figures: dict[str, Any] = {"delay_s": args.delay, "subtasks": SUBTASKS, "repeat": args.repeat}
    figures["load_before"] = load()
    sides = [("parallel_4", SUBTASKS), ("one_by_one", 1)]
    times: dict[str, list[float]] = {label: [] for label, _ in sides}
    for round_number in range(args.repeat):
        for label, workers in sides if round_number % 2 == 0 else sides[::-1]:
            times[label].append(one_run(workers, args.delay))
    for label, values in times.items():
        figures[f"{label}_s"] = round(statistics.median(values), 3)
    figures["load_after"] = load()
    figures["speedup"] = round(figures["one_by_one_s"] / figures["parallel_4_s"], 2)
    if args.json:
        print(json.dumps(figures))
        return
    replies = 1 + 3 * SUBTASKS
    print(
        f"{SUBTASKS} subtasks, 3 model replies each plus the plan ({replies} replies), "
        f"{args.delay:.2f} s per reply, median of {args.repeat} interleaved runs:"
    )
    print(f"  load average before: {figures['load_before']}, after: {figures['load_after']}")
    print(f"  swarm, 4 workers:        {figures['parallel_4_s']:.2f} s")
    print(f"  same subtasks one by one: {figures['one_by_one_s']:.2f} s")
    print(f"  speedup:                 {figures['speedup']:.2f}x")


if __name__ == "__main__":
    main()
