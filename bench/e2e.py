"""CPU per step of the command a user runs: `journeyman run` next to mini-swe-agent's `mini`.

Scope
    The whole agent process as a user starts it, and nothing else: `python -m journeyman run`
    (the real CLI, the OpenAI-compatible provider, the official `openai` SDK, the tools, the
    SQLite session store) and `python -m minisweagent` (mini-swe-agent's `mini` command with its
    default `mini.yaml`, its LiteLLM model, which sends through the `openai` SDK, and its local
    environment). Each talks over HTTP to a scripted Chat Completions server of this file that
    runs in its own process, so the server's CPU is never counted. The shell commands the agents
    start are counted (they are children the agent waits for); both run `echo i`, through bash
    for journeyman, through sh for mini-swe-agent. Not measured: a real model's latency, tokens
    (bench/tokens.py), the sandbox (journeyman runs with ``--sandbox local``, as mini-swe-agent
    has none), start-up alone (bench/startup.py), one provider call alone (bench/provider_path.py).

What runs
    For N steps the server answers request k (k < N) with one tool call running ``echo k``
    (journeyman's ``run_command``, mini-swe-agent's ``bash``) and request N with the way each
    agent ends a run (journeyman's ``finish`` call; ``echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT``
    for mini-swe-agent). Replies are plain JSON chat completions (neither agent streams when its
    output is not a terminal) whose usage says prompt tokens = request bytes / 4. journeyman runs
    with ``--yes --no-verify --sandbox local``, its sessions in a fresh folder; mini-swe-agent with
    ``--yolo --exit-immediately`` and its trajectory saved after every step, as it does by default.

How CPU is measured
    * Whole run: user + system CPU of the agent process and the commands it waited for, from
      ``wait4`` when it exits (start-up included). The marginal CPU per step between two step
      counts is the difference of the medians divided by the difference of the step counts:
      start-up and the last turn cancel out.
    * Per step: when request k arrives the server reads the agent's CPU so far from
      ``/proc/<pid>/stat`` (10 ms ticks; the agent waits for the reply then, so the reading is
      exact to a tick). Step k costs the CPU between request k - 1 and request k: reading
      the reply, running its command, storing the step, building the next request. The table
      shows the mean over the ``--window`` steps around each mark (within steps 2 .. N; step 1
      holds first-use work), from the runs of the largest step count, and "step last / step
      first", which a flat harness keeps near 1.

    The two agents take turns run by run (A/B interleaved, the order alternating between
    repeats), each run in fresh processes and folders; figures are medians over ``--repeat``
    runs. The load average is printed before and after: on a busy machine compare only figures
    measured in the same invocation.

Usage (from the repository root)
    .venv/bin/python bench/e2e.py                                # --steps 10 50 200 300 --repeat 3
    .venv/bin/python bench/e2e.py --steps 10 50 --repeat 5 --only journeyman --json

mini-swe-agent comes from ``bench/.venv-mini`` (created by bench/overhead.py, or here, with
mini-swe-agent 2.4.x). Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
WORK_DIR = BENCH_DIR / ".work" / "e2e"
HARNESSES = ("journeyman", "baseline", "mini")
LABELS = {"journeyman": "journeyman", "baseline": "jm --baseline-src", "mini": "mini-swe-agent"}
TASK = "Print the numbers with echo, one command per step, then finish."
MODEL = "gpt-bench"
PRICE_PER_MTOK = "1,4"
"""USD per million input and output tokens, given to both agents (the model is unknown to
their price lists)."""
CLOCK_TICK = os.sysconf("SC_CLK_TCK")


# --------------------------------------------------------------------------------------------
# The scripted Chat Completions server (its own process; standard library only)
# --------------------------------------------------------------------------------------------


def _tool_call(harness: str, step: int, steps: int) -> tuple[str, dict[str, str]]:
    """The tool call of reply `step` out of `steps` + 1 for `harness`."""
    if harness != "mini":
        if step < steps:
            return "run_command", {"command": f"echo {step}"}
        return "finish", {"summary": "Printed the numbers."}
    command = f"echo {step}" if step < steps else "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
    return "bash", {"command": command}


def _client_cpu(pid: int) -> tuple[float, float]:
    """CPU seconds of process `pid` so far: its own, and its waited-for children's."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
    return (utime + stime) / CLOCK_TICK, (cutime + cstime) / CLOCK_TICK


