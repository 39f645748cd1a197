"""SIGTERM and SIGHUP end a run the way Ctrl-C does.

`asyncio.run` turns SIGINT into a cancellation of the run: the running command's processes are
stopped, the session gets its `cancelled` outcome, and the process exits 130. A service manager
(SIGTERM) or a closed terminal (SIGHUP) deserves the same, instead of dying at once and leaving
the command's process group running and the session without an outcome.
"""

from __future__ import annotations

import signal
from types import FrameType

TERMINATING_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def _as_interrupt(signum: int, frame: FrameType | None) -> None:
    # Whatever handles SIGINT at this moment (asyncio's, or Python's default which raises
    # KeyboardInterrupt) handles this signal too.
    handler = signal.getsignal(signal.SIGINT)
    if callable(handler):
        handler(signal.SIGINT, frame)
    else:
        raise KeyboardInterrupt


def handle_termination_as_interrupt() -> None:
    """From now on, SIGTERM and SIGHUP act like Ctrl-C (call from the main thread)."""
    for sig in TERMINATING_SIGNALS:
        signal.signal(sig, _as_interrupt)
