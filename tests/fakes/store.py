"""Session-store fixtures: a stored session, a realistic step, a read through another
connection (as another process would)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from journeyman.core.messages import Message, ToolCall, ToolResult, Usage
from journeyman.economics.usage_log import UsageRow
from journeyman.session.store import SessionRecord, SessionStore, StepRecord


def new_session(store: SessionStore, session_id: str = "s1", workspace: str = "/ws") -> str:
    store.create_session(
        SessionRecord(
            id=session_id,
            task="fix the bug",
            workspace=workspace,
            settings={"provider": "scripted", "model": "m"},
            system_prompt="you are a test",
        )
    )
    return session_id


def step(session_id: str, number: int, *, usage: bool = True) -> StepRecord:
    """A realistic step: the model's call, the tool's result, two events and a usage row."""
    call = ToolCall(f"c{number}", "read_file", {"path": f"f{number}.py"})
    return StepRecord(
        step=number,
        messages=[
            Message.assistant(f"reading f{number}", [call]),
            Message.tool(ToolResult(call.id, "read_file", f"contents {number}")),
        ],
        events=[
            {"type": "tool_call", "name": "read_file", "step": number},
            {"type": "tool_result", "name": "read_file", "step": number},
        ],
        checkpoint={"counters": {"iterations": number}},
        usage=[UsageRow(session_id, number, "scripted", "m", Usage(10, 5), 0.001, 0.01)]
        if usage
        else [],
    )


def rows(path: Path, query: str, *params: Any) -> list[tuple[Any, ...]]:
    """Read through a separate connection, as another process would."""
    db = sqlite3.connect(path)
    try:
        return db.execute(query, params).fetchall()
    finally:
        db.close()
