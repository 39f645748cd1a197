"""The loop's side of the hooks: build the payload, report failing hooks, queue what hooks
tell the model, and raise `HookHalt` when one stops the run."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from journeyman.core import events as ev
from journeyman.core.errors import ErrorCategory
from journeyman.core.result import FinishReason
from journeyman.loop.endings import HookHalt, Termination
from journeyman.loop.state import LoopState
from journeyman.policy.hooks import HookEvent, HookPayload, HookRunner, HookRunResult


class LoopHooks:
    def __init__(
        self, runner: HookRunner, workspace: Path, emit: Callable[[ev.Event], None]
    ) -> None:
        self.runner = runner
        self.workspace = workspace
        self.emit = emit

    async def start(self, state: LoopState, *, resumed: bool) -> Termination | None:
        """SessionStart, and UserPromptSubmit for a new task (which may refuse it)."""
        await self.run(
            HookEvent.SESSION_START, state, prompt=state.task, extra={"resumed": resumed}
        )
        if resumed:
            return None
        submitted = await self.run(HookEvent.USER_PROMPT_SUBMIT, state, prompt=state.task)
        if submitted is not None and submitted.denied:
            message = f"the task was refused by a hook: {submitted.reason}"
            return Termination(FinishReason.HALTED, message)
        return None

    async def end(self, state: LoopState, ending: Termination) -> None:
        """SessionEnd; it cannot change the ending, and a second Ctrl-C skips it."""
        with contextlib.suppress(asyncio.CancelledError, HookHalt):
            await self.run(
                HookEvent.SESSION_END,
                state,
                message=state.final_text or None,
                extra={"finish_reason": ending.reason.value},
            )

    async def run(self, event: HookEvent, state: LoopState, **fields: Any) -> HookRunResult | None:
        """Run `event`'s hooks, queueing their messages for the model; None when none listen.

        Raises `HookHalt` when a hook stops the run.
        """
        if not self.runner.has(event):
            return None
        payload = HookPayload(session_id=state.session_id, cwd=str(self.workspace), **fields)
        outcome = await self.runner.run(event, payload)
        for error in outcome.errors:
            self.emit(
                ev.ErrorOccurred(
                    ErrorCategory.INTERNAL.value,
                    f"{event} hook {error.hook!r} failed ({error.kind}): {error.message}",
                    False,
                    {},
                )
            )
        if outcome.message:
            state.pending_nudges.append(("hook", outcome.message))
        if outcome.halted:
            raise HookHalt(str(event), outcome.reason)
        return outcome
