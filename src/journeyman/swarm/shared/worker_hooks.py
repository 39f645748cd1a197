"""Wiring a `WorkerBudgetTracker` (and the swarm's shared state) into a journeyman `Agent`.

`attach_worker(agent, tracker, context=...)`, before `agent.run(...)`:

- the agent's events go through `tracker.observe` first (tokens, turns, call fingerprints),
  then to the handler the agent already had;
- a PreToolUse hook stops the worker (halt) once the tracker says it must stop (a local doom
  loop, tokens or turns spent), so the call that closed a doom loop is not run (a `finish`
  call still goes through: the worker's report is worth keeping), and refuses
  (deny) a call the swarm flagged as a global doom loop, telling the model why;
- a PostToolUse / PostToolUseFailure hook tells the worker, once, about every global doom loop
  flagged since its last call (a message before its next turn);
- failed tool calls, and the reason the worker was stopped, are recorded in the shared
  `SharedContextState`, so the next workers' prompts include them;
- `tracker.on_stop` also calls `agent.cancel()`, which ends the run before its next turn when
  no tool call is left to halt.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from journeyman.core import events as ev
from journeyman.core.tool_kind import ToolKind
from journeyman.policy.hooks import HookEvent, HookOutcome, HookPayload
from journeyman.swarm.shared.context_state import SharedContextState
from journeyman.swarm.shared.worker_budget import (
    WorkerBudgetTracker,
    call_fingerprint,
    call_label,
)

if TYPE_CHECKING:
    from journeyman.loop.agent import Agent


@dataclass
class WorkerAttachment:
    """What `attach_worker` changed; `detach()` makes the hooks inert and stops listening."""

    agent: Agent
    tracker: WorkerBudgetTracker
    context: SharedContextState | None
    active: bool = True
    stop_listening: Callable[[], None] | None = None
    _labels: dict[str, str] = field(default_factory=dict)
    _told: set[str] = field(default_factory=set)

    def detach(self) -> None:
        if self.active:
            self.active = False
            if self.stop_listening is not None:
                self.stop_listening()

    def on_event(self, event: ev.Event) -> None:
        if self.active:
            self.tracker.observe(event)
            self._record_failure(event)

    def _record_failure(self, event: ev.Event) -> None:
        if isinstance(event, ev.ToolCallStarted):
            self._labels[event.call.id] = call_label(event.call.name, event.call.arguments)
        elif isinstance(event, ev.ToolResultReceived):
            label = self._labels.pop(event.result.call_id, event.result.name)
            if event.result.is_error and self.context is not None:
                self.context.record_failure(self.tracker.worker_id, label, event.result.content)

    def before_tool(self, _event: HookEvent, payload: HookPayload) -> HookOutcome | None:
        if not self.active:
            return None
        if self.tracker.stop_reason is not None:
            if payload.tool_name and self.agent.registry.kind_of(payload.tool_name) is (
                ToolKind.FINISH
            ):
                return None  # the work is done: let the worker report it (cancel ends the run)
            return HookOutcome.halt(self.tracker.stop_reason)
        economics = self.tracker.shared_economics
        if economics is None or payload.tool_name is None:
            return None
        fingerprint = call_fingerprint(payload.tool_name, payload.tool_args)
        if economics.is_global_doom_loop(fingerprint):
            self._told.add(fingerprint)
            loop = next(
                (lp for lp in economics.global_doom_loops() if lp.fingerprint == fingerprint), None
            )
            seen = loop.describe() if loop is not None else "this call repeats across the swarm"
            return HookOutcome.deny(
                f"the swarm flagged this call as a global doom loop ({seen}); it fails for every "
                "worker, so try another way or report what blocks you"
            )
        return None

    def after_tool(self, _event: HookEvent, _payload: HookPayload) -> HookOutcome | None:
        economics = self.tracker.shared_economics
        if not self.active or economics is None:
            return None
        new = [lp for lp in economics.global_doom_loops() if lp.fingerprint not in self._told]
        if not new:
            return None
        self._told.update(lp.fingerprint for lp in new)
        lines = "\n".join(f"- {lp.describe()}" for lp in new)
        return HookOutcome.inject(
            "Other workers keep failing on these calls (global doom loop); do not make them:\n"
            + lines
        )

    def stopped(self, reason: str) -> None:
        if self.context is not None:
            self.context.record_failure(self.tracker.worker_id, "the worker's run", reason)
        self.agent.cancel()


def attach_worker(
    agent: Agent,
    tracker: WorkerBudgetTracker,
    context: SharedContextState | None = None,
) -> WorkerAttachment:
    """Make `tracker` watch and police `agent`'s runs (see the module's docstring)."""
    attachment = WorkerAttachment(agent, tracker, context)
    attachment.stop_listening = agent.add_listener(attachment.on_event)
    previous_stop = tracker.on_stop

    def on_stop(reason: str) -> None:
        if attachment.active:
            attachment.stopped(reason)
        if previous_stop is not None:
            previous_stop(reason)

    tracker.on_stop = on_stop
    name = f"swarm-worker-{tracker.worker_id}"
    agent.hooks.add(HookEvent.PRE_TOOL_USE, attachment.before_tool, name=name)
    agent.hooks.add(HookEvent.POST_TOOL_USE, attachment.after_tool, name=name)
    agent.hooks.add(HookEvent.POST_TOOL_USE_FAILURE, attachment.after_tool, name=name)
    return attachment
