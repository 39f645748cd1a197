"""At the end of a run, git metadata a left-over process armed after the last command is
disarmed, and the user is told (an `ErrorOccurred` event naming the key and the file)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from pathlib import Path

from journeyman.core import events as ev
from journeyman.core.events import Event
from journeyman.providers.base import ModelRequest, ModelResponse
from tests.fakes.agents import call, finish, make_agent, turn


def test_a_process_arming_git_after_the_last_command_is_caught_at_the_end(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    subprocess.run(["git", "init", "-q", "lib"], cwd=workspace, check=True)
    marker = tmp_path / "MARK"
    later = f"(sleep 1; git -C lib config core.fsmonitor 'touch {marker}; false') >/dev/null 2>&1 &"

    def wait_then_finish(_request: ModelRequest) -> ModelResponse:
        time.sleep(2)  # the left-over process writes meanwhile
        return finish()

    events: list[Event] = []
    agent, _ = make_agent(
        tmp_path,
        [turn(call("run_command", "c", command=later)), wait_then_finish],
        events=events,
        sandbox="local",
        agent_options={"assume_yes": True},
    )
    asyncio.run(agent.run("start a job"))
    warnings = [e for e in events if isinstance(e, ev.ErrorOccurred) and e.details.get("warning")]
    assert len(warnings) == 1
    assert "lib/.git/config: core.fsmonitor" in warnings[0].message
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull}
    subprocess.run(["git", "status"], cwd=workspace / "lib", env=env, capture_output=True)
    assert not marker.exists()
