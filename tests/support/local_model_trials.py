"""A small local model on the demo task: one seeded run, measured from its stream-json events.

`demo_trial()` copies examples/demo, runs `journeyman run` on its task with the given provider
arguments (a llama.cpp server's `--base-url`, or `--provider local`) and reports what the issue
on local models asks to count: tool calls that were valid (a known tool, arguments its schema
accepts), whether the file holding the bug (calc/stats.py) was edited, whether the demo's tests
pass afterwards, and the seconds each model step took.

Used by tests/reliability/test_local_tool_modes.py and bench/local_models.py.
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from journeyman.loop.verdict import CHECK_CALL_PREFIX
from tests.support.cli import clean_env, jm

DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo"
BUGGY_FILE = "calc/stats.py"
"""The file the demo's failing test points at (the fix belongs there, not in the test)."""
UNUSABLE_CALL = frozenset({"unknown", "invalid"})
"""Tool-result error kinds that mean the call itself was not valid."""


@dataclass
class DemoOutcome:
    seed: int
    mode: str
    exit_code: int = -1
    finish_reason: str = ""
    tool_mode: str = ""
    """The tool-mode line of the run (its notes on stderr), when the provider reports one."""
    steps: int = 0
    valid_calls: int = 0
    unusable_calls: int = 0
    edited_right_file: bool = False
    tests_pass: bool = False
    step_seconds: list[float] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def median_step_seconds(self) -> float | None:
        return statistics.median(self.step_seconds) if self.step_seconds else None


def demo_trial(
    root: Path,
    provider_args: Sequence[str],
    *,
    seed: int,
    mode: str = "react",
    max_iterations: int = 3,
    env: dict[str, str] | None = None,
    timeout: float = 900,
) -> DemoOutcome:
    """One run on a fresh copy of the demo; `env` is added to a clean environment."""
    outcome = DemoOutcome(seed, mode)
    workspace = root / "ws"
    shutil.copytree(DEMO, workspace)
    original = (workspace / BUGGY_FILE).read_bytes()
    task = (workspace / "TASK.md").read_text().strip()
    run = jm(
        *("run", task, "-w", str(workspace), "--session-dir", str(root / "sessions")),
        *provider_args,
        *("--mode", mode, "--max-iterations", str(max_iterations), "--yes", "--no-lsp"),
        *("--sandbox", "local", "-o", "stream-json"),
        env=clean_env(**(env or {})),
        timeout=timeout,
    )
    outcome.exit_code = run.returncode
    outcome.tool_mode = " ".join(
        line for line in run.stderr.splitlines() if "tool" in line and "note" in line
    )
    for line in run.stdout.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        kind = event.get("type")
        if kind == "model_response":
            outcome.steps += 1
            if isinstance(event.get("latency_s"), int | float):
                outcome.step_seconds.append(float(event["latency_s"]))
        elif kind == "tool_result" and not str(event["result"]["call_id"]).startswith(
            CHECK_CALL_PREFIX
        ):
            error_kind = (event["result"].get("metadata") or {}).get("error")
            if error_kind in UNUSABLE_CALL:
                outcome.unusable_calls += 1
            else:
                outcome.valid_calls += 1
        elif kind == "run_finished":
            outcome.finish_reason = str(event["result"].get("finish_reason", ""))
    if run.returncode not in (0, 1) or "Traceback" in run.stderr:
        outcome.problems.append(f"exit {run.returncode}: {run.stderr[-600:]}")
    outcome.edited_right_file = (workspace / BUGGY_FILE).read_bytes() != original
    check = subprocess.run(
        [sys.executable, "-m", "unittest", "-q"], cwd=workspace, capture_output=True, timeout=120
    )
    outcome.tests_pass = check.returncode == 0
    return outcome
