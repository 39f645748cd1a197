"""Cost of one command: `run_command` next to a bare `subprocess.run` of the same shell.

Scope
    Both sides start the same program: the shell `run_command` uses (``bash`` when it is on
    PATH, as ``journeyman.tools.sandbox.base.shell()`` finds it; the header prints which), with
    ``-c "echo i"``, output captured, in the same process. The bare side is
    ``subprocess.run([shell, "-c", "echo i"], capture_output=True)`` and nothing else; the
    tool side is a model call as the loop runs it: ``ToolRegistry.execute`` (argument
    validation, the per-call timeout, the agent's own secrets scrubbed from the output) on a
    ``ToolContext`` built for the call (the loop builds one per turn), with the ``local``
    sandbox: resource limits, its own process group (killed whole on timeout), capped output,
    an allow-listed environment and the git metadata guard. So the difference is what
    journeyman adds around the same process. ``/bin/sh`` (dash on Debian) is timed too, for
    scale only: it starts faster than bash, and the tool does not use it.

What runs (each round runs one call of every kind, so a loaded machine weighs on all alike)
    * bare sh, bare shell: the two ``subprocess.run`` calls above; and bare shell in a new
      session (``start_new_session=True``, as the tool starts every command so that it has
      no controlling terminal and its process group can be killed whole), for scale: with
      Linux's autogroup scheduling a new session gets a scheduling group of its own, which
      costs nothing on a quiet machine and milliseconds of waiting on a loaded one.
    * run_command: the tool with the command journal off, in a one-file workspace.
    * run_command, tree: the same in a git repository of about 2,450 files (a copy of the
      running interpreter's standard library, CPython's ``Lib/`` without ``site-packages/`` and
      ``__pycache__/``, made once under ``bench/.work/journal-tree/`` and ``git init``-ed; or
      ``--root PATH``): the git guard looks at every folder of it.
    * journal, 1 file / tree: the same two with the command journal on (undo snapshots); the
      extra time over journal off is what the journal costs per command that changes nothing.
      The first call of each kind (which hashes the whole tree into the shadow repository) is
      not counted.

    Medians per call of the wall time and of this process's CPU time (user + system, children
    not included): on a loaded machine the wall time of both sides swings with the wait for a
    core, while the CPU time is what the agent itself spends; the load average is printed
    before and after.

Usage (from the repository root)
    .venv/bin/python bench/command.py                  # --calls 200
    .venv/bin/python bench/command.py --calls 500 --json

Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sysconfig
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
TREE = BENCH_DIR / ".work" / "journal-tree"
KINDS = (
    "bare_sh",
    "bare",
    "bare_session",
    "run_command",
    "run_command_tree",
    "journal_small",
    "journal_tree",
)


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
    if not (TREE / ".git").exists():
        subprocess.run(["git", "init", "-q", str(TREE)], check=True)
    return TREE


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


async def _interleaved(
    calls: int, shell: str, small: Path, tree: Path, cache: Path
) -> dict[str, list[float]]:
    """Each round runs one command of every kind, so that the machine's load hits all alike."""
    from journeyman.core.messages import ToolCall
    from journeyman.tools.context import ToolContext
    from journeyman.tools.registry import ToolRegistry
    from journeyman.tools.shell import RunCommandTool

    os.environ["JOURNEYMAN_CACHE_DIR"] = str(cache)

    def journal(_change: object) -> None:
        return None

    tools = {
        "run_command": (small, None),
        "run_command_tree": (tree, None),
        "journal_small": (small, journal),
        "journal_tree": (tree, journal),
    }
    registries = {kind: ToolRegistry([RunCommandTool()]) for kind in tools}

    def tool_call(kind: str, command: str) -> Callable[[], Awaitable[Any]]:
        workspace, journal_to = tools[kind]

        async def call() -> None:
            ctx = ToolContext(workspace=workspace, session_id=kind, journal=journal_to)
            call = ToolCall(id="c", name="run_command", arguments={"command": command})
            result = await registries[kind].execute(call, ctx, 60.0)
            if result.is_error or "not journaled" in result.content:
                raise RuntimeError(f"run_command failed: {result.content}")

        return call

    for kind in tools:  # the first record hashes the whole tree: not counted
        await tool_call(kind, "echo warm")()
    times: dict[str, list[float]] = {kind: [] for kind in KINDS}
    cpu: dict[str, list[float]] = {kind: [] for kind in KINDS}

    def note(kind: str, start: float, start_cpu: float) -> None:
        times[kind].append(time.perf_counter() - start)
        cpu[kind].append(time.process_time() - start_cpu)

    for i in range(calls):
        start, start_cpu = time.perf_counter(), time.process_time()
        subprocess.run(f"echo {i}", shell=True, capture_output=True, check=True)
        note("bare_sh", start, start_cpu)
        start, start_cpu = time.perf_counter(), time.process_time()
        subprocess.run([shell, "-c", f"echo {i}"], capture_output=True, check=True)
        note("bare", start, start_cpu)
        start, start_cpu = time.perf_counter(), time.process_time()
        subprocess.run(
            [shell, "-c", f"echo {i}"], capture_output=True, check=True, start_new_session=True
        )
        note("bare_session", start, start_cpu)
        for kind in tools:
            call = tool_call(kind, f"echo {i}")
            start, start_cpu = time.perf_counter(), time.process_time()
            await call()
            note(kind, start, start_cpu)
    return times | {f"{kind}_cpu": values for kind, values in cpu.items()}


