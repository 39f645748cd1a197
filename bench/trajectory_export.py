"""How long does a long session take to export? ATIF, mini-swe-agent and JSONL export of a
1,000-step session.

Scope
    The exporters on one stored 1,000-step session: in process (reading the store,
    building and validating the formats) and as the `journeyman sessions export` command
    (with its start-up); the session's own run is setup and not timed.

What runs
    The 1,000-step session of ``bench/inspector.py`` (a scripted model on the real store and
    file tools: writes, edits, reads and commands, prompts mostly read from the cache, several
    compactions), built once.

What is measured
    * in process, the median of ``--repeat``: ``atif_trajectory`` (reading the store, building
      the ``atif`` models, redacting, validating again) plus its JSON text; the same for
      ``mini_trajectory`` and for ``export_jsonl``;
    * ``journeyman sessions export ID --format atif -o FILE`` as a fresh process (what Harbor's
      installed agent runs), wall time with the interpreter's start, median of ``--repeat``;
    * the document: steps, tool calls (each id once: a compaction's rewritten history is not
      exported again), compactions, size.

Usage (from the repository root)
    .venv/bin/python bench/trajectory_export.py                # --steps 1000 --repeat 3
    .venv/bin/python bench/trajectory_export.py --steps 200 --json

Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import io
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from journeyman.session.atif_export import atif_json, atif_trajectory  # noqa: E402
from journeyman.session.mini_export import mini_trajectory  # noqa: E402
from journeyman.session.store import SessionStore  # noqa: E402
from journeyman.session.trajectory import export_jsonl  # noqa: E402


def _inspector_bench() -> Any:
    """bench/inspector.py, whose 1,000-step session this measures."""
    spec = importlib.util.spec_from_file_location("bench_inspector", ROOT / "bench/inspector.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def median_s(work: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="jm-bench-export-") as folder:
        root = Path(folder)
        started = time.perf_counter()
        sessions, session_id = asyncio.run(_inspector_bench().build_session(root, args.steps))
        run_s = time.perf_counter() - started
        store = SessionStore(sessions)
        try:
            trajectory = atif_trajectory(store, session_id)
            text = atif_json(trajectory)
            atif_s = median_s(lambda: atif_json(atif_trajectory(store, session_id)), args.repeat)
            mini_s = median_s(lambda: json.dumps(mini_trajectory(store, session_id)), args.repeat)
            jsonl_s = median_s(lambda: export_jsonl(store, session_id, io.StringIO()), args.repeat)
        finally:
            store.close()
        out = root / "trajectory.json"
        command = [
            sys.executable, "-m", "journeyman", "sessions", "export", session_id,
            "--format", "atif", "-o", str(out), "--session-dir", str(sessions),
        ]  # fmt: skip

        def cli() -> None:
            subprocess.run(command, check=True, capture_output=True)

        cli_s = median_s(cli, args.repeat)
        call_ids = [c.tool_call_id for s in trajectory.steps for c in s.tool_calls or ()]
        figures = {
            "session_steps": args.steps,
            "atif_steps": len(trajectory.steps),
            "tool_calls": len(call_ids),
            "tool_call_ids_repeated": len(call_ids) - len(set(call_ids)),
            "observations": sum(
                len(s.observation.results) for s in trajectory.steps if s.observation
            ),
            "compactions": sum(1 for s in trajectory.steps if s.extra and "compaction" in s.extra),
            "atif_bytes": len(text.encode()),
            "run_s": round(run_s, 2),
            "atif_in_process_s": round(atif_s, 3),
            "mini_traj_in_process_s": round(mini_s, 3),
            "jsonl_in_process_s": round(jsonl_s, 3),
            "atif_cli_s": round(cli_s, 3),
            "python": platform.python_version(),
            "machine": f"{platform.machine()}, {platform.system()}",
        }
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(
        f"{figures['session_steps']:,}-step session (scripted run {figures['run_s']} s): "
        f"{figures['atif_steps']:,} ATIF steps, {figures['tool_calls']:,} tool calls "
        f"({figures['tool_call_ids_repeated']} repeated, {figures['observations']:,} results), "
        f"{figures['compactions']} compactions, "
        f"{figures['atif_bytes'] / 1024:,.0f} KiB"
    )
    print(
        f"in process, median of {args.repeat}: ATIF {figures['atif_in_process_s']} s, "
        f"mini-traj {figures['mini_traj_in_process_s']} s, JSONL {figures['jsonl_in_process_s']} s"
    )
    print(f"`journeyman sessions export --format atif -o FILE`: {figures['atif_cli_s']} s")


if __name__ == "__main__":
    main()
