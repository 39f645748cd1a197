"""The phased mode and its own policies: the workflow (phases and transitions), verification,
recovery from errors, and interventions against loops."""

from journeyman.loop.modes.phased.mode import (
    AGAIN_HEADER,
    CLAIM_REFUSED,
    FIRST_HEADER,
    FRESH_HEADER,
    PhasedMode,
)
from journeyman.loop.modes.phased.workflow import Edge, Phase, WorkflowError

__all__ = [
    "AGAIN_HEADER",
    "CLAIM_REFUSED",
    "FIRST_HEADER",
    "FRESH_HEADER",
    "Edge",
    "Phase",
    "PhasedMode",
    "WorkflowError",
]