class ScriptedChat:
    """State of one scripted run: the replies to play and what the server saw."""

    def __init__(self, harness: str, steps: int) -> None:
        self.harness = harness
        self.steps = steps
        self.served = 0
        self.client_pid: int | None = None
        self.pid_known = threading.Event()
        self.samples: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def completion(self, body: bytes) -> dict[str, Any]:
        """Record request `served` and answer it with the next scripted tool call."""
        self.pid_known.wait(timeout=10)
        own, children = _client_cpu(self.client_pid) if self.client_pid else (0.0, 0.0)
        request = json.loads(body)
        with self.lock:
            step = self.served
            self.served += 1
        self.samples.append(
            {"step": step, "cpu_self": own, "cpu_children": children, "bytes": len(body),
             "messages": len(request.get("messages", ()))}
        )  # fmt: skip
        message: dict[str, Any] = {"role": "assistant", "content": None, "refusal": None}
        finish_reason = "tool_calls"
        if step <= self.steps:
            name, arguments = _tool_call(self.harness, step, self.steps)
            message["tool_calls"] = [
                {"id": f"call_{step}", "type": "function",
                 "function": {"name": name, "arguments": json.dumps(arguments)}}
            ]  # fmt: skip
        else:  # beyond the script: a plain answer
            message["content"], finish_reason = "Done.", "stop"
        prompt_tokens = len(body) // 4
        return {
            "id": f"chatcmpl-bench-{step}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.get("model", MODEL),
            "choices": [
                {"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}
            ],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 20,
                      "total_tokens": prompt_tokens + 20},
        }  # fmt: skip


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    chat: ScriptedChat

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.endswith("/chat/completions"):
            self._send(200, self.chat.completion(body))
        elif self.path == "/_bench/client":
            self.chat.client_pid = int(json.loads(body)["pid"])
            self.chat.pid_known.set()
            self._send(200, {"ok": True})
        else:
            self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

    def do_GET(self) -> None:
        if self.path == "/_bench/samples":
            self._send(200, self.chat.samples)
        else:
            self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})


def serve(harness: str, steps: int) -> int:
    """Serve the script until stdin closes; print the base URL first."""
    handler = type("Handler", (_Handler,), {"chat": ScriptedChat(harness, steps)})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(f"http://127.0.0.1:{server.server_address[1]}/v1", flush=True)
    sys.stdin.read()
    server.shutdown()
    return 0


# --------------------------------------------------------------------------------------------
# One run: the server, the agent's command, its CPU
# --------------------------------------------------------------------------------------------


@dataclass
class RunResult:
    """What one agent run cost and what the server saw of it."""

    harness: str
    steps: int
    cpu_s: float
    """User + system CPU of the agent and its waited-for commands (wait4)."""
    cpu_self_s: float
    """The agent process alone (its /proc ticks at exit)."""
    wall_s: float
    requests: int
    samples: list[dict[str, Any]]


def ensure_mini_python() -> Path:
    """bench/.venv-mini's interpreter, creating the venv through bench/overhead.py if needed."""
    sys.path.insert(0, str(BENCH_DIR))
    from overhead import MINI_SPEC, ensure_mini_venv

    return ensure_mini_venv(MINI_SPEC)


def _clean_env(folder: Path) -> dict[str, str]:
    """This environment without provider, agent or Python path settings."""
    prefixes = ("OPENAI_", "ANTHROPIC_", "JOURNEYMAN_", "MSWEA_", "LITELLM_", "PYTHON")
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    env["HOME"] = str(folder / "home")
    return env


def agent_command(
    harness: str, url: str, steps: int, folder: Path, mini_python: Path | None, src: Path
) -> tuple[list[str], dict[str, str]]:
    """The command line and environment a user would use for `harness` (journeyman from the
    sources in `src`)."""
    env = _clean_env(folder)
    workspace = folder / "workspace"
    if harness != "mini":
        env.update(
            OPENAI_API_KEY="sk-bench",
            PYTHONPATH=str(src),
            JOURNEYMAN_CONFIG_DIR=str(folder / "config"),
            JOURNEYMAN_CACHE_DIR=str(folder / "cache"),
            JOURNEYMAN_LOCAL_PORTS="none",
        )
        command = [
            sys.executable, "-m", "journeyman", "run", TASK, "--yes", "--no-verify",
            "--provider", "openai", "--model", MODEL, "--base-url", url,
            "--sandbox", "local", "--no-lsp", "--no-mcp", "--max-iterations", str(steps + 5),
            "--session-dir", str(folder / "sessions"), "--workspace", str(workspace),
            "--price-per-mtok", PRICE_PER_MTOK,
        ]  # fmt: skip
        return command, env
    assert mini_python is not None
    env.update(
        MSWEA_SILENT_STARTUP="1",
        MSWEA_CONFIGURED="true",
        MSWEA_GLOBAL_CONFIG_DIR=str(folder / "config"),
        LITELLM_LOCAL_MODEL_COST_MAP="True",  # no download of LiteLLM's price list
        LITELLM_MODEL_REGISTRY_PATH=str(_mini_price_file(folder)),
    )
    command = [
        str(mini_python), "-m", "minisweagent", "--task", TASK, "--model", f"openai/{MODEL}",
        "--yolo", "--exit-immediately", "--output", str(folder / "run.traj.json"),
        "-c", "mini.yaml", "-c", f"model.model_kwargs.api_base={url}",
        "-c", "model.model_kwargs.api_key=sk-bench", "-c", "agent.step_limit=0",
        "-c", "agent.cost_limit=0", "-c", f"environment.cwd={workspace}",
    ]  # fmt: skip
    return command, env


