"""The agent lifecycle: seven states, eighteen allowed transitions, listeners and history."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from enum import StrEnum
from typing import Any


class AgentState(StrEnum):
    IDLE = "idle"
    INITIALIZING = "initializing"
    RUNNING = "running"
    PAUSED = "paused"
    COMPLETING = "completing"
    ERROR = "error"
    DISPOSED = "disposed"


_S = AgentState
VALID_TRANSITIONS: frozenset[tuple[AgentState, AgentState]] = frozenset(
    {
        (_S.IDLE, _S.INITIALIZING),
        (_S.INITIALIZING, _S.RUNNING),
        (_S.INITIALIZING, _S.ERROR),
        (_S.RUNNING, _S.PAUSED),
        (_S.RUNNING, _S.COMPLETING),
        (_S.RUNNING, _S.ERROR),
        (_S.PAUSED, _S.RUNNING),
        (_S.PAUSED, _S.COMPLETING),
        (_S.PAUSED, _S.ERROR),
        (_S.COMPLETING, _S.IDLE),
        (_S.COMPLETING, _S.ERROR),
        (_S.ERROR, _S.IDLE),
        *((state, _S.DISPOSED) for state in _S if state is not _S.DISPOSED),
    }
)

TransitionListener = Callable[[AgentState, AgentState, Mapping[str, Any]], object]


class InvalidTransitionError(Exception):
    """Raised when a transition outside `VALID_TRANSITIONS` is attempted."""

    def __init__(self, from_state: AgentState, to_state: AgentState) -> None:
        super().__init__(f"invalid lifecycle transition {from_state.value} -> {to_state.value}")
        self.from_state = from_state
        self.to_state = to_state


class LifecycleMachine:
    """Tracks the agent's state; listeners observe transitions but cannot veto them."""

    def __init__(self, initial: AgentState = AgentState.IDLE) -> None:
        self._state = initial
        self._listeners: list[TransitionListener] = []
        self._history: list[tuple[AgentState, AgentState]] = []

    @property
    def state(self) -> AgentState:
        return self._state

    @property
    def history(self) -> list[tuple[AgentState, AgentState]]:
        return list(self._history)

    def can_transition(self, to_state: AgentState) -> bool:
        return (self._state, to_state) in VALID_TRANSITIONS

    def on_transition(self, listener: TransitionListener) -> Callable[[], None]:
        """Register a listener; returns a function that unregisters it."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def transition(self, to_state: AgentState, metadata: Mapping[str, Any] | None = None) -> None:
        from_state = self._state
        if (from_state, to_state) not in VALID_TRANSITIONS:
            raise InvalidTransitionError(from_state, to_state)
        self._state = to_state
        self._history.append((from_state, to_state))
        for listener in list(self._listeners):
            # A listener's failure must never stop or undo a transition.
            with contextlib.suppress(Exception):
                listener(from_state, to_state, dict(metadata or {}))

    def initialize(self) -> None:
        self.transition(AgentState.INITIALIZING)

    def start(self) -> None:
        self.transition(AgentState.RUNNING)

    def pause(self) -> None:
        self.transition(AgentState.PAUSED)

    def resume(self) -> None:
        self.transition(AgentState.RUNNING)

    def complete(self) -> None:
        self.transition(AgentState.COMPLETING)

    def finish(self) -> None:
        self.transition(AgentState.IDLE)

    def fail(self, error: BaseException | str | None = None) -> None:
        self.transition(AgentState.ERROR, {"error": str(error) if error is not None else None})

    def dispose(self) -> None:
        self.transition(AgentState.DISPOSED)

    # --- a run's path through the states -------------------------------------------------

    def begin_run(self) -> None:
        """IDLE (or ERROR, after a failed run) -> INITIALIZING; refused once DISPOSED."""
        if self._state is AgentState.DISPOSED:
            raise InvalidTransitionError(self._state, AgentState.INITIALIZING)
        if self._state is AgentState.ERROR:
            self.transition(AgentState.IDLE)
        self.initialize()

    @contextlib.asynccontextmanager
    async def paused(self) -> AsyncIterator[None]:
        """PAUSED while the body waits for a decision (an approval, a budget extension)."""
        if self._state is not AgentState.RUNNING:
            yield
            return
        self.pause()
        try:
            yield
        finally:
            if self.state is AgentState.PAUSED:
                self.resume()

    def begin_completing(self) -> None:
        """RUNNING -> COMPLETING: the closing report is being produced."""
        if self._state is AgentState.RUNNING:
            self.complete()

    def settle(self, *, failed: bool, error: str | None = None) -> None:
        """End a run: ERROR when it failed, else through COMPLETING back to IDLE."""
        if self._state is AgentState.INITIALIZING or (failed and self._state in _LIVE):
            self.fail(error)
            return
        if self._state in (AgentState.RUNNING, AgentState.PAUSED):
            self.complete()
        if self._state is AgentState.COMPLETING:
            self.finish()


_LIVE = frozenset({AgentState.RUNNING, AgentState.PAUSED, AgentState.COMPLETING})
