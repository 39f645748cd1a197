"""JSONL export and import of sessions: one header line, then every message and event."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

from journeyman.core.errors import ConfigurationError
from journeyman.core.messages import Message, Role, ToolCall, ToolResult
from journeyman.session.redact import Redactor
from journeyman.session.store import SessionRecord, SessionStore, StepRecord

FORMAT = "journeyman-session-1"


class _Ignored(Protocol):
    @property
    def message(self) -> str: ...


class DataTrust(Protocol):
    """The trust rule for settings read from a file (`policy.settings.trusted_from_data`):
    the settings it keeps, and what it left out. Passed in, since the rule lives in policy."""

    def __call__(
        self, settings: Mapping[str, Any], source: str, /
    ) -> tuple[dict[str, Any], Sequence[_Ignored]]: ...


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


@dataclass
class ImportedSession:
    """What `import_file` stored, and what the user should know about it."""

    session_id: str
    ignored: list[str] = field(default_factory=list)
    """Why settings of the file were not kept (the trust rules for data), one line each."""
    notes: list[str] = field(default_factory=list)
    """Plain facts about the import (e.g. that it has no file history)."""


def _read_lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    try:
        with path.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                try:
                    item = json.loads(line)
                except (json.JSONDecodeError, RecursionError) as error:
                    reason = error.msg if isinstance(error, json.JSONDecodeError) else "too deep"
                    raise ConfigurationError(
                        f"{path}:{number}: not valid JSON ({reason})"
                    ) from None
                if not isinstance(item, dict):
                    raise ConfigurationError(f"{path}:{number}: expected a JSON object per line")
                yield number, item
    except UnicodeDecodeError as error:
        raise ConfigurationError(f"{path} is not UTF-8 text ({error.reason})") from None


def import_jsonl(
    store: SessionStore,
    path: Path,
    new_id: str,
    *,
    trust: DataTrust,
    workspace: Path | None = None,
    mark: Mapping[str, Any] | None = None,
) -> ImportedSession:
    """Store an exported session under `new_id` (its messages as one step), in `workspace` if
    given, else in the workspace the export names (see `import_file` for `mark`).

    The file's settings are data: only descriptive ones are kept (`trusted_from_data`), so an
    export cannot bring hooks, permissions, a sandbox choice or a provider endpoint with it.
    """
    lines = list(_read_lines(path))
    if not lines or lines[0][1].get("kind") != "session" or lines[0][1].get("format") != FORMAT:
        raise ConfigurationError(f"{path} is not a journeyman session export ({FORMAT})")
    header = lines[0][1]
    for key in ("task", "workspace"):
        if not isinstance(header.get(key), str):
            raise ConfigurationError(
                f"{path}:1: the session header has no {key!r} text; the export is incomplete"
            )
    settings = header.get("settings")
    if not isinstance(settings, dict):
        settings = {}
    kept, ignored = trust(settings, str(path))
    messages = []
    for number, line in lines[1:]:
        if line.get("kind") != "message":
            continue
        try:
            message = Message.from_dict({k: v for k, v in line.items() if k != "kind"})
            if not isinstance(message.content, str):
                raise ValueError("its content is not text")
            messages.append(message)
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise ConfigurationError(
                f"{path}:{number}: not a message this version understands ({_why(error)})"
            ) from None
    events = [line["event"] for _, line in lines[1:] if line.get("kind") == "event"]
    system_prompt = header.get("system_prompt")
    recorded = header["workspace"]
    notes = []
    if workspace is not None and recorded != str(workspace.resolve()):
        notes.append(
            f"the file names {recorded} as its workspace; the session works in "
            f"{workspace.resolve()} (choose another with --workspace)"
        )
    store.create_session(
        SessionRecord(
            id=new_id,
            task=header["task"],
            workspace=recorded if workspace is None else str(workspace.resolve()),
            settings={
                **kept,
                "imported_from": str(header.get("id", path)),
                "recorded_workspace": recorded,
                **(mark or {}),
            },
            system_prompt=system_prompt if isinstance(system_prompt, str) else "",
            parent_id=header.get("parent_id") if isinstance(header.get("parent_id"), str) else None,
        )
    )
    store.record_step(new_id, StepRecord(step=0, messages=messages, events=events, checkpoint={}))
    return ImportedSession(new_id, ignored=[item.message for item in ignored], notes=notes)


def _why(error: BaseException) -> str:
    if isinstance(error, KeyError):
        return f"missing field {error.args[0]!r}"
    return str(error)


MINI_FORMAT = "mini-swe-agent-1.1"
"""The trajectory format of mini-swe-agent 2.x."""
MINI_FORMATS = ("mini-swe-agent-1", MINI_FORMAT)
"""Every `trajectory_format` mini-swe-agent has written (1.x, then 2.x); files from before 1.x
wrote none, and its own test data are bare message lists: both are read too."""

NO_FILE_HISTORY = (
    "an imported session has no file history: a fork starts from the workspace's files as they "
    "are now, and cannot roll them back to an earlier step"
)


def import_file(
    store: SessionStore,
    path: Path,
    new_id: str,
    *,
    trust: DataTrust,
    workspace: Path | None = None,
    mark: Mapping[str, Any] | None = None,
) -> ImportedSession:
    """Import our JSONL export or a mini-swe-agent trajectory, whichever `path` holds.

    `workspace` replaces the working directory the file recorded (for a trajectory) or the
    workspace of the exported session; the command line always gives one, so that a file never
    chooses where a session works (the recorded folder is kept as a descriptive setting).
    `mark` is added to the stored settings (after the file's own were filtered).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise ConfigurationError(f"{path} is not UTF-8 text ({error.reason})") from None
    try:
        whole = json.loads(text) if text.strip() else None
    except (json.JSONDecodeError, RecursionError):
        whole = None  # JSON lines, or not JSON at all: the JSONL reader says which line
    if _is_mini_trajectory(whole):
        imported = import_mini_swe_agent(
            store, path, new_id, data=whole, trust=trust, workspace=workspace, mark=mark
        )
    else:
        imported = import_jsonl(store, path, new_id, trust=trust, workspace=workspace, mark=mark)
    imported.notes.append(NO_FILE_HISTORY)
    return imported


def _is_mini_trajectory(data: Any) -> bool:
    if isinstance(data, list):  # a bare message list
        return bool(data) and all(isinstance(m, dict) and "role" in m for m in data)
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        return False
    return data.get("trajectory_format", None) in (None, *MINI_FORMATS)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(part.get("text", "")) if isinstance(part, dict) else str(part) for part in content
        )
    return "" if content is None else str(content)


