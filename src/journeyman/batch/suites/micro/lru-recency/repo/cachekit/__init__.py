"""A least-recently-used cache and a loader built on it."""

from .cache import LRUCache
from .loader import CachedLoader

__all__ = ["CachedLoader", "LRUCache"]
