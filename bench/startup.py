"""Command-line start-up: `journeyman --version` and `journeyman run --help`, wall time.

What runs
    Each command line is started ``--repeat`` times as a fresh process (the console script in
    the interpreter's ``bin/``, as a user types it), output discarded; the median and the
    minimum wall time, and the median CPU time (user + system) of the process, are printed next
    to ``python -c pass`` (the interpreter alone). On a shared machine the minimum and the CPU
    time are the steadier figures. With ``--importtime`` the modules that
    ``import journeyman.cli.app`` spends most time in are listed too (``python -X importtime``,
    cumulative microseconds), with the number of modules it loads.

Usage (from the repository root)
    .venv/bin/python bench/startup.py                    # --repeat 11
    .venv/bin/python bench/startup.py --repeat 21 --importtime --json

Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BIN = Path(sys.executable).parent


def _wall_ms(argv: list[str], repeat: int) -> dict[str, float]:
    times, cpu = [], []
    for _ in range(repeat):
        used = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--repeat", type=int, default=11, help="starts of each command line")
    parser.add_argument("--importtime", action="store_true", help="list the slowest imports")
    parser.add_argument("--json", action="store_true", help="print a JSON report instead")
    args = parser.parse_args(argv)
    journeyman = str(BIN / "journeyman")
    report: dict[str, Any] = {
        "python -c pass": _wall_ms([sys.executable, "-c", "pass"], args.repeat),
        "journeyman --version": _wall_ms([journeyman, "--version"], args.repeat),
        "journeyman run --help": _wall_ms([journeyman, "run", "--help"], args.repeat),
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
