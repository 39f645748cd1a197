"""Through the CLI: a command that arms a nested repository is disarmed, and the user sees a
warning line naming the key and the file."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import reply
from tests.support.cli import clean_env, jm


@pytest.mark.parametrize("sandbox", ["local", "bubblewrap"])
def test_the_user_is_told_what_was_removed(
    sandbox: str, fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    from tests.tools.sandboxes import BWRAP_PROBLEM

    if sandbox == "bubblewrap" and BWRAP_PROBLEM is not None:
        pytest.skip(BWRAP_PROBLEM)
    ws = tmp_path / "ws"
    ws.mkdir()
    marker = tmp_path / "MARK"
    arm = f"git init -q vendor/lib && git -C vendor/lib config core.fsmonitor 'touch {marker}'"
    fake_openai.enqueue(
        reply(tool_calls=[("run_command", {"command": arm})]),
        reply(tool_calls=[("finish", {"summary": "done"})]),
    )
    env = clean_env(
        OPENAI_API_KEY="sk-test",
        OPENAI_BASE_URL=fake_openai.base_url,
        JOURNEYMAN_CONFIG_DIR=str(tmp_path / "config"),
        JOURNEYMAN_SESSION_DIR=str(tmp_path / "sessions"),
    )
    done = jm("run", "x", "-w", str(ws), "--sandbox", sandbox, "--yes", env=env, timeout=90)
    assert "! warning: git configuration in the workspace named programs" in done.stdout
    assert "vendor/lib/.git/config: core.fsmonitor" in done.stdout
    sent = fake_openai.requests[1].raw_body.decode()
    assert "vendor/lib/.git/config: core.fsmonitor" in sent  # the model is told too
    host = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull}
    subprocess.run(["git", "status"], cwd=ws / "vendor" / "lib", env=host, capture_output=True)
    assert not marker.exists()
