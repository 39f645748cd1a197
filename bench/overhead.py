"""Per-step harness overhead: journeyman next to mini-swe-agent, on one scripted trajectory.

Scope
    The harness around the model and the shell: both agents run the same commands with the
    same shell (bash, found on PATH; mini-swe-agent's ``LocalEnvironment`` would use
    ``/bin/sh``, which is dash on Debian and starts about 1 ms faster, so its commands are
    given bash here), with deterministic models that cost nothing, in the project's
    interpreter for journeyman and in ``bench/.venv-mini`` for mini-swe-agent. Not measured:
    a real provider's SDK and wire format, start-up, the CLI (see ``startup.py`` and the
    end-to-end bench for those). Runs of the two harnesses alternate; the load average is
    printed before and after.

What runs
    Both agents play the same script with a deterministic model (no network, no LLM):
    step i (i = 0 .. N-1) runs ``echo i`` through the agent's shell tool, then the agent finishes.

    * journeyman: ``Agent`` + ``ScriptedProvider`` in the project venv; the shell tool is
      ``run_command`` (with the ``local`` sandbox, as mini-swe-agent has none), finishing is the
      ``finish`` tool call. journeyman commits every step to its SQLite session store under
      ``AgentConfig.session_dir`` and snapshots the workspace around each command for undo.
    * mini-swe-agent: ``DefaultAgent`` + ``LocalEnvironment`` + ``DeterministicToolcallModel``
      (its tool-calling test model, with the script held outside its config: see
      ``_script_outside_config``) and the templates of its default ``mini.yaml`` config, in its
      own venv ``bench/.venv-mini`` (created by this script with ``python -m venv`` + pip when it
      is missing). Finishing is its protocol: a last ``echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT``.
      ``output_path`` is set, so it saves its trajectory after every step as journeyman does.

    Both therefore make N + 1 model calls. Each measured run happens in a fresh Python process
    (this file re-executed with ``--driver``, by the right venv's interpreter) after an untimed
    5-step warm-up run in that process, so imports and first-use caches are excluded for both.

How overhead is measured (identically for both)
    The shell tool's command execution is wrapped with a clock: ``LocalEnvironment.execute`` for
    mini-swe-agent, the ``run_command`` tool's ``_run`` (start the process, collect its output,
    wait for it) for journeyman, so the tool's own work around the command (argument checks,
    the undo snapshots, output formatting) counts as journeyman's overhead. The clock records when
    every command execution starts and ends. Then

        harness overhead per step = (wall time of the run - summed time inside the shell tool) / N

    where the wall time spans agent construction plus the whole run (the scripted model's list
    of responses is built before the clock starts). Everything that is not running the command
    counts as overhead: model call plumbing, message and prompt building, validation, policy,
    events, persistence, the loop itself. The time inside each shell tool is printed as well,
    next to a bare ``subprocess.run([bash, "-c", "echo i"])`` measured in the same process and
    the end-to-end wall time per step, so that a slow shell tool cannot hide in the excluded
    part: "shell tool - bare" is what each tool adds around the same process.

    Flatness over a run: the gap between the end of command k-1 and the start of command k is
    pure harness time for one step (it holds one persist and one model call). The table shows the
    mean gap over the first 10% and over the last 10% of steps; an append-only store keeps the two
    close, a store that rewrites the whole trajectory every step grows with the step count.

Usage (from the repository root)
    .venv/bin/python bench/overhead.py                      # --steps 200 1000 --repeat 3
    .venv/bin/python bench/overhead.py --steps 200 1000 --repeat 5 --json

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
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
MINI_VENV = BENCH_DIR / ".venv-mini"
WORK_DIR = BENCH_DIR / ".work"
MINI_SPEC = "mini-swe-agent>=2.4,<2.5"
WARMUP_STEPS = 5
RAW_BASELINE_CALLS = 100
HARNESSES = ("journeyman", "mini")
LABELS = {"journeyman": "journeyman", "mini": "mini-swe-agent"}


# --------------------------------------------------------------------------------------------
# Measurement helpers (used inside the driver processes of both venvs: stdlib only)
# --------------------------------------------------------------------------------------------


class ShellClock:
    """Records the start and end (perf_counter) of every shell tool execution."""

    def __init__(self) -> None:
        self.spans: list[tuple[float, float]] = []

    def reset(self) -> None:
        self.spans = []

    def wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """Wrap a sync or async callable so each call's duration is recorded (also on raise)."""
        import functools
        import inspect

        spans = self

        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                start = time.perf_counter()
                try:
                    return await fn(*args, **kwargs)
                finally:
                    spans.spans.append((start, time.perf_counter()))

            return async_wrapper

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spans.spans.append((start, time.perf_counter()))

        return wrapper