def measure(calls: int, root: Path) -> dict[str, Any]:
    from journeyman.tools.sandbox.base import shell as tool_shell

    shell = tool_shell()
    load_before = load()
    with tempfile.TemporaryDirectory(prefix="jm-command-") as tmp:
        small = Path(tmp) / "small"
        small.mkdir()
        (small / "app.py").write_text("print('hello')\n")
        times = asyncio.run(_interleaved(calls, shell, small, root, Path(tmp) / "cache"))
    median = {kind: statistics.median(values) * 1000 for kind, values in times.items()}
    ms: dict[str, Any] = {f"{kind}_ms": median[kind] for kind in KINDS}
    ms |= {f"{kind}_cpu_ms": median[f"{kind}_cpu"] for kind in KINDS}
    ms["run_command_over_bare_cpu_ms"] = median["run_command_cpu"] - median["bare_cpu"]
    ms["run_command_tree_over_bare_cpu_ms"] = median["run_command_tree_cpu"] - median["bare_cpu"]
    ms["run_command_over_bare_ms"] = median["run_command"] - median["bare"]
    ms["run_command_tree_over_bare_ms"] = median["run_command_tree"] - median["bare"]
    ms["journal_small_extra_ms"] = median["journal_small"] - median["run_command"]
    ms["journal_tree_extra_ms"] = median["journal_tree"] - median["run_command_tree"]
    ms["tree_files"] = sum(1 for p in root.rglob("*") if p.is_file() and ".git" not in p.parts)
    ms["tree_folders"] = sum(1 for p in root.rglob("*") if p.is_dir() and ".git" not in p.parts)
    ms |= {"calls": calls, "shell": shell, "load_before": load_before, "load_after": load()}
    return ms


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--calls", type=int, default=200, help="rounds (one call of each kind)")
    parser.add_argument("--root", type=Path, help="tree for the 'tree' kinds")
    parser.add_argument("--json", action="store_true", help="print a JSON report instead")
    args = parser.parse_args(argv)
    root = (args.root or standard_library_copy()).resolve()
    report = measure(args.calls, root)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    r = report
    print(
        f"median per command over {r['calls']} interleaved rounds; the tool's shell: {r['shell']}; "
        f"tree: {root.name}, {r['tree_files']} files in {r['tree_folders']} folders"
    )
    print(f"load average before: {r['load_before']}, after: {r['load_after']}")
    rows = [
        ("bare_sh", "bare subprocess.run, /bin/sh (scale only)", None),
        ("bare", f"bare subprocess.run, {r['shell']}", None),
        ("bare_session", "  the same in a new session (scale only)", "bare"),
        ("run_command", "run_command, 1-file workspace", "bare"),
        ("run_command_tree", "run_command, tree", "bare"),
        ("journal_small", "run_command + journal, 1-file workspace", "run_command"),
        ("journal_tree", "run_command + journal, tree", "run_command_tree"),
    ]
    print(f"{'':44} {'wall ms':>8} {'(+ over)':>9} {'CPU ms':>8} {'(+ over)':>9}  over")
    for kind, label, over in rows:
        wall, cpu = r[f"{kind}_ms"], r[f"{kind}_cpu_ms"]
        line = f"  {label:<42} {wall:8.2f} {'':>9} {cpu:8.2f} {'':>9}"
        if over is not None:
            line = (
                f"  {label:<42} {wall:8.2f} {wall - r[f'{over}_ms']:+9.2f} "
                f"{cpu:8.2f} {cpu - r[f'{over}_cpu_ms']:+9.2f}  {over}"
            )
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
