"""`journeyman` as a user runs it: a subprocess, against the fake OpenAI server."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from journeyman.session.store import SessionStore
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import error, reply
from tests.support.cli import clean_env, journeyman
from tests.support.waiting import wait_until

DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo"
BUGGY = "        return ordered[middle]\n    return ordered[middle]\n"
FIXED = "        return ordered[middle]\n    return (ordered[middle - 1] + ordered[middle]) / 2\n"


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    target = tmp_path / "demo"
    shutil.copytree(DEMO, target)
    return target


def fix_the_demo_script(server: FakeOpenAIServer) -> None:
    server.enqueue(
        reply("Let me look at the code.", tool_calls=[("read_file", {"path": "calc/stats.py"})]),
        reply(
            tool_calls=[
                ("edit_file", {"path": "calc/stats.py", "old_string": BUGGY, "new_string": FIXED})
            ]
        ),
        reply(tool_calls=[("run_command", {"command": "python3 -m unittest -q"})]),
        reply(tool_calls=[("finish", {"summary": "median now averages the middle pair"})]),
    )


def test_end_to_end_fixes_the_demo(
    fake_openai: FakeOpenAIServer, demo: Path, tmp_path: Path
) -> None:
    assert (
        subprocess.run(
            [sys.executable, "-m", "unittest", "-q"], cwd=demo, capture_output=True
        ).returncode
        != 0
    )
    fix_the_demo_script(fake_openai)
    env = clean_env(OPENAI_API_KEY="sk-test-e2e", OPENAI_BASE_URL=fake_openai.base_url)
    sessions = tmp_path / "sessions"
    done = journeyman(
        "run",
        "--yes",
        (demo / "TASK.md").read_text(),
        "--workspace",
        str(demo),
        "--model",
        "gpt-4.1-mini",
        "--session-dir",
        str(sessions),
        "--output-format",
        "json",
        env=env,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["finish_reason"] == "completed" and result["success"]
    assert result["iterations"] == 4 and result["tool_calls_made"] == 4
    assert result["final_text"] == "median now averages the middle pair"
    assert (
        subprocess.run(
            [sys.executable, "-m", "unittest", "-q"], cwd=demo, capture_output=True
        ).returncode
        == 0
    )
    store = SessionStore(sessions)
    events = list(store.events(result["session_id"]))
    kinds = [e["type"] for e in events]
    # the harness's check before the first turn, the model's four calls, then the harness's
    # check of its finish
    assert kinds.count("tool_result") == 6 and kinds[-1] == "run_finished"
    assert kinds.count("check_fixed") == 1
    check = result["verification"]
    assert check["command"] == "python -m unittest discover -s tests -t ."
    assert check["exit_code"] == 0 and check["after_last_change"] is True
    assert result["files_changed"] == ["calc/stats.py"] and result["refused_calls"] == []
    assert events[-1]["result"]["session_id"] == result["session_id"]
    ran = [e for e in events if e["type"] == "tool_result" and e["result"]["name"] == "run_command"]
    assert ran[0]["result"]["call_id"] == "verify-before"
    assert "FAILED" in ran[0]["result"]["content"]
    assert "OK" in ran[1]["result"]["content"]
    store.close()
    for stored in sessions.glob("journeyman.db*"):  # the database and its WAL
        assert b"sk-test-e2e" not in stored.read_bytes()
    # the model saw the tool schemas and its own earlier tool results
    last = fake_openai.requests[-1].json
    assert {t["function"]["name"] for t in last["tools"]} >= {"read_file", "edit_file", "finish"}
    assert [m["role"] for m in last["messages"]].count("tool") == 3


def test_text_output_and_stream_json(
    fake_openai: FakeOpenAIServer, demo: Path, tmp_path: Path
) -> None:
    env = clean_env(OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=fake_openai.base_url)
    fix_the_demo_script(fake_openai)
    text = journeyman(
        "run", "--yes", "fix it", "-w", str(demo), "--session-dir", str(tmp_path), env=env
    )
    assert text.returncode == 0, text.stderr
    assert "→ edit_file" in text.stdout and "completed" in text.stdout and "cost" in text.stdout

    fake_openai.enqueue(reply("Nothing to do."))
    streamed = journeyman(
        "run",
        "--yes",
        "say hi",
        "-w",
        str(demo),
        "--session-dir",
        str(tmp_path),
        "-o",
        "stream-json",
        env=env,
    )
    assert streamed.returncode == 0, streamed.stderr
    lines = [json.loads(line) for line in streamed.stdout.splitlines()]
    kinds = [line["type"] for line in lines]
    assert kinds[-1] == "run_finished" and "run_started" in kinds
    assert "text_delta" in kinds
    assert (
        "".join(line["text"] for line in lines if line["type"] == "text_delta") == "Nothing to do."
    )


def test_failure_exits_nonzero_with_one_line_reason(
    fake_openai: FakeOpenAIServer, demo: Path, tmp_path: Path
) -> None:
    env = clean_env(OPENAI_API_KEY="sk-wrong", OPENAI_BASE_URL=fake_openai.base_url)
    fake_openai.enqueue(error(401))
    done = journeyman(
        "run", "--yes", "x", "-w", str(demo), "--session-dir", str(tmp_path),
        "--model", "gpt-4.1-mini", env=env,
    )  # fmt: skip
    assert done.returncode == 2  # a refused key is the user's configuration
    assert done.stderr.count("\n") == 1 and "OPENAI_API_KEY" in done.stderr


def test_max_iterations_is_a_failure(
    fake_openai: FakeOpenAIServer, demo: Path, tmp_path: Path
) -> None:
    env = clean_env(OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=fake_openai.base_url)
    fake_openai.enqueue(reply(tool_calls=[("list_files", {"path": "."})]))
    done = journeyman(
        "run",
        "--yes",
        "x",
        "-w",
        str(demo),
        "--session-dir",
        str(tmp_path),
        "--max-iterations",
        "1",
        env=env,
    )
    assert done.returncode == 1 and "max_iterations" in done.stderr


def test_no_provider_explains_and_exits_2(tmp_path: Path) -> None:
    done = journeyman("run", "--yes", "anything", "-w", str(tmp_path), env=clean_env())
    assert done.returncode == 2
    assert "ANTHROPIC_API_KEY" in done.stderr and "OPENAI_API_KEY" in done.stderr


def test_make_demo_without_provider_exits_2(tmp_path: Path) -> None:
    script = Path(__file__).resolve().parents[2] / "examples" / "run_demo.py"
    done = subprocess.run(
        [sys.executable, str(script), "--keep", str(tmp_path / "d")],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "OPENAI_API_KEY" in done.stderr


def test_version_and_help() -> None:
    version = journeyman("--version", env=clean_env())
    assert version.returncode == 0 and version.stdout.startswith("journeyman ")
    helped = journeyman("run", "--help", env=clean_env())
    assert helped.returncode == 0
    for flag in ("--workspace", "--provider", "--base-url", "--max-budget-usd", "--output-format"):
        assert flag in helped.stdout
    assert "--verify" in helped.stdout and "phased" in helped.stdout


def test_phased_mode_verifies_with_the_given_command(
    fake_openai: FakeOpenAIServer, demo: Path, tmp_path: Path
) -> None:
    fix_the_demo_script(fake_openai)
    env = clean_env(OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=fake_openai.base_url)
    check = "python3 -m unittest -q"
    done = journeyman(
        "run",
        "--yes",
        "fix the median",
        "-w",
        str(demo),
        "--mode",
        "phased",
        "--verify",
        check,
        "--session-dir",
        str(tmp_path / "sessions"),
        "--output-format",
        "json",
        env=env,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["finish_reason"] == "completed"
    store = SessionStore(tmp_path / "sessions")
    try:
        _, checkpoint = store.checkpoint(result["session_id"])
        settings = store.load_session(result["session_id"]).settings
    finally:
        store.close()
    assert checkpoint["mode"]["agent_state"]["phase"] == "done"
    assert settings["config"]["verify_command"] == check  # resume runs the same check
    # the first request carried the context pack of the discovery
    first = fake_openai.requests[0].json["messages"]
    assert any("Verification" in str(m.get("content")) for m in first)


def test_ctrl_c_cancels_and_kills_the_running_command(
    fake_openai: FakeOpenAIServer, demo: Path, tmp_path: Path
) -> None:
    import signal
    import time

    marker = f"jm-sigint-{os.getpid()}"
    env = clean_env(OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=fake_openai.base_url)
    fake_openai.enqueue(reply(tool_calls=[("run_command", {"command": f"sleep 60 # {marker}"})]))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "journeyman",
            "run",
            "--yes",
            "wait",
            "-w",
            str(demo),
            "-o",
            "stream-json",
            "--session-dir",
            str(tmp_path),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    for line in proc.stdout:  # wait until the command is running
        if json.loads(line)["type"] == "tool_call":
            break
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    finished = json.loads(out.splitlines()[-1])
    assert finished["type"] == "run_finished"
    assert finished["result"]["finish_reason"] == "cancelled"
    wait_until(
        lambda: not processes_mentioning(marker), timeout=10, what="the command's group ending"
    )


def processes_mentioning(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if text in cmdline:
                found.append(int(entry.name))
    return found


def test_budget_drives_the_run_to_a_clean_capacity_stop(
    fake_openai: FakeOpenAIServer, demo: Path, tmp_path: Path
) -> None:
    # each call's reply fits what the budget lets it write; the prompts report a token each
    fake_openai.enqueue(
        reply(tool_calls=[("list_files", {"path": "."})], input_tokens=100, output_tokens=0),
        reply(
            tool_calls=[("read_file", {"path": "calc/stats.py"})],
            input_tokens=1,
            output_tokens=70_000,
        ),
        reply(tool_calls=[("grep", {"pattern": "median"})], input_tokens=1, output_tokens=20_000),
        reply(
            tool_calls=[("read_file", {"path": "calc/__init__.py"}), ("glob", {"pattern": "*"})],
            input_tokens=1,
            output_tokens=6_000,
        ),
        reply(
            "Closing report: found the bug in median(); no edit made yet.",
            input_tokens=1,
            output_tokens=2_000,
        ),
    )
    env = clean_env(
        OPENAI_API_KEY="sk-test",
        OPENAI_BASE_URL=fake_openai.base_url,
        JOURNEYMAN_MAX_OUTPUT_TOKENS="100000",
    )
    done = journeyman(
        "run",
        "--yes",
        "fix it",
        "-w",
        str(demo),
        "--session-dir",
        str(tmp_path),
        "--max-total-tokens",
        "100000",
        "--model",
        "gpt-4.1-mini",
        env=env,
    )
    assert done.returncode == 1
    assert done.stderr.startswith(
        "journeyman: max_tokens: used 98,004 of 100,000 budgeted tokens"
    ), done.stderr
    out = done.stdout
    assert "level warn" in out and "level restricted" in out and "text only" in out
    assert "not run — the budget allows only 1 tool call(s)" in out
    assert "Closing report: found the bug" in out and "max_tokens" in out
    final_request = fake_openai.requests[-1].json
    assert "tools" not in final_request
    usage = journeyman("usage", "--session-dir", str(tmp_path), env={**env, "COLUMNS": "200"})
    assert usage.returncode == 0 and "gpt-4.1-mini" in usage.stdout and "5" in usage.stdout


def test_resume_last_needs_no_other_flags(
    fake_openai: FakeOpenAIServer, demo: Path, tmp_path: Path
) -> None:
    """The session remembers provider, model, base URL, mode and limits; `resume --last` run in
    the workspace, with only the API key in the environment, continues it where it stopped."""
    sessions = tmp_path / "sessions"
    fake_openai.enqueue(
        reply("Looking first.", tool_calls=[("list_files", {"path": "."})]),
        error(400),  # a refusal that is not retried: the run stops after one step
    )
    first = journeyman(
        "run", "--yes", "tidy up", "-w", str(demo), "--provider", "openai",
        "--model", "remembered-model", "--base-url", fake_openai.base_url,
        "--mode", "plan-solve", "--max-iterations", "7", "--session-dir", str(sessions),
        "--no-verify", env=clean_env(OPENAI_API_KEY="sk-test"),
    )  # fmt: skip
    assert first.returncode == 1, first.stderr
    sent_before = len(fake_openai.requests)

    fake_openai.enqueue(reply(tool_calls=[("finish", {"summary": "tidied"})]))
    resumed = journeyman(
        "resume", "--last", "-o", "json", cwd=demo,
        env=clean_env(OPENAI_API_KEY="sk-test", JOURNEYMAN_SESSION_DIR=str(sessions)),
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    result = json.loads(resumed.stdout)
    assert result["finish_reason"] == "completed" and result["final_text"] == "tidied"
    request = fake_openai.requests[sent_before]
    assert request.json["model"] == "remembered-model"
    # the history the model sees goes on from the stored steps: the plan turn is not repeated
    contents = [str(m.get("content")) for m in request.json["messages"]]
    assert sum("numbered plan" in c for c in contents) == 1
    assert any("Looking first." in c for c in contents)
