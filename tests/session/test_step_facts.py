"""Each fact of a step is stored once (a call's arguments and a result's text in the step's
messages, referred to by its events) and every reader gets the events back as emitted."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from journeyman.core import events as ev
from journeyman.core.messages import Message, ToolCall, ToolResult, Usage
from journeyman.session.store import STORED_PREVIEW_CHARS, SessionStore, StepRecord
from journeyman.session.transfer import export_session, merge_session
from tests.fakes.store import new_session, rows

OUTPUT = "line of output that is easy to count\n" * 200  # 7,400 characters


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SessionStore]:
    opened = SessionStore(tmp_path / "sessions")
    yield opened
    opened.close()


def command_step(number: int, output: str = OUTPUT) -> tuple[StepRecord, list[dict[str, object]]]:
    """A step whose model ran one command, with the events a run emits for it."""
    call = ToolCall(f"call_{number}", "run_command", {"command": f"cat log{number}.txt"})
    result = ToolResult(call.id, call.name, output, metadata={"exit_code": 0})
    emitted = [
        ev.ModelResponseReceived(number, "", (call,), Usage(100, 20), 0.001, "tool_calls", 0.02),
        ev.ToolCallStarted(number, call),
        ev.ToolResultReceived(number, result, 0.01),
    ]
    events = [ev.event_to_dict(e) for e in emitted]
    messages = [Message.assistant("", (call,)), Message.tool(result)]
    return StepRecord(number, messages, events, {"counters": {"iterations": number}}), events


def stored_bodies(store: SessionStore, table: str) -> str:
    return "".join(body for (body,) in rows(store.path, f"SELECT body FROM {table}"))


def test_a_result_and_its_arguments_are_written_once(store: SessionStore) -> None:
    sid = new_session(store)
    record, _ = command_step(1)
    store.record_step(sid, record)

    written = stored_bodies(store, "messages") + stored_bodies(store, "events")
    assert written.count("line of output that is easy to count") == 200
    assert written.count("cat log1.txt") == 1


def test_events_read_back_as_they_were_emitted_with_previews_capped(store: SessionStore) -> None:
    sid = new_session(store)
    emitted = []
    for number in (1, 2):
        record, events = command_step(number, OUTPUT if number == 1 else "short output")
        store.record_step(sid, record)
        emitted += events

    read = list(store.events(sid))
    assert [e["type"] for e in read] == [e["type"] for e in emitted]
    first_result = read[2]["result"]
    assert first_result["content"].startswith(OUTPUT[:STORED_PREVIEW_CHARS])
    assert "7,400 characters, cut when stored" in first_result["content"]
    assert read[5]["result"]["content"] == "short output"
    for got, sent in zip(read, emitted, strict=True):
        if got["type"] != "tool_result":
            assert got == sent
    typed = [e for _, e in store.read_step_events(sid, types={"tool_call", "tool_result"})]
    assert isinstance(typed[0], ev.ToolCallStarted)
    assert typed[0].call.arguments == {"command": "cat log1.txt"}
    assert isinstance(typed[3], ev.ToolResultReceived) and typed[3].result.content == "short output"
    messages = store.messages(sid)
    assert messages[1].tool_result is not None and messages[1].tool_result.content == OUTPUT


def test_a_shipped_session_reads_the_same_in_another_store(
    store: SessionStore, tmp_path: Path
) -> None:
    sid = new_session(store)
    record, _ = command_step(1)
    store.record_step(sid, record)

    other = SessionStore(tmp_path / "elsewhere")
    try:
        merge_session(other, export_session(store, sid))
        assert list(other.events(sid)) == list(store.events(sid))
        assert other.messages(sid) == store.messages(sid)
    finally:
        other.close()


def test_a_call_id_said_twice_in_a_step_is_kept_in_full(store: SessionStore) -> None:
    """A model that reuses a call id within one turn: the events keep their own text."""
    sid = new_session(store)
    one = ToolCall("dup", "run_command", {"command": "echo a"})
    two = ToolCall("dup", "run_command", {"command": "echo b"})
    results = [ToolResult("dup", "run_command", "a"), ToolResult("dup", "run_command", "b")]
    events = [ev.event_to_dict(ev.ToolCallStarted(1, c)) for c in (one, two)]
    events += [ev.event_to_dict(ev.ToolResultReceived(1, r, 0.0)) for r in results]
    messages = [Message.assistant("", (one, two)), *(Message.tool(r) for r in results)]
    store.record_step(sid, StepRecord(1, messages, events, {}))

    assert list(store.events(sid)) == events


def test_a_result_whose_message_is_missing_says_so(store: SessionStore) -> None:
    sid = new_session(store)
    record, _ = command_step(1)
    store.record_step(sid, record)
    store._db.execute("DELETE FROM messages WHERE session_id = ?", (sid,))

    result = next(e for e in store.events(sid) if e["type"] == "tool_result")["result"]
    assert result["content"] == "[not found among the session's stored messages]"
