"""Exit codes of the `journeyman` command, `fail`, and what happens when the reader of the
output goes away."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

import typer

from journeyman.core.display import printable

if TYPE_CHECKING:
    from journeyman.core.events import Event

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_CONFIG = 2
EXIT_CANCELLED = 130
EXIT_CLOSED_STDOUT = 141
"""Whoever read the output closed it (`| head -1`): the code a shell gives a SIGPIPE'd command."""


def fail(code: int, message: str) -> NoReturn:
    """Print a one-line reason (plus any detail lines) on stderr and exit with `code`."""
    from journeyman.session.redact import Redactor

    first, *rest = printable(Redactor()(message)).splitlines() or [""]
    sys.stderr.write(f"journeyman: {first}\n")
    for line in rest:
        sys.stderr.write(f"{line}\n")
    raise typer.Exit(code)


class ClosedStdoutGuard:
    """Passes events to the renderer until stdout is closed by its reader; then sends stdout to
    /dev/null (so nothing more fails or prints a traceback) and calls `on_close` once."""

    def __init__(self, renderer: Callable[[Event], None]) -> None:
        self.renderer = renderer
        self.closed = False
        self.on_close: Callable[[], None] | None = None

    def __call__(self, event: Any) -> None:
        self.call(self.renderer, event)

    def call(self, write: Callable[..., None], *args: Any) -> None:
        if self.closed:
            return
        try:
            write(*args)
        except BrokenPipeError:
            self.closed = True
            silence_stdout()
            if self.on_close is not None:
                self.on_close()


def silence_stdout() -> None:
    """Point stdout at /dev/null, so that later writes and the flush at exit do not fail."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    finally:
        os.close(devnull)
