"""A big tool argument is stored in full where it is needed — the model's message (for resume)
and the undo journal — and not again in events or in the tool result's metadata."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from journeyman import Agent, AgentConfig
from journeyman.core.messages import ToolCall
from journeyman.providers.base import ModelResponse
from journeyman.providers.scripted import ScriptedProvider
from journeyman.session.store import DATABASE_FILE, STORED_PREVIEW_CHARS, SessionStore

CONTENT = "value = 'a line of generated python text'\n" * 25_000  # about 1 MB


async def test_a_big_write_is_stored_twice_not_five_times(tmp_path: Path) -> None:
    workspace, root = tmp_path / "ws", tmp_path / "s"
    workspace.mkdir()
    write = ToolCall("w", "write_file", {"path": "big.py", "content": CONTENT})
    script = [ModelResponse(text="writing", tool_calls=(write,)), ModelResponse(text="done")]
    agent = Agent(
        ScriptedProvider(script), workspace=workspace, config=AgentConfig(session_dir=root)
    )
    result = await agent.run("write it")

    store = SessionStore(root)
    try:
        messages = store.messages(result.session_id)
        events = list(store.events(result.session_id))
        [change] = store.file_changes(result.session_id)
    finally:
        store.close()
    assert messages[1].tool_calls[0].arguments["content"] == CONTENT  # resume needs it whole
    assert change.after == CONTENT  # undo needs it whole
    [call_event] = [e for e in events if e["type"] == "tool_call"]
    shown = call_event["call"]["arguments"]["content"]
    assert shown.startswith(CONTENT[:STORED_PREVIEW_CHARS]) and "cut when stored" in shown
    assert f"{len(CONTENT):,} characters" in shown

    db = sqlite3.connect(root / DATABASE_FILE)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    stored = {
        table: db.execute(
            f"SELECT COALESCE(SUM(LENGTH(CAST(body AS BLOB))), 0) FROM {table}"
        ).fetchone()[0]
        for table in ("messages", "events")
    }
    db.close()
    assert stored["events"] < 50_000
    assert stored["messages"] < len(CONTENT) + 50_000
    assert (root / DATABASE_FILE).stat().st_size < 2.5 * len(CONTENT)
