"""Strategies that build each turn; the kernel calls `Mode.iterate` once per turn."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from journeyman.economics.loop_detector import LoopCheck
from journeyman.loop.endings import Termination
from journeyman.loop.port import TurnPort
from journeyman.loop.state import LoopState, TurnOutcome


class Mode(Protocol):
    async def iterate(self, state: LoopState, port: TurnPort) -> TurnOutcome: ...


@runtime_checkable
class StatefulMode(Protocol):
    """A mode with state of its own beyond the messages; the kernel stores it in every step's
    checkpoint and gives it back on resume."""

    def snapshot(self) -> dict[str, Any]:
        """JSON-ready state after the step just taken."""
        ...

    def restore(self, data: Mapping[str, Any]) -> None:
        """Continue from a `snapshot` (called once, before the first turn of a resume)."""
        ...


@runtime_checkable
class RepetitionPolicy(Protocol):
    """A mode with its own answer to repeated actions: the kernel hands it what the observer
    found instead of passing the plain loop nudge to the model."""

    def on_repetition(
        self, state: LoopState, check: LoopCheck, port: TurnPort
    ) -> Termination | None:
        """Respond to `check` (queue nudges, change course); a Termination stops the run."""
        ...
