"""Does a step cost more late in a long session? Harness time per step at steps 10, 100, 1,000.

Scope
    The harness's own time per step in one long scripted session (the model's time taken
    out; no SDK, no wire format, no CLI start-up): whether it grows with the history.

What runs
    One journeyman session of N steps (default 1,000) against a ``ScriptedProvider``, with the
    real SQLite session store and real, cheap file tools on a temporary workspace. Step i makes
    one tool call, cycling through three kinds on 20 small files:

    * i % 3 == 0: ``write_file`` f{i % 20}.txt (a journaled file change),
    * i % 3 == 1: ``edit_file`` on the file just written (another journaled change),
    * i % 3 == 2: ``read_file`` of it,

    then a ``finish`` call ends the run. Every step is committed to the store in one transaction
    (messages, events, usage, checkpoint), exactly as in a real run.

How harness time is measured
    The provider's ``complete`` is wrapped with a clock recording when each model call starts and
    returns. The harness time of step i is the gap between the return of model call i and the
    start of model call i + 1: running the step's tool (with its journal write), committing the
    step, the loop's gates, nudges and compaction check, and building the next request. The
    scripted model's own time is excluded. An untimed 5-step run in the same process comes first,
    so imports and first-use caches are not counted.

    For each mark m (10, 100, 1,000 by default) the table shows the mean and median over the
    ``--window`` steps ending at m, then the ratio of the last mark's mean to the first's. The
    last column is the part spent inside the session store (``record_file_change`` journal
    writes and the step's ``record_step`` commit, clocked the same way): an append-only store
    keeps it flat. Whatever else grows with the history (the request carries the whole
    conversation; ``--no-compaction`` removes the compaction checks) shows in the total.

    The store's size on disk is the database file plus its WAL after the run.

Usage (from the repository root)
    .venv/bin/python bench/growth.py                   # --steps 1000 --window 5
    .venv/bin/python bench/growth.py --steps 2000 --marks 10 100 1000 2000 --repeat 3 --json

Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from journeyman import Agent, AgentConfig, __version__
from journeyman.core.messages import ToolCall
from journeyman.providers.base import ModelRequest, ModelResponse, TextCallback
from journeyman.providers.scripted import ScriptedProvider
from journeyman.session.store import DATABASE_FILE, SessionStore

WARMUP_STEPS = 5
FILES = 20
STORE_WRITES = ("record_step", "record_file_change")


class ClockedProvider(ScriptedProvider):
    """The scripted provider, with the start and return time of every call."""

    def __init__(self, script: list[ModelResponse]) -> None:
        super().__init__(script)
        self.starts: list[float] = []
        self.ends: list[float] = []

    async def complete(
        self, request: ModelRequest, on_text: TextCallback | None = None
    ) -> ModelResponse:
        self.starts.append(time.perf_counter())
        try:
            return await super().complete(request, on_text)
        finally:
            self.ends.append(time.perf_counter())


def step_call(i: int) -> ToolCall:
    name = f"f{(i - i % 3) % FILES}.txt"
    if i % 3 == 0:
        return ToolCall(f"c{i}", "write_file", {"path": name, "content": f"step {i}\nbody\n"})
    if i % 3 == 1:
        return ToolCall(
            f"c{i}",
            "edit_file",
            {"path": name, "old_string": f"step {i - 1}\n", "new_string": f"edited {i}\n"},
        )
    return ToolCall(f"c{i}", "read_file", {"path": name})


def script(steps: int) -> list[ModelResponse]:
    responses = [ModelResponse(text="", tool_calls=(step_call(i),)) for i in range(steps)]
    responses.append(
        ModelResponse(text="", tool_calls=(ToolCall("fin", "finish", {"summary": "done"}),))
    )
    return responses


@dataclass
class Run:
    harness_s: list[float]
    """Harness time of steps 1..N (index 0 is step 1)."""
    store_s: list[float]
    """The part of it spent in the session store (journal writes and the step's commit)."""
    wall_s: float
    db_bytes: int
    wal_bytes: int
    messages: int
    file_changes: int


def run_session(steps: int, root: Path, *, compaction: bool = True) -> Run:
    workspace = root / "workspace"
    sessions = root / "sessions"
    workspace.mkdir(parents=True)
    provider = ClockedProvider(script(steps))
    store_s = [0.0] * (steps + 2)
    originals = {name: getattr(SessionStore, name) for name in STORE_WRITES}

    def clocked(method: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                # between the return of model call k and the start of call k + 1: step k
                store_s[len(provider.ends)] += time.perf_counter() - start

        return wrapper

    for name, method in originals.items():
        setattr(SessionStore, name, clocked(method))
    agent = Agent(
        provider,
        workspace=workspace,
        config=AgentConfig(
            max_iterations=steps + 5,
            max_unproductive_iterations=steps + 5,
            session_dir=sessions,
            verify=False,  # the harness's cost per step is measured, not a check
            **({} if compaction else {"compaction": None}),
        ),
    )
    start = time.perf_counter()
    try:
        result = asyncio.run(agent.run("work through the files"))
    finally:
        for name, method in originals.items():
            setattr(SessionStore, name, method)
    wall = time.perf_counter() - start
    if not result.success or result.iterations != steps + 1:
        raise RuntimeError(
            f"the run did not follow the script: {result.finish_reason.value} after "
            f"{result.iterations} iterations ({result.error})"
        )
    store = SessionStore(sessions)
    try:
        messages = len(store.messages(result.session_id))
        changes = len(store.file_changes(result.session_id))
    finally:
        store.close()
    db = sessions / DATABASE_FILE
    wal = db.with_name(db.name + "-wal")
    harness = [provider.starts[i] - provider.ends[i - 1] for i in range(1, steps + 1)]
    return Run(
        harness_s=harness,
        store_s=store_s[1 : steps + 1],
        wall_s=wall,
        db_bytes=db.stat().st_size,
        wal_bytes=wal.stat().st_size if wal.exists() else 0,
        messages=messages,
        file_changes=changes,
    )


def window(per_step: list[float], mark: int, size: int) -> list[float]:
    """The figures of the `size` steps ending at step `mark` (index 0 is step 1)."""
    first = max(1, mark - size + 1)
    return per_step[first - 1 : mark]


def summarise(runs: list[Run], marks: list[int], size: int) -> dict[str, Any]:
    rows = []
    for mark in marks:
        means = [statistics.fmean(window(r.harness_s, mark, size)) * 1000 for r in runs]
        medians = [statistics.median(window(r.harness_s, mark, size)) * 1000 for r in runs]
        stores = [statistics.fmean(window(r.store_s, mark, size)) * 1000 for r in runs]
        rows.append(
            {
                "step": mark,
                "mean_ms": statistics.median(means),
                "median_ms": statistics.median(medians),
                "store_mean_ms": statistics.median(stores),
            }
        )
    last = runs[-1]
    return {
        "steps": len(last.harness_s),
        "window": size,
        "repeat": len(runs),
        "marks": rows,
        "ratio_last_over_first": rows[-1]["mean_ms"] / rows[0]["mean_ms"],
        "store_ratio_last_over_first": rows[-1]["store_mean_ms"] / rows[0]["store_mean_ms"],
        "mean_all_steps_ms": statistics.median(statistics.fmean(r.harness_s) * 1000 for r in runs),
        "wall_s": statistics.median(r.wall_s for r in runs),
        "store_bytes": last.db_bytes + last.wal_bytes,
        "db_bytes": last.db_bytes,
        "wal_bytes": last.wal_bytes,
        "messages": last.messages,
        "file_changes": last.file_changes,
        "journeyman": __version__,
        "python": platform.python_version(),
        "machine": f"{platform.system()} {platform.machine()}",
    }


def print_table(summary: dict[str, Any]) -> None:
    print(
        f"growth: {summary['steps']} scripted steps (write/edit/read on {FILES} files), "
        f"real SQLite store, compaction {'on' if summary['compaction'] else 'off'}; "
        f"mean/median over the {summary['window']} steps ending at each mark; "
        f"median of {summary['repeat']} run(s)"
    )
    print(f"{'step':>6} | {'harness ms/step (mean)':>22} | {'median':>8} | {'of which store':>14}")
    print(f"{'-' * 6}-+-{'-' * 22}-+-{'-' * 8}-+-{'-' * 14}")
    for row in summary["marks"]:
        print(
            f"{row['step']:>6} | {row['mean_ms']:>22.3f} | {row['median_ms']:>8.3f} | "
            f"{row['store_mean_ms']:>14.3f}"
        )
    first, last = summary["marks"][0]["step"], summary["marks"][-1]["step"]
    print(
        f"ratio step {last} / step {first}: harness {summary['ratio_last_over_first']:.2f}, "
        f"store {summary['store_ratio_last_over_first']:.2f}"
    )
    print(
        f"mean over all steps {summary['mean_all_steps_ms']:.3f} ms; "
        f"run wall time {summary['wall_s']:.2f} s"
    )
    print(
        f"store on disk: {summary['store_bytes'] / 1e6:.2f} MB "
        f"(database {summary['db_bytes'] / 1e6:.2f} MB + WAL {summary['wal_bytes'] / 1e6:.2f} MB) "
        f"for {summary['messages']} messages and {summary['file_changes']} file changes"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--steps", type=int, default=1000, help="Steps in the session.")
    parser.add_argument(
        "--marks",
        type=int,
        nargs="+",
        default=None,
        help="Steps to report (default: 10 100 and --steps).",
    )
    parser.add_argument("--window", type=int, default=5, help="Steps averaged per mark.")
    parser.add_argument("--repeat", type=int, default=1, help="Sessions to run (median).")
    parser.add_argument("--json", action="store_true", help="Print the summary as JSON.")
    parser.add_argument(
        "--no-compaction",
        action="store_true",
        help="Turn compaction off (AgentConfig.compaction=None), to see what its checks cost.",
    )
    args = parser.parse_args(argv)
    marks = args.marks or sorted({m for m in (10, 100, args.steps) if m <= args.steps})
    if any(m < 1 or m > args.steps for m in marks):
        parser.error(f"marks must lie between 1 and --steps ({args.steps})")

    with tempfile.TemporaryDirectory(prefix="jm-growth-") as tmp:
        compaction = not args.no_compaction
        run_session(WARMUP_STEPS, Path(tmp) / "warmup", compaction=compaction)
        runs = [
            run_session(args.steps, Path(tmp) / f"run{i}", compaction=compaction)
            for i in range(args.repeat)
        ]
    summary = summarise(runs, marks, args.window)
    summary["compaction"] = compaction
    if args.json:
        json.dump(summary, sys.stdout, indent=2)
        print()
    else:
        print_table(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
