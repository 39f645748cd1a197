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


async def test_closing_a_sandbox_stops_its_orphans_and_nothing_else_of_this_process(
    tmp_path: Path,
) -> None:
    """Several agents share a process (a swarm's workers, a batch's tasks): what one sandbox
    adopts when its command ends is that command's orphan only, never the host's own child
    started meanwhile (git run by the swarm) nor another sandbox's running command."""
    import os
    import subprocess

    from journeyman.tools.sandbox.local import LocalSandbox

    mine, other = LocalSandbox(tmp_path), LocalSandbox(tmp_path)
    env = {"PATH": os.environ["PATH"]}
    started = await mine.start(
        "sleep 0.5; env -u JOURNEYMAN_SANDBOX_RUN setsid sleep 30 >/dev/null 2>&1 < /dev/null &",
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
    )
    # while that command runs: another agent's command, and a child of the host's own
    theirs = await other.start("sleep 30", cwd=tmp_path, env=env, stdout=subprocess.DEVNULL)
    host_child = subprocess.Popen(["sleep", "30"])
    try:
        await started.wait()
        assert len(mine.adopted) == 1  # the setsid job alone
        (orphan,) = mine.adopted
        await mine.close(grace=0.5)
        assert not Path(f"/proc/{orphan}").exists() or "Z" in _state(orphan)
        assert host_child.poll() is None, "the host's own child was stopped"
        assert theirs.running(), "another sandbox's command was stopped"
    finally:
        host_child.kill()
        host_child.wait()
        await other.close(grace=0.5)


def _state(pid: int) -> str:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2 :].split()[0]
