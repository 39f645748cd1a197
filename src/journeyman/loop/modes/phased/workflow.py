"""The phased workflow's phases and the transitions allowed between them.

The table follows the atloop design:

    DISCOVER -> PLAN | FAIL
    PLAN     -> ACT | DONE | FAIL
    ACT      -> VERIFY | FAIL
    VERIFY   -> DISCOVER | DONE | FAIL
    DONE, FAIL: terminal

Besides the table, three labelled edges exist, each for one named reason:

- RECOVER: a recoverable error (a failing check, a malformed reply, a failed tool) goes back
  to PLAN from any live phase, with the error shown to the model;
- UNCHANGED: an ACT step that changed nothing has nothing to verify and goes back to PLAN;
- INTERVENE: a loop intervention forces a fresh DISCOVER from any live phase.

A terminal phase is never left: a new attempt (a resumed session, a Stop hook that asks for
more work) starts a new workflow.
"""

from __future__ import annotations

from enum import StrEnum

from journeyman.core.errors import AgentError


class WorkflowPhase(StrEnum):
    """Where the phased mode's workflow is (not the economics' `WorkPhase` of a run)."""

    DISCOVER = "discover"
    PLAN = "plan"
    ACT = "act"
    VERIFY = "verify"
    DONE = "done"
    FAIL = "fail"


class Edge(StrEnum):
    """Why a transition is taken."""

    NEXT = "next"
    """The workflow's own table."""
    RECOVER = "recover"
    """A recoverable error: back to PLAN."""
    UNCHANGED = "unchanged"
    """ACT changed nothing, so there is nothing to verify: back to PLAN."""
    INTERVENE = "intervene"
    """A loop intervention: a fresh DISCOVER."""


TERMINAL = frozenset({WorkflowPhase.DONE, WorkflowPhase.FAIL})
LIVE = frozenset(WorkflowPhase) - TERMINAL

TABLE: dict[WorkflowPhase, frozenset[WorkflowPhase]] = {
    WorkflowPhase.DISCOVER: frozenset({WorkflowPhase.PLAN, WorkflowPhase.FAIL}),
    WorkflowPhase.PLAN: frozenset({WorkflowPhase.ACT, WorkflowPhase.DONE, WorkflowPhase.FAIL}),
    WorkflowPhase.ACT: frozenset({WorkflowPhase.VERIFY, WorkflowPhase.FAIL}),
    WorkflowPhase.VERIFY: frozenset(
        {WorkflowPhase.DISCOVER, WorkflowPhase.DONE, WorkflowPhase.FAIL}
    ),
    WorkflowPhase.DONE: frozenset(),
    WorkflowPhase.FAIL: frozenset(),
}

_LABELLED: dict[Edge, tuple[frozenset[WorkflowPhase], WorkflowPhase]] = {
    Edge.RECOVER: (LIVE, WorkflowPhase.PLAN),
    Edge.UNCHANGED: (frozenset({WorkflowPhase.ACT}), WorkflowPhase.PLAN),
    Edge.INTERVENE: (LIVE, WorkflowPhase.DISCOVER),
}


class WorkflowError(AgentError):
    """The phased mode tried a transition its workflow does not allow (a bug, not a user
    error)."""


def allowed(source: WorkflowPhase, target: WorkflowPhase, edge: Edge = Edge.NEXT) -> bool:
    if edge is Edge.NEXT:
        return target in TABLE[source]
    sources, only_target = _LABELLED[edge]
    return source in sources and target is only_target


def transition(
    source: WorkflowPhase, target: WorkflowPhase, edge: Edge = Edge.NEXT
) -> WorkflowPhase:
    """`target`, when the workflow allows going there from `source` by `edge`."""
    if not allowed(source, target, edge):
        raise WorkflowError(
            f"the phased workflow cannot go from {source.value} to {target.value} "
            f"({edge.value} edge); this is a bug in journeyman, please report it"
        )
    return target
