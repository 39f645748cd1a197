"""The tool mode a run uses is reported beyond the text header: in the stream-json
`run_started` event, the `-o json` result and the session's stored events; and `--help` says
how the provider and model are found."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from journeyman.cli.app import app
from journeyman.session.store import SessionStore
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import reply
from tests.support.cli import clean_env, journeyman


def run(server: FakeOpenAIServer, tmp_path: Path, output: str) -> str:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    env = clean_env(OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=server.base_url)
    server.enqueue(reply("Nothing to do."))
    done = journeyman(
        "run", "say hi", "--yes", "--no-verify", "-w", str(workspace), "--model", "tiny",
        "--tool-format", "text", "--session-dir", str(tmp_path / "sessions"), "-o", output,
        env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_stream_json_and_the_stored_session_say_which_tool_mode_is_used(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    lines = [json.loads(line) for line in run(fake_openai, tmp_path, "stream-json").splitlines()]
    (started,) = [line for line in lines if line["type"] == "run_started"]
    assert started["tool_mode"].startswith("text: tool calls written as fenced JSON")
    store = SessionStore(tmp_path / "sessions")
    try:
        (session,) = store.list_sessions()
        stored = [e for e in store.events(session.record.id) if e.get("type") == "run_started"]
    finally:
        store.close()
    assert stored and stored[0]["tool_mode"] == started["tool_mode"]


def test_the_json_result_says_which_tool_mode_was_used(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    result = json.loads(run(fake_openai, tmp_path, "json"))
    assert result["tool_mode"].startswith("text: tool calls written as fenced JSON")


def test_help_says_how_the_provider_and_the_model_are_found() -> None:
    shown = " ".join(
        CliRunner().invoke(app, ["run", "--help"], env={"COLUMNS": "200"}).output.split()
    )
    for words in (
        "PATH.gguf",
        "smollm2-135m",
        "JOURNEYMAN_LOCAL_PORTS",
        "11434",
        "asked for its models",
    ):
        assert words in shown, words
