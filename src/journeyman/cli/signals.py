"""SIGTERM and SIGHUP end a run the way Ctrl-C does.

`asyncio.run` turns SIGINT into a cancellation of the run: the running command's processes are
stopped, the session gets its `cancelled` outcome, and the process exits 130. A service manager
(SIGTERM) or a closed terminal (SIGHUP) deserves the same, instead of dying at once and leaving
the command's process group running and the session without an outcome.

`run_cancellable` goes further for a run: the first of these signals cancels it, and the ones
that follow while it winds down (a user pressing Ctrl-C three times) are ignored, where
`asyncio.run` would raise `KeyboardInterrupt` wherever the cleanup happens to be; only one
sent `FORCE_AFTER_S` or more after the first ends the process at once (exit 130).
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Coroutine
from types import FrameType
from typing import Any, TypeVar

from journeyman.cli.exits import EXIT_CANCELLED

T = TypeVar("T")

FORCE_AFTER_S = 5.0
"""A signal this long after the one that cancelled a run ends the process at once: a user
pressing Ctrl-C again after waiting is not left with a cleanup that hangs."""

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


def run_cancellable(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)` where SIGINT, SIGTERM and SIGHUP cancel `main` once; the same signals
    after that are ignored, so the cancellation's cleanup (stopping commands, storing the
    outcome) runs to its end. Raises `KeyboardInterrupt` when the cancellation ends `main`
    with `CancelledError` rather than a result. Call from the main thread."""
    loop: asyncio.AbstractEventLoop | None = None
    task: asyncio.Task[Any] | None = None
    signalled = False
    first_signal = 0.0

    def cancel_once(signum: int, frame: FrameType | None) -> None:
        nonlocal signalled, first_signal
        if signalled:
            if time.monotonic() - first_signal >= FORCE_AFTER_S:  # the cleanup seems stuck
                os.write(2, b"\njourneyman: stopped without finishing the cleanup\n")
                os._exit(EXIT_CANCELLED)
            return  # already winding down: let the cleanup finish
        signalled, first_signal = True, time.monotonic()
        if task is not None and loop is not None and not task.done():
            task.cancel()
            loop.call_soon_threadsafe(lambda: None)  # wake a loop blocked in select()

    async def started() -> T:
        nonlocal loop, task
        loop, task = asyncio.get_running_loop(), asyncio.current_task()
        if signalled:
            raise asyncio.CancelledError
        return await main

    for sig in (signal.SIGINT, *TERMINATING_SIGNALS):
        signal.signal(sig, cancel_once)  # asyncio.run keeps a SIGINT handler that is not default
    try:
        return asyncio.run(started())
    except asyncio.CancelledError:
        raise KeyboardInterrupt from None
    finally:
        if signalled:  # the process exits now: more Ctrl-Cs must not kill it halfway out
            for sig in (signal.SIGINT, *TERMINATING_SIGNALS):
                signal.signal(sig, signal.SIG_IGN)
