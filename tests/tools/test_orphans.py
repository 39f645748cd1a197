"""A background job that leaves its command's process group and drops the sandbox's marker is
still stopped when the run ends, under `--sandbox local` too."""

from __future__ import annotations

import time
from pathlib import Path

from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import reply
from tests.support.cli import clean_env, jm

ESCAPE = (
    "env -u JOURNEYMAN_SANDBOX_RUN setsid sh -c 'sleep 2; echo late > {target}' "
    ">/dev/null 2>&1 < /dev/null &"
)


def test_a_job_that_left_its_group_and_marker_does_not_outlive_the_run(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    target = tmp_path / "written-after-the-run"
    fake_openai.enqueue(
        reply(tool_calls=[("run_command", {"command": ESCAPE.format(target=target)})]),
        reply(tool_calls=[("finish", {"summary": "started it"})]),
    )
    env = clean_env(OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=fake_openai.base_url)
    done = jm(
        "run", "start a job", "--yes", "--no-verify", "-w", str(workspace), "--sandbox", "local",
        "--session-dir", str(tmp_path / "sessions"), env=env, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    time.sleep(3.5)  # past the job's own delay: it would have written by now
    assert not target.exists(), "a background job outlived the run under --sandbox local"
