"""Wiring the swarm's shared state into one worker's `Agent`.

A worker's own limits (turns, tokens, its local doom loop) are its loop's (see
`worker_budget`); what is added here is only what the swarm sees across workers.
`attach_worker(agent, worker_id, economics, context, task=...)`, before `agent.run(...)`:

- the agent's events are heard through a listener (`Agent.add_listener`): a finished
  call identical to this worker's previous one, same tool, arguments and result, is a repeat
  and is counted in `SharedEconomicsState` (a file read again later in the task, or a test run
  again after an edit, is not);
- a PreToolUse hook refuses (deny) a call the swarm flagged as a global doom loop, telling the
  model why, and stops the worker (halt) when it makes that call again after the refusal;
- a PostToolUse / PostToolUseFailure hook tells the worker, once, about every global doom loop
  flagged since its last call (a message before its next turn);
- failed tool calls are recorded in the shared `SharedContextState`, so the next workers'
  prompts include them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from journeyman.core import events as ev
from journeyman.economics.loop_detector import loop_signature, result_digest
from journeyman.policy.hooks import HookEvent, HookOutcome, HookPayload
from journeyman.swarm.shared.context_state import SharedContextState
from journeyman.swarm.shared.economics_state import SharedEconomicsState
from journeyman.swarm.shared.worker_budget import call_fingerprint, call_label

if TYPE_CHECKING:
    from journeyman.loop.agent import Agent


@dataclass
class WorkerAttachment:
    """What `attach_worker` changed; `detach()` makes the hooks inert and stops listening."""

    agent: Agent
    worker_id: str
    """The id the worker's calls and failures are recorded under in the shared state."""
    economics: SharedEconomicsState | None
    context: SharedContextState | None
    task: str = ""
    """The subtask the worker is on, reported with its repeats (`should_skip(task)`)."""
    active: bool = True
    stop_listening: Callable[[], None] | None = None
    repeats: int = 0
    """Calls of this worker that repeated its previous call (same arguments and result)."""
    _calls: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    _last: str | None = None
    _told: set[str] = field(default_factory=set)
    _refused: set[str] = field(default_factory=set)

    def detach(self) -> None:
        if self.active:
            self.active = False
            if self.stop_listening is not None:
                self.stop_listening()

    def on_event(self, event: ev.Event) -> None:
        if self.active:
            self._observe(event)

    def _observe(self, event: ev.Event) -> None:
        if isinstance(event, ev.ToolCallStarted):
            self._calls[event.call.id] = (event.call.name, dict(event.call.arguments))
            return
        if not isinstance(event, ev.ToolResultReceived):
            return
        result = event.result
        name, args = self._calls.pop(result.call_id, (result.name, {}))
        label = call_label(name, args)
        if result.is_error and self.context is not None:
            self.context.record_failure(self.worker_id, label, result.content)
        signature = loop_signature(name, args, result_digest(result.content))
        repeated, self._last = signature == self._last, signature
        if repeated:
            self.repeats += 1
            if self.economics is not None:
                fingerprint = call_fingerprint(name, args)
                self.economics.record(self.worker_id, fingerprint, label=label, task=self.task)

    def before_tool(self, _event: HookEvent, payload: HookPayload) -> HookOutcome | None:
        economics = self.economics
        if not self.active or economics is None or payload.tool_name is None:
            return None
        fingerprint = call_fingerprint(payload.tool_name, payload.tool_args)
        if not economics.is_global_doom_loop(fingerprint):
            return None
        if fingerprint in self._refused:
            return HookOutcome.halt(
                f"global doom loop: the worker made a call the swarm flagged (more than "
                f"{economics.global_doom_threshold} repeats across workers) again after it was "
                f"refused: {call_label(payload.tool_name, payload.tool_args)}"
            )
        self._refused.add(fingerprint)
        self._told.add(fingerprint)
        return HookOutcome.deny(
            f"the swarm flagged this call as a global doom loop ({_seen(economics, fingerprint)});"
            " it fails for every worker, so try another way or report what blocks you"
        )

    def after_tool(self, _event: HookEvent, _payload: HookPayload) -> HookOutcome | None:
        economics = self.economics
        if not self.active or economics is None:
            return None
        new = [lp for lp in economics.global_doom_loops() if lp.fingerprint not in self._told]
        if not new:
            return None
        self._told.update(lp.fingerprint for lp in new)
        lines = "\n".join(f"- {lp.describe()}" for lp in new)
        return HookOutcome.inject(
            "Other workers keep repeating these calls with the same result (global doom loop); "
            "do not make them:\n" + lines
        )


def _seen(economics: SharedEconomicsState, fingerprint: str) -> str:
    loop = next((lp for lp in economics.global_doom_loops() if lp.fingerprint == fingerprint), None)
    return loop.describe() if loop is not None else "this call repeats across the swarm"


def attach_worker(
    agent: Agent,
    worker_id: str,
    economics: SharedEconomicsState | None = None,
    context: SharedContextState | None = None,
    *,
    task: str = "",
) -> WorkerAttachment:
    """Report `agent`'s repeated calls to the swarm and enforce its global doom loops (see the
    module's docstring)."""
    attachment = WorkerAttachment(agent, worker_id, economics, context, task)
    attachment.stop_listening = agent.add_listener(attachment.on_event)
    name = f"swarm-worker-{worker_id}"
    agent.hooks.add(HookEvent.PRE_TOOL_USE, attachment.before_tool, name=name)
    agent.hooks.add(HookEvent.POST_TOOL_USE, attachment.after_tool, name=name)
    agent.hooks.add(HookEvent.POST_TOOL_USE_FAILURE, attachment.after_tool, name=name)
    return attachment
