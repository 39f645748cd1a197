import copy
from typing import Any

from .defaults import DEFAULTS


def merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """A new dict: `base` with the keys of `override` laid over it, nested dicts merged.

    Neither argument is modified, and nothing in the result is shared with them.
    """
    result = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = merge(result[key], value)
        else:
            result[key] = copy.deepcopy(value)
    return result


def load_config(override: dict[str, Any] | None = None) -> dict[str, Any]:
    """The default settings with `override` applied."""
    return merge(DEFAULTS, override or {})
