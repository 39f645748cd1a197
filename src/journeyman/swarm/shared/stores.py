"""Choosing where a swarm keeps its shared state from one string (`journeyman swarm
--shared-state`):

- ``sqlite:PATH`` — a SQLite file (several processes on one machine);
- ``json:DIR`` — one JSON file per view under a directory (to read and debug);
- ``redis://HOST:PORT/DB`` (or ``rediss://`` for TLS) — a Redis server (several machines);
- ``none`` — keep nothing: the state lives and dies with the swarm.

`open_shared_state` opens the store and proves it usable (one key written and deleted), so a
bad value fails before any model call with a `ConfigurationError` saying what to do.
"""

from __future__ import annotations

import contextlib
import uuid
from pathlib import Path

from journeyman.core.errors import ConfigurationError
from journeyman.swarm.shared.persistence import (
    JSONFilePersistenceAdapter,
    PersistenceAdapter,
    PersistenceError,
    SQLitePersistenceAdapter,
)

DEFAULT_STORE_NAME = "swarm-shared-state.db"
"""The SQLite file in the session folder used when no store is named."""
SCHEMES = "sqlite:PATH, json:DIR, redis://HOST:PORT/DB or none"


def default_store_spec(session_root: Path) -> str:
    """The store a swarm uses when none is named: a SQLite file in the session folder."""
    return f"sqlite:{session_root / DEFAULT_STORE_NAME}"


def open_shared_state(spec: str) -> PersistenceAdapter | None:
    """The store `spec` names, checked by writing and deleting one key; None for ``none``.
    Raises `ConfigurationError` for an unknown scheme, an unwritable path or an unreachable
    server."""
    text = spec.strip()
    if text.lower() in ("none", "off"):
        return None
    scheme, sep, rest = text.partition(":")
    scheme = scheme.lower()
    if not sep or scheme not in ("sqlite", "json", "redis", "rediss"):
        raise ConfigurationError(f"--shared-state {spec!r}: unknown kind of store; give {SCHEMES}")
    if scheme in ("sqlite", "json") and not rest.strip():
        raise ConfigurationError(
            f"--shared-state {spec!r}: the {scheme} store needs a path after '{scheme}:'"
        )
    store: PersistenceAdapter | None = None
    try:
        if scheme == "sqlite":
            store = SQLitePersistenceAdapter(Path(rest).expanduser())
        elif scheme == "json":
            store = JSONFilePersistenceAdapter(Path(rest).expanduser())
        else:
            from journeyman.swarm.shared.redis_adapter import RedisPersistenceAdapter

            store = RedisPersistenceAdapter(text, socket_timeout_s=3.0)
        probe = f"probe/{uuid.uuid4().hex}"
        store.save(probe, {"probe": True})
        store.delete(probe)
    except PersistenceError as error:
        close_shared_state(store)
        raise ConfigurationError(
            f"--shared-state {spec!r} cannot be used: {error.message}. Fix it, name another "
            "store, or pass --shared-state none"
        ) from None
    return store


def close_shared_state(store: PersistenceAdapter | None) -> None:
    """Close `store`'s connection, if it has one."""
    close = getattr(store, "close", None)
    if callable(close):
        with contextlib.suppress(Exception):  # a broken connection: nothing left to save
            close()


def describe_store(store: PersistenceAdapter) -> str:
    """Where `store` keeps its data, for the progress line."""
    for attribute in ("path", "directory", "url"):
        where = getattr(store, attribute, None)
        if where is not None:
            return str(where)
    return type(store).__name__
