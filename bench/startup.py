"""Command-line start-up: `--version`, `--help`, `run --help`, and `run` to its first model call.

What runs
    Each command line is started ``--repeat`` times as a fresh process (the console script in
    the interpreter's ``bin/``, as a user types it, with this tree's ``src`` first on
    ``PYTHONPATH``), output discarded; the median and the minimum wall time, and the median CPU
    time (user + system) of the process, are printed next to ``python -c pass`` (the
    interpreter alone). On a shared machine the minimum and the CPU time are the steadier
    figures. Each tree's modules are compiled to bytecode first (``compileall``), as an
    installed package's are, and ``PYTHONDONTWRITEBYTECODE`` is not passed on. With
    ``--importtime`` the modules that ``import journeyman.cli.app`` spends most time in are
    listed too (``python -X importtime``, cumulative microseconds), with the number of modules
    it loads.

``run → first call``: the real ``journeyman run --yes "say hi" --model gpt-4o-mini
--no-verify`` in a one-commit git repository, its OpenAI-compatible provider pointed at a fake
OpenAI server (``tests/fakes``) running in a thread of this process; the fake answers "Done." and
the run ends. When the first ``/v1/chat/completions`` request has been read, the server reads the
client's CPU time from ``/proc/<pid>/stat``: user + system of the client process (all its
threads, 10 ms ticks) up to that moment, which is the figure shown; the CPU of the child
processes it has already waited for (git) is shown after a ``+``. Wall time is from the spawn to
the request's arrival. Not counted: the server's side and whatever the run does after the call.
``run, one answer, start to exit`` is that whole run, spawn to exit: wall time, and the CPU of
the process with every child it waited for (``RUSAGE_CHILDREN``), the figure the "a one-answer
run under 600 ms of CPU" target is about.
The cache folder (``JOURNEYMAN_CACHE_DIR``) and config folder are temporary folders kept across
the starts of one tree, after one untimed start (the second and later runs of a user); ``run →
first call, empty cache`` gives each start a new, empty cache folder (a user's first run).

With ``--before SRC`` (the ``src`` folder of another checkout, e.g. a ``git worktree``) the
same command lines run against that tree too (put first on ``PYTHONPATH``), the two trees
alternating for ``--rounds`` rounds of ``--repeat`` starts each, and the medians over the rounds
are printed side by side: drift on a shared machine then hits both alike. The load average is
printed before and after.

Usage (from the repository root)
    .venv/bin/python bench/startup.py                    # --repeat 11
    .venv/bin/python bench/startup.py --repeat 21 --importtime --json
    .venv/bin/python bench/startup.py --before /path/to/old/src --rounds 5 --repeat 7
    .venv/bin/python bench/startup.py --only "run → first call" --repeat 5

Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fakes.openai_server import FakeOpenAIServer  # noqa: E402
from tests.fakes.script import RecordedRequest, reply  # noqa: E402

BIN = Path(sys.executable).parent
FIGURES = ("median_ms", "min_ms", "cpu_median_ms", "children_cpu_median_ms")
FIRST_CALL = "run → first call"
FIRST_CALL_EMPTY = "run → first call, empty cache"
ONE_ANSWER = "run, one answer, start to exit"
TICK_MS = 1000 / os.sysconf("SC_CLK_TCK")


def _figures(times: list[float], cpu: list[float], children: list[float]) -> dict[str, float]:
    return {
        "median_ms": statistics.median(times),
        "min_ms": min(times),
        "cpu_median_ms": statistics.median(cpu),
        "children_cpu_median_ms": statistics.median(children),
    }


def _wall_ms(argv: list[str], repeat: int, env: dict[str, str]) -> dict[str, float]:
    times, cpu = [], []
    for _ in range(repeat):
        used = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(
            argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, env=env
        )
        times.append((time.perf_counter() - start) * 1000)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append((after.ru_utime - used.ru_utime + after.ru_stime - used.ru_stime) * 1000)
    return _figures(times, cpu, [0.0] * repeat)


def _process_cpu_ms(pid: int) -> tuple[float, float]:
    """CPU time (user + system) of process `pid` so far, and of its children it has waited for."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()  # fields from the third (state) on
    utime, stime, cutime, cstime = (int(value) for value in fields[11:15])
    return (utime + stime) * TICK_MS, (cutime + cstime) * TICK_MS


@dataclass
class _Arrival:
    wall_ms: float
    cpu_ms: float
    children_cpu_ms: float


