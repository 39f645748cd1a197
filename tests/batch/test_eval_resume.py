"""An eval killed (kill -9) while grading, then resumed: every task is graded, none is run
again, preds.json is written. Driven through the CLI against the fake OpenAI server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import RecordedRequest, ScriptItem, reply
from tests.support.cli import clean_env, journeyman
from tests.support.git import git

INSTANCES = ("calc__calc-1", "calc__calc-2")
WAIT_S = 60.0


class Fixer:
    """Fixes calc.py with one edit, then finishes."""

    def __call__(self, request: RecordedRequest) -> ScriptItem:
        if not any(m.get("role") == "tool" for m in request.json.get("messages", [])):
            edit = {"path": "calc.py", "old_string": "return a - b", "new_string": "return a + b"}
            return reply(tool_calls=[("edit_file", edit)], output_tokens=30)
        return reply(tool_calls=[("finish", {"summary": "fixed"})], output_tokens=10)


def blocking_test_patch(started: Path, release: Path) -> str:
    """A test patch whose test says it started grading, then waits for `release`."""
    body = [
        "import time",
        "from pathlib import Path",
        "from calc import add",
        "",
        "def test_add():",
        f"    Path({str(started)!r}).touch()",
        f"    while not Path({str(release)!r}).exists():",
        "        time.sleep(0.05)",
        "    assert add(2, 3) == 5",
    ]
    added = "".join(f"+{line}\n" for line in body)
    return (
        "diff --git a/test_add.py b/test_add.py\nnew file mode 100644\n--- /dev/null\n"
        f"+++ b/test_add.py\n@@ -0,0 +1,{len(body)} @@\n{added}"
    )


def swebench_suite(tmp_path: Path) -> Path:
    repo = tmp_path / "calc"
    repo.mkdir()
    (repo / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (repo / "test_base.py").write_text("def test_base():\n    assert True\n")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "start")
    commit = git(repo, "rev-parse", "HEAD")
    lines = []
    for instance in INSTANCES:
        record = {
            "instance_id": instance,
            "repo": "calc",
            "base_commit": commit,
            "problem_statement": "add() subtracts its arguments",
            "FAIL_TO_PASS": '["test_add.py::test_add"]',
            "PASS_TO_PASS": '["test_base.py::test_base"]',
            "test_patch": blocking_test_patch(tmp_path / f"started-{instance}", tmp_path / "go"),
            "test_cmd": "{python} -m pytest -q test_add.py test_base.py",
        }
        lines.append(json.dumps(record) + "\n")
    suite = tmp_path / "swe.jsonl"
    suite.write_text("".join(lines))
    return suite


def eval_args(tmp_path: Path, suite: Path) -> list[str]:
    return [
        *("eval", str(suite), "--out", str(tmp_path / "out")),
        *("--session-dir", str(tmp_path / "sessions"), "--model", "gpt-4.1-mini"),
        *("--price-per-mtok", "0,1000", "--no-verify", "--max-parallel", "2"),
        *("--sandbox", "local", "--allow-unsandboxed"),
    ]


def wait_for(paths: list[Path], process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not all(path.exists() for path in paths):
        if process.poll() is not None:
            pytest.fail(f"eval ended before grading blocked: {process.communicate()}")
        if time.monotonic() > deadline:
            process.kill()
            pytest.fail("grading never started")
        time.sleep(0.05)


@pytest.mark.slow
def test_a_kill_during_grading_loses_nothing_and_resume_grades_every_task(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    suite = swebench_suite(tmp_path)
    fake_openai.default = Fixer()
    env = clean_env(OPENAI_API_KEY="sk-test-eval", OPENAI_BASE_URL=fake_openai.base_url)
    process = subprocess.Popen(
        [sys.executable, "-m", "journeyman", *eval_args(tmp_path, suite)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for([tmp_path / f"started-{instance}" for instance in INSTANCES], process)
        os.kill(process.pid, signal.SIGKILL)  # both tasks are in their hidden tests
        process.communicate(timeout=30)
    finally:
        (tmp_path / "go").touch()  # tests left behind by the dead workers end
    out = tmp_path / "out"
    rows = out / "results.jsonl"
    assert not rows.exists()  # killed before any task's row: the two agents did finish
    assert not (out / "preds.json").exists()
    model_calls = len(fake_openai.requests)

    resumed = journeyman(*eval_args(tmp_path, suite), "--resume", env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert "Traceback" not in resumed.stderr
    assert len(fake_openai.requests) == model_calls  # no agent ran again
    assert "eval: resolved 2/2" in resumed.stdout
    final = {row["id"]: row for row in map(json.loads, rows.read_text().splitlines())}
    assert set(final) == set(INSTANCES)
    for row in final.values():
        assert row["status"] == "succeeded" and row["grade"]["resolved"] is True
    preds = json.loads((out / "preds.json").read_text())
    assert sorted(p["instance_id"] for p in preds) == sorted(INSTANCES)
    for prediction in preds:
        assert "+    return a + b" in prediction["model_patch"]
        assert "test_add.py" not in prediction["model_patch"]  # the test patch stayed out
    summary = json.loads((out / "eval.json").read_text())["summary"]
    assert summary["graded"] == 2 and summary["resolved"] == 2
