"""Exit 0 means the task is done: `journeyman run` as a user runs it, against the fake server."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import reply
from tests.support.cli import clean_env, jm

DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo"
BUGGY = "        return ordered[middle]\n    return ordered[middle]\n"
FIXED = "        return ordered[middle]\n    return (ordered[middle - 1] + ordered[middle]) / 2\n"
FIX = ("edit_file", {"path": "calc/stats.py", "old_string": BUGGY, "new_string": FIXED})
FINISH = ("finish", {"summary": "fixed"})


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    target = tmp_path / "demo"
    shutil.copytree(DEMO, target)
    return target


def run(
    server: FakeOpenAIServer, demo: Path, *flags: str, task: str = "make the failing test pass"
) -> subprocess.CompletedProcess[str]:
    env = clean_env(OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=server.base_url)
    return jm(
        "run", task, "-w", str(demo), "--session-dir", str(demo.parent / "sessions"),
        "--sandbox", "local", *flags, env=env, timeout=90,
    )  # fmt: skip


def test_refused_edit_and_command_exit_nonzero_and_are_listed(
    fake_openai: FakeOpenAIServer, demo: Path
) -> None:
    fake_openai.enqueue(
        reply(tool_calls=[FIX, ("run_command", {"command": "python3 -m unittest -q"})]),
        reply(tool_calls=[FINISH]),
    )
    done = run(fake_openai, demo, "-o", "json", "--no-verify")  # no --yes, no terminal

    assert done.returncode == 1, done.stderr
    result = json.loads(done.stdout)
    assert result["finish_reason"] == "refused" and result["success"] is False
    assert [(r["tool"], r["argument"]) for r in result["refused_calls"]] == [
        ("edit_file", "calc/stats.py"),
        ("run_command", "python3 -m unittest -q"),
    ]
    assert result["files_changed"] == []
    assert "refused" in done.stderr and "--yes" in done.stderr


def test_a_prose_reply_with_a_failing_check_is_not_a_success(
    fake_openai: FakeOpenAIServer, demo: Path
) -> None:
    fake_openai.enqueue(reply("The median is fine now; the tests pass."))
    done = run(fake_openai, demo, "-o", "json", "--yes", "--max-verify-rounds", "1")

    assert done.returncode == 1, done.stderr
    result = json.loads(done.stdout)
    assert result["finish_reason"] == "verification_failed" and not result["success"]
    check = result["verification"]
    assert check["command"] == "python -m unittest discover -s tests -t ."
    assert check["exit_code"] == 1 and check["passed"] is False
    assert "FAILED" in check["output_tail"]


def test_a_failed_check_goes_back_to_the_model_until_it_fixes_the_code(
    fake_openai: FakeOpenAIServer, demo: Path
) -> None:
    fake_openai.enqueue(
        reply(tool_calls=[FINISH]), reply(tool_calls=[FIX]), reply(tool_calls=[FINISH])
    )
    done = run(fake_openai, demo, "--yes")

    assert done.returncode == 0, done.stderr
    told = [m for m in fake_openai.requests[1].json["messages"] if m["role"] == "user"][-1]
    assert "journeyman ran the check" in told["content"] and "exit code 1" in told["content"]
    # the harness's own check is shown as such, and the summary shows the evidence
    assert "→ check by journeyman python -m unittest discover" in done.stdout
    assert "check: python -m unittest discover -s tests -t . → exit 1" in done.stdout
    assert "before → exit 0" in done.stdout
    assert "on the final tree" in done.stdout
    assert "files changed: calc/stats.py" in done.stdout


def test_questions_succeed_with_no_verify_or_ask_mode(
    fake_openai: FakeOpenAIServer, demo: Path
) -> None:
    fake_openai.enqueue(reply("median() returns the middle element."))
    plain = run(fake_openai, demo, "--no-verify", task="what does median() do?")
    assert plain.returncode == 0, plain.stderr

    fake_openai.enqueue(reply("median() returns the middle element."))
    asked = run(fake_openai, demo, "--mode", "ask", "-o", "json", task="what does median() do?")
    assert asked.returncode == 0, asked.stderr
    result = json.loads(asked.stdout)
    assert result["finish_reason"] == "answered" and result["verification"] is None
    offered = {t["function"]["name"] for t in fake_openai.requests[-1].json["tools"]}
    assert "read_file" in offered and not offered & {"edit_file", "write_file", "run_command"}


def test_help_documents_the_verdict() -> None:
    shown = jm("run", "--help", env=clean_env(COLUMNS="200"), timeout=60).stdout
    for text in ("--no-verify", "--verify-timeout", "--max-verify-rounds", "ask:", "Exit status"):
        assert text in shown
