"""The live "thinking… 12 s" line of `journeyman run`'s text output while a model call is in
flight: drawn on a terminal only, erased when anything else is printed."""

from __future__ import annotations

import time

from rich.console import Console
from rich.live import Live
from rich.text import Text

SPINNER_FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
REFRESHES_PER_SECOND = 8


def draws_live_lines(console: Console) -> bool:
    """Whether `console` writes to a real terminal (not a pipe or file, not TERM=dumb): only
    there may a line be drawn and then erased."""
    isatty = getattr(console.file, "isatty", None)
    try:
        on_terminal = bool(isatty()) if isatty is not None else False
    except ValueError:  # the file was closed
        return False
    return on_terminal and not console.is_dumb_terminal


class ThinkingLine:
    """A transient spinner with the seconds since the model call began. Rich redraws it from
    its own thread a few times a second; `stop` erases it and restores the cursor."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._live: Live | None = None
        self._started = 0.0

    @property
    def shown(self) -> bool:
        return self._live is not None

    def _line(self) -> Text:
        elapsed = time.monotonic() - self._started
        frame = SPINNER_FRAMES[int(elapsed * REFRESHES_PER_SECOND) % len(SPINNER_FRAMES)]
        return Text(f"{frame} thinking… {int(elapsed)} s", style="dim")

    def start(self) -> None:
        if self._live is not None:
            return
        self._started = time.monotonic()
        live = Live(
            console=self.console,
            get_renderable=self._line,
            refresh_per_second=REFRESHES_PER_SECOND,
            transient=True,
            # stderr stays stderr and stdout is written only by the renderer, which stops
            # the line first
            redirect_stdout=False,
            redirect_stderr=False,
        )
        live.start()
        self._live = live

    def stop(self) -> None:
        live, self._live = self._live, None
        if live is not None:
            live.stop()
