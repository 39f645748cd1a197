"""A stored session as an ATIF trajectory (the Agent Trajectory Interchange Format, v1.8), built
from the `atif` package's models so that what is written is what they validate.

Steps: the system prompt (a system step), each user message (a user step), each reply (an agent
step: its text, its tool calls, their results as the observation, and the model call's tokens
and cost as its metrics), each compaction (a system step). The session's subagents are embedded
in `subagent_trajectories`, each with its own subagents, recursively; a spawn call's result
points at its child's trajectory (`subagent_trajectory_ref`).

Secrets are redacted as in every export (`Redactor.tree` over the whole document), then the
document is validated again by the models.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import IO, Any

import atif
from pydantic import ValidationError

from journeyman.core.errors import ConfigurationError
from journeyman.core.messages import Role, ToolResult, Usage
from journeyman.core.package import package_version
from journeyman.core.redact import Redactor
from journeyman.economics.usage_log import UsageRow
from journeyman.session.history import Compaction, Entry, ModelCall, read_history
from journeyman.session.store import SessionStore, storable

AtifAgent = atif.Agent
"""ATIF's agent record (not journeyman's `Agent`, which only the launcher builds)."""

SCHEMA_VERSION = "ATIF-v1.8"
AGENT_NAME = "journeyman"
MAX_EMBEDDED_DEPTH = 32
"""Subagents deeper than this are named (in `extra.subagents_not_embedded`), not embedded: the
subagent config allows a few levels; only parent links of imported files could make more."""
CHILD_KEY = "child_session_id"
"""The key of a spawn call's result metadata that names the subagent session it started."""


def export_atif(store: SessionStore, session_id: str, out: IO[str]) -> atif.Trajectory:
    """Write the session (with its subagents) as one ATIF JSON document; returns it."""
    trajectory = atif_trajectory(store, session_id)
    out.write(atif_json(trajectory))
    return trajectory


def atif_json(trajectory: atif.Trajectory) -> str:
    """The document's JSON text on one line (unset fields left out), with any lone surrogate a
    stored text kept (bytes that were not UTF-8) made U+FFFD, so that it can be written as
    UTF-8. One line: a long session's file is written in a third of the time indented JSON
    takes (`jq .` indents it)."""
    text = json.dumps(trajectory.to_json_dict(), ensure_ascii=False)
    return storable(text) + "\n"


def atif_trajectory(
    store: SessionStore, session_id: str, redactor: Redactor | None = None
) -> atif.Trajectory:
    """The session with its subagents as an ATIF trajectory, redacted and validated (whole:
    a step's observation is completed after the step was built)."""
    redact = redactor or Redactor()
    try:
        built = _trajectory(store, session_id, visited=set(), depth=0)
        return atif.Trajectory.model_validate(redact.tree(built.to_json_dict()))
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise ConfigurationError(
            f"session {session_id} holds data an ATIF trajectory cannot carry "
            f"({where}: {first['msg']}); export it as jsonl instead"
        ) from None


def _trajectory(
    store: SessionStore, session_id: str, visited: set[str], depth: int
) -> atif.Trajectory:
    visited.add(session_id)
    summary = store.summary(session_id)
    record = summary.record
    # parent links of an imported session are data: a loop among them is cut here
    child_ids = [child for child in store.subagent_ids(session_id) if child not in visited]
    too_deep = child_ids if depth >= MAX_EMBEDDED_DEPTH else []
    children = [
        _trajectory(store, child, visited, depth + 1) for child in child_ids if not too_deep
    ]
    history = read_history(store, session_id)
    steps = _Steps({child.trajectory_id or "" for child in children})
    if record.system_prompt:
        steps.add(source="system", message=record.system_prompt, timestamp=_iso(record.created_at))
    copied = _copied_from_parent(record.forked_at_step, history.items)
    for item in history.items:
        if isinstance(item, Compaction):
            steps.compaction(item)
        else:
            steps.copying = id(item) in copied
            steps.entry(item)
    rows = store.usage_rows(session_id)
    settings = record.settings
    model = settings.get("model") or settings.get("model_name")
    return atif.Trajectory(
        schema_version=SCHEMA_VERSION,
        session_id=record.id,
        trajectory_id=record.id,
        agent=AtifAgent(
            name=AGENT_NAME,
            version=package_version(),
            model_name=str(model) if model else None,
            extra=_agent_extra(settings),
        ),
        steps=steps.steps,
        final_metrics=_final_metrics(rows, len(steps.steps), history.unmatched_calls, children),
        extra=_drop_none(
            {
                "task": record.task,
                "workspace": record.workspace,
                "created_at": _iso(record.created_at),
                "parent_session_id": record.parent_id,
                "forked_at_step": record.forked_at_step,
                "finish_reason": summary.finish_reason,
                "final_text": summary.final_text or None,
                "error": summary.error,
                "subagents_not_embedded": too_deep or None,
            }
        ),
        subagent_trajectories=children or None,
    )


