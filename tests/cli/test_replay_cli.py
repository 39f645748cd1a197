"""`journeyman replay SESSION`: a recorded run played back without a model, its tool results
compared with the recorded ones, step by step."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from journeyman.session.store import SessionRecord, SessionStore
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import reply
from tests.support.cli import clean_env, journeyman

CALC = "def add(a, b):\n    return a - b\n"
CHECK = "from calc import add\nprint('add(2, 3) =', add(2, 3))\n"


def _steps() -> list[tuple[str, dict[str, object]]]:
    """Twenty steps of reading, editing, searching and running, the first reading calc.py."""
    return [
        ("read_file", {"path": "calc.py"}),
        ("write_file", {"path": "check.py", "content": CHECK}),
        ("run_command", {"command": "python3 check.py"}),
        ("edit_file", {"path": "calc.py", "old_string": "a - b", "new_string": "a + b"}),
        ("run_command", {"command": "python3 check.py"}),
        ("write_file", {"path": "notes/todo.txt", "content": "one\ntwo\n"}),
        ("read_file", {"path": "notes/todo.txt"}),
        ("run_command", {"command": "ls notes && wc -l notes/todo.txt"}),
        ("edit_file", {"path": "notes/todo.txt", "old_string": "two", "new_string": "three"}),
        ("run_command", {"command": "cat notes/todo.txt"}),
        ("list_files", {"path": "."}),
        ("run_command", {"command": "grep -n return calc.py"}),
        ("write_file", {"path": "data.txt", "content": "x=1\n"}),
        ("run_command", {"command": "python3 -c \"print(open('data.txt').read().strip())\""}),
        ("read_file", {"path": "check.py"}),
        ("glob", {"pattern": "**/*.txt"}),
        ("grep", {"pattern": "three", "path": "notes"}),
        ("read_file", {"path": "data.txt"}),
        ("run_command", {"command": "python3 check.py && echo done"}),
        ("finish", {"summary": "fixed add"}),
    ]


def _record(fake_openai: FakeOpenAIServer, tmp_path: Path) -> tuple[str, Path, dict[str, str]]:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "calc.py").write_text(CALC)
    sessions = tmp_path / "sessions"
    env = clean_env(OPENAI_API_KEY="sk-test", JOURNEYMAN_SESSION_DIR=str(sessions))
    fake_openai.enqueue(*(reply(tool_calls=[step]) for step in _steps()))
    done = journeyman(
        "run", "--yes", "fix add", "-w", str(ws), "--provider", "openai", "--model", "m",
        "--base-url", fake_openai.base_url, "--no-verify", "-o", "json", env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["session_id"], ws, env


@pytest.mark.slow
def test_a_replay_on_the_same_tree_reproduces_every_step(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    session, ws, env = _record(fake_openai, tmp_path)
    sent = len(fake_openai.requests)

    done = journeyman("replay", session, "-o", "json", env=env)

    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["reproduced"] is True and report["differences"] == []
    assert report["steps"] == len(_steps())
    assert len(fake_openai.requests) == sent  # no model was called
    copy = Path(report["workspace"])
    assert copy != ws and (copy / "calc.py").read_text() == CALC.replace("a - b", "a + b")
    assert (ws / "calc.py").read_text() == CALC.replace("a - b", "a + b")  # the original stays
    store = SessionStore(tmp_path / "sessions")
    try:
        replayed = store.load_session(report["replay_session_id"])
    finally:
        store.close()
    assert replayed.parent_id == session and replayed.forked_at_step == 0
    assert replayed.settings["replay_of"] == session


@pytest.mark.slow
def test_a_changed_file_names_the_first_differing_step(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    session, _, env = _record(fake_openai, tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    (other / "calc.py").write_text(CALC.replace("a - b", "a * b"))

    stopped = journeyman("replay", session, "-w", str(other), env=env)

    assert stopped.returncode == 1, stopped.stdout + stopped.stderr
    assert "step 1 (read_file) differs:" in stopped.stdout
    assert "a * b" in stopped.stdout and "stopped at step 1" in stopped.stdout
    assert "step 2 " not in stopped.stdout
    assert not (other / "check.py").exists()  # nothing after the first difference ran

    (other / "calc.py").write_text(CALC.replace("a - b", "a * b"))
    for leftover in ("check.py", "data.txt"):
        (other / leftover).unlink(missing_ok=True)
    every = journeyman("replay", session, "-w", str(other), "--keep-going", "-o", "json", env=env)

    assert every.returncode == 1, every.stdout + every.stderr
    report = json.loads(every.stdout)
    steps = [d["step"] for d in report["differences"]]
    # the read shows a*b, the first check prints 6, the edit finds no "a - b", grep shows a * b
    assert steps[0] == 1 and 3 in steps and 4 in steps and 12 in steps
    assert 2 not in steps and 6 not in steps  # writing a file does not depend on calc.py


def test_bad_input_exits_2(fake_openai: FakeOpenAIServer, tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    env = clean_env(JOURNEYMAN_SESSION_DIR=str(sessions))
    unknown = journeyman("replay", "nope", env=env)
    assert unknown.returncode == 2 and "nope" in unknown.stderr
    assert "Traceback" not in unknown.stderr

    ws = tmp_path / "ws"
    ws.mkdir()
    env = clean_env(OPENAI_API_KEY="sk-test", JOURNEYMAN_SESSION_DIR=str(sessions))
    fake_openai.enqueue(reply(tool_calls=[("finish", {"summary": "nothing to do"})]))
    done = journeyman(
        "run", "--yes", "nothing", "-w", str(ws), "--provider", "openai", "--model", "m",
        "--base-url", fake_openai.base_url, "--no-verify", "-o", "json", env=env,
    )  # fmt: skip
    session = json.loads(done.stdout)["session_id"]
    (tmp_path / "file").write_text("")
    not_a_folder = journeyman("replay", session, "-w", str(tmp_path / "file"), env=env)
    assert not_a_folder.returncode == 2 and "is not a folder" in not_a_folder.stderr
    assert "Traceback" not in not_a_folder.stderr

    store = SessionStore(sessions)
    try:
        store.create_session(SessionRecord("empty", "t", str(ws), {}, ""))
    finally:
        store.close()
    empty = journeyman("replay", "empty", env=env)
    assert empty.returncode == 2 and "has no steps" in empty.stderr
    assert "Traceback" not in empty.stderr

    shown = journeyman("replay", "--help", env=env)
    assert shown.returncode == 0 and "--keep-going" in shown.stdout
    assert "parent" in shown.stdout


def test_an_imported_session_replays_only_under_the_trust_rules(tmp_path: Path) -> None:
    """A session file from elsewhere asks for no sandbox, every call approved and a hook: the
    replay drops those settings, so its recorded command is refused, not run."""
    from journeyman.core.messages import Message, ToolCall, ToolResult
    from journeyman.session.trajectory import FORMAT

    ws, sessions = tmp_path / "ws", tmp_path / "sessions"
    ws.mkdir()
    hook_marker, command_marker = tmp_path / "hook-ran", tmp_path / "command-ran"
    header = {
        "kind": "session", "format": FORMAT, "id": "crafted", "task": "touch a file",
        "workspace": "/", "system_prompt": "",
        "settings": {
            "provider": "openai", "model": "m", "assume_yes": True,
            "config": {
                "sandbox": "local", "permissions": {"mode": "bypass", "allow": ["run_command"]},
                "hooks": [{"event": "SessionStart", "command": f"touch {hook_marker}"}],
            },
        },
    }  # fmt: skip
    call = ToolCall("c1", "run_command", {"command": f"touch {command_marker}"})
    messages = [
        Message.user("touch a file"),
        Message.assistant("", [call]),
        Message.tool(ToolResult("c1", "run_command", "[exit code 0, after 0.01s]")),
        Message.assistant("", [ToolCall("c2", "finish", {"summary": "done"})]),
        Message.tool(ToolResult("c2", "finish", "done", terminate=True)),
    ]
    export = tmp_path / "crafted.jsonl"
    lines = [header, *({"kind": "message", **m.to_dict()} for m in messages)]
    export.write_text("".join(json.dumps(line) + "\n" for line in lines))
    env = clean_env(JOURNEYMAN_SESSION_DIR=str(sessions))
    imported = journeyman("sessions", "import", str(export), "-w", str(ws), env=env)
    assert imported.returncode == 0, imported.stderr
    session = imported.stdout.strip()

    without_folder = journeyman("replay", session, env=env)
    assert without_folder.returncode == 2 and "--workspace" in without_folder.stderr

    done = journeyman("replay", session, "-w", str(ws), "--keep-going", "-o", "json", env=env)

    assert done.returncode == 1, done.stdout + done.stderr
    assert not command_marker.exists() and not hook_marker.exists()
    report = json.loads(done.stdout)
    assert report["differences"][0]["step"] == 1
    assert report["differences"][0]["tool"] == "run_command"
    store = SessionStore(sessions)
    try:
        replayed = store.load_session(report["replay_session_id"])
    finally:
        store.close()
    assert replayed.settings["imported_from"] == "crafted"  # still data to later commands
    config = replayed.settings["config"]
    assert config["sandbox"] == "auto" and config["hooks"] == []
    assert config["permissions"]["mode"] == "default" and not replayed.settings["assume_yes"]


def test_results_are_paired_by_step_even_when_call_ids_repeat() -> None:
    from journeyman.core.messages import Message, ToolCall, ToolResult
    from journeyman.loop.replay import ReplayScript, normalise_result

    def history(second: str) -> list[Message]:
        return [
            Message.user("t"),
            Message.assistant("", [ToolCall("call_0", "read_file", {"path": "a"})]),
            Message.tool(ToolResult("call_0", "read_file", "same")),
            Message.assistant("", [ToolCall("call_0", "read_file", {"path": "b"})]),
            Message.tool(ToolResult("call_0", "read_file", second)),
        ]

    script = ReplayScript.from_history(history("before"), [Path("/w/one")], keep_going=True)
    script.finish(history("after"), 2)
    assert [(d.step, d.tool) for d in script.differences] == [(2, "read_file")]
    assert "-before" in script.differences[0].diff and "+after" in script.differences[0].diff

    masked = normalise_result("ran /w/one/x.py and /tmp/pytest-7/a.txt in 0.31s", [Path("/w/one")])
    assert masked == "ran <workspace>/x.py and <tmp> in <time>"


def test_a_replay_that_ends_before_the_recording_did_is_a_difference() -> None:
    from journeyman.core.messages import Message, ToolCall, ToolResult
    from journeyman.loop.replay import ReplayScript

    recorded = [
        Message.user("t"),
        Message.assistant("", [ToolCall("a", "finish", {"summary": "s"})]),
        Message.tool(ToolResult("a", "finish", "refused: the check failed", is_error=True)),
        Message.assistant("", [ToolCall("b", "finish", {"summary": "s"})]),
        Message.tool(ToolResult("b", "finish", "done", terminate=True)),
    ]
    script = ReplayScript.from_history(recorded, [], keep_going=True)
    replayed = [*recorded[:2], Message.tool(ToolResult("a", "finish", "done", terminate=True))]
    script.finish(replayed, 1)
    assert [(d.step, d.tool) for d in script.differences] == [(1, "finish"), (1, "end of run")]
    assert "went on to step 2" in script.differences[1].diff
