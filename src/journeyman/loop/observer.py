"""What the loop learns from each finished turn: progress, loops and phases, and the nudges
they call for. The same code rebuilds this knowledge from a stored history on resume.

Every mode reports a turn's calls together with their results (`TurnOutcome`), so the
observer learns the same from a react turn as from a phased ACT step. A result whose metadata
says `pending` (a tool that has no answer yet, such as a language server still analysing) is
not counted by the loop detector: asking again is the right move there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from journeyman.core import events as ev
from journeyman.core.messages import Message, Role, ToolCall, ToolResult
from journeyman.core.tool_kind import ToolKind
from journeyman.economics.loop_detector import LoopCheck, LoopDetector, result_digest
from journeyman.economics.phases import PhaseTracker
from journeyman.loop.config import AgentConfig
from journeyman.loop.progress import ProgressTracker
from journeyman.loop.state import LoopState, TurnOutcome

Nudge = tuple[str, str]
"""(kind, message) to show the model before its next turn."""
LOOP_NUDGE = "loop"


class TurnObserver:
    def __init__(self, config: AgentConfig, kind_of: Callable[[ToolCall], ToolKind | None]) -> None:
        self.kind_of = kind_of
        """What each call's tool declares (`ToolRegistry.kind_of`); phases follow kinds."""
        self.progress = ProgressTracker()
        self.loops = LoopDetector(threshold=config.loop_threshold)
        self.phases = PhaseTracker(config.exploration_saturation)
        self.last_loop: LoopCheck | None = None
        """The repetition found in the last observed turn, if any."""

    @property
    def unproductive_streak(self) -> int:
        return self.progress.unproductive_streak

    def observe(self, outcome: TurnOutcome) -> list[Nudge]:
        if outcome.by_harness:  # the harness's check is not a turn of the model's
            self.last_loop = None
            return []
        return self._observe(outcome.text, outcome.calls, outcome.results, outcome.calls_pending)

    def _observe(
        self,
        text: str,
        calls: Sequence[ToolCall],
        results: Sequence[ToolResult],
        calls_pending: bool = False,
    ) -> list[Nudge]:
        nudges: list[Nudge] = []
        self.last_loop = None
        self.progress.observe(text, calls, results)
        if not calls and not calls_pending and text.strip():
            self.phases.record_text()
        for call, result in zip(calls, results, strict=False):
            path = call.arguments.get("path")
            found = self.phases.record(
                call.name,
                self.kind_of(call),
                is_error=result.is_error,
                path=path if isinstance(path, str) else None,
            )
            nudges.extend((n.kind.value, n.message) for n in found)
            if result.metadata.get("pending") is True:
                continue  # "not ready yet, ask again": repeating that is waiting, not looping
            check = self.loops.record(call.name, call.arguments, result_digest(result.content))
            if check.is_loop:
                self.last_loop = check
                nudges.append((LOOP_NUDGE, check.message))
                stuck = self.phases.note_loop(check)
                if stuck is not None:
                    nudges.append((stuck.kind.value, stuck.message))
        return nudges

    def replay(self, messages: Sequence[Message]) -> None:
        """Feed every stored turn (an assistant message and the tool results after it)."""
        index = 0
        while index < len(messages):
            message = messages[index]
            index += 1
            if message.role is not Role.ASSISTANT:
                continue
            results = []
            while index < len(messages) and messages[index].role is Role.TOOL:
                result = messages[index].tool_result
                if result is not None:
                    results.append(result)
                index += 1
            self._observe(message.content, message.tool_calls, results)


def deliver_nudges(state: LoopState, emit: Callable[[ev.Event], None]) -> None:
    """The queued nudges (budget, phase, loop, hooks) reach the model as one user message."""
    if not state.pending_nudges:
        return
    for kind, message in state.pending_nudges:
        emit(ev.NudgeInjected(kind, message))
    text = "\n\n".join(dict.fromkeys(m for _, m in state.pending_nudges))
    state.messages.append(Message.user(f"[journeyman] {text}"))
    state.pending_nudges.clear()
