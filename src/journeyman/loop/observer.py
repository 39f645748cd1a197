"""What the loop learns from each finished turn: progress, loops and phases, and the nudges
they call for. The same code rebuilds this knowledge from a stored history on resume."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from enum import StrEnum

from journeyman.core.messages import Message, Role, ToolCall, ToolResult
from journeyman.economics.loop_detector import LoopDetector, result_digest
from journeyman.economics.phases import PhaseTracker
from journeyman.loop.config import AgentConfig
from journeyman.loop.progress import ProgressTracker

Nudge = tuple[str, str]
"""(kind, message) to show the model before its next turn."""


class TurnObserver:
    def __init__(
        self, config: AgentConfig, kind_of: Callable[[str], StrEnum | None] | None = None
    ) -> None:
        self.kind_of = kind_of
        """What a named tool declares it does (read / edit / command ...), when known."""
        self.progress = ProgressTracker()
        self.loops = LoopDetector(threshold=config.loop_threshold)
        self.phases = PhaseTracker(config.exploration_saturation)

    @property
    def unproductive_streak(self) -> int:
        return self.progress.unproductive_streak

    def observe(
        self, text: str, calls: Sequence[ToolCall], results: Sequence[ToolResult]
    ) -> list[Nudge]:
        nudges: list[Nudge] = []
        self.progress.observe(text, calls, results)
        if not calls and text.strip():
            self.phases.record_text()
        for call, result in zip(calls, results, strict=False):
            path = call.arguments.get("path")
            kind = self.kind_of(call.name) if self.kind_of is not None else None
            found = self.phases.record(
                call.name,
                is_error=result.is_error,
                path=path if isinstance(path, str) else None,
                kind=kind.value if kind is not None else None,
            )
            nudges.extend((n.kind.value, n.message) for n in found)
            check = self.loops.record(call.name, call.arguments, result_digest(result.content))
            if check.is_loop:
                nudges.append(("loop", check.message))
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
            self.observe(message.content, message.tool_calls, results)
