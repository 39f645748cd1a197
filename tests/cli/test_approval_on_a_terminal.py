"""`journeyman run` on a terminal asks about a long patch as a user sees it: the whole call,
page after page (Enter), then the question; the answers are typed on a pseudo-terminal."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from journeyman.cli.approver import PAGE_ROWS_WITHOUT_TERMINAL
from journeyman.policy.call_description import describe_call
from tests.fakes.long_patch import (
    ESCAPED_LINE,
    ESCAPED_NAME,
    HIDDEN_FILE,
    HIDDEN_LINE,
    SETTINGS_TAIL,
    long_patch_workspace,
)
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import reply
from tests.support.cli import clean_env

RUN_OPTIONS = ["--provider", "openai", "--model", "m", "--edit-tool", "apply_patch"]
RUN_OPTIONS += ["--sandbox", "local", "--no-verify", "--no-lsp", "--no-mcp"]


def run_on_a_terminal(
    fake_openai: FakeOpenAIServer, tmp_path: Path, typed: str
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """`journeyman run` with stdin on a pseudo-terminal where `typed` was typed ahead (stdout
    and stderr are pipes: the pages are then PAGE_ROWS_WITHOUT_TERMINAL rows)."""
    workspace = tmp_path / "ws"
    patch = long_patch_workspace(workspace)
    fake_openai.enqueue(
        reply(tool_calls=[("apply_patch", {"patch": patch})]),
        reply(tool_calls=[("finish", {"summary": "settings doubled"})]),
    )
    env = clean_env(OPENAI_API_KEY="sk-test", JOURNEYMAN_SESSION_DIR=str(tmp_path / "sessions"))
    terminal, other_end = pty.openpty()
    try:
        os.write(terminal, typed.encode())
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "journeyman",
                "run",
                "double the settings",
                *RUN_OPTIONS,
                "-w",
                str(workspace),
                "--base-url",
                fake_openai.base_url,
            ],
            env=env,
            stdin=other_end,
            capture_output=True,
            text=True,
            timeout=90,
        )
    finally:
        os.close(terminal)
        os.close(other_end)
    return done, workspace


def pages_of(tmp_path: Path) -> int:
    patch = long_patch_workspace(tmp_path / "preview")
    lines = describe_call("apply_patch", {"patch": patch}, str(tmp_path / "preview"))
    return -(-len(lines.split("\n")) // PAGE_ROWS_WITHOUT_TERMINAL)


@pytest.mark.slow  # a journeyman process
def test_the_whole_patch_is_paged_before_allow_on_a_terminal(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    pages = pages_of(tmp_path)
    done, workspace = run_on_a_terminal(fake_openai, tmp_path, "\n" * (pages - 1) + "y\n")
    assert done.returncode == 0, done.stderr
    asked = done.stderr
    assert f"shown in {pages} pages" in asked
    assert asked.index("Allow it?") > asked.index(HIDDEN_LINE) > asked.index("create backdoor.py")
    assert f"+{SETTINGS_TAIL}" in asked
    assert f"create {ESCAPED_NAME}:" in asked and f"+{ESCAPED_LINE}" in asked
    assert not {"\x1b", "\r", "\x07", "\u202e"} & set(asked)
    assert (workspace / HIDDEN_FILE).read_text() == HIDDEN_LINE + "\n"  # what was shown ran


@pytest.mark.slow  # a journeyman process
def test_stopping_at_the_first_page_refuses_by_default(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    done, workspace = run_on_a_terminal(fake_openai, tmp_path, "q\n\n")
    assert done.returncode != 0
    question = done.stderr[: done.stderr.index("Allow it?")]
    assert "lines of this call were not shown" in question and "refused" in done.stderr
    assert "create backdoor.py" not in question  # not shown, and said so with a count
    assert not (workspace / HIDDEN_FILE).exists()
