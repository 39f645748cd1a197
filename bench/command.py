"""Cost of one command: `run_command` next to a bare `subprocess.run`, and the command journal.

What runs
    * command: ``RunCommandTool.execute`` on ``echo i`` (``local`` sandbox, journal off) against
      ``subprocess.run("echo i", shell=True, capture_output=True)`` in the same process;
      the median per call of each and the difference.
    * journal: the same tool with the command journal on (a ``ToolContext`` with a journal),
      on a tree that the command leaves alone; the extra time per command over the journal-off
      figure is what the journal costs when a command changes nothing. The tree is a copy of the
      running interpreter's standard library (CPython's ``Lib/`` as installed, without
      ``site-packages/`` and ``__pycache__/``, about 2,450 files) made once under
      ``bench/.work/journal-tree/``, or ``--root PATH``. The first command (which hashes the
      whole tree into the shadow repository) is not counted.

    The four kinds of call take turns (``--calls`` rounds of one call each), so that the load
    of a shared machine weighs on all of them alike.

Usage (from the repository root)
    .venv/bin/python bench/command.py                  # --calls 200
    .venv/bin/python bench/command.py --calls 500 --json

Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import subprocess
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
TREE = BENCH_DIR / ".work" / "journal-tree"


def standard_library_copy() -> Path:
    """A copy of the interpreter's standard library (made once) that commands may run in."""
    if not TREE.is_dir():
        source = Path(sysconfig.get_paths()["stdlib"])
        shutil.copytree(
            source,
            TREE,
            ignore=shutil.ignore_patterns("site-packages", "__pycache__"),
            symlinks=True,
        )
    return TREE


async def _interleaved(calls: int, small: Path, tree: Path, cache: Path) -> dict[str, list[float]]:
    """Each round runs one command of every kind, so that the machine's load hits all alike."""
    import os

    from journeyman.tools.context import ToolContext
    from journeyman.tools.shell import RunCommandArgs, RunCommandTool

    os.environ["JOURNEYMAN_CACHE_DIR"] = str(cache)

    def journal(_change: object) -> None:
        return None

    kinds = {
        "run_command": ToolContext(workspace=small, session_id="off"),
        "journal_small": ToolContext(workspace=small, session_id="small", journal=journal),
        "journal_tree": ToolContext(workspace=tree, session_id="tree", journal=journal),
    }
    tools = {kind: RunCommandTool() for kind in kinds}
    for kind, ctx in kinds.items():  # the first record hashes the whole tree: not counted
        await tools[kind].execute(RunCommandArgs(command="echo warm"), ctx)
    times: dict[str, list[float]] = {"bare": [], **{kind: [] for kind in kinds}}
    for i in range(calls):
        start = time.perf_counter()
        subprocess.run(f"echo {i}", shell=True, capture_output=True, check=True)
        times["bare"].append(time.perf_counter() - start)
        for kind, ctx in kinds.items():
            start = time.perf_counter()
            result = await tools[kind].execute(RunCommandArgs(command=f"echo {i}"), ctx)
            times[kind].append(time.perf_counter() - start)
            if result.is_error or "not journaled" in result.content:
                raise RuntimeError(f"run_command failed: {result.content}")
    return times


def measure(calls: int, root: Path) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="jm-command-") as tmp:
        small = Path(tmp) / "small"
        small.mkdir()
        (small / "app.py").write_text("print('hello')\n")
        times = asyncio.run(_interleaved(calls, small, root, Path(tmp) / "cache"))
    median = {kind: statistics.median(values) * 1000 for kind, values in times.items()}
    ms: dict[str, Any] = {
        "bare_subprocess_ms": median["bare"],
        "run_command_ms": median["run_command"],
        "run_command_journal_small_ms": median["journal_small"],
        "run_command_journal_tree_ms": median["journal_tree"],
    }
    ms["run_command_over_bare_ms"] = ms["run_command_ms"] - ms["bare_subprocess_ms"]
    ms["journal_small_ms"] = ms["run_command_journal_small_ms"] - ms["run_command_ms"]
    ms["journal_tree_ms"] = ms["run_command_journal_tree_ms"] - ms["run_command_ms"]
    ms["tree_files"] = sum(1 for p in root.rglob("*") if p.is_file())
    ms["calls"] = calls
    return ms


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--calls", type=int, default=200, help="commands per measure")
    parser.add_argument("--root", type=Path, help="tree for the journal measure")
    parser.add_argument("--json", action="store_true", help="print a JSON report instead")
    args = parser.parse_args(argv)
    root = (args.root or standard_library_copy()).resolve()
    report = measure(args.calls, root)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(
        f"median per command over {args.calls} calls; journal tree: {root.name}, "
        f"{report['tree_files']} files"
    )
    print(f"  bare subprocess.run('echo i', shell=True):  {report['bare_subprocess_ms']:7.2f} ms")
    print(
        f"  run_command 'echo i' (journal off):         {report['run_command_ms']:7.2f} ms"
        f"  (+{report['run_command_over_bare_ms']:.2f} ms over bare)"
    )
    print(
        f"  run_command, journal on, 1-file workspace:  "
        f"{report['run_command_journal_small_ms']:7.2f} ms  "
        f"(journal {report['journal_small_ms']:+.2f} ms)"
    )
    print(
        f"  run_command, journal on, stdlib tree:       "
        f"{report['run_command_journal_tree_ms']:7.2f} ms  "
        f"(journal {report['journal_tree_ms']:+.2f} ms)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