def _at(data: Any, *keys: str) -> Any:
    """`data[k1][k2]...`, or None where a level is missing or not an object."""
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def import_mini_swe_agent(
    store: SessionStore,
    path: Path,
    new_id: str,
    *,
    trust: DataTrust,
    data: Any = None,
    workspace: Path | None = None,
    mark: Mapping[str, Any] | None = None,
) -> ImportedSession:
    """Store a mini-swe-agent trajectory as a session, one step per model turn (step 0 holds the
    task).

    Every published shape is read: 2.x (`mini-swe-agent-1.1`), 1.x (`mini-swe-agent-1`, and the
    earlier files without a format), and a bare list of messages. The workspace is the working
    directory the run recorded (`info.config.environment.cwd`) unless `workspace` is given, else
    the folder holding the file; the model name, exit status and cost are kept as descriptive
    settings.

    Native tool calls become our tool calls and results; text-based actions (a bash block in the
    assistant's text) stay text, with the observation as the next user message. A call the run
    never answered (the submitting one, when mini-swe-agent stops on it) gets a placeholder
    result, so the history remains valid for any provider. The closing `exit` message is not
    something the model saw and is left out (its status is kept in the settings).
    """
    data = _mini_data(path, data)
    info = {} if isinstance(data, list) else (data.get("info") or {})
    system, steps = _mini_steps(data if isinstance(data, list) else data["messages"])
    task = next((m.content for m in steps[0] if m.role is Role.USER), "")
    recorded_cwd = _at(info, "config", "environment", "cwd")
    recorded = recorded_cwd if isinstance(recorded_cwd, str) and recorded_cwd else None
    where = workspace if workspace is not None else Path(recorded) if recorded else path.parent
    kept, ignored = trust(_mini_settings(path, data, info, recorded_cwd), str(path))
    store.create_session(
        SessionRecord(
            id=new_id,
            task=task,
            workspace=str(where.resolve()),
            settings={**kept, **(mark or {})},
            system_prompt=system,
        )
    )
    for number, step_messages in enumerate(steps):
        store.record_step(
            new_id, StepRecord(step=number, messages=step_messages, events=[], checkpoint={})
        )
    notes = _mini_workspace_notes(where, chosen=workspace is not None, recorded_cwd=recorded)
    return ImportedSession(new_id, ignored=[item.message for item in ignored], notes=notes)