class _FirstCallServer(FakeOpenAIServer):
    """The fake OpenAI server, reading the client's CPU time when its first call arrives."""

    def __init__(self) -> None:
        super().__init__(default=reply("Done."))
        self.client: tuple[int, float] | None = None
        """The pid of the client being measured and when it was spawned (perf_counter)."""
        self.arrival: _Arrival | None = None
        self.arrived = threading.Event()

    def _record(self, request: RecordedRequest) -> None:
        if self.client is not None and self.arrival is None:
            pid, spawned = self.client
            wall = (time.perf_counter() - spawned) * 1000
            cpu, children = _process_cpu_ms(pid)
            self.arrival = _Arrival(wall, cpu, children)
            self.arrived.set()
        super()._record(request)


@contextlib.contextmanager
def _first_call_setup() -> Iterator[tuple[_FirstCallServer, Path]]:
    """A running fake server and a scratch folder holding a one-commit git repository."""
    with tempfile.TemporaryDirectory(prefix="jm-startup-") as scratch, _FirstCallServer() as server:
        root = Path(scratch)
        workspace = root / "ws"
        workspace.mkdir()
        (workspace / "calc.py").write_text("def add(a, b):\n    return a + b\n")
        git = ["git", "-C", str(workspace), "-c", "user.name=b", "-c", "user.email=b@b"]
        subprocess.run([*git, "init", "-q"], check=True)
        subprocess.run([*git, "add", "."], check=True)
        subprocess.run([*git, "commit", "-q", "-m", "start"], check=True)
        yield server, root


def _first_call_env(server: FakeOpenAIServer, folders: Path, src: Path) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("OPENAI_", "ANTHROPIC_", "JOURNEYMAN_"))
        and key != "PYTHONDONTWRITEBYTECODE"
    }
    env.update(
        PYTHONPATH=str(src),
        HOME=str(folders / "home"),
        OPENAI_API_KEY="sk-bench",
        OPENAI_BASE_URL=server.base_url,
        JOURNEYMAN_CACHE_DIR=str(folders / "cache"),
        JOURNEYMAN_CONFIG_DIR=str(folders / "config"),
    )
    (folders / "home").mkdir(parents=True, exist_ok=True)
    return env


def _first_call_once(server: _FirstCallServer, root: Path, env: dict[str, str]) -> _Arrival:
    argv = [str(BIN / "journeyman"), "run", "--yes", "say hi", "--model", "gpt-4o-mini"]
    argv += ["-w", str(root / "ws"), "--session-dir", str(root / "sessions"), "--no-verify"]
    server.arrival = None
    server.arrived.clear()
    spawned = time.perf_counter()
    process = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, text=True
    )
    server.client = (process.pid, spawned)
    _, stderr = process.communicate(timeout=120)
    server.client = None
    if process.returncode != 0 or server.arrival is None:
        raise SystemExit(f"the run failed (exit {process.returncode}): {stderr.strip()[-2000:]}")
    return server.arrival


def first_call_ms(src: Path, repeat: int, empty_cache: bool) -> dict[str, float]:
    """`run` to its first model call, `repeat` starts against `src` (see the module's doc)."""
    with _first_call_setup() as (server, root):
        arrivals = []
        for index in range(repeat + (0 if empty_cache else 1)):
            folders = root / (f"start-{index}" if empty_cache else "kept")
            arrival = _first_call_once(server, root, _first_call_env(server, folders, src))
            if empty_cache or index > 0:
                arrivals.append(arrival)
    return _figures(
        [a.wall_ms for a in arrivals],
        [a.cpu_ms for a in arrivals],
        [a.children_cpu_ms for a in arrivals],
    )


def one_answer_ms(src: Path, repeat: int) -> dict[str, float]:
    """The same run from start to exit: the process and every child it waited for (git, the
    sandbox probe), after one untimed run with the same cache and config folders."""
    with _first_call_setup() as (server, root):
        env = _first_call_env(server, root / "kept", src)
        argv = [str(BIN / "journeyman"), "run", "--yes", "say hi", "--model", "gpt-4o-mini"]
        argv += ["-w", str(root / "ws"), "--session-dir", str(root / "sessions"), "--no-verify"]
        _wall_ms(argv, 1, env)
        return _wall_ms(argv, repeat, env)


def import_profile(top: int) -> dict[str, Any]:
    """The slowest imports under `journeyman.cli.app` (cumulative µs) and the module count."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import journeyman.cli.app"],
        capture_output=True,
        text=True,
        check=True,
        env=_env(ROOT / "src"),
    )
    rows = []
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, name = line.removeprefix("import time:").split("|")
        if cumulative.strip().isdigit():
            rows.append((int(cumulative), name.strip()))
    slowest = sorted(rows, reverse=True)[:top]
    return {
        "modules": len(rows),
        "journeyman_modules": sum(1 for _, name in rows if name.startswith("journeyman")),
        "slowest": [{"module": name, "cumulative_us": us} for us, name in slowest],
    }


def _env(src: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "PYTHONPATH": str(src.resolve())}


def compile_tree(src: Path) -> None:
    """Write the bytecode of every module of `src`, as installing a package does: without it
    each start compiles journeyman's modules from source (hundreds of ms)."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(src)], check=True)


