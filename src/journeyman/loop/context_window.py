"""The context window: when the projected history passes the trigger (or the provider refused
it as too long, or the user asked with `request_compaction`), compact it, with the summary call
of `ModelCalls`, and move the budget's baseline to the new size so removed tokens stop counting
against the token budget."""

from __future__ import annotations

from collections.abc import Callable

from journeyman.context.compaction import Compactor
from journeyman.core import events as ev
from journeyman.economics.budget import ExecutionEconomics
from journeyman.loop.hooks import LoopHooks
from journeyman.loop.model_calls import ModelCalls
from journeyman.loop.recorder import StepRecorder
from journeyman.loop.state import LoopState
from journeyman.policy.hooks import HookEvent


class ContextWindow:
    def __init__(
        self,
        compactor: Compactor | None,
        model: ModelCalls,
        hooks: LoopHooks,
        economics: ExecutionEconomics,
        emit: Callable[[ev.Event], None],
    ) -> None:
        self.compactor = compactor
        self.model = model
        self.hooks = hooks
        self.economics = economics
        self.emit = emit
        self.recorder: StepRecorder | None = None
        self.compaction_requested = False
        """Compact at the next turn whatever the size (the user's /compact); one-shot."""

    def request_compaction(self) -> None:
        """Compact the history at the start of the next turn, however small it is."""
        self.compaction_requested = True

    async def overflow(self, state: LoopState) -> bool:
        """The provider refused the prompt as too long: compact whatever the trigger says."""
        return await self.compact(state, overflow=True)

    async def compact(self, state: LoopState, *, overflow: bool = False) -> bool:
        """Shrink the history when its projected size passes the trigger (always, on overflow).

        Returns whether the history changed.
        """
        if self.compactor is None:
            return False
        requested, self.compaction_requested = self.compaction_requested, False
        meter, ratio = self.model.history_meter, state.token_ratio
        window = self.model.provider.capabilities.context_window
        fixed = self.model.fixed_tokens()
        projected = int(meter.tokens(state.messages, fixed) * ratio)
        over_size = overflow or requested or self.compactor.should_compact(projected, window)
        if not over_size and not self.compactor.stale_observations_due(state.messages, meter):
            return False
        pre = await self.hooks.run(
            HookEvent.PRE_COMPACT, state, extra={"tokens": projected, "overflow": overflow}
        )
        if pre is not None and pre.denied and not (overflow or requested):
            return False  # a hook may veto a routine compaction, not a refused or asked one
        if over_size:
            result = await self.compactor.compact(
                state.messages,
                context_window=int(window / ratio),
                fixed_tokens=fixed,
                summarise=lambda transcript: self.model.summarise(
                    state, transcript, after_history=not overflow
                ),
                force=overflow or requested,
            )
        else:
            result = await self.compactor.mask_stale(state.messages)
            result.tokens_before += fixed
            result.tokens_after += fixed
        if not result.changed:
            return False
        state.messages[:] = result.messages
        meter.reset()
        if self.recorder is not None:
            self.recorder.history_replaced()
        before = int(result.tokens_before * ratio)
        after = int(result.tokens_after * ratio)
        self.economics.update_baseline(after)
        reason = "threshold" if over_size else "stale_observations"
        if overflow or requested:
            reason = "overflow" if overflow else "requested"
        self.emit(
            ev.ContextCompacted(
                reason,
                tuple(stage.value for stage in result.stages),
                before,
                after,
            )
        )
        await self.hooks.run(
            HookEvent.POST_COMPACT,
            state,
            extra={"tokens_before": before, "tokens_after": after, "stages": result.stages},
        )
        return True
