"""A stored history with a tool call left without a result (older versions could store one) is
repaired when loaded, so a resume sends providers a history they accept."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from journeyman import Agent, AgentConfig, FinishReason
from journeyman.core.messages import Role, ToolCall
from journeyman.providers.base import ModelResponse
from journeyman.providers.scripted import ScriptedProvider
from journeyman.session.store import DATABASE_FILE, SessionStore
from tests.fakes.agents import Crash, crash


async def test_resume_answers_a_stored_call_that_had_no_result(tmp_path: Path) -> None:
    workspace, root = tmp_path / "ws", tmp_path / "s"
    workspace.mkdir()
    config = AgentConfig(session_dir=root, verify=False)
    calls = (ToolCall("v", "list_files", {}), ToolCall("w", "list_files", {"path": "."}))
    later = ModelResponse(text="one more", tool_calls=(ToolCall("x", "list_files", {}),))
    first = ScriptedProvider([ModelResponse(text="two calls", tool_calls=calls), later, crash])
    with pytest.raises(Crash):
        await Agent(first, workspace=workspace, config=config).run("look")
    # what an older version stored: the first call's result is missing
    db = sqlite3.connect(root / DATABASE_FILE)
    db.execute('DELETE FROM messages WHERE body LIKE \'%"call_id": "v"%\'')
    db.commit()
    db.close()

    provider = ScriptedProvider([ModelResponse(text="done")])
    store = SessionStore(root)
    [summary] = store.list_sessions()
    store.close()
    result = await Agent(provider, workspace=workspace, config=config).resume(summary.record.id)
    assert result.finish_reason is FinishReason.ANSWERED
    sent = list(provider.requests[0].messages)
    assert [m.role for m in sent[:5]] == [
        Role.USER, Role.ASSISTANT, Role.TOOL, Role.TOOL, Role.ASSISTANT,
    ]  # fmt: skip
    # the results follow the calls in call order: the added one for "v", then "w"'s own
    assert [m.tool_result.call_id for m in sent[2:4] if m.tool_result] == ["v", "w"]
    added = sent[2].tool_result
    assert added is not None and added.is_error and "not run" in added.content

    # the repair is the same on every load, and the resumed turn follows it
    store = SessionStore(root)
    try:
        again = store.messages(summary.record.id)
    finally:
        store.close()
    assert again[:4] == sent[:4] and again[-1].content == "done"
