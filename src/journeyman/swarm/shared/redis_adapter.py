"""Shared state in Redis, for swarm workers on several machines (``pip install
journeyman[redis]``).

Keys are stored as ``<namespace>:<key>`` holding the object's JSON, so several swarms can share
one server without seeing each other's keys.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from journeyman.swarm.shared.persistence import (
    PersistenceError,
    decode_value,
    encode_value,
    validate_key,
)

if TYPE_CHECKING:
    import redis

DEFAULT_NAMESPACE = "journeyman:swarm"


class RedisPersistenceAdapter:
    """Keys under `namespace` on the Redis server at `url` (``redis://host:port/db``)."""

    def __init__(
        self,
        url: str = "redis://127.0.0.1:6379/0",
        namespace: str = DEFAULT_NAMESPACE,
        *,
        socket_timeout_s: float = 5.0,
        client: redis.Redis | None = None,
    ) -> None:
        try:
            import redis
        except ImportError:
            raise PersistenceError(
                "RedisPersistenceAdapter needs the redis client: pip install 'journeyman[redis]'"
            ) from None
        if not namespace or any(c in namespace for c in "*?[]\\ "):
            raise PersistenceError(
                f"redis namespace {namespace!r} is not allowed: give a non-empty name without "
                "spaces or glob characters (* ? [ ] \\)"
            )
        self.url = url
        self.namespace = namespace
        self._errors: tuple[type[BaseException], ...] = (redis.RedisError,)
        try:
            self._client: redis.Redis = client or redis.Redis.from_url(
                url,
                socket_timeout=socket_timeout_s,
                socket_connect_timeout=socket_timeout_s,
            )
        except ValueError as error:
            raise PersistenceError(f"bad redis url {url!r}: {error}") from None

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> RedisPersistenceAdapter:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _name(self, key: str) -> str:
        return f"{self.namespace}:{validate_key(key)}"

    @contextmanager
    def _talking(self, what: str) -> Iterator[None]:
        try:
            yield
        except self._errors as error:
            raise PersistenceError(
                f"{what} on redis at {self.url} failed: {error}; check that the server runs "
                "and the url is right"
            ) from None

    def _call(self, what: str, action: Callable[[], Any]) -> Any:
        with self._talking(what):
            return action()

    def save(self, key: str, value: Mapping[str, Any]) -> None:
        name, text = self._name(key), encode_value(key, value)
        self._call(f"saving {key!r}", lambda: self._client.set(name, text.encode("utf-8")))

    def load(self, key: str) -> dict[str, Any] | None:
        name = self._name(key)
        raw = self._call(f"loading {key!r}", lambda: self._client.get(name))
        if raw is None:
            return None
        return decode_value(key, raw, f"redis {self.url} ({name})")

    def list_keys(self, prefix: str = "") -> list[str]:
        # `prefix` goes into a MATCH pattern: escape what redis would read as glob syntax
        pattern = (
            f"{self.namespace}:" + "".join("\\" + c if c in "*?[]\\" else c for c in prefix) + "*"
        )
        start = len(self.namespace) + 1

        def scan() -> list[str]:
            names = self._client.scan_iter(match=pattern, count=500)
            return sorted(
                {(n.decode("utf-8") if isinstance(n, bytes) else str(n))[start:] for n in names}
            )

        keys: list[str] = self._call("listing keys", scan)
        return keys

    def delete(self, key: str) -> bool:
        name = self._name(key)
        return bool(self._call(f"deleting {key!r}", lambda: self._client.delete(name)))

    def exists(self, key: str) -> bool:
        name = self._name(key)
        return bool(self._call(f"looking up {key!r}", lambda: self._client.exists(name)))
