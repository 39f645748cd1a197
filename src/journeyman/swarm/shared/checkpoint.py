"""Saving and loading a swarm's shared state through any `PersistenceAdapter`.

Each process (or machine) saves its own view under ``swarm/<swarm_id>/<node_id>``; loading
merges every node's view into the local state. Merging is idempotent (the same failure or
count read twice is kept once), so nodes can save and load as often as they like without
overwriting what another node learned.

Each view also says when it was saved and whether its node has finished. Failures and
references are worth reading from any view, however old; call counts are not (a call made
once by each of eleven workers over a month of swarms is no doom loop), so a loader can take
counts only from nodes still running (`economics_max_age_s`; a running swarm saves its view
every `HEARTBEAT_S`, so `LIVE_WITHIN_S` drops a killed one's counts within a minute).
"""

from __future__ import annotations

import time

from journeyman.swarm.shared.context_state import SharedContextState
from journeyman.swarm.shared.economics_state import SharedEconomicsState
from journeyman.swarm.shared.persistence import (
    CorruptRecordError,
    PersistenceAdapter,
    validate_key,
)

CHECKPOINT_VERSION = 1
HEARTBEAT_S = 20.0
"""How often a running swarm saves its view, finished or not: its heartbeat."""
LIVE_WITHIN_S = 60.0
"""A view saved longer ago than this, by a node that never said it finished, is a dead node's:
the `economics_max_age_s` to give a loader that reads call counts."""


def checkpoint_prefix(swarm_id: str) -> str:
    return validate_key(f"swarm/{swarm_id}") + "/"


def save_shared_state(
    adapter: PersistenceAdapter,
    swarm_id: str,
    node_id: str,
    context: SharedContextState,
    economics: SharedEconomicsState | None = None,
    *,
    finished: bool = False,
) -> str:
    """Save this node's view of the swarm's state; returns the key it was saved under.
    `finished` marks the node's last save (its counts stop counting for the live nodes)."""
    key = validate_key(checkpoint_prefix(swarm_id) + node_id)
    value: dict[str, object] = {
        "version": CHECKPOINT_VERSION,
        "saved_at": time.time(),
        "finished": finished,
        "context": context.snapshot(),
    }
    if economics is not None:
        value["economics"] = economics.snapshot()
    adapter.save(key, value)
    return key


def load_shared_state(
    adapter: PersistenceAdapter,
    swarm_id: str,
    context: SharedContextState,
    economics: SharedEconomicsState | None = None,
    *,
    economics_max_age_s: float | None = None,
    skip_node: str | None = None,
) -> int:
    """Merge every node's saved view of `swarm_id` into `context` (and `economics`); returns
    how many views were read. A damaged view raises `CorruptRecordError` naming its key.

    With `economics_max_age_s`, call counts are merged only from views of nodes that have not
    finished and saved within that many seconds; failures and references from every view.
    `skip_node` leaves out that node's own view (a node reloading what it saved itself)."""
    prefix = checkpoint_prefix(swarm_id)
    now = time.time()
    read = 0
    for key in adapter.list_keys(prefix):
        if skip_node is not None and key == prefix + skip_node:
            continue
        value = adapter.load(key)
        if value is None:  # deleted since it was listed
            continue
        try:
            if value.get("version") != CHECKPOINT_VERSION:
                raise ValueError(f"version {value.get('version')!r}, expected {CHECKPOINT_VERSION}")
            context.merge(value["context"])
            live = economics_max_age_s is None or _live(value, now, economics_max_age_s)
            if economics is not None and "economics" in value and live:
                economics.merge(value["economics"])
        except (KeyError, ValueError) as error:
            raise CorruptRecordError(
                f"shared state {key!r} is damaged ({error}); delete it (the other nodes' views "
                "are enough) or save it again"
            ) from None
        read += 1
    return read


def sync_shared_state(
    adapter: PersistenceAdapter,
    swarm_id: str,
    node_id: str,
    context: SharedContextState,
    economics: SharedEconomicsState | None = None,
    *,
    economics_max_age_s: float | None = None,
) -> int:
    """Load what the other nodes learned, then save the merged view as this node's."""
    read = load_shared_state(
        adapter,
        swarm_id,
        context,
        economics,
        economics_max_age_s=economics_max_age_s,
        skip_node=node_id,
    )
    save_shared_state(adapter, swarm_id, node_id, context, economics)
    return read


def _live(value: dict[str, object], now: float, max_age_s: float) -> bool:
    saved_at = value.get("saved_at")
    if value.get("finished") or not isinstance(saved_at, int | float):
        return False
    return now - saved_at <= max_age_s
