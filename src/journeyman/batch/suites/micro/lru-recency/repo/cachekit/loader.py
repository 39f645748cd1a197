from collections.abc import Callable
from typing import Any

from .cache import LRUCache


class CachedLoader:
    """Calls `load(key)` only when the key is not cached."""

    def __init__(self, load: Callable[[str], Any], capacity: int = 128) -> None:
        self._load = load
        self._cache = LRUCache(capacity)
        self.loads = 0

    def __call__(self, key: str) -> Any:
        if key in self._cache:
            return self._cache.get(key)
        self.loads += 1
        value = self._load(key)
        self._cache.put(key, value)
        return value
