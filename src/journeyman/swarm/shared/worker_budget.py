"""One swarm worker's budget: tokens, iterations, and its own doom loops.

A call's fingerprint is the MD5 of ``{"tool": name, "args": args}`` as sorted-key JSON. The
tracker keeps the last `history_size` fingerprints; `doom_loop_threshold` identical ones in a
row is a local doom loop. Every fingerprint is also reported to the swarm's
`SharedEconomicsState`, which sees repeats across workers.

`observe(event)` takes the events of a journeyman run (`Agent(on_event=...)`), so a tracker
can watch a real worker; `worker_hooks.attach_worker` wires it in and stops the worker.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from journeyman.core import events as ev
from journeyman.core.text import one_line
from journeyman.swarm.shared.economics_state import SharedEconomicsState


class WorkerBudgetConfig(BaseModel):
    """Limits of one swarm worker."""

    model_config = ConfigDict(extra="forbid")

    max_tokens: int = Field(default=300_000, ge=1)
    """Tokens (input, cached and output) the worker may use over its whole run."""
    max_iterations: int = Field(default=50, ge=1)
    """Model turns the worker may take."""
    doom_loop_threshold: int = Field(default=3, ge=2)
    """Identical calls in a row that make a local doom loop."""
    history_size: int = Field(default=20, ge=2)
    """How many of the worker's most recent call fingerprints are kept."""


def call_fingerprint(tool: str, args: Mapping[str, Any] | None) -> str:
    """MD5 (hex) of ``{"tool": tool, "args": args}`` as sorted-key JSON; values JSON cannot
    encode are rendered with `str()`, so this never raises."""
    payload = json.dumps({"tool": tool, "args": dict(args or {})}, sort_keys=True, default=str)
    return hashlib.md5(payload.encode("utf-8", errors="surrogatepass")).hexdigest()


def call_label(tool: str, args: Mapping[str, Any] | None) -> str:
    """A short readable form of a call, for notices and failure records."""
    return one_line(f"{tool} {json.dumps(dict(args or {}), sort_keys=True, default=str)}", 200)


@dataclass(frozen=True)
class CallVerdict:
    """What one recorded call means for its worker and for the swarm."""

    fingerprint: str
    label: str
    repeats: int
    """Identical calls in a row ending with this one (1 when it differs from the last)."""
    local_doom_loop: bool
    global_doom_loop: bool
    """The swarm has flagged this call (now or before)."""


@dataclass(frozen=True)
class WorkerBudgetStatus:
    """Where a worker stands against its limits."""

    worker_id: str
    tokens: int
    iterations: int
    max_tokens: int
    max_iterations: int
    over_budget: bool
    stop_reason: str | None


StopCallback = Callable[[str], object]


class WorkerBudgetTracker:
    """Tracks one worker's tokens, iterations and call fingerprints.

    `on_stop(reason)` is called once, the first time the worker should stop (a local doom
    loop, or its tokens or iterations are spent); `stop_reason` keeps the reason.
    """

    def __init__(
        self,
        worker_id: str,
        config: WorkerBudgetConfig | None = None,
        shared_economics: SharedEconomicsState | None = None,
        *,
        task: str = "",
        on_stop: StopCallback | None = None,
    ) -> None:
        self.worker_id = worker_id
        self.config = config or WorkerBudgetConfig()
        self.shared_economics = shared_economics
        self.task = task
        """The subtask this worker is on, reported with its calls (`should_skip(task)`)."""
        self.on_stop = on_stop
        self.tokens = 0
        self.iterations = 0
        self.stop_reason: str | None = None
        self._recent: deque[str] = deque(maxlen=self.config.history_size)
        self._lock = threading.Lock()

    @property
    def recent_fingerprints(self) -> tuple[str, ...]:
        """The last `history_size` fingerprints, oldest first."""
        with self._lock:
            return tuple(self._recent)

    def record_tool_call(self, tool: str, args: Mapping[str, Any] | None) -> CallVerdict:
        """Record one call; a local doom loop stops the worker (through `on_stop`)."""
        fingerprint = call_fingerprint(tool, args)
        label = call_label(tool, args)
        with self._lock:
            self._recent.append(fingerprint)
            repeats = 0
            for seen in reversed(self._recent):
                if seen != fingerprint:
                    break
                repeats += 1
        local = repeats >= self.config.doom_loop_threshold
        global_loop = False
        if self.shared_economics is not None:
            verdict = self.shared_economics.record(
                self.worker_id, fingerprint, label=label, task=self.task
            )
            global_loop = verdict.is_global_doom_loop
        if local:
            self._stop(
                f"worker {self.worker_id} made the same call {repeats} times in a row "
                f"(local doom loop): {label}"
            )
        return CallVerdict(fingerprint, label, repeats, local, global_loop)

    def is_doom_loop(self) -> bool:
        """Whether the last calls are a local doom loop."""
        with self._lock:
            recent = list(self._recent)
        threshold = self.config.doom_loop_threshold
        return len(recent) >= threshold and len(set(recent[-threshold:])) == 1

    def record_tokens(self, tokens: int) -> None:
        with self._lock:
            self.tokens += max(0, int(tokens))
        self._check_budget()

    def record_iteration(self, iteration: int | None = None) -> None:
        """Count one model turn, or set the count to `iteration` when the loop numbers them."""
        with self._lock:
            self.iterations = max(self.iterations + 1 if iteration is None else iteration, 0)
        self._check_budget()

    def over_budget(self) -> str | None:
        """Which limit is spent ("tokens" or "iterations"), or None."""
        with self._lock:
            if self.tokens >= self.config.max_tokens:
                return "tokens"
            if self.iterations >= self.config.max_iterations:
                return "iterations"
        return None

    def is_over_budget(self) -> bool:
        return self.over_budget() is not None

    def status(self) -> WorkerBudgetStatus:
        with self._lock:
            tokens, iterations = self.tokens, self.iterations
        return WorkerBudgetStatus(
            self.worker_id,
            tokens,
            iterations,
            self.config.max_tokens,
            self.config.max_iterations,
            self.is_over_budget(),
            self.stop_reason,
        )

    def observe(self, event: ev.Event) -> CallVerdict | None:
        """Learn from one event of the worker's run: model responses add tokens and turns,
        tool calls are fingerprinted. Returns the verdict for a tool call, else None."""
        if isinstance(event, ev.ModelResponseReceived):
            with self._lock:
                self.tokens += event.usage.total_tokens
                self.iterations = max(self.iterations, event.iteration)
            self._check_budget()
        elif isinstance(event, ev.ToolCallStarted):
            return self.record_tool_call(event.call.name, event.call.arguments)
        return None

    def _check_budget(self) -> None:
        spent = self.over_budget()
        if spent == "tokens":
            self._stop(
                f"worker {self.worker_id} used {self.tokens:,} tokens, its limit is "
                f"{self.config.max_tokens:,}"
            )
        elif spent == "iterations":
            self._stop(
                f"worker {self.worker_id} took {self.iterations} turns, its limit is "
                f"{self.config.max_iterations}"
            )

    def _stop(self, reason: str) -> None:
        with self._lock:
            if self.stop_reason is not None:
                return
            self.stop_reason = reason
        if self.on_stop is not None:
            self.on_stop(reason)
