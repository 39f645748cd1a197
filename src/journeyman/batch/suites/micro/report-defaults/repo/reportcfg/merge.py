from typing import Any

from .defaults import DEFAULTS


def merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """`base` with the keys of `override` laid over it, nested dicts merged."""
    result = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key].update(value)
        else:
            result[key] = value
    return result


def load_config(override: dict[str, Any] | None = None) -> dict[str, Any]:
    """The default settings with `override` applied."""
    return merge(DEFAULTS, override or {})
