"""journeyman as a Harbor installed agent, run by Harbor itself: `harbor run` (Python 3.12, from
the project's `.venv-harbor`, built by `make harbor-venv`) on a one-task folder, with journeyman
as the agent (`-a journeyman.integrations.harbor_agent:JourneymanAgent`), a bubblewrap
environment standing in for the container (`bwrap_environment.py`), the fake OpenAI server as
the model, and Harbor's own verifier reading the reward."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import RecordedRequest, ScriptItem, error, reply
from tests.tools.sandboxes import BWRAP_PROBLEM

ROOT = Path(__file__).resolve().parents[3]
HARBOR_VENV = ROOT / ".venv-harbor"
HARBOR = HARBOR_VENV / "bin" / "harbor"
INSTALLED = HARBOR_VENV / ".installed"
AGENT = "journeyman.integrations.harbor_agent:JourneymanAgent"
ENVIRONMENT = "tests.integrations.harbor_run.bwrap_environment:BubblewrapEnvironment"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(400),  # Harbor's own start-up is several seconds on a loaded machine
    pytest.mark.skipif(
        not INSTALLED.is_file(),
        reason=f"no Harbor here: {HARBOR_VENV} is not built (`make harbor-venv` builds it "
        "where Python 3.12 is installed)",
    ),
    pytest.mark.skipif(BWRAP_PROBLEM is not None, reason=str(BWRAP_PROBLEM)),
]


def hello_task(root: Path) -> Path:
    task = root / "hello"
    (task / "environment").mkdir(parents=True)
    (task / "tests").mkdir()
    (task / "instruction.md").write_text(
        "Write /app/hello.txt holding the text of /app/greeting.txt in capitals.\n"
    )
    (task / "task.toml").write_text(
        'version = "1.0"\n\n[agent]\ntimeout_sec = 120.0\n\n[verifier]\ntimeout_sec = 60.0\n'
    )
    (task / "environment" / "Dockerfile").write_text(
        "FROM ubuntu:24.04\nWORKDIR /app\nCOPY greeting.txt /app/greeting.txt\n"
    )
    (task / "environment" / "greeting.txt").write_text("hello, world\n")
    (task / "tests" / "test.sh").write_text(
        "#!/bin/bash\n"
        'if [ "$(cat /app/hello.txt)" = "HELLO, WORLD" ]; then r=1; else r=0; fi\n'
        "echo $r > /logs/verifier/reward.txt\n"
    )
    return task


def model(request: RecordedRequest) -> ScriptItem:
    """Reads the greeting, writes it in capitals, then finishes."""
    tool_results = [m for m in request.json.get("messages", []) if m.get("role") == "tool"]
    if not tool_results:
        return reply(tool_calls=[("read_file", {"path": "greeting.txt"})], output_tokens=30)
    if len(tool_results) == 1:
        content = {"path": "hello.txt", "content": "HELLO, WORLD\n"}
        return reply(tool_calls=[("write_file", content)], output_tokens=40)
    return reply(tool_calls=[("finish", {"summary": "wrote hello.txt"})], output_tokens=20)


def journeyman_on_path(folder: Path) -> Path:
    """A `journeyman` command for the environment: this checkout, on this interpreter."""
    folder.mkdir()
    shim = folder / "journeyman"
    shim.write_text(
        f'#!/bin/sh\nPYTHONPATH={ROOT / "src"} exec {sys.executable} -m journeyman "$@"\n'
    )
    shim.chmod(0o755)
    return folder


def harbor_run(tmp_path: Path, server: FakeOpenAIServer) -> dict[str, Any]:
    """`harbor run` on the hello task with journeyman as the agent; the trial's result.json."""
    task = hello_task(tmp_path / "tasks")
    shims = journeyman_on_path(tmp_path / "bin")
    env = {
        "PATH": f"{shims}:{os.environ['PATH']}",
        "HOME": str(tmp_path / "home"),
        "PYTHONPATH": f"{ROOT / 'src'}:{ROOT}",
        "OPENAI_API_KEY": "sk-test-harbor",
        "OPENAI_BASE_URL": server.base_url,
        "JOURNEYMAN_CONFIG_DIR": str(tmp_path / "config"),
        "NO_COLOR": "1",
    }
    command = [str(HARBOR), "run", "-p", str(task), "-a", AGENT, "-e", ENVIRONMENT]
    command += ["-m", "openai/gpt-4.1-mini", "-o", str(tmp_path / "jobs"), "--job-name", "j"]
    command += ["--ak", "sandbox=local", "--ak", "no_verify=true"]
    command += ["--ak", "price_per_mtok=0,1000", "-n", "1", "--yes", "-q"]
    done = subprocess.run(
        command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    trials = [p for p in (tmp_path / "jobs" / "j").iterdir() if p.is_dir()]
    assert len(trials) == 1, list((tmp_path / "jobs" / "j").iterdir())
    result: dict[str, Any] = json.loads((trials[0] / "result.json").read_text())
    result["trial_dir"] = trials[0]
    return result


def test_harbor_runs_journeyman_as_an_installed_agent(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.default = model
    result = harbor_run(tmp_path, fake_openai)
    trial: Path = result["trial_dir"]
    assert result.get("exception_info") is None, result["exception_info"]
    assert result["verifier_result"]["rewards"] == {"reward": 1.0}
    assert (trial / "verifier" / "reward.txt").read_text().strip() == "1"

    agent_logs = trial / "agent"
    outcome = json.loads((agent_logs / "journeyman-result.json").read_text())
    assert outcome["finish_reason"] == "completed" and outcome["iterations"] == 3
    assert result["agent_result"]["n_output_tokens"] == 90
    assert result["agent_result"]["metadata"]["session_id"] == outcome["session_id"]
    assert (agent_logs / "sessions").is_dir()
    assert len(fake_openai.requests) == 3
    instruction = json.dumps(fake_openai.requests[0].json)
    assert "hello.txt holding the text of /app/greeting.txt" in instruction

    exported = agent_logs / "trajectory.json"
    if not exported.is_file():
        log = (trial / "trial.log").read_text()
        assert "unknown export format 'atif'" in log, log[-3000:]
        pytest.skip(
            "`journeyman sessions export --format atif` is not on this branch yet: the run "
            "and its reward passed, the agent asked for the ATIF trajectory and was refused"
        )
    checked = subprocess.run(
        [str(HARBOR_VENV / "bin" / "python"), "-c", VALIDATE_ATIF, str(exported)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert checked.returncode == 0, checked.stderr[-2000:]
    assert checked.stdout.split() == [outcome["session_id"], "3"]


VALIDATE_ATIF = """
import sys
from pathlib import Path
from harbor.models.trajectories import Trajectory
trajectory = Trajectory.model_validate_json(Path(sys.argv[1]).read_text())
print(trajectory.session_id, sum(step.source == "agent" for step in trajectory.steps))
"""


def test_a_run_the_provider_ended_is_an_agent_error_not_a_zero(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.default = error(400, "the model does not exist")
    result = harbor_run(tmp_path, fake_openai)
    exception = result["exception_info"]
    assert exception is not None and exception["exception_type"] == "NonZeroAgentExitCodeError"
    assert "journeyman run ended with provider_error" in exception["exception_message"]
    outcome = json.loads((result["trial_dir"] / "agent" / "journeyman-result.json").read_text())
    assert outcome["finish_reason"] == "provider_error"
