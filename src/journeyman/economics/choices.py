"""The budget choices a user names on the command line or in a config file.

Kept apart from `budget` (and free of heavy imports) so that the command line can offer them
without loading the economics.
"""

from __future__ import annotations

from enum import StrEnum


class BudgetMode(StrEnum):
    """How the token budget is enforced. The iteration, USD and duration limits stop a run in
    every mode (`BudgetGate.hard_limit`); the mode decides the rest."""

    STRICT = "strict"
    """Stops at 100 %, text only from 95 %, fewer tool calls from 90 %, nudges from 70 %."""
    ADVISORY = "advisory"
    """Nudges only; never stops or restricts for tokens. Duration draws no nudges."""
    SOFT = "soft"
    """Tracks usage only."""
