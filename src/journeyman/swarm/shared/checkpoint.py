"""Saving and loading a swarm's shared state through any `PersistenceAdapter`.

Each process (or machine) saves its own view under ``swarm/<swarm_id>/<node_id>``; loading
merges every node's view into the local state. Merging is idempotent (the same failure or
count read twice is kept once), so nodes can save and load as often as they like without
overwriting what another node learned.
"""

from __future__ import annotations

from journeyman.swarm.shared.context_state import SharedContextState
from journeyman.swarm.shared.economics_state import SharedEconomicsState
from journeyman.swarm.shared.persistence import (
    CorruptRecordError,
    PersistenceAdapter,
    validate_key,
)

CHECKPOINT_VERSION = 1


def checkpoint_prefix(swarm_id: str) -> str:
    return validate_key(f"swarm/{swarm_id}") + "/"


def save_shared_state(
    adapter: PersistenceAdapter,
    swarm_id: str,
    node_id: str,
    context: SharedContextState,
    economics: SharedEconomicsState | None = None,
) -> str:
    """Save this node's view of the swarm's state; returns the key it was saved under."""
    key = validate_key(checkpoint_prefix(swarm_id) + node_id)
    value: dict[str, object] = {"version": CHECKPOINT_VERSION, "context": context.snapshot()}
    if economics is not None:
        value["economics"] = economics.snapshot()
    adapter.save(key, value)
    return key


def load_shared_state(
    adapter: PersistenceAdapter,
    swarm_id: str,
    context: SharedContextState,
    economics: SharedEconomicsState | None = None,
) -> int:
    """Merge every node's saved view of `swarm_id` into `context` (and `economics`); returns
    how many views were read. A damaged view raises `CorruptRecordError` naming its key."""
    prefix = checkpoint_prefix(swarm_id)
    read = 0
    for key in adapter.list_keys(prefix):
        value = adapter.load(key)
        if value is None:  # deleted since it was listed
            continue
        try:
            if value.get("version") != CHECKPOINT_VERSION:
                raise ValueError(f"version {value.get('version')!r}, expected {CHECKPOINT_VERSION}")
            context.merge(value["context"])
            if economics is not None and "economics" in value:
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
) -> int:
    """Load what the other nodes learned, then save the merged view as this node's."""
    read = load_shared_state(adapter, swarm_id, context, economics)
    save_shared_state(adapter, swarm_id, node_id, context, economics)
    return read
