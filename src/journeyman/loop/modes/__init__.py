"""Strategies that build each turn; the kernel calls `Mode.iterate` once per turn."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from journeyman.loop.state import LoopState, TurnOutcome

if TYPE_CHECKING:
    from journeyman.loop.kernel import Kernel


class Mode(Protocol):
    async def iterate(self, state: LoopState, kernel: Kernel) -> TurnOutcome: ...