def _copied_from_parent(forked_at: int | None, items: list[Entry | Compaction]) -> set[int]:
    """The entries (by `id`) a fork copied from its parent: the history stored with its step 0
    before its own task, the last message of that step."""
    if forked_at is None:
        return set()
    first = [item for item in items if isinstance(item, Entry) and item.step == 0]
    return {id(item) for item in first[:-1]}


class _Steps:
    """The steps of one trajectory as they are read: a reply opens an agent step, and the tool
    results after it become that step's observation."""

    def __init__(self, child_ids: set[str]) -> None:
        self.steps: list[atif.Step] = []
        self._child_ids = child_ids
        self._open: atif.Step | None = None
        """The agent step whose tool results are still arriving."""
        self.copying = False
        """The entries being read are a fork's copy of its parent's history."""

    def add(self, **fields: Any) -> atif.Step:
        if self.copying:
            fields["is_copied_context"] = True
        step = atif.Step(step_id=len(self.steps) + 1, **fields)
        self.steps.append(step)
        self._open = None
        return step

    def compaction(self, item: Compaction) -> None:
        self.add(
            source="system",
            message=f"context compacted ({item.reason}): "
            f"{item.tokens_before:,} -> {item.tokens_after:,} tokens",
            timestamp=_iso(item.at),
            extra={"compaction": {"reason": item.reason, "stages": list(item.stages)}},
        )

    def entry(self, entry: Entry) -> None:
        message = entry.message
        result = message.tool_result
        if result is not None:
            self._observe(result, entry)
        elif message.role is Role.ASSISTANT:
            self._reply(entry)
            return
        else:
            source = "system" if message.role is Role.SYSTEM else "user"
            self.add(source=source, message=_text(message.content), timestamp=_iso(entry.at))

    def _reply(self, entry: Entry) -> None:
        message, call = entry.message, entry.model_call
        calls = [
            atif.ToolCall(
                tool_call_id=str(c.id),  # an imported file's ids and names may be anything
                function_name=str(c.name),
                arguments=c.arguments,
                extra={"invalid": c.invalid} if c.invalid else None,
            )
            for c in message.tool_calls
        ]
        step = self.add(
            source="agent",
            message=_text(message.content),
            timestamp=_iso(entry.at),
            model_name=call.model if call else None,
            tool_calls=calls or None,
            metrics=_metrics(call) if call else None,
            llm_call_count=1 if call else None,
            extra=_drop_none(
                {"step": entry.step, "stop_reason": call.stop_reason if call else None}
            ),
        )
        if calls:
            self._open = step

    def _observe(self, result: ToolResult, entry: Entry) -> None:
        observed = atif.ObservationResult(
            source_call_id=str(result.call_id),
            content=_text(result.content),
            subagent_trajectory_ref=self._child_ref(result),
            extra=_drop_none(
                {
                    "tool": result.name,
                    "is_error": result.is_error or None,
                    "duration_s": entry.duration_s,
                    "metadata": result.metadata or None,
                }
            ),
        )
        step = self._open
        if step is None or str(result.call_id) not in {
            c.tool_call_id for c in step.tool_calls or ()
        }:
            # a result with no reply before it (a harness's own call, an imported file's
            # leftover): a system step of its own, not tied to any call
            orphan = observed.model_copy(update={"source_call_id": None})
            orphan.extra = {**(orphan.extra or {}), "call_id": result.call_id}
            self.add(
                source="system",
                message=f"result of {result.name}",
                timestamp=_iso(entry.at),
                observation=atif.Observation(results=[orphan]),
            )
            return
        if step.observation is None:
            step.observation = atif.Observation(results=[])
        step.observation.results.append(observed)

    def _child_ref(self, result: ToolResult) -> list[atif.SubagentTrajectoryRef] | None:
        child = result.metadata.get(CHILD_KEY)
        if not isinstance(child, str) or child not in self._child_ids:
            return None
        return [atif.SubagentTrajectoryRef(trajectory_id=child, session_id=child)]


