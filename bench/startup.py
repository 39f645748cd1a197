"""Command-line start-up: `journeyman --version` and `journeyman run --help`, wall time.

What runs
    Each command line is started ``--repeat`` times as a fresh process (the console script in
    the interpreter's ``bin/``, as a user types it), output discarded; the median and the
    minimum wall time, and the median CPU time (user + system) of the process, are printed next
    to ``python -c pass`` (the interpreter alone). On a shared machine the minimum and the CPU
    time are the steadier figures. With ``--importtime`` the modules that
    ``import journeyman.cli.app`` spends most time in are listed too (``python -X importtime``,
    cumulative microseconds), with the number of modules it loads.

With ``--before SRC`` (the ``src`` folder of another checkout, e.g. from ``git archive``) the
same command lines run against that tree too (put first on ``PYTHONPATH``), the two trees
alternating for ``--rounds`` rounds of ``--repeat`` starts each, and the medians over the rounds
are printed side by side: drift on a shared machine then hits both alike.

Usage (from the repository root)
    .venv/bin/python bench/startup.py                    # --repeat 11
    .venv/bin/python bench/startup.py --repeat 21 --importtime --json
    .venv/bin/python bench/startup.py --before /path/to/old/src --rounds 5 --repeat 7

Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BIN = Path(sys.executable).parent


def _wall_ms(argv: list[str], repeat: int, env: dict[str, str] | None = None) -> dict[str, float]:
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
    return {
        "median_ms": statistics.median(times),
        "min_ms": min(times),
        "cpu_median_ms": statistics.median(cpu),
    }


def import_profile(top: int) -> dict[str, Any]:
    """The slowest imports under `journeyman.cli.app` (cumulative µs) and the module count."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import journeyman.cli.app"],
        capture_output=True,
        text=True,
        check=True,
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


def command_lines() -> dict[str, list[str]]:
    journeyman = str(BIN / "journeyman")
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        "journeyman --version": [journeyman, "--version"],
        "journeyman run --help": [journeyman, "run", "--help"],
    }


def compare(before_src: Path, rounds: int, repeat: int) -> dict[str, dict[str, dict[str, float]]]:
    """Median over `rounds` of each figure, for `before_src` and this tree, alternating."""
    old_env = {**os.environ, "PYTHONPATH": str(before_src.resolve())}
    new_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    runs: dict[str, list[dict[str, dict[str, float]]]] = {"before": [], "after": []}
    for _ in range(rounds):
        for label, env in (("before", old_env), ("after", new_env)):
            runs[label].append(
                {name: _wall_ms(line, repeat, env) for name, line in command_lines().items()}
            )
    return {
        label: {
            name: {
                figure: statistics.median(run[name][figure] for run in results)
                for figure in ("median_ms", "min_ms", "cpu_median_ms")
            }
            for name in command_lines()
        }
        for label, results in runs.items()
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--repeat", type=int, default=11, help="starts of each command line")
    parser.add_argument("--importtime", action="store_true", help="list the slowest imports")
    parser.add_argument("--json", action="store_true", help="print a JSON report instead")
    parser.add_argument("--before", type=Path, help="src folder of a tree to compare against")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds (--before)")
    args = parser.parse_args(argv)
    if args.before:
        if not (args.before / "journeyman" / "__init__.py").is_file():
            parser.error(f"--before {args.before}: no journeyman package in that folder")
        compared = compare(args.before, args.rounds, args.repeat)
        if args.json:
            print(json.dumps(compared, indent=2))
            return 0
        print(
            f"medians over {args.rounds} alternating rounds of {args.repeat} starts: "
            "median wall / min wall / median CPU (user + system), ms"
        )
        for name in command_lines():
            old, new = compared["before"][name], compared["after"][name]
            print(
                f"  {name:24s} before {old['median_ms']:6.1f} / {old['min_ms']:6.1f} / "
                f"{old['cpu_median_ms']:6.1f}   after {new['median_ms']:6.1f} / "
                f"{new['min_ms']:6.1f} / {new['cpu_median_ms']:6.1f}"
            )
        return 0
    report: dict[str, Any] = {
        name: _wall_ms(line, args.repeat) for name, line in command_lines().items()
    }
    if args.importtime:
        report["importtime"] = import_profile(12)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"wall time of {args.repeat} starts each, and the median CPU time (user + system), ms")
    for label, figures in report.items():
        if label != "importtime":
            median, least = figures["median_ms"], figures["min_ms"]
            cpu = figures["cpu_median_ms"]
            print(f"  {label:24s} median {median:7.1f}   min {least:7.1f}   CPU {cpu:7.1f}")
    if args.importtime:
        profile = report["importtime"]
        print(
            f"import journeyman.cli.app: {profile['modules']} modules "
            f"({profile['journeyman_modules']} of journeyman); slowest, cumulative:"
        )
        for row in profile["slowest"]:
            print(f"  {row['cumulative_us'] / 1000:8.1f} ms  {row['module']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
