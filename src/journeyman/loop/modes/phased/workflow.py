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


class Phase(StrEnum):
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


TERMINAL = frozenset({Phase.DONE, Phase.FAIL})
LIVE = frozenset(Phase) - TERMINAL

TABLE: dict[Phase, frozenset[Phase]] = {
    Phase.DISCOVER: frozenset({Phase.PLAN, Phase.FAIL}),
    Phase.PLAN: frozenset({Phase.ACT, Phase.DONE, Phase.FAIL}),
    Phase.ACT: frozenset({Phase.VERIFY, Phase.FAIL}),
    Phase.VERIFY: frozenset({Phase.DISCOVER, Phase.DONE, Phase.FAIL}),
    Phase.DONE: frozenset(),
    Phase.FAIL: frozenset(),
}

_LABELLED: dict[Edge, tuple[frozenset[Phase], Phase]] = {
    Edge.RECOVER: (LIVE, Phase.PLAN),
    Edge.UNCHANGED: (frozenset({Phase.ACT}), Phase.PLAN),
    Edge.INTERVENE: (LIVE, Phase.DISCOVER),
}


class WorkflowError(AgentError):
    """The phased mode tried a transition its workflow does not allow (a bug, not a user
    error)."""


def allowed(source: Phase, target: Phase, edge: Edge = Edge.NEXT) -> bool:
    if edge is Edge.NEXT:
        return target in TABLE[source]
    sources, only_target = _LABELLED[edge]
    return source in sources and target is only_target


def transition(source: Phase, target: Phase, edge: Edge = Edge.NEXT) -> Phase:
    """`target`, when the workflow allows going there from `source` by `edge`."""
    if not allowed(source, target, edge):
        raise WorkflowError(
            f"the phased workflow cannot go from {source.value} to {target.value} "
            f"({edge.value} edge); this is a bug in journeyman, please report it"
        )
    return target
