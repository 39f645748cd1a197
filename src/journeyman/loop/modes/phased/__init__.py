"""The phased mode and its own policies: the workflow (phases and transitions), verification,
recovery from errors, and interventions against loops."""

from journeyman.loop.modes.phased.mode import (
    AGAIN_HEADER,
    ANSWER_REFUSED,
    FINISH_REFUSED,
    FIRST_HEADER,
    FRESH_HEADER,
    SAME_CHECK_FAILURE,
    PhasedMode,
)
from journeyman.loop.modes.phased.workflow import Edge, WorkflowError, WorkflowPhase

__all__ = [
    "AGAIN_HEADER",
    "ANSWER_REFUSED",
    "FINISH_REFUSED",
    "FIRST_HEADER",
    "FRESH_HEADER",
    "SAME_CHECK_FAILURE",
    "Edge",
    "PhasedMode",
    "WorkflowError",
    "WorkflowPhase",
]
