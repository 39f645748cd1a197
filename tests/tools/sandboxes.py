"""Which sandboxes can run here, for skipping tests with the precise reason."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from journeyman.core.errors import ConfigurationError
from journeyman.tools.sandbox import BubblewrapSandbox


def bubblewrap_problem() -> str | None:
    """Why the bubblewrap sandbox cannot run here, or None when it can."""
    try:
        BubblewrapSandbox(Path(os.getcwd())).check()
    except ConfigurationError as error:
        return error.message
    return None


BWRAP_PROBLEM = bubblewrap_problem()
needs_bwrap = pytest.mark.skipif(BWRAP_PROBLEM is not None, reason=str(BWRAP_PROBLEM))
IS_ROOT = os.geteuid() == 0
CAN_SETPRIV = IS_ROOT and shutil.which("setpriv") is not None
