"""What an eval's agent can read, and when an eval refuses to start: driven through the CLI
against the fake OpenAI server, the agent's commands trying to read every hidden thing."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from journeyman.batch.suites.micro import micro_root
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import RecordedRequest, ScriptItem, reply
from tests.support.cli import clean_env, journeyman
from tests.tools.sandboxes import needs_bwrap

TASKS = ("url-join", "inventory-reorder")
SECRET_LINE = "def test_one_slash_between"
"""A line of url-join's hidden tests (tests/test_join.py), in no file the agent starts with."""


def suite_of(tmp_path: Path) -> Path:
    suite = tmp_path / "suite"
    for task in TASKS:
        shutil.copytree(micro_root() / task, suite / task)
    return suite


def prying_commands(suite: Path, out: Path) -> str:
    """Shell lines that print every hidden thing an agent could look for."""
    targets = [
        micro_root() / "url-join" / "hidden" / "tests" / "test_join.py",  # the package's copy
        suite / "url-join" / "hidden" / "tests" / "test_join.py",  # the suite's
        out / "suite.jsonl",
    ]
    lines = [f"cat {shlex.quote(str(path))}" for path in targets]
    lines.append(f"ls {shlex.quote(str(out / 'workspaces'))}")
    lines.append(f"ls {shlex.quote(str(suite))}")
    return "; ".join(lines) + "; true"


class Prying:
    """Runs the prying commands once, then finishes."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __call__(self, request: RecordedRequest) -> ScriptItem:
        messages = request.json.get("messages", [])
        if not any(m.get("role") == "tool" for m in messages):
            return reply(tool_calls=[("run_command", {"command": self.command})])
        return reply(tool_calls=[("finish", {"summary": "done"})])


def tool_results(server: FakeOpenAIServer) -> list[str]:
    """Every tool result the model was sent (once each)."""
    seen = [
        str(message.get("content"))
        for request in server.requests
        for message in request.json.get("messages", [])
        if message.get("role") == "tool"
    ]
    return list(dict.fromkeys(seen))


def shown_to_model(server: FakeOpenAIServer) -> str:
    """Every tool result the model was sent, as one text."""
    return "\n".join(tool_results(server))


def run_eval(
    tmp_path: Path, server: FakeOpenAIServer, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    common = (
        *("--session-dir", str(tmp_path / "sessions"), "--model", "gpt-4.1-mini"),
        *("--price-per-mtok", "0,1000", "--no-verify", "--max-parallel", "2"),
    )
    environment = clean_env(OPENAI_API_KEY="sk-test-eval", OPENAI_BASE_URL=server.base_url)
    environment.update(env or {})
    return journeyman("eval", *args, *common, env=environment)


@pytest.fixture
def outside_tmp() -> Iterator[Path]:
    """A scratch folder outside /tmp, which bubblewrap makes private anyway: what lies there
    is hidden only when the eval hides it."""
    root = Path(tempfile.mkdtemp(prefix="journeyman-test-", dir="/var/tmp"))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@needs_bwrap
def test_under_bubblewrap_no_hidden_test_suite_or_other_workspace_is_readable(
    outside_tmp: Path, fake_openai: FakeOpenAIServer
) -> None:
    tmp_path = outside_tmp
    suite, out = suite_of(tmp_path), tmp_path / "out"
    fake_openai.default = Prying(prying_commands(suite, out))
    done = run_eval(tmp_path, fake_openai, str(suite), "--out", str(out), "--sandbox", "bubblewrap")
    assert done.returncode == 0, done.stderr
    shown = shown_to_model(fake_openai)
    assert "cat:" in shown  # the commands ran, and were refused
    assert SECRET_LINE not in shown
    assert "test_patch" not in shown and "fail_to_pass" not in shown  # suite.jsonl
    for result in tool_results(fake_openai):  # each task's listing: its own workspace only
        listed = [line for line in result.splitlines() if line in TASKS]
        assert len(listed) == 1, result
    # grading still saw them: the hidden tests went in after the agent stopped
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert all(row["grade"]["fail_to_pass"] for row in rows)
    assert "UNSANDBOXED" not in done.stdout
    assert json.loads((out / "eval.json").read_text())["unsandboxed"] is False


def test_local_is_refused_and_allowed_only_when_said_and_then_reported(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    suite, out = suite_of(tmp_path), tmp_path / "out"
    fake_openai.default = Prying(prying_commands(suite, out))
    refused = run_eval(tmp_path, fake_openai, str(suite), "--out", str(out), "--sandbox", "local")
    assert refused.returncode == 2
    assert refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr
    assert "--sandbox is local" in refused.stderr and "--allow-unsandboxed" in refused.stderr
    assert not fake_openai.requests and not out.exists()

    allowed = run_eval(
        tmp_path, fake_openai, str(suite), "--out", str(out), "--sandbox", "local",
        "--allow-unsandboxed",
    )  # fmt: skip
    assert allowed.returncode == 0, allowed.stderr
    assert SECRET_LINE in shown_to_model(fake_openai)  # what local lets through
    assert "UNSANDBOXED" in allowed.stdout
    report = json.loads((out / "eval.json").read_text())
    assert report["unsandboxed"] is True and report["summary"]["unsandboxed"] is True
    assert "unsandboxed" in (out / "eval.md").read_text()
    assert "unsandboxed" in (out / "report.md").read_text()


def test_the_sandbox_of_the_users_settings_is_refused_too(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    suite = suite_of(tmp_path)
    done = run_eval(
        tmp_path, fake_openai, str(suite), "--out", str(tmp_path / "out"),
        env={"JOURNEYMAN_SANDBOX": "local"},
    )  # fmt: skip
    assert done.returncode == 2
    assert "the sandbox of your settings is local" in done.stderr
    assert not fake_openai.requests


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bwrap on PATH to break it")
def test_auto_falling_back_to_local_is_refused(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    """A `bwrap` that cannot start (as where user namespaces are off) makes auto local."""
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    refusing = "#!/bin/sh\necho 'No permissions to create new namespace' >&2\nexit 1\n"
    (fake_bin / "bwrap").write_text(refusing)
    (fake_bin / "bwrap").chmod(0o755)
    env = {"PATH": f"{fake_bin}:{clean_env()['PATH']}"}
    suite = suite_of(tmp_path)
    done = run_eval(
        tmp_path, fake_openai, str(suite), "--out", str(tmp_path / "out"), "--sandbox", "auto",
        env=env,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "auto and fell back to local" in done.stderr
    assert not fake_openai.requests


def test_the_hidden_paths_skip_nested_ones_and_a_shared_clones_source(tmp_path: Path) -> None:
    from journeyman.batch.grading import GradingSpec
    from journeyman.batch.isolation import batch_hidden_paths
    from journeyman.batch.task_file import BatchTask

    out, suite = tmp_path / "out", tmp_path / "suite"
    hidden = suite / "t1" / "hidden"
    repo = tmp_path / "repos" / "calc"
    graded = BatchTask(
        id="t1",
        task="fix",
        workspace=str(suite / "t1" / "repo"),
        grading=GradingSpec(test_cmd="true", hidden_tests_dir=str(hidden)),
    )
    cloned = BatchTask(id="t2", task="fix", workspace=str(repo), base_commit="abc")
    paths = batch_hidden_paths([graded, cloned], out, [suite, tmp_path / "repos", tmp_path / "x"])
    # the suite hides its hidden folder; the folder of a shared clone's repository stays seen
    assert paths == [str(out.resolve()), str(suite.resolve()), str((tmp_path / "x").resolve())]