Measure = Callable[[Path, int], dict[str, float]]


def measures() -> dict[str, Measure]:
    """Each figure's name and how to take it: (src folder, starts) -> figures."""
    journeyman = str(BIN / "journeyman")
    lines = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "journeyman --version": [journeyman, "--version"],
        "journeyman --help": [journeyman, "--help"],
        "journeyman run --help": [journeyman, "run", "--help"],
    }
    table: dict[str, Measure] = {
        name: functools.partial(_command_line_ms, argv) for name, argv in lines.items()
    }
    table[FIRST_CALL] = functools.partial(first_call_ms, empty_cache=False)
    table[FIRST_CALL_EMPTY] = functools.partial(first_call_ms, empty_cache=True)
    table[ONE_ANSWER] = one_answer_ms
    return table


def _command_line_ms(argv: list[str], src: Path, repeat: int) -> dict[str, float]:
    return _wall_ms(argv, repeat, _env(src))


def compare(
    before_src: Path, rounds: int, repeat: int, chosen: dict[str, Measure]
) -> dict[str, dict[str, dict[str, float]]]:
    """Median over `rounds` of each figure, for `before_src` and this tree, alternating."""
    trees = {"before": before_src, "after": ROOT / "src"}
    runs: dict[str, list[dict[str, dict[str, float]]]] = {"before": [], "after": []}
    for _ in range(rounds):
        for label, src in trees.items():
            runs[label].append({name: take(src, repeat) for name, take in chosen.items()})
    return {
        label: {
            name: {
                figure: statistics.median(run[name][figure] for run in results)
                for figure in FIGURES
            }
            for name in chosen
        }
        for label, results in runs.items()
    }


def _cell(figures: dict[str, float]) -> str:
    text = (
        f"{figures['median_ms']:6.1f} / {figures['min_ms']:6.1f} / {figures['cpu_median_ms']:6.1f}"
    )
    children = figures["children_cpu_median_ms"]
    return text + (f" +{children:4.0f}" if children else "      ")


def _load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def _print_compared(compared: dict[str, dict[str, dict[str, float]]], args: Any) -> None:
    print(
        f"medians over {args.rounds} alternating rounds of {args.repeat} starts: "
        "median wall / min wall / median CPU (user + system) [+ CPU of waited-for children], ms"
    )
    for name in compared["after"]:
        old, new = compared["before"][name], compared["after"][name]
        print(f"  {name:30s} before {_cell(old)}   after {_cell(new)}")


def _print_report(report: dict[str, Any], repeat: int) -> None:
    print(f"wall time of {repeat} starts each, and the median CPU time (user + system), ms")
    for label, figures in report.items():
        if label != "importtime":
            print(f"  {label:30s} median / min wall / CPU {_cell(figures)}")
    if "importtime" in report:
        profile = report["importtime"]
        print(
            f"import journeyman.cli.app: {profile['modules']} modules "
            f"({profile['journeyman_modules']} of journeyman); slowest, cumulative:"
        )
        for row in profile["slowest"]:
            print(f"  {row['cumulative_us'] / 1000:8.1f} ms  {row['module']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--repeat", type=int, default=11, help="starts of each command line")
    parser.add_argument("--importtime", action="store_true", help="list the slowest imports")
    parser.add_argument("--json", action="store_true", help="print a JSON report instead")
    parser.add_argument("--before", type=Path, help="src folder of a tree to compare against")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds (--before)")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="only these figures, by name")
    args = parser.parse_args(argv)
    chosen = measures()
    if args.only:
        unknown = set(args.only) - chosen.keys()
        if unknown:
            parser.error(f"--only: no figure named {sorted(unknown)}; there are {list(chosen)}")
        chosen = {name: take for name, take in chosen.items() if name in args.only}
    if args.before and not (args.before / "journeyman" / "__init__.py").is_file():
        parser.error(f"--before {args.before}: no journeyman package in that folder")
    for src in (ROOT / "src", *([args.before] if args.before else [])):
        compile_tree(src)
    if not args.json:
        print(f"load average before: {_load()}")
    if args.before:
        compared = compare(args.before, args.rounds, args.repeat, chosen)
        if args.json:
            print(json.dumps(compared, indent=2))
        else:
            _print_compared(compared, args)
    else:
        report: dict[str, Any] = {
            name: take(ROOT / "src", args.repeat) for name, take in chosen.items()
        }
        if args.importtime:
            report["importtime"] = import_profile(12)
        if args.json:
            print(json.dumps(report, indent=2))
        else:
            _print_report(report, args.repeat)
    if not args.json:
        print(f"load average after: {_load()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
