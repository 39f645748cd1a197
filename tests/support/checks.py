"""Running a detected test check for real: the shared virtualenv first on PATH, offline, and
the test counts read from the runner's own summary (pytest's or unittest's)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

VENV_BIN = Path(sys.executable).parent
OFFLINE_PROGRAMS = frozenset({"python", "python3", "pytest", "make"})
"""Programs the checks may start here; the network-bound wrappers are left out."""


def offline_which(program: str) -> str | None:
    """`shutil.which` over the virtualenv first, limited to `OFFLINE_PROGRAMS`."""
    if program not in OFFLINE_PROGRAMS:
        return None
    return shutil.which(program, path=f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}")


def check_env() -> dict[str, str]:
    """The environment of a check: the virtualenv first, nothing of this test run's settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PYTEST", "COV"))}
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # the venv's plugins cost seconds per run
    return env


@dataclass(frozen=True)
class Run:
    """A check's exit code and the test counts its runner's summary printed."""

    exit_code: int
    ran: int
    failed: int
    output: str


_PYTEST_COUNT = re.compile(r"(\d+) (passed|failed|errors?)\b")
_UNITTEST_RAN = re.compile(r"^Ran (\d+) tests? in ", re.MULTILINE)
_UNITTEST_FAILED = re.compile(
    r"^FAILED \((?:failures=(\d+))?(?:, )?(?:errors=(\d+))?", re.MULTILINE
)


def run_check(root: Path, command: str) -> Run:
    """Run `command` in `root` through the shell; count tests from the runner's summary."""
    done = subprocess.run(
        command, shell=True, cwd=root, env=check_env(), capture_output=True, text=True, timeout=60
    )
    output = done.stdout + done.stderr
    ran = failed = 0
    for line in output.splitlines():  # pytest: "1 failed, 2 passed in 0.05s"
        if re.search(r" in [\d.]+s\b", line) and _PYTEST_COUNT.search(line):
            for count, kind in _PYTEST_COUNT.findall(line):
                ran += int(count)
                failed += int(count) if kind != "passed" else 0
    for count in _UNITTEST_RAN.findall(output):
        ran += int(count)
    for failures, errors in _UNITTEST_FAILED.findall(output):
        failed += int(failures or 0) + int(errors or 0)
    return Run(done.returncode, ran, failed, output)