def _mini_price_file(folder: Path) -> Path:
    """A LiteLLM model registry giving the bench model journeyman's price (mini's cost tracking
    fails on a model it does not know)."""
    price_in, price_out = (float(x) / 1e6 for x in PRICE_PER_MTOK.split(","))
    entry = {
        "litellm_provider": "openai", "mode": "chat", "max_input_tokens": 128_000,
        "max_output_tokens": 16_384, "input_cost_per_token": price_in,
        "output_cost_per_token": price_out,
    }  # fmt: skip
    path = folder / "config" / "model_registry.json"
    path.write_text(json.dumps({f"openai/{MODEL}": entry, MODEL: entry}))
    return path


def _post(url: str, payload: dict[str, Any]) -> None:
    request = urllib.request.Request(
        url, json.dumps(payload).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        response.read()


def _wait_with_cpu(pid: int) -> tuple[int, float, float]:
    """Wait for `pid`; its exit status, CPU with its commands (wait4) and its own CPU."""
    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped: /proc still there
    own, _children = _client_cpu(pid)
    _pid, status, usage = os.wait4(pid, 0)
    return os.waitstatus_to_exitcode(status), usage.ru_utime + usage.ru_stime, own


def run_once(
    harness: str, steps: int, index: int, mini_python: Path | None, src: Path, keep: bool = False
) -> RunResult:
    """Run `harness` for `steps` steps against a fresh server; its CPU and the server's log."""
    folder = WORK_DIR / f"{harness}-{steps}-{index}"
    shutil.rmtree(folder, ignore_errors=True)
    for sub in ("workspace", "home", "config", "cache"):
        (folder / sub).mkdir(parents=True)
    (folder / "workspace" / "README.md").write_text("Numbers.\n")
    server = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "--serve", harness, "--steps", str(steps)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        command, env = agent_command(harness, url, steps, folder, mini_python, src)
        with open(folder / "stdout.txt", "wb") as out, open(folder / "stderr.txt", "wb") as err:
            started = time.perf_counter()
            agent = subprocess.Popen(
                command, cwd=folder / "workspace", env=env, stdin=subprocess.DEVNULL,
                stdout=out, stderr=err,
            )  # fmt: skip
            _post(url.removesuffix("/v1") + "/_bench/client", {"pid": agent.pid})
            code, cpu, own = _wait_with_cpu(agent.pid)
            agent.returncode = code
            wall = time.perf_counter() - started
        with urllib.request.urlopen(url.removesuffix("/v1") + "/_bench/samples") as response:
            samples: list[dict[str, Any]] = json.loads(response.read())
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(timeout=30)
    if code != 0 or len(samples) != steps + 1:
        tail = (folder / "stderr.txt").read_text(errors="replace")[-2000:]
        raise RuntimeError(
            f"{harness} did not follow the script of {steps} steps: exit {code}, "
            f"{len(samples)} requests (expected {steps + 1}); see {folder}\n{tail}"
        )
    if not keep:
        shutil.rmtree(folder, ignore_errors=True)
    return RunResult(harness, steps, cpu, own, wall, len(samples), samples)


# --------------------------------------------------------------------------------------------
# Figures
# --------------------------------------------------------------------------------------------


def step_costs(samples: list[dict[str, Any]], key: str = "total") -> list[float]:
    """CPU ms of each step k (request k -> request k + 1), index k."""

    def cpu(sample: dict[str, Any]) -> float:
        if key == "self":
            return float(sample["cpu_self"])
        return float(sample["cpu_self"]) + float(sample["cpu_children"])

    return [(cpu(b) - cpu(a)) * 1000 for a, b in itertools.pairwise(samples)]


def window_steps(mark: int, window: int, last: int) -> range:
    """The `window` steps around step `mark` (1-based), kept within steps 2 .. `last`.

    Step 1 is left out: it holds first-use work (imports, caches) that no later step repeats.
    """
    low = max(2, min(mark - window // 2, last - window + 1))
    return range(low, min(last, low + window - 1) + 1)


def per_step_at_marks(
    runs: list[RunResult], marks: list[int], window: int, key: str = "total"
) -> dict[int, float]:
    """Mean CPU ms per step over the `window` steps around each mark, median over runs."""
    out: dict[int, float] = {}
    for mark in marks:
        means = []
        for run in runs:
            costs = step_costs(run.samples, key)  # costs[k - 1] is step k (its k-th command)
            chunk = [costs[k - 1] for k in window_steps(mark, window, run.steps)]
            if chunk:
                means.append(statistics.fmean(chunk))
        if means:
            out[mark] = statistics.median(means)
    return out


def summarise(
    runs: dict[str, dict[int, list[RunResult]]], steps: list[int], window: int
) -> dict[str, Any]:
    """Medians per step count, marginal CPU per step, the per-step profile and the ratios."""
    summary: dict[str, Any] = {"harnesses": {}}
    for harness, by_steps in runs.items():
        totals = {n: statistics.median(r.cpu_s for r in by_steps[n]) for n in steps}
        own = {n: statistics.median(r.cpu_self_s for r in by_steps[n]) for n in steps}
        walls = {n: statistics.median(r.wall_s for r in by_steps[n]) for n in steps}
        marginal = {
            f"{a}-{b}": (totals[b] - totals[a]) / (b - a) * 1000
            for a, b in itertools.pairwise(steps)
        }
        longest = by_steps[steps[-1]]
        summary["harnesses"][harness] = {
            "cpu_s": totals,
            "cpu_self_s": own,
            "wall_s": walls,
            "marginal_ms_per_step": marginal,
            "per_step_ms": per_step_at_marks(longest, steps, window),
            "per_step_self_ms": per_step_at_marks(longest, steps, window, "self"),
            "request_kib": {
                n: statistics.median(r.samples[n]["bytes"] for r in longest) / 1024 for n in steps
            },
        }
    return summary


def _fmt(value: float | None, width: int, digits: int = 1) -> str:
    if value is None:
        return f"{'-':>{width}}"
    return f"{value:>{width}.{digits}f}"


def _ratio(values: dict[str, float | None]) -> float | None:
    jm, mini = values.get("journeyman"), values.get("mini")
    return jm / mini if jm is not None and mini else None


def print_report(summary: dict[str, Any], meta: dict[str, Any]) -> None:
    data = summary["harnesses"]
    names = [h for h in HARNESSES if h in data]
    steps: list[int] = meta["steps"]
    print(f"Agent CPU through the real command and the OpenAI wire format ({meta['date']})")
    print(f"{meta['machine']}; median of {meta['repeat']} run(s) per step count, interleaved")
    print(f"load average before {meta['load_before']}, after {meta['load_after']}")
    print("\nWhole run, CPU s (agent + its commands; agent alone in brackets), wall s:")
    print(f"{'steps':>6} " + " ".join(f"{LABELS[h]:>26}" for h in names))
    for n in steps:
        cells = [
            f"{data[h]['cpu_s'][n]:>7.2f} ({data[h]['cpu_self_s'][n]:>6.2f}) "
            f"{data[h]['wall_s'][n]:>7.2f} s"
            for h in names
        ]
        print(f"{n:>6} " + " ".join(f"{c:>26}" for c in cells))
    print("\nMarginal CPU per step between step counts, ms (difference of whole-run medians):")
    print(f"{'steps':>9} " + " ".join(f"{LABELS[h]:>15}" for h in names) + f" {'jm / mini':>10}")
    for span in data[names[0]]["marginal_ms_per_step"]:
        values = {h: data[h]["marginal_ms_per_step"][span] for h in names}
        print(
            f"{span:>9} " + " ".join(_fmt(values[h], 15) for h in names)
            + f" {_fmt(_ratio(values), 9, 2)}x"
        )  # fmt: skip
    window = meta["window"]
    print(
        f"\nCPU per step at step k, ms (mean of the {window} steps around k, runs of "
        f"{steps[-1]} steps; agent alone in brackets; request size at k):"
    )
    print(f"{'step':>6} " + " ".join(f"{LABELS[h]:>26}" for h in names) + f" {'jm / mini':>10}")
    for n in steps:
        values = {h: data[h]["per_step_ms"].get(n) for h in names}
        cells = [
            f"{_fmt(values[h], 6)} ({_fmt(data[h]['per_step_self_ms'].get(n), 5)}) "
            f"{data[h]['request_kib'][n]:>6.1f} KiB"
            for h in names
        ]
        print(f"{n:>6} " + " ".join(f"{c:>26}" for c in cells) + f" {_fmt(_ratio(values), 9, 2)}x")
    first, last = steps[0], steps[-1]
    for h in names:
        profile = data[h]["per_step_ms"]
        if profile.get(first) and last in profile:
            print(
                f"{LABELS[h]}: step {last} / step {first} = {profile[last] / profile[first]:.2f}x"
            )


# --------------------------------------------------------------------------------------------
# Orchestration
# --------------------------------------------------------------------------------------------


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def measure(args: argparse.Namespace) -> dict[str, Any]:
    harnesses = [h for h in ("journeyman", "mini") if h in (args.only or HARNESSES)]
    sources = {"journeyman": REPO_ROOT / "src", "baseline": args.baseline_src, "mini": None}
    if args.baseline_src is not None:
        harnesses.insert(1, "baseline")
    mini_python = ensure_mini_python() if "mini" in harnesses else None
    runs: dict[str, dict[int, list[RunResult]]] = {
        h: {n: [] for n in args.steps} for h in harnesses
    }
    load_before = _load()
    for index in range(args.repeat):
        for steps in args.steps:
            order = harnesses if index % 2 == 0 else list(reversed(harnesses))
            for harness in order:
                result = run_once(harness, steps, index, mini_python, sources[harness], args.keep)
                runs[harness][steps].append(result)
                print(
                    f"  [run {index + 1}/{args.repeat}, {steps} steps] {LABELS[harness]}: "
                    f"{result.cpu_s:.2f} s CPU, {result.wall_s:.2f} s wall (load {_load()})",
                    file=sys.stderr,
                )
    meta = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{os.uname().sysname} {os.uname().machine}, {os.cpu_count()} CPU(s), "
        f"Python {sys.version.split()[0]}",
        "steps": args.steps,
        "repeat": args.repeat,
        "window": args.window,
        "load_before": load_before,
        "load_after": _load(),
    }
    return {"meta": meta, "summary": summarise(runs, args.steps, args.window), "runs": runs}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n", 1)[0],
        epilog="The scope and the method are in this file's docstring.",
    )
    parser.add_argument(
        "--steps", type=int, nargs="+", default=[10, 50, 200, 300],
        help="step counts to run, in increasing order (default: 10 50 200 300)",
    )  # fmt: skip
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs per step count and agent (default: 3)"
    )
    parser.add_argument(
        "--window", type=int, default=20,
        help="steps averaged for the CPU per step at each mark (default: 20)",
    )  # fmt: skip
    parser.add_argument(
        "--only", nargs="+", choices=("journeyman", "mini"), help="run only these agents"
    )
    parser.add_argument(
        "--baseline-src", type=Path, metavar="SRC",
        help="also run journeyman from these sources (another checkout's src/, e.g. main's), "
        "interleaved with the others: a before/after comparison on the same machine state",
    )  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print a JSON report instead")
    parser.add_argument(
        "--keep", action="store_true",
        help="keep each run's folder (workspace, sessions, output) under bench/.work/e2e",
    )  # fmt: skip
    parser.add_argument("--serve", choices=HARNESSES, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        return serve(args.serve, args.steps[0])
    if args.repeat < 1 or args.window < 1 or any(n < 1 for n in args.steps):
        parser.error("--steps, --repeat and --window must be positive")
    if args.baseline_src is not None and not (args.baseline_src / "journeyman").is_dir():
        parser.error(f"--baseline-src {args.baseline_src}: no journeyman package there")
    if args.steps != sorted(set(args.steps)):
        parser.error("--steps must be distinct and in increasing order")
    report = measure(args)
    if args.json:
        report["runs"] = {
            h: {n: [vars(r) for r in rs] for n, rs in by.items()}
            for h, by in report["runs"].items()
        }
        print(json.dumps(report, indent=2))
    else:
        print_report(report["summary"], report["meta"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
