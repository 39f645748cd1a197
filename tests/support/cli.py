"""journeyman as a user runs it: a subprocess with a clean environment, and the tree it leaves."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.waiting import patience


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under `root`, by its path relative to `root`, with its bytes."""
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


_SUITE_FOLDERS = ("JOURNEYMAN_CACHE_DIR", "JOURNEYMAN_CONFIG_DIR")


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without provider or journeyman settings (the cache folder
    of command snapshots and the user config folder excepted: tests/conftest.py points both at
    temporary folders), plus `extra`. Scripted models edit with edit_file, which an
    OpenAI-compatible provider is not offered by default (it gets apply_patch): the environment
    asks for edit_file."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OPENAI_", "ANTHROPIC_", "JOURNEYMAN_")) or k in _SUITE_FOLDERS
    }
    env["JOURNEYMAN_EDIT_TOOL"] = "edit_file"
    env["JOURNEYMAN_LOCAL_PORTS"] = "none"  # never find a model server running on this machine
    env.update(extra)
    return env


# A CLI run's time limit: a batch that starts its own Ray instance takes a minute or more on a
# loaded machine; the limit only ends a run that hangs (scaled by TESTS_TIME_SCALE).
CLI_LIMIT_S = 240.0


def jm(
    *args: str, env: dict[str, str], timeout: float | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the `journeyman` CLI of this interpreter. The time limit only catches a hang: it is
    `timeout` or `CLI_LIMIT_S`, whichever is longer."""
    return subprocess.run(
        [sys.executable, "-m", "journeyman", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=max(timeout or 0.0, patience(CLI_LIMIT_S)),
    )


def journeyman(
    *args: str, env: dict[str, str], cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """The CLI with the test suite's time limit (`CLI_LIMIT_S`)."""
    return jm(*args, env=env, cwd=cwd)
