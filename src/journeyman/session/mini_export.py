"""A stored session as a mini-swe-agent trajectory (`.traj.json`, the `mini-swe-agent-1.1` format
of its 2.x releases), for the tools that read those files (its inspector, SWE-bench pipelines).

The shape is mini-swe-agent's own: `info` (`model_stats` with `instance_cost` and `api_calls`,
`config` with the agent, model and environment, `exit_status`, `submission`), then `messages`
as the model saw them — the system prompt, the task, each reply with its native tool calls (the
arguments as a JSON string) and an `extra` holding its actions, cost and time, each tool result
as a `tool` message — closed by an `exit` message, then `trajectory_format`.

journeyman's tools are not all bash: each action names its tool and arguments, and carries
`command` where the tool ran one. `submission` is the session's change as a unified diff (what
a SWE-bench run submits), from the undo journal. Subagents have no place in the format: their
session ids are listed in `info.subagent_sessions`, each exportable on its own. Secrets are
redacted as in every export.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO, Any

from journeyman.core.messages import Role
from journeyman.core.package import package_version
from journeyman.core.redact import Redactor
from journeyman.session.atif_export import COST_DIGITS
from journeyman.session.history import Entry, read_history
from journeyman.session.store import SessionStore, storable
from journeyman.session.trajectory import MINI_FORMAT
from journeyman.session.undo import FileChangeTracker

COMMAND_ARGUMENT = "command"
"""The argument that holds the command of a tool that runs one (run_command)."""


def export_mini(store: SessionStore, session_id: str, out: IO[str]) -> dict[str, Any]:
    """Write the session as a mini-swe-agent trajectory; returns what was written."""
    data = mini_trajectory(store, session_id)
    out.write(storable(json.dumps(data, ensure_ascii=False, indent=2)) + "\n")
    return data


def mini_trajectory(
    store: SessionStore, session_id: str, redactor: Redactor | None = None
) -> dict[str, Any]:
    """The session as mini-swe-agent's `.traj.json` data, redacted."""
    summary = store.summary(session_id)
    record = summary.record
    settings = record.settings
    config = settings.get("config") if isinstance(settings.get("config"), dict) else {}
    rows = store.usage_rows(session_id)
    costs = [row.cost_usd for row in rows]
    submission = FileChangeTracker(store, session_id, Path(record.workspace)).diff()
    exit_status = summary.finish_reason or "unfinished"
    messages: list[dict[str, Any]] = []
    if record.system_prompt:
        messages.append({"role": "system", "content": record.system_prompt})
    for item in read_history(store, session_id).items:
        if isinstance(item, Entry):
            messages.append(_message(item))
    messages.append(
        {
            "role": "exit",
            "content": summary.error or summary.final_text,
            "extra": {"exit_status": exit_status, "submission": submission},
        }
    )
    data = {
        "info": {
            "model_stats": {
                # mini-swe-agent counts an unpriced call as 0.0; the file says so below
                "instance_cost": round(sum(cost or 0.0 for cost in costs), COST_DIGITS),
                "api_calls": len(rows),
            },
            "config": {
                "agent": {"mode": (config or {}).get("mode"), "task": record.task},
                "agent_type": f"journeyman {package_version()}",
                "model": {"model_name": settings.get("model") or settings.get("model_name")},
                "model_type": settings.get("provider"),
                "environment": {"cwd": record.workspace},
                "environment_type": (config or {}).get("sandbox"),
            },
            "exit_status": exit_status,
            "submission": submission,
            "session_id": record.id,
            "unpriced_calls": sum(1 for cost in costs if cost is None),
            "subagent_sessions": store.subagent_ids(session_id),
        },
        "messages": messages,
        "trajectory_format": MINI_FORMAT,
    }
    redact = redactor or Redactor()
    result: dict[str, Any] = redact.tree(data)
    return result


def _message(entry: Entry) -> dict[str, Any]:
    message = entry.message
    result = message.tool_result
    if result is not None:
        exit_code = result.metadata.get("exit_code")
        return {
            "role": "tool",
            "tool_call_id": result.call_id,
            "content": result.content,
            "extra": {
                "tool": result.name,
                "returncode": exit_code if isinstance(exit_code, int) else None,
                "is_error": result.is_error,
                "timestamp": entry.at,
            },
        }
    if message.role is not Role.ASSISTANT:
        return {"role": message.role.value, "content": message.content}
    call = entry.model_call
    shown: dict[str, Any] = {"role": "assistant", "content": message.content}
    if message.tool_calls:
        shown["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
            }
            for c in message.tool_calls
        ]
    shown["extra"] = {
        "actions": [_action(c.id, c.name, c.arguments) for c in message.tool_calls],
        "cost": (call.cost_usd or 0.0) if call else 0.0,
        "usage": call.usage.to_dict() if call else None,
        "model": call.model if call else None,
        "timestamp": entry.at,
    }
    return shown


def _action(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    action: dict[str, Any] = {"tool": name, "arguments": arguments, "tool_call_id": call_id}
    command = arguments.get(COMMAND_ARGUMENT)
    if isinstance(command, str):
        action["command"] = command
    return action
