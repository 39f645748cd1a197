"""Which phase of the work the agent is in, inferred from the tools it uses, and phase nudges.

The tracker knows no tool names: the caller passes each call's `ToolKind` (which the tool
declares; the registry answers `kind_of(call)`). Kinds other than read, edit and command (finish,
other, or None for an unknown tool) count as events and move nothing.

Phases move EXPLORATION -> PLANNING -> ACTING <-> VERIFYING:

- a read/search tool keeps or puts the run in EXPLORATION while nothing has been edited yet;
  once edits exist, reading does not change the phase;
- assistant text without tool calls during EXPLORATION is taken as a plan: PLANNING;
- a successful edit moves to ACTING (also from VERIFYING, when a check led to a fix);
- a command after the first edit is most likely a test run: VERIFYING; before any edit a
  command leaves the phase as it is.

A failed read or edit (`is_error=True`) read or changed nothing, so it does not count and moves
nothing. A failed command still counts: a failing test run is verification all the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from journeyman.core.tool_kind import ToolKind
from journeyman.economics.loop_detector import LoopCheck

DEFAULT_EXPLORATION_SATURATION = 10
"""Read/search calls without any edit after which the saturation nudge fires."""


class WorkPhase(StrEnum):
    """What kind of work a run is doing, inferred from its tool use (in every mode)."""

    EXPLORATION = "exploration"
    PLANNING = "planning"
    ACTING = "acting"
    VERIFYING = "verifying"
    WRAPUP = "wrapup"
    """Never entered from tool use; the budget accounts text-only closing turns here."""


class NudgeKind(StrEnum):
    EXPLORATION_SATURATION = "exploration_saturation"
    ACTING_WITHOUT_EXPLORATION = "acting_without_exploration"
    STUCK_IN_LOOP = "stuck_in_loop"


@dataclass(frozen=True)
class PhaseNudge:
    """A hint for the model, to be injected into the conversation by the loop."""

    kind: NudgeKind
    message: str


@dataclass(frozen=True)
class PhaseChange:
    """One entry of the phase history: the phase entered and the event index where it began."""

    phase: WorkPhase
    call_index: int
    """Number of events (tool calls and text turns) recorded before the change; 0 is the start."""


class PhaseTracker:
    """Follows the phase of a run and hands out each phase nudge once, when it becomes due."""

    def __init__(self, exploration_saturation: int = DEFAULT_EXPLORATION_SATURATION) -> None:
        if exploration_saturation < 1:
            raise ValueError(
                f"PhaseTracker: exploration_saturation must be at least 1, "
                f"got {exploration_saturation}"
            )
        self.exploration_saturation = exploration_saturation
        self._phase = WorkPhase.EXPLORATION
        self._history: list[PhaseChange] = [PhaseChange(WorkPhase.EXPLORATION, 0)]
        self._events = 0
        self._reads = 0
        self._edits = 0
        self._commands = 0
        self._files_read: set[str] = set()
        self._sent: set[NudgeKind] = set()
        self._stuck_signature: str | None = None

    # -- state --------------------------------------------------------------------------------

    @property
    def phase(self) -> WorkPhase:
        return self._phase

    @property
    def reads(self) -> int:
        """Successful read/search calls."""
        return self._reads

    @property
    def edits_made(self) -> int:
        """Successful edit calls."""
        return self._edits

    @property
    def commands(self) -> int:
        """Command calls, failed ones included."""
        return self._commands

    @property
    def files_read(self) -> frozenset[str]:
        """Distinct paths passed to `record(..., path=...)` by successful read/search calls."""
        return frozenset(self._files_read)

    @property
    def history(self) -> tuple[PhaseChange, ...]:
        """Every phase entered, in order, starting with EXPLORATION at index 0."""
        return tuple(self._history)

    # -- events -------------------------------------------------------------------------------

    def record(
        self,
        tool_name: str,
        kind: ToolKind | str | None,
        *,
        is_error: bool = False,
        path: str | None = None,
    ) -> list[PhaseNudge]:
        """Account for one finished call of `tool_name`, whose tool declares `kind`; returns the
        nudges that became due with it.

        `path` is the file the call read, when the caller knows it (feeds `files_read`).
        Kinds other than read, edit and command count as events but change nothing else.
        """
        self._events += 1
        nudges: list[PhaseNudge] = []
        if kind == ToolKind.READ:
            if is_error:
                return nudges
            self._reads += 1
            if path is not None:
                self._files_read.add(path)
            if self._edits == 0:
                self._enter(WorkPhase.EXPLORATION)
                if self._reads >= self.exploration_saturation:
                    self._fire(nudges, NudgeKind.EXPLORATION_SATURATION, self._saturation_text())
        elif kind == ToolKind.EDIT:
            if is_error:
                return nudges
            if self._edits == 0 and self._reads == 0:
                self._fire(
                    nudges, NudgeKind.ACTING_WITHOUT_EXPLORATION, _blind_edit_text(tool_name)
                )
            self._edits += 1
            self._stuck_signature = None  # the workspace changed: a later loop is a new one
            self._enter(WorkPhase.ACTING)
        elif kind == ToolKind.COMMAND:
            self._commands += 1
            if self._edits > 0:
                self._enter(WorkPhase.VERIFYING)
        return nudges

    def record_text(self) -> None:
        """Account for an assistant turn that produced text and no tool calls.

        While exploring, such a turn is a plan taking shape, so the phase becomes PLANNING.
        """
        self._events += 1
        if self._phase is WorkPhase.EXPLORATION:
            self._enter(WorkPhase.PLANNING)

    def note_loop(self, check: LoopCheck) -> PhaseNudge | None:
        """Pass the loop detector's verdict; returns the stuck nudge when a new loop begins.

        The nudge is given once per looping signature. It is given again after a check that is
        not a loop, after a successful edit, or when a different signature starts looping.
        """
        if not check.is_loop:
            self._stuck_signature = None
            return None
        key = check.signature or check.tool_name
        if key == self._stuck_signature:
            return None
        self._stuck_signature = key
        return PhaseNudge(NudgeKind.STUCK_IN_LOOP, _stuck_text(check))

    # -- internals ----------------------------------------------------------------------------

    def _enter(self, phase: WorkPhase) -> None:
        if phase is not self._phase:
            self._phase = phase
            self._history.append(PhaseChange(phase, self._events))

    def _fire(self, nudges: list[PhaseNudge], kind: NudgeKind, message: str) -> None:
        if kind not in self._sent:
            self._sent.add(kind)
            nudges.append(PhaseNudge(kind, message))

    def _saturation_text(self) -> str:
        files = len(self._files_read)
        distinct = f" over {files} distinct files" if files else ""
        return (
            f"{self._reads} read/search calls{distinct} and no edit yet. "
            "You have likely seen enough to begin: make the first change, then check it."
        )


def _blind_edit_text(tool_name: str) -> str:
    return (
        f"`{tool_name}` changed the workspace before any file was read or searched. "
        "Look at the code around the change first, so the edit fits what is already there."
    )


def _stuck_text(check: LoopCheck) -> str:
    what = check.message or (
        f"`{check.tool_name}` was called {check.count} times with identical arguments."
    )
    return (
        f"{what} Doing it again will not give a different outcome: change the arguments, "
        "use another tool, or step back and rethink the approach."
    )
