"""JSONL export and import of sessions: one header line, then every message and event."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from journeyman.core.errors import ConfigurationError
from journeyman.core.messages import Message, Role, ToolCall, ToolResult
from journeyman.session.redact import Redactor
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
    # an event's own fields may include "kind" (a nudge's), so events are nested
    lines += [{"kind": "event", "event": e} for e in store.events(session_id)]
    redact = Redactor()  # the store holds redacted text; this also catches keys set since
    for line in lines:
        out.write(json.dumps(redact.tree(line), ensure_ascii=False, default=str) + "\n")
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
    events = [line["event"] for line in lines[1:] if line.get("kind") == "event"]
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


MINI_FORMAT = "mini-swe-agent-1.1"


def import_file(store: SessionStore, path: Path, new_id: str) -> str:
    """Import our JSONL export or a mini-swe-agent trajectory, whichever `path` holds."""
    head = path.read_text(encoding="utf-8", errors="replace")[:4096].lstrip()
    if head.startswith("{") and f'"{MINI_FORMAT}"' in path.read_text(encoding="utf-8"):
        return import_mini_swe_agent(store, path, new_id)
    return import_jsonl(store, path, new_id)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(part.get("text", "")) if isinstance(part, dict) else str(part) for part in content
        )
    return "" if content is None else str(content)


def import_mini_swe_agent(store: SessionStore, path: Path, new_id: str) -> str:
    """Store a mini-swe-agent trajectory as a session, one step per model turn (step 0 holds the
    task), so it can be forked at any turn.

    Native tool calls become our tool calls and results; text-based actions (a bash block in the
    assistant's text) stay text, with the observation as the next user message. A call the run
    never answered (the submitting one, when mini-swe-agent stops on it) gets a placeholder
    result, so the history remains valid for any provider. The closing `exit` message is not
    something the model saw and is left out (its status is kept in the settings).
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ConfigurationError(f"{path}: not valid JSON ({error.msg})") from None
    if not isinstance(data, dict) or data.get("trajectory_format") != MINI_FORMAT:
        raise ConfigurationError(f"{path} is not a mini-swe-agent trajectory ({MINI_FORMAT})")
    system = ""
    steps: list[list[Message]] = [[]]
    messages = steps[0]
    call_names: dict[str, str] = {}
    unanswered: list[str] = []
    for raw in data.get("messages", []):
        if not isinstance(raw, dict):
            continue
        role = raw.get("role")
        text = _text(raw.get("content"))
        if role != "tool":
            _answer(messages, unanswered, call_names)
        if role == "system" and not system:
            system = text
        elif role == "exit":
            continue
        elif role == "assistant":
            messages = []
            steps.append(messages)
            calls = []
            for tc in raw.get("tool_calls") or []:
                function = tc.get("function", {})
                try:
                    arguments = json.loads(function.get("arguments") or "{}")
                except json.JSONDecodeError:
                    arguments = {"raw": function.get("arguments")}
                name = function.get("name", "bash")
                call_names[tc.get("id", "")] = name
                unanswered.append(tc.get("id", ""))
                calls.append(ToolCall(tc.get("id", ""), name, arguments))
            messages.append(Message.assistant(text, calls))
        elif role == "tool":
            call_id = str(raw.get("tool_call_id", ""))
            if call_id in unanswered:
                unanswered.remove(call_id)
            result = ToolResult(call_id, call_names.get(call_id, "bash"), text)
            messages.append(Message.tool(result))
        elif text:
            messages.append(Message.user(text))
    _answer(messages, unanswered, call_names)
    task = next((m.content for m in steps[0] if m.role is Role.USER), "")
    info = data.get("info", {})
    store.create_session(
        SessionRecord(
            id=new_id,
            task=task,
            workspace=str(path.parent.resolve()),
            settings={
                "imported_from": str(path),
                "format": MINI_FORMAT,
                "mini_version": info.get("mini_version"),
                "exit_status": info.get("exit_status"),
            },
            system_prompt=system,
        )
    )
    for number, step_messages in enumerate(steps):
        store.record_step(
            new_id, StepRecord(step=number, messages=step_messages, events=[], checkpoint={})
        )
    return new_id


UNANSWERED = "(no result was recorded for this call: the run ended on it)"


def _answer(messages: list[Message], unanswered: list[str], call_names: dict[str, str]) -> None:
    """Give each call still waiting for its result a placeholder one, in call order."""
    for call_id in unanswered:
        messages.append(Message.tool(ToolResult(call_id, call_names[call_id], UNANSWERED)))
    unanswered.clear()
