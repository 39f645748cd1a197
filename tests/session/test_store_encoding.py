"""Text the store cannot encode as UTF-8 — lone surrogates from model output, file names that
were not UTF-8 — is escaped at the store boundary: nothing crashes, and messages load back as
they were, so a resume sends the model exactly what it saw."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from journeyman import Agent, AgentConfig, FinishReason
from journeyman.core.messages import Message, ToolCall, ToolResult
from journeyman.providers.base import ModelResponse
from journeyman.providers.scripted import ScriptedProvider
from journeyman.session.store import SessionStore, StepRecord
from tests.fakes.agents import Crash, crash
from tests.fakes.store import new_session

BROKEN = "half an emoji \ud83d and a lone \ud800 here"
UNDECODABLE_NAME = os.fsdecode(b"caf\xe9.txt")  # latin-1 bytes: 'caf\udce9.txt'


def test_a_message_with_lone_surrogates_round_trips(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    try:
        sid = new_session(store)
        call = ToolCall("c1", "read_file", {"path": UNDECODABLE_NAME})
        messages = [
            Message.assistant(BROKEN, [call]),
            Message.tool(ToolResult("c1", "read_file", f"listing: {UNDECODABLE_NAME}")),
        ]
        store.record_step(
            sid,
            StepRecord(1, messages, [{"type": "model_response", "text": BROKEN}], {"n": BROKEN}),
        )
        store.record_file_change(sid, 1, UNDECODABLE_NAME, None, BROKEN, "write_file", BROKEN)
        store.record_outcome(sid, "completed", BROKEN, BROKEN)
        assert store.messages(sid) == messages
        assert [e["text"] for e in store.events(sid)] == [BROKEN]
        assert store.checkpoint(sid)[1] == {"n": BROKEN}
        [change] = store.file_changes(sid)
        assert change.path == "caf\ufffd.txt" and change.after == BROKEN.replace(
            "\ud83d", "\ufffd"
        ).replace("\ud800", "\ufffd")
        assert "\ufffd" in store.summary(sid).final_text
    finally:
        store.close()


async def test_a_run_with_broken_text_and_file_names_resumes(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    with open(os.path.join(os.fsencode(ws), b"caf\xe9.txt"), "w") as handle:
        handle.write("x")
    listing = ModelResponse(text=BROKEN, tool_calls=(ToolCall("l1", "list_files", {}),))
    config = AgentConfig(session_dir=tmp_path / "s", verify=False)
    with pytest.raises(Crash):
        await Agent(ScriptedProvider([listing, crash]), workspace=ws, config=config).run("look")
    store = SessionStore(tmp_path / "s")
    [summary] = store.list_sessions()
    history = store.messages(summary.record.id)
    store.close()
    assert history[1].content == BROKEN
    # the listing shows the undecodable byte as an escape, and the store keeps it as it is
    assert "caf\\xe9.txt" in history[2].content

    resumed = ScriptedProvider([ModelResponse(text="done")])
    agent = Agent(resumed, workspace=ws, config=config)
    result = await agent.resume(summary.record.id)
    assert result.finish_reason is FinishReason.ANSWERED
    assert list(resumed.requests[0].messages) == history
