"""Escalating answers to a loop: warning, strong warning, forced re-discovery, abort.

Detecting a loop is the loop detector's job (`economics/loop_detector.py`); this module only
decides what to do about each loop it reports. Every detection climbs one rung: the first two
are messages to the model, the third rebuilds the context from scratch (the mode returns to
DISCOVER and the detector forgets its window, so the old repeats do not count again), and the
fourth stops the run.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class Intervention(IntEnum):
    NONE = 0
    WARNING = 1
    STRONG_WARNING = 2
    REDISCOVER = 3
    ABORT = 4


_MESSAGES = {
    Intervention.WARNING: (
        "{detail} Repeating the same action will not give a different result. Look at what "
        "it returned, and try a different way forward."
    ),
    Intervention.STRONG_WARNING: (
        "Second warning: {detail} You are going in circles. Change your approach now; if "
        "this happens again, your context is rebuilt from scratch, and the time after that "
        "the run is stopped."
    ),
    Intervention.REDISCOVER: (
        "Third warning: {detail} Your context is being rebuilt from scratch. Read the fresh "
        "context below as if you were starting, and make a new plan that avoids what you "
        "have already tried. One more repetition stops the run."
    ),
}


@dataclass
class InterventionLadder:
    level: Intervention = Intervention.NONE
    """The last rung reached; it never goes down within a run."""

    def escalate(self) -> Intervention:
        """Climb one rung (up to ABORT) and return it."""
        self.level = Intervention(min(self.level + 1, Intervention.ABORT))
        return self.level

    @staticmethod
    def message(rung: Intervention, detail: str) -> str:
        """What the model is told at `rung`; empty for NONE and ABORT (nothing more to say)."""
        template = _MESSAGES.get(rung)
        return template.format(detail=detail.strip()) if template else ""