def _bash() -> str:
    """The shell both harnesses run their commands with (journeyman's choice: bash on PATH)."""
    found = shutil.which("bash")
    if found is None:
        raise SystemExit("bash is not on PATH: the benchmark runs every command with bash")
    return found


def _raw_echo_ms(calls: int = RAW_BASELINE_CALLS) -> float:
    """Mean ms of a bare ``subprocess.run([bash, "-c", "echo i"])`` in this process."""
    bash = _bash()
    start = time.perf_counter()
    for i in range(calls):
        subprocess.run([bash, "-c", f"echo {i}"], capture_output=True, text=True, check=True)
    return (time.perf_counter() - start) / calls * 1000


def _memory() -> dict[str, float]:
    """Resident memory of this process now and at its peak, in MiB (Linux /proc, getrusage)."""
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        now = pages * os.sysconf("SC_PAGE_SIZE") / 1024**2
    except (OSError, ValueError, IndexError):
        now = float("nan")
    return {"rss_mib": now, "peak_rss_mib": peak}


def _summarise(steps: int, wall_s: float, clock: ShellClock, **extra: Any) -> dict[str, Any]:
    spans = clock.spans
    shell_s = sum(end - start for start, end in spans)
    # Harness time of step k (1 <= k < steps): end of echo k-1 -> start of echo k.
    gaps = [spans[k][0] - spans[k - 1][1] for k in range(1, min(steps, len(spans)))]
    tenth = max(1, len(gaps) // 10)
    return {
        "steps": steps,
        "wall_s": wall_s,
        "shell_s": shell_s,
        "shell_calls": len(spans),
        "overhead_ms_per_step": (wall_s - shell_s) / steps * 1000,
        "wall_ms_per_step": wall_s / steps * 1000,
        "shell_ms_per_step": shell_s / max(1, len(spans)) * 1000,
        "first10_ms": statistics.fmean(gaps[:tenth]) * 1000 if gaps else float("nan"),
        "last10_ms": statistics.fmean(gaps[-tenth:]) * 1000 if gaps else float("nan"),
        **extra,
    }


def _fresh_dir(path: Path) -> Path:
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


# --------------------------------------------------------------------------------------------
# journeyman driver (project venv)
# --------------------------------------------------------------------------------------------


def _patch_journeyman_shell(clock: ShellClock) -> None:
    """Wrap the ``_run`` of the class behind the ``run_command`` tool with the clock."""
    from journeyman.tools import shell

    patched = []
    for obj in vars(shell).values():
        if (
            isinstance(obj, type)
            and getattr(obj, "name", None) == "run_command"
            and callable(getattr(obj, "_run", None))
        ):
            obj._run = clock.wrap(obj._run)  # type: ignore[method-assign]
            patched.append(obj.__name__)
    if not patched:
        raise RuntimeError("no run_command tool class found in journeyman.tools.shell")


def _run_journeyman(
    steps: int, root: Path, clock: ShellClock, journal_commands: bool
) -> dict[str, Any]:
    from journeyman import Agent, AgentConfig
    from journeyman.core.messages import ToolCall
    from journeyman.providers.base import ModelResponse
    from journeyman.providers.scripted import ScriptedProvider

    workspace = _fresh_dir(root / "workspace")
    session_dir = _fresh_dir(root / "sessions")
    responses = [
        ModelResponse(
            text="",
            tool_calls=(
                ToolCall(id=f"c{i}", name="run_command", arguments={"command": f"echo {i}"}),
            ),
        )
        for i in range(steps)
    ]
    responses.append(
        ModelResponse(
            text="",
            tool_calls=(ToolCall(id="fin", name="finish", arguments={"summary": "done"}),),
        )
    )
    provider = ScriptedProvider(responses)
    tool_results = 0

    def on_event(event: Any) -> None:
        nonlocal tool_results
        if getattr(event, "type", None) == "tool_result":
            tool_results += 1

    clock.reset()
    start = time.perf_counter()
    agent = Agent(
        provider=provider,
        workspace=workspace,
        config=AgentConfig(
            max_iterations=steps + 5,
            max_unproductive_iterations=steps + 5,
            session_dir=session_dir,
            sandbox="local",
            journal_commands=journal_commands,
            verify=False,  # mini-swe-agent runs no check either: the loop's overhead is measured
        ),
        on_event=on_event,
    )
    result = agent.run_sync("echo numbers")
    wall = time.perf_counter() - start
    if not result.success or len(clock.spans) != steps:
        raise RuntimeError(
            f"journeyman run did not follow the script: success={result.success} "
            f"iterations={result.iterations} shell_calls={len(clock.spans)} "
            f"finish_reason={getattr(result, 'finish_reason', None)!r}"
        )
    store = Path(result.store_path) if result.store_path else None
    store_bytes = sum(p.stat().st_size for p in session_dir.rglob("*") if p.is_file())
    return _summarise(
        steps,
        wall,
        clock,
        iterations=result.iterations,
        tool_result_events=tool_results,
        trajectory_bytes=store.stat().st_size if store and store.exists() else None,
        session_dir_bytes=store_bytes,
    )


def _drive_journeyman(steps: int, workdir: Path, *, journal_commands: bool) -> dict[str, Any]:
    import journeyman

    clock = ShellClock()
    _patch_journeyman_shell(clock)
    _run_journeyman(WARMUP_STEPS, workdir / "warmup", clock, journal_commands)
    measured = _run_journeyman(steps, workdir / "run", clock, journal_commands)
    return {
        "harness": "journeyman",
        "version": getattr(journeyman, "__version__", "?"),
        "model": "ScriptedProvider",
        "journal_commands": journal_commands,
        **measured,
        **_memory(),  # after the run, before anything else allocates
        "raw_echo_ms": _raw_echo_ms(),
    }


# --------------------------------------------------------------------------------------------
# mini-swe-agent driver (bench/.venv-mini)
# --------------------------------------------------------------------------------------------


def _script_outside_config(base: type) -> type:
    """mini-swe-agent's test model, with the script kept out of its pydantic config.

    The stock ``DeterministicToolcallModel`` stores all N scripted outputs in ``self.config``;
    mini-swe-agent dumps that config into the template variables on every step and into the
    trajectory file on every save, which makes each step O(N) for a reason a real model (whose
    config is a model name and a few options) would not have. This subclass holds the script in
    a plain attribute and otherwise is the stock class: same message formatting, observation
    rendering, template variables and serialisation. ``--mini-stock-model`` measures the stock
    class instead.
    """
    from minisweagent.models import GLOBAL_MODEL_STATS

    class ScriptedToolcallModel(base):  # type: ignore[misc, valid-type]
        def __init__(self, script: list[dict[str, Any]], **kwargs: Any) -> None:
            super().__init__(outputs=[], **kwargs)
            self.script = script

        def query(self, messages: list[dict[str, str]], **kwargs: Any) -> dict[str, Any]:
            self.current_index += 1
            GLOBAL_MODEL_STATS.add(self.config.cost_per_call)
            output: dict[str, Any] = self.script[self.current_index]
            return output

    return ScriptedToolcallModel


def _run_mini(
    steps: int, root: Path, clock: ShellClock, config: dict[str, Any], stock_model: bool
) -> dict[str, Any]:
    from minisweagent.agents.default import AgentConfig, DefaultAgent
    from minisweagent.environments.local import LocalEnvironment, LocalEnvironmentConfig
    from minisweagent.models.test_models import DeterministicToolcallModel, make_toolcall_output

    workspace = _fresh_dir(root / "workspace")
    output_path = _fresh_dir(root / "output") / "run.traj.json"

    def bash_call(call_id: str, command: str) -> dict[str, Any]:
        tool_call = {
            "id": call_id,
            "type": "function",
            "function": {"name": "bash", "arguments": json.dumps({"command": command})},
        }
        return make_toolcall_output(
            None, [tool_call], [{"command": command, "tool_call_id": call_id}]
        )

    outputs = [bash_call(f"c{i}", f"echo {i}") for i in range(steps)]
    outputs.append(bash_call("fin", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"))
    observation_template = config["model"]["observation_template"]
    if stock_model:
        model = DeterministicToolcallModel(
            outputs=outputs, observation_template=observation_template
        )
    else:
        model = _script_outside_config(DeterministicToolcallModel)(
            outputs, observation_template=observation_template
        )
    agent_kwargs = {k: v for k, v in config["agent"].items() if k in AgentConfig.model_fields}
    # No step or cost limit (the test model bills 1.0 per call); save after every step.
    agent_kwargs.update(step_limit=0, cost_limit=0, output_path=output_path)
    env_kwargs = {
        k: v
        for k, v in config.get("environment", {}).items()
        if k in LocalEnvironmentConfig.model_fields
    }
    env_kwargs["cwd"] = str(workspace)

    clock.reset()
    start = time.perf_counter()
    env = LocalEnvironment(**env_kwargs)
    agent = DefaultAgent(model, env, **agent_kwargs)
    info = agent.run("echo numbers")
    wall = time.perf_counter() - start
    if info.get("exit_status") != "Submitted" or len(clock.spans) != steps + 1:
        raise RuntimeError(
            f"mini-swe-agent run did not follow the script: exit={info.get('exit_status')!r} "
            f"shell_calls={len(clock.spans)}"
        )
    return _summarise(
        steps,
        wall,
        clock,
        iterations=agent.n_calls,
        trajectory_bytes=output_path.stat().st_size,
    )


def _mini_runs_bash() -> None:
    """Make mini-swe-agent's ``LocalEnvironment`` start its commands with bash, as journeyman
    does (its ``subprocess.Popen(command, shell=True)`` runs ``/bin/sh`` otherwise); only the
    module's own reference to ``subprocess`` is replaced."""
    import functools
    import types

    from minisweagent.environments import local

    shim = types.ModuleType("subprocess")
    shim.__dict__.update(vars(subprocess))
    shim.Popen = functools.partial(subprocess.Popen, executable=_bash())  # type: ignore[attr-defined]
    local.subprocess = shim  # type: ignore[attr-defined]


def _drive_mini(steps: int, workdir: Path, stock_model: bool = False) -> dict[str, Any]:
    # Keep mini-swe-agent quiet and its global config dir out of the user's home.
    os.environ["MSWEA_SILENT_STARTUP"] = "1"
    os.environ["MSWEA_GLOBAL_CONFIG_DIR"] = str(workdir / "mini-config")
    import minisweagent
    import yaml
    from minisweagent.environments.local import LocalEnvironment

    config = yaml.safe_load((Path(minisweagent.package_dir) / "config" / "mini.yaml").read_text())
    _mini_runs_bash()
    clock = ShellClock()
    LocalEnvironment.execute = clock.wrap(LocalEnvironment.execute)  # type: ignore[method-assign]
    _run_mini(WARMUP_STEPS, workdir / "warmup", clock, config, stock_model)
    measured = _run_mini(steps, workdir / "run", clock, config, stock_model)
    return {
        "harness": "mini",
        "version": minisweagent.__version__,
        "model": "DeterministicToolcallModel"
        + (" (stock)" if stock_model else " (script kept out of config)"),
        **measured,
        **_memory(),
        "raw_echo_ms": _raw_echo_ms(),
    }


# --------------------------------------------------------------------------------------------
# Orchestrator (project venv)
# --------------------------------------------------------------------------------------------


def ensure_mini_venv(spec: str) -> Path:
    """Create ``bench/.venv-mini`` and install mini-swe-agent into it when needed."""
    python = MINI_VENV / "bin" / "python"
    stamp = MINI_VENV / ".bench-installed"
    if not python.exists():
        print(f"creating {MINI_VENV.relative_to(REPO_ROOT)} ...", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(MINI_VENV)], check=True)
    installed = stamp.read_text().strip() if stamp.exists() else None
    importable = (
        subprocess.run(
            [str(python), "-c", "import minisweagent.agents.default"],
            capture_output=True,
            env={
                **os.environ,
                "MSWEA_SILENT_STARTUP": "1",
                "MSWEA_GLOBAL_CONFIG_DIR": str(WORK_DIR / "mini-config"),
            },
        ).returncode
        == 0
    )
    if installed != spec or not importable:
        print(f"installing {spec!r} into {MINI_VENV.relative_to(REPO_ROOT)} ...", file=sys.stderr)
        subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", spec],
            check=True,
        )
        stamp.write_text(spec + "\n")
    return python


def run_driver(
    harness: str, python: Path, steps: int, index: int, extra: list[str]
) -> dict[str, Any]:
    workdir = _fresh_dir(WORK_DIR / f"{harness}-{steps}-{index}")
    result_file = workdir / "result.json"
    proc = subprocess.run(
        [
            str(python),
            str(Path(__file__).resolve()),
            "--driver",
            harness,
            "--steps",
            str(steps),
            "--workdir",
            str(workdir),
            "--result",
            str(result_file),
            *extra,
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0 or not result_file.exists():
        raise RuntimeError(
            f"{harness} driver failed (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
        )
    data: dict[str, Any] = json.loads(result_file.read_text())
    shutil.rmtree(workdir, ignore_errors=True)
    return data


MEDIAN_KEYS = (
    "overhead_ms_per_step",
    "wall_ms_per_step",
    "shell_ms_per_step",
    "first10_ms",
    "last10_ms",
    "raw_echo_ms",
    "wall_s",
    "trajectory_bytes",
    "rss_mib",
    "peak_rss_mib",
)


def _median(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "version": runs[0]["version"],
        "model": runs[0]["model"],
        "runs": len(runs),
    }
    for key in MEDIAN_KEYS:
        values = [r[key] for r in runs if isinstance(r.get(key), int | float)]
        out[key] = statistics.median(values) if values else None
    return out


def _fmt(value: float | None, spec: str = "8.3f") -> str:
    if isinstance(value, int | float):
        return format(value, spec)
    return format("n/a", ">" + spec.split(".")[0])


def print_table(report: dict[str, Any]) -> None:
    meta = report["meta"]
    rows = report["results"]
    versions = ", ".join(f"{LABELS[h]} {v}" for h, v in meta["versions"].items())
    print(f"Harness overhead per step — {versions}")
    print(
        f"{meta['machine']}; median of {meta['repeat']} run(s), each in a fresh process "
        f"after a {WARMUP_STEPS}-step warm-up"
    )
    print("Script: step i runs `echo i` through the shell tool, then the agent finishes.")
    print("overhead/step = (wall time of the run - time inside the shell tool) / steps")
    print(
        "shell tool = journeyman run_command._run (the command itself), "
        "mini-swe-agent LocalEnvironment.execute; both run bash"
    )
    print(f"load average before: {meta['load_before']}, after: {meta['load_after']}")
    print()
    header = f"{'steps':>6} | {'journeyman ms/step':>18} | {'mini-swe-agent ms/step':>22} | "
    header += f"{'ratio jm/mini':>13}"
    print(header)
    print("-" * len(header))
    for row in rows:
        jm, mini = row.get("journeyman"), row.get("mini")
        jm_v = jm["overhead_ms_per_step"] if jm else None
        mini_v = mini["overhead_ms_per_step"] if mini else None
        ratio = jm_v / mini_v if jm_v is not None and mini_v else None
        print(
            f"{row['steps']:>6} | {_fmt(jm_v, '18.3f')} | {_fmt(mini_v, '22.3f')} | "
            f"{_fmt(ratio, '13.2f')}"
        )
    print()
    print("Harness time of one step (end of one echo -> start of the next), ms,")
    print("mean over the first 10% vs the last 10% of steps; trajectory size at the end:")
    header = f"{'steps':>6} | {'harness':>14} | {'first 10%':>9} | {'last 10%':>9} | "
    header += f"{'last/first':>10} | {'traj bytes':>11}"
    print(header)
    print("-" * len(header))
    for row in rows:
        for harness in HARNESSES:
            data = row.get(harness)
            if not data:
                continue
            first, last = data["first10_ms"], data["last10_ms"]
            growth = last / first if first else None
            size = data["trajectory_bytes"]
            size_text = f"{int(size):>11,}" if isinstance(size, int | float) else f"{'n/a':>11}"
            print(
                f"{row['steps']:>6} | {LABELS[harness]:>14} | {_fmt(first, '9.3f')} | "
                f"{_fmt(last, '9.3f')} | {_fmt(growth, '10.2f')} | {size_text}"
            )
    print()
    print("End to end, shell tool included: wall ms/step, ms inside the shell tool per command")
    print("(excluded above), a bare subprocess.run([bash, '-c', 'echo i']) in the same process,")
    print("the difference, and the resident memory after the run (now / peak, MiB; warm-up")
    print("run included):")
    header = f"{'steps':>6} | {'harness':>14} | {'wall/step':>9} | {'shell tool':>10} | "
    header += f"{'bare bash':>9} | {'tool-bare':>9} | {'RSS MiB':>13}"
    print(header)
    print("-" * len(header))
    for row in rows:
        for harness in HARNESSES:
            data = row.get(harness)
            if data:
                tool, bare = data["shell_ms_per_step"], data["raw_echo_ms"]
                added = tool - bare if tool is not None and bare is not None else None
                print(
                    f"{row['steps']:>6} | {LABELS[harness]:>14} | "
                    f"{_fmt(data['wall_ms_per_step'], '9.3f')} | "
                    f"{_fmt(tool, '10.3f')} | "
                    f"{_fmt(bare, '9.3f')} | {_fmt(added, '9.3f')} | "
                    f"{_fmt(data.get('rss_mib'), '6.1f')} /{_fmt(data.get('peak_rss_mib'), '6.1f')}"
                )


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _machine() -> str:
    cpus = os.cpu_count()
    return (
        f"{platform.system()} {platform.machine()}, {cpus} CPU(s), "
        f"Python {platform.python_version()}"
    )


def orchestrate(args: argparse.Namespace) -> int:
    harnesses = args.only or list(HARNESSES)
    pythons: dict[str, Path] = {}
    if "journeyman" in harnesses:
        pythons["journeyman"] = Path(sys.executable)
    if "mini" in harnesses:
        pythons["mini"] = ensure_mini_venv(args.mini_spec)
    WORK_DIR.mkdir(parents=True, exist_ok=True)

    load_before = _load()
    results = []
    raw_runs: dict[str, dict[str, list[dict[str, Any]]]] = {}
    versions: dict[str, str] = {}
    for steps in args.steps:
        runs: dict[str, list[dict[str, Any]]] = {h: [] for h in harnesses}
        for index in range(args.repeat):
            # Alternate the order so that slow drift of the machine hits both sides alike.
            order = harnesses if index % 2 == 0 else list(reversed(harnesses))
            for harness in order:
                stock = harness == "mini" and args.mini_stock_model
                extra = ["--mini-stock-model"] if stock else []
                if harness == "journeyman" and args.no_command_journal:
                    extra.append("--no-command-journal")
                data = run_driver(harness, pythons[harness], steps, index, extra)
                runs[harness].append(data)
                versions[harness] = data["version"]
                if not args.json:
                    print(
                        f"  [{steps} steps, run {index + 1}/{args.repeat}] {LABELS[harness]}: "
                        f"{data['overhead_ms_per_step']:.3f} ms/step",
                        file=sys.stderr,
                    )
        row: dict[str, Any] = {"steps": steps}
        for harness in harnesses:
            row[harness] = _median(runs[harness])
        jm, mini = row.get("journeyman"), row.get("mini")
        if jm and mini and mini["overhead_ms_per_step"]:
            row["ratio_jm_over_mini"] = jm["overhead_ms_per_step"] / mini["overhead_ms_per_step"]
        results.append(row)
        raw_runs[str(steps)] = runs

    report = {
        "meta": {
            "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": _machine(),
            "repeat": args.repeat,
            "warmup_steps": WARMUP_STEPS,
            "versions": versions,
            "method": "overhead/step = (wall - time inside shell tool) / steps",
            "shell": _bash(),
            "load_before": load_before,
            "load_after": _load(),
        },
        "results": results,
    }
    if args.json:
        report["runs"] = raw_runs
        print(json.dumps(report, indent=2))
    else:
        print_table(report)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--steps",
        type=int,
        nargs="+",
        default=[200, 1000],
        help="step counts to measure (default: 200 1000)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="runs per step count and harness; the median is shown (default: 3)",
    )
    parser.add_argument("--json", action="store_true", help="print a JSON report instead")
    parser.add_argument("--only", nargs="+", choices=HARNESSES, help="measure only these harnesses")
    parser.add_argument(
        "--mini-spec",
        default=MINI_SPEC,
        help=f"pip requirement for mini-swe-agent (default: {MINI_SPEC!r})",
    )
    parser.add_argument(
        "--mini-stock-model",
        action="store_true",
        help="drive mini-swe-agent with its stock DeterministicToolcallModel, "
        "which keeps the whole script in its config (see _script_outside_config)",
    )
    parser.add_argument(
        "--no-command-journal",
        action="store_true",
        help="run journeyman with AgentConfig.journal_commands=False (no workspace snapshots "
        "around commands, so undo covers the file tools only)",
    )
    # Internal: run one measurement in this interpreter and write its JSON to --result.
    parser.add_argument("--driver", choices=HARNESSES, help=argparse.SUPPRESS)
    parser.add_argument("--workdir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.driver:
        if args.driver == "journeyman":
            data = _drive_journeyman(
                args.steps[0], args.workdir, journal_commands=not args.no_command_journal
            )
        else:
            data = _drive_mini(args.steps[0], args.workdir, args.mini_stock_model)
        args.result.write_text(json.dumps(data))
        return 0
    if args.repeat < 1 or any(s < 1 for s in args.steps):
        parser.error("--steps and --repeat must be positive")
    return orchestrate(args)


if __name__ == "__main__":
    sys.exit(main())
