"""What journeyman knows about its own installation: its version and where it is imported from.

Kept apart from the package's `__init__` (which names the agent and the providers for type
checkers), so that any part of journeyman can ask without importing the whole public API.
"""

from __future__ import annotations

import os
from pathlib import Path


def package_version() -> str:
    """The installed distribution's version; "0.0.0" when running from a source tree that is
    not installed."""
    from importlib import metadata  # costs ~30 ms (email parsing): only when asked

    try:
        return metadata.version("journeyman")
    except metadata.PackageNotFoundError:
        return "0.0.0"


def import_root() -> Path:
    """The `sys.path` folder the `journeyman` package is imported from (links resolved)."""
    return Path(os.path.realpath(__file__)).parent.parent.parent
