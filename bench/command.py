"""Cost of one command: `run_command` next to a bare `subprocess.run`, and the command journal.

What runs
    * command: ``RunCommandTool.execute`` on ``echo i`` (``local`` sandbox, journal off) against
      ``subprocess.run("echo i", shell=True, capture_output=True)`` in the same process,
      alternating, ``--calls`` of each; the median per call of each and the difference.
    * journal: the same tool with the command journal on (a ``ToolContext`` with a journal),
      on a tree that the command leaves alone; the extra time per command over the journal-off
      figure is what the journal costs when a command changes nothing. The tree is a copy of the
      running interpreter's standard library (CPython's ``Lib/`` as installed, without
      ``site-packages/`` and ``__pycache__/``, about 2,450 files) made once under
      ``bench/.work/journal-tree/``, or ``--root PATH``. The first command (which hashes the
      whole tree into the shadow repository) is not counted.

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


async def _tool_calls(root: Path, calls: int, journal: bool, cache: Path) -> list[float]:
    import os

    from journeyman.tools.context import ToolContext
    from journeyman.tools.shell import RunCommandArgs, RunCommandTool

    os.environ["JOURNEYMAN_CACHE_DIR"] = str(cache)
    ctx = ToolContext(
        workspace=root, session_id="bench", journal=(lambda _c: None) if journal else None
    )
    tool = RunCommandTool()
    await tool.execute(RunCommandArgs(command="echo warm"), ctx)  # first record, imports
    times = []
    for i in range(calls):
        start = time.perf_counter()
        result = await tool.execute(RunCommandArgs(command=f"echo {i}"), ctx)
        times.append(time.perf_counter() - start)
        if result.is_error or "not journaled" in result.content:
            raise RuntimeError(f"run_command failed: {result.content}")
    return times


def _bare_calls(calls: int) -> list[float]:
    times = []
    for i in range(calls):
        start = time.perf_counter()
        subprocess.run(f"echo {i}", shell=True, capture_output=True, check=True)
        times.append(time.perf_counter() - start)
    return times


def measure(calls: int, root: Path) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="jm-command-") as tmp:
        small = Path(tmp) / "small"
        small.mkdir()
        (small / "app.py").write_text("print('hello')\n")
        cache = Path(tmp) / "cache"
        bare = _bare_calls(calls)
        plain = asyncio.run(_tool_calls(small, calls, False, cache))
        bare += _bare_calls(calls)
        small_journal = asyncio.run(_tool_calls(small, calls, True, cache))
        tree_journal = asyncio.run(_tool_calls(root, calls, True, cache))
    ms = {
        "bare_subprocess_ms": statistics.median(bare) * 1000,
        "run_command_ms": statistics.median(plain) * 1000,
        "run_command_journal_small_ms": statistics.median(small_journal) * 1000,
        "run_command_journal_tree_ms": statistics.median(tree_journal) * 1000,
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