def _mini_data(path: Path, data: Any) -> Any:
    """The trajectory (read from `path` unless `data` is given), refused unless it has a
    mini-swe-agent shape."""
    if data is None:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, RecursionError, UnicodeDecodeError) as error:
            raise ConfigurationError(f"{path}: not valid JSON ({error})") from None
    if not _is_mini_trajectory(data):
        raise ConfigurationError(
            f"{path} is not a mini-swe-agent trajectory (one of {', '.join(MINI_FORMATS)}, "
            "or a list of messages)"
        )
    return data


def _mini_steps(raw_messages: list[Any]) -> tuple[str, list[list[Message]]]:
    """The system prompt and the messages of each step: step 0 holds the task, every assistant
    turn opens a new step."""
    system = ""
    steps: list[list[Message]] = [[]]
    messages = steps[0]
    call_names: dict[str, str] = {}
    unanswered: list[str] = []
    for raw in raw_messages:
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
            calls = _mini_tool_calls(raw.get("tool_calls") or [], call_names, unanswered)
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
    return system, steps


def _mini_tool_calls(
    raw_calls: list[Any], call_names: dict[str, str], unanswered: list[str]
) -> list[ToolCall]:
    """An assistant message's native tool calls, each noted as waiting for its result."""
    calls = []
    for tc in raw_calls:
        if not isinstance(tc, dict):
            continue
        function = tc.get("function") or {}
        try:
            arguments = json.loads(function.get("arguments") or "{}")
        except (json.JSONDecodeError, RecursionError, TypeError):
            arguments = {"raw": function.get("arguments")}
        if not isinstance(arguments, dict):
            arguments = {"raw": arguments}
        name = str(function.get("name") or "bash")
        call_id = str(tc.get("id", ""))
        call_names[call_id] = name
        unanswered.append(call_id)
        calls.append(ToolCall(call_id, name, arguments))
    return calls


def _mini_settings(path: Path, data: Any, info: Any, recorded_cwd: Any) -> dict[str, Any]:
    """What the file says of its run, kept as descriptive settings (subject to the trust rules)."""
    version = None if isinstance(data, list) else data.get("trajectory_format")
    return {
        "imported_from": str(path),
        "format": version
        or (
            "mini-swe-agent (message list)"
            if isinstance(data, list)
            else "mini-swe-agent (no format field)"
        ),
        "mini_version": info.get("mini_version"),
        "exit_status": info.get("exit_status"),
        "model_name": _at(info, "config", "model", "model_name"),
        "cost_usd": _at(info, "model_stats", "instance_cost"),
        "api_calls": _at(info, "model_stats", "api_calls"),
        "recorded_cwd": recorded_cwd or None,
    }


def _mini_workspace_notes(where: Path, *, chosen: bool, recorded_cwd: str | None) -> list[str]:
    """What the user should know about the folder the imported session works in."""
    if not chosen and recorded_cwd:
        if where.is_dir():
            return []
        return [
            f"the run worked in {recorded_cwd}, which is not a folder here; "
            "import again with --workspace to say where its files are"
        ]
    if not chosen:
        return [
            f"the file records no working directory; using {where.resolve()} "
            "(import again with --workspace to choose another)"
        ]
    if recorded_cwd and recorded_cwd != str(where.resolve()):
        return [
            f"the run worked in {recorded_cwd}; the session works in {where.resolve()} "
            "(choose another with --workspace)"
        ]
    return []


UNANSWERED = "(no result was recorded for this call: the run ended on it)"


def _answer(messages: list[Message], unanswered: list[str], call_names: dict[str, str]) -> None:
    """Give each call still waiting for its result a placeholder one, in call order."""
    for call_id in unanswered:
        messages.append(Message.tool(ToolResult(call_id, call_names[call_id], UNANSWERED)))
    unanswered.clear()
