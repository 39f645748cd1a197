"""`journeyman acp` reopens sessions from the folder the user config names, where `run` put
them, and keeps writing there."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from journeyman.session.store import SessionStore
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import reply
from tests.protocols.acp.conftest import EditorClient, acp
from tests.support.cli import clean_env, journeyman


@pytest.mark.slow  # a `run` and an editor process
async def test_a_session_run_stored_via_the_user_config_is_loaded_and_continued(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    config = tmp_path / "user-config"
    config.mkdir()
    chosen = tmp_path / "chosen-sessions"
    (config / "config.toml").write_text(f"session_dir = {str(chosen)!r}\n")
    env = clean_env(
        OPENAI_API_KEY="sk-test",
        OPENAI_BASE_URL=fake_openai.base_url,
        JOURNEYMAN_CONFIG_DIR=str(config),
        XDG_DATA_HOME=str(tmp_path / "data"),
    )
    fake_openai.enqueue(
        reply(tool_calls=[("write_file", {"path": "a.txt", "content": "one\n"})]),
        reply(tool_calls=[("finish", {"summary": "wrote a"})]),
    )
    first = journeyman(
        "run", "--yes", "write a.txt", "-w", str(workspace), "--provider", "openai",
        "--model", "m", "--no-verify", "-o", "json", env=env,
    )  # fmt: skip
    assert first.returncode == 0, first.stderr
    session = json.loads(first.stdout)["session_id"]

    fake_openai.enqueue(
        reply(tool_calls=[("write_file", {"path": "b.txt", "content": "two\n"})]),
        reply(tool_calls=[("finish", {"summary": "wrote b"})]),
    )
    client = EditorClient()
    with (tmp_path / "acp-stderr.txt").open("ab") as stderr:
        async with acp.spawn_agent_process(
            client, sys.executable, "-m", "journeyman", "acp", "--no-lsp", "--sandbox", "local",
            "--no-verify", env=env, transport_kwargs={"stderr": stderr.fileno()},
        ) as (conn, _process):  # fmt: skip
            await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
            await conn.load_session(cwd=str(workspace), session_id=session, mcp_servers=[])
            replayed = client.take()
            stop = await conn.prompt(
                session_id=session,
                prompt=[acp.schema.TextContentBlock(type="text", text="now write b.txt")],
            )
    log = (tmp_path / "acp-stderr.txt").read_text()
    assert replayed and replayed[0].content.text == "write a.txt", log
    assert stop.stop_reason == "end_turn", log
    assert (workspace / "b.txt").read_text() == "two\n"
    store = SessionStore(chosen)
    try:
        assert [s.record.id for s in store.list_sessions()] == [session]
        assert [c.path for c in store.file_changes(session)] == ["a.txt", "b.txt"]
    finally:
        store.close()
    assert not (tmp_path / "data" / "journeyman" / "sessions").exists()
