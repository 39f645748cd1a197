"""Workspace index on a CPython-sized tree: bootstrap, refresh, search next to ripgrep, repo map.

Scope
    The index's own operations, in this process, on a warm page cache, next to ``rg`` started
    as a subprocess with the same search semantics. ripgrep needs no index, so the search
    table counts the index's upkeep too: "refresh+top-50" is the ``refresh()`` that the
    phased mode runs before each use followed by the ranked top 50, and the bootstrap is
    printed as the number of rg searches it costs (what a session must search to win it back).
    Calls alternate (top 50, all, refresh+top 50, rg, then again) so the load of a shared
    machine weighs on each alike; the load average is printed before and after.

What runs
    The tree is a copy of the running interpreter's standard library directory
    (``sysconfig.get_paths()["stdlib"]``, CPython's ``Lib/`` as installed) made once under
    ``bench/.work/index-tree/`` without ``site-packages/`` (third-party packages, not CPython)
    and without ``__pycache__/``. A copy, because the refresh figures touch files.
    ``--root PATH`` benchmarks another tree in place instead (it is never modified unless
    ``--touch`` is above 0, and then only mtimes move, each put back afterwards).

    Every figure is the median of ``--repeat`` runs (min and max shown too) after one untimed
    warm-up, so the OS page cache is warm for the indexer and for ripgrep alike.

    * bootstrap: ``WorkspaceIndexer(root).bootstrap()`` (walk, .gitignore, read, tokenise).
    * refresh, no change: ``refresh()`` right after a bootstrap: as the index runs it (an
      inotify watch armed before the last walk says nothing moved, so nothing is walked) and
      with the watch taken away (walk and stat every file, as where inotify is missing).
    * refresh after touching N files: mtimes of N indexed files moved forward, then
      ``refresh()`` (full walk) and ``refresh(paths)`` (only those files); both re-read N files.
    * search: ``search(q, 50)`` (the ranked top 50 a caller such as the context pack uses) and
      ``search(q, None)`` (every matching line) against ``rg`` run as a subprocess from the
      tree's root with the same semantics: fixed string, case-insensitive, hidden files,
      .gitignore files of the tree only, the index's exclude globs, the same size cap, output
      captured; and ``refresh()`` + ``search(q, 50)`` with nothing changed (refresh+top-50).
      ratio = indexer time / rg time. "same" says whether ``search(q, None)``
      returned exactly rg's (path, line) pairs. The indexer narrows the files by its token
      sets, then counts matches in its in-memory text, or with ``rg --count-matches`` over
      just those files once they hold 4 MiB or more (``IndexConfig.ripgrep_min_bytes``);
      the "engine" column says which.
    * repo map: ``repo_map(goal, errors, max_tokens=B)`` on a fresh index (symbols parsed on
      demand, "cold") and again (symbols cached, "warm"); and the symbols of every Python file
      (a full tree-sitter parse of the tree) for scale.

Usage (from the repository root)
    .venv/bin/python bench/index.py                      # --repeat 5 --touch 50
    .venv/bin/python bench/index.py --root ~/src/cpython/Lib --json

Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import sysconfig
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
TREE_DIR = BENCH_DIR / ".work" / "index-tree"
sys.path.insert(0, str(REPO_ROOT / "src"))

from journeyman.context.index import IndexConfig, WorkspaceIndexer  # noqa: E402
from journeyman.tools.search import find_ripgrep  # noqa: E402

QUERIES = (
    "HTTPConnection",
    "getaddrinfo",
    "parse_args",
    "TimeoutError",
    "socket",
    "def main",
    "xyzzy",
    "import",
    "self",
)
"""Rare identifiers first, then common words; a phrase; very frequent words last."""

GOAL = "HTTPConnection ignores the timeout when the proxy tunnel is set up; fix http.client"
ERROR = (
    "Traceback (most recent call last):\n"
    '  File "/usr/lib/python3/http/client.py", line 941, in _tunnel\n'
    "    response = self.response_class(self.sock, method=self._method)\n"
    "TimeoutError: timed out\n"
)


def copy_stdlib(source: Path, target: Path) -> Path:
    """A copy of the stdlib without site-packages and __pycache__, made once per interpreter."""
    stamp = target / ".source"
    label = f"{source} {sys.version}"
    if stamp.is_file() and stamp.read_text() == label:
        return target
    if target.exists():
        shutil.rmtree(target)
    print(f"copying {source} to {target.relative_to(REPO_ROOT)} ...", file=sys.stderr)
    shutil.copytree(
        source,
        target,
        symlinks=True,
        ignore=shutil.ignore_patterns("site-packages", "__pycache__"),
    )
    stamp.write_text(label)
    return target


def timed(fn: Callable[[], Any], repeat: int) -> tuple[list[float], Any]:
    """One untimed warm-up call, then `repeat` timed calls; (seconds, last result)."""
    result = fn()
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - started)
    return times, result


def interleaved(
    kinds: dict[str, Callable[[], Any]], repeat: int
) -> tuple[dict[str, list[float]], dict[str, Any]]:
    """One untimed warm-up call of each, then `repeat` rounds of one timed call of each."""
    last = {kind: fn() for kind, fn in kinds.items()}
    times: dict[str, list[float]] = {kind: [] for kind in kinds}
    for _ in range(repeat):
        for kind, fn in kinds.items():
            started = time.perf_counter()
            last[kind] = fn()
            times[kind].append(time.perf_counter() - started)
    return times, last


def summary(times: list[float]) -> dict[str, float]:
    return {
        "median_ms": statistics.median(times) * 1000,
        "min_ms": min(times) * 1000,
        "max_ms": max(times) * 1000,
    }


def rg_command(rg: str, config: IndexConfig, query: str) -> list[str]:
    command = [
        rg, "--no-config", "--line-number", "--no-heading", "--with-filename", "--color=never",
        "--no-messages", "--hidden", "--ignore-case", "--fixed-strings", "--no-require-git",
        "--no-ignore-parent", "--no-ignore-global", "--no-ignore-exclude", "--no-ignore-dot",
        f"--max-filesize={config.max_file_bytes}", "--glob=!.git",
    ]  # fmt: skip
    command += [f"--glob=!{pattern.rstrip('/')}" for pattern in config.exclude]
    return [*command, "--regexp", query, "."]


def run_rg(command: list[str], root: Path) -> bytes:
    return subprocess.run(command, cwd=root, capture_output=True, check=False).stdout


def rg_pairs(output: bytes) -> set[tuple[str, int]]:
    pairs = set()
    for line in output.decode("utf-8", errors="replace").splitlines():
        path, number, _ = line.split(":", 2)
        pairs.add((path.removeprefix("./"), int(number)))
    return pairs


def measure(root: Path, repeat: int, touch: int) -> dict[str, Any]:
    config = IndexConfig()
    report: dict[str, Any] = {"root": str(root)}

    times, stats = timed(lambda: WorkspaceIndexer(root, config=config).bootstrap(), repeat)
    report["bootstrap"] = summary(times) | {
        "files": stats.files,
        "skipped_binary": stats.skipped_binary,
        "skipped_large": stats.skipped_large,
    }
    indexer = WorkspaceIndexer(root, config=config)
    indexer.bootstrap()
    text_bytes = sum(entry.size for entry in indexer.files.values())
    report["bootstrap"]["text_mb"] = text_bytes / 1e6
    times, _ = timed(indexer.refresh, repeat)
    report["refresh_unchanged"] = summary(times)
    walking = WorkspaceIndexer(root, config=config)
    walking.bootstrap()
    walking._watch = None  # as where inotify is missing: every refresh walks
    times, _ = timed(walking.refresh, repeat)
    report["refresh_unchanged_walk"] = summary(times)
    del walking

    chosen = sorted(indexer.files)[:: max(1, len(indexer.files) // max(1, touch))][:touch]
    original = {rel: (root / rel).stat() for rel in chosen}

    def touch_all(offset_s: int) -> None:
        for rel, st in original.items():
            os.utime(root / rel, ns=(st.st_atime_ns, st.st_mtime_ns + offset_s * 1_000_000_000))

    try:
        full, partial, changed = [], [], 0
        for round_number in range(repeat + 1):
            touch_all(2 * round_number + 1)
            started = time.perf_counter()
            changed = len(indexer.refresh().changed)
            if round_number:
                full.append(time.perf_counter() - started)
            touch_all(2 * round_number + 2)
            started = time.perf_counter()
            indexer.refresh(chosen)
            if round_number:
                partial.append(time.perf_counter() - started)
    finally:
        for rel, st in original.items():
            os.utime(root / rel, ns=(st.st_atime_ns, st.st_mtime_ns))
        indexer.refresh(chosen)
    report["refresh_touched"] = summary(full) | {"files": touch, "changed": changed}
    report["refresh_paths"] = summary(partial) | {"files": touch}

    rg = find_ripgrep()
    report["rg"] = rg
    searches = []
    for query in QUERIES:
        command = rg_command(rg, config, query) if rg is not None else None
        kinds: dict[str, Callable[[], Any]] = {
            "top": lambda q=query: indexer.search(q, 50),
            "all": lambda q=query: indexer.search(q, None),
            "refresh_top": lambda q=query: (indexer.refresh(), indexer.search(q, 50)),
        }
        if command is not None:
            kinds["rg"] = lambda c=command: run_rg(c, root)
        runs, last = interleaved(kinds, repeat)
        top, top_hits = runs["top"], last["top"]
        every, all_hits = runs["all"], last["all"]
        candidates = indexer.candidates(query)
        size = sum(indexer.files[rel].size for rel in candidates)
        uses_rg = rg is not None and query.isascii() and size >= config.ripgrep_min_bytes
        row: dict[str, Any] = {
            "query": query,
            "candidates": len(candidates),
            "engine": "rg" if uses_rg else "python",
            "top50_ms": statistics.median(top) * 1000,
            "refresh_top50_ms": statistics.median(runs["refresh_top"]) * 1000,
            "all_ms": statistics.median(every) * 1000,
            "hits": len(all_hits),
            "top_file": top_hits[0].path if top_hits else "",
        }
        if command is not None:
            output = last["rg"]
            row["rg_ms"] = statistics.median(runs["rg"]) * 1000
            row["rg_hits"] = output.count(b"\n")
            row["same"] = rg_pairs(output) == {(h.path, h.line) for h in all_hits}
        searches.append(row)
    report["search"] = searches

    maps = []
    for budget in (1024, 4096):
        cold_times = []
        result = None
        for _ in range(repeat):
            fresh = WorkspaceIndexer(root, config=config)
            fresh.bootstrap()
            started = time.perf_counter()
            result = fresh.repo_map(GOAL, [ERROR], max_tokens=budget)
            cold_times.append(time.perf_counter() - started)
        warm_times, result = timed(
            lambda b=budget: indexer.repo_map(GOAL, [ERROR], max_tokens=b), repeat
        )
        assert result is not None
        maps.append(
            {
                "budget": budget,
                "cold": summary(cold_times),
                "warm": summary(warm_times),
                "tokens": result.tokens,
                "files": len(result.files),
                "first_files": list(result.files[:3]),
            }
        )
    report["repo_map"] = maps
    fresh = WorkspaceIndexer(root, config=config)
    python_files = [rel for rel, e in fresh.files.items() if e.grammar == "python"]
    started = time.perf_counter()
    symbols = sum(len(fresh.symbols(rel)) for rel in python_files)
    report["all_symbols"] = {
        "files": len(python_files),
        "symbols": symbols,
        "seconds": time.perf_counter() - started,
    }
    return report


def print_table(report: dict[str, Any]) -> None:
    print(f"Workspace index on {report['root']}")
    boot = report["bootstrap"]
    print(
        f"{boot['files']} files indexed ({boot['text_mb']:.1f} MB of text); passed over: "
        f"{boot['skipped_binary']} binary, {boot['skipped_large']} over the size cap"
    )
    print(f"median of {report['repeat']} runs after a warm-up; {report['machine']}")
    print(f"load average before: {report['load_before']}, after: {report['load_after']}")
    print()
    header = f"{'operation':<40} {'median ms':>10} {'min ms':>9} {'max ms':>9}"
    print(header)
    print("-" * len(header))
    rows = [
        ("bootstrap", boot),
        ("refresh, nothing changed", report["refresh_unchanged"]),
        ("refresh, nothing changed, walking", report["refresh_unchanged_walk"]),
        (
            f"refresh after touching {report['refresh_touched']['files']} files",
            report["refresh_touched"],
        ),
        (
            f"refresh(paths) of those {report['refresh_paths']['files']} files",
            report["refresh_paths"],
        ),
    ]
    for label, row in rows:
        print(f"{label:<40} {row['median_ms']:>10.1f} {row['min_ms']:>9.1f} {row['max_ms']:>9.1f}")
    print()
    print("Search (fixed string, case-insensitive), median ms; ratio = indexer / rg;")
    print("files = candidate files left by the token sets, engine = who counted matches;")
    print("r+top-50 = refresh() then the top 50, as the phased mode searches:")
    header = (
        f"{'query':<16} {'hits':>7} {'files':>6} {'engine':>6} {'top-50 ms':>10} {'all ms':>8} "
        f"{'rg ms':>7} {'top-50/rg':>10} {'r+top-50/rg':>11} {'all/rg':>7} {'same':>5}  top file"
    )
    print(header)
    print("-" * len(header))
    for row in report["search"]:
        rg_ms = row.get("rg_ms")
        ratio_top = f"{row['top50_ms'] / rg_ms:.2f}" if rg_ms else "-"
        ratio_refresh = f"{row['refresh_top50_ms'] / rg_ms:.2f}" if rg_ms else "-"
        ratio_all = f"{row['all_ms'] / rg_ms:.2f}" if rg_ms else "-"
        rg_text = f"{rg_ms:.1f}" if rg_ms else "-"
        same = {True: "yes", False: "NO", None: "-"}[row.get("same")]
        print(
            f"{row['query']:<16} {row['hits']:>7} {row['candidates']:>6} {row['engine']:>6} "
            f"{row['top50_ms']:>10.1f} {row['all_ms']:>8.1f} "
            f"{rg_text:>7} {ratio_top:>10} {ratio_refresh:>11} {ratio_all:>7} {same:>5}  "
            f"{row['top_file']}"
        )
    rg_times = [row["rg_ms"] for row in report["search"] if row.get("rg_ms")]
    if rg_times:
        per_search = statistics.median(rg_times)
        print(
            f"The bootstrap costs {boot['median_ms'] / per_search:.0f} rg searches "
            f"(median rg search {per_search:.1f} ms)."
        )
    print()
    print("Repo map for a goal and a traceback (cold: fresh index, symbols parsed on demand):")
    header = f"{'budget':>7} {'cold ms':>8} {'warm ms':>8} {'tokens':>7} {'files':>6}  first files"
    print(header)
    print("-" * len(header))
    for row in report["repo_map"]:
        print(
            f"{row['budget']:>7} {row['cold']['median_ms']:>8.1f} {row['warm']['median_ms']:>8.1f} "
            f"{row['tokens']:>7} {row['files']:>6}  {', '.join(row['first_files'])}"
        )
    full = report["all_symbols"]
    print(
        f"Symbols of every Python file (full tree-sitter parse, once): {full['files']} files, "
        f"{full['symbols']} symbols, {full['seconds']:.2f} s"
    )


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def machine() -> str:
    cores = os.cpu_count() or 0
    return (
        f"{platform.system()} {platform.machine()}, {cores} CPU cores, "
        f"Python {platform.python_version()}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--root", type=Path, help="benchmark this tree instead of the stdlib")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per figure")
    parser.add_argument("--touch", type=int, default=50, help="files touched for the refresh")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    if args.root is not None:
        root = args.root.resolve()
    else:
        root = copy_stdlib(Path(sysconfig.get_paths()["stdlib"]), TREE_DIR)
    load_before = load()
    report = measure(root, args.repeat, args.touch)
    report |= {
        "load_before": load_before,
        "load_after": load(),
        "repeat": args.repeat,
        "machine": machine(),
        "date": datetime.now(UTC).date().isoformat(),
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_table(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
