"""JSONL export and import of sessions: one header line, then every message and event."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from journeyman.core.errors import ConfigurationError
from journeyman.core.messages import Message
from journeyman.session.store import SessionRecord, SessionStore, StepRecord

FORMAT = "journeyman-session-1"


def export_jsonl(store: SessionStore, session_id: str, out: IO[str]) -> int:
    """Write the session as JSON lines; returns the number of lines written."""
    summary = store.summary(session_id)
    record = summary.record
    lines: list[dict[str, Any]] = [
        {
            "kind": "session",
            "format": FORMAT,
            "id": record.id,
            "task": record.task,
            "workspace": record.workspace,
            "settings": record.settings,
            "system_prompt": record.system_prompt,
            "parent_id": record.parent_id,
            "forked_at_step": record.forked_at_step,
            "created_at": record.created_at,
            "steps": summary.steps,
            "finish_reason": summary.finish_reason,
            "final_text": summary.final_text,
        }
    ]
    lines += [{"kind": "message", **m.to_dict()} for m in store.messages(session_id)]
    lines += [{"kind": "event", **e} for e in store.events(session_id)]
    for line in lines:
        out.write(json.dumps(line, ensure_ascii=False, default=str) + "\n")
    return len(lines)


def _read_lines(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError as error:
                raise ConfigurationError(f"{path}:{number}: not valid JSON ({error.msg})") from None


def import_jsonl(store: SessionStore, path: Path, new_id: str) -> str:
    """Store an exported session under `new_id` (its messages as one step); returns the id."""
    lines = list(_read_lines(path))
    if not lines or lines[0].get("kind") != "session" or lines[0].get("format") != FORMAT:
        raise ConfigurationError(f"{path} is not a journeyman session export ({FORMAT})")
    header = lines[0]
    messages = [
        Message.from_dict({k: v for k, v in line.items() if k != "kind"})
        for line in lines[1:]
        if line.get("kind") == "message"
    ]
    events = [
        {k: v for k, v in line.items() if k != "kind"}
        for line in lines[1:]
        if line.get("kind") == "event"
    ]
    store.create_session(
        SessionRecord(
            id=new_id,
            task=header["task"],
            workspace=header["workspace"],
            settings={**header["settings"], "imported_from": header["id"]},
            system_prompt=header["system_prompt"],
            parent_id=header.get("parent_id"),
        )
    )
    store.record_step(new_id, StepRecord(step=0, messages=messages, events=events, checkpoint={}))
    return new_id
