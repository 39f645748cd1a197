"""The loop modes a user names on the command line or in a config file.

Kept apart from `config` (and free of pydantic) so that the command line can offer them
without loading the run settings.
"""

from __future__ import annotations

from enum import StrEnum


class ModeName(StrEnum):
    REACT = "react"
    PLAN_SOLVE = "plan-solve"
    PHASED = "phased"
    ASK = "ask"
