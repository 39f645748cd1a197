"""Posts and their tags."""

from .post import Post
from .tags import normalize_tags

__all__ = ["Post", "normalize_tags"]