def _text(content: object) -> str:
    """A stored text as text (an imported file's may be a list or a number)."""
    return content if isinstance(content, str) else json.dumps(content, default=str)


def _metrics(call: ModelCall) -> atif.Metrics:
    usage = call.usage
    return atif.Metrics(
        prompt_tokens=usage.total_input_tokens,
        completion_tokens=usage.output_tokens,
        cached_tokens=usage.cache_read_tokens,
        cost_usd=call.cost_usd,
        extra={"cache_write_tokens": usage.cache_write_tokens, "latency_s": call.latency_s},
    )


def _final_metrics(
    rows: list[UsageRow],
    steps: int,
    unmatched: list[ModelCall],
    children: Iterable[atif.Trajectory],
) -> atif.FinalMetrics:
    """The session's own totals, from its usage rows (every billed call, also those with no
    turn to show); the totals with its subagents' in `extra`."""
    usage = sum((row.usage for row in rows), Usage())
    cost = _sum_cost(row.cost_usd for row in rows)
    tree_cost, tree_tokens = cost, usage.total_tokens
    for child in children:
        child_extra = (child.final_metrics.extra if child.final_metrics else None) or {}
        tree_cost = _sum_cost([tree_cost, child_extra.get("tree_cost_usd")])
        tree_tokens += int(child_extra.get("tree_tokens") or 0)
    return atif.FinalMetrics(
        total_prompt_tokens=usage.total_input_tokens,
        total_completion_tokens=usage.output_tokens,
        total_cached_tokens=usage.cache_read_tokens,
        total_cost_usd=cost,
        total_steps=steps,
        extra={
            "model_calls": len(rows),
            "model_calls_without_turn": len(unmatched),
            "cache_write_tokens": usage.cache_write_tokens,
            "tree_cost_usd": tree_cost,
            "tree_tokens": tree_tokens,
        },
    )


COST_DIGITS = 10
"""Sums of costs are rounded to this many decimals (a ten-billionth of a dollar), so that a
total reads $0.0017 rather than $0.0017000000000000001."""


def _sum_cost(costs: Iterable[float | None]) -> float | None:
    """The sum, or None when any part is unknown (an unpriced call)."""
    total = 0.0
    for cost in costs:
        if cost is None:
            return None
        total += cost
    return round(total, COST_DIGITS)


def _agent_extra(settings: dict[str, Any]) -> dict[str, Any] | None:
    config = settings.get("config") if isinstance(settings.get("config"), dict) else {}
    return _drop_none(
        {
            "provider": settings.get("provider"),
            "mode": config.get("mode") if isinstance(config, dict) else None,
            "imported_from": settings.get("imported_from"),
        }
    )


def _drop_none(fields: dict[str, Any]) -> dict[str, Any] | None:
    kept = {key: value for key, value in fields.items() if value is not None}
    return kept or None


def _iso(at: float | None) -> str | None:
    if at is None:
        return None
    try:
        return datetime.fromtimestamp(at, UTC).isoformat().replace("+00:00", "Z")
    except (OverflowError, OSError, ValueError):  # a damaged or hand-made time
        return None
