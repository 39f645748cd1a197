"""The tree of a session and its subagents' sidechain sessions, with what each one cost."""

from __future__ import annotations

from dataclasses import dataclass, field

from journeyman.session.store import SessionStore, SessionSummary


@dataclass
class SessionNode:
    """One session of a tree and its subagents."""

    summary: SessionSummary
    tokens: int
    cost_usd: float | None
    """None when a call of the session could not be priced."""
    children: list[SessionNode] = field(default_factory=list)

    @property
    def tree_cost_usd(self) -> float | None:
        """The session's cost with its subagents'; None when any part is unknown."""
        costs = [self.cost_usd, *(child.tree_cost_usd for child in self.children)]
        if any(cost is None for cost in costs):
            return None
        return sum(cost for cost in costs if cost is not None)

    def walk(self, depth: int = 0) -> list[tuple[int, SessionNode]]:
        """(depth, node) for this node and every node below it, parents first."""
        rows = [(depth, self)]
        for child in self.children:
            rows.extend(child.walk(depth + 1))
        return rows


def session_tree(store: SessionStore, session_id: str) -> SessionNode:
    """`session_id` with its subagent sessions (and a swarm's workers) below it; forks are
    not subagents."""
    store.load_session(session_id)  # a missing id fails here, with the store's message

    def node(sid: str) -> SessionNode:
        rows = store.usage_rows(sid)
        costs = [row.cost_usd for row in rows]
        cost = None if any(c is None for c in costs) else sum(c for c in costs if c is not None)
        return SessionNode(
            summary=store.summary(sid),
            tokens=sum(row.usage.total_tokens for row in rows),
            cost_usd=cost,
            children=[node(child) for child in store.subagent_ids(sid)],
        )

    return node(session_id)
