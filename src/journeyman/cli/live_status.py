"""The live status line of `journeyman run`'s text output on a terminal:

    ⠹ run_command pytest -q · 4 s · turn 3 · 12,408 tokens · $0.0132

It says what the run is doing (the model thinking, a tool running with its main argument, the
check), for how long, and the tokens and cost so far. It is redrawn in place ten times a
second by a small thread, and only ever occupies the row below the last complete line:

- `RunProgress` follows the run's events and composes the text (no terminal involved);
- `StatusLine` draws that text on the terminal and erases it before anything else is written
  there. While it is up, `sys.stdout` and `sys.stderr` are wrapped so that every write (the
  renderer's lines, streamed text, approval prompts, warnings, the exit message) first erases
  the line; after a write that leaves a partial line (streamed text, a prompt waiting for an
  answer) nothing is drawn until a line is complete again; streamed text that stopped mid-row
  for `ROW_END_AFTER_S` (the model went on to write a long tool call) has its row ended first.

It is drawn only where the text output goes to a real terminal (not a pipe or a file, not
`TERM=dumb`), never with `--quiet`; `NO_COLOR` keeps it but drops its dim colour. A write that
bypassed Python's streams would not be seen, and none reaches the terminal during a run: every
process a run starts has its output captured (commands and the check through the sandbox,
language servers through a pipe, MCP servers' stderr into a file kept for their error reports;
tests/cli/test_live_status_terminal.py has a server chattering on its stderr the whole run).
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any

from rich.cells import cell_len, set_cell_size

from journeyman.core import events as ev
from journeyman.core.display import printable_name
from journeyman.core.text import ELLIPSIS, one_line
from journeyman.loop.verdict import CHECK_CALL_PREFIX
from journeyman.session.redact import Redactor

SPINNER_FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
REDRAWS_PER_SECOND = 10
ERASE_LINE = "\r\x1b[2K"
"""Back to the row's first column, then clear the whole row."""
DIM, PLAIN = "\x1b[2m", "\x1b[0m"
ROW_END_AFTER_S = 2.0
"""Streamed text that stopped mid-row this long ago (the model now writes a tool call) gets its
row ended, so the line can show below it."""
ARGUMENT_CHARS = 48
"""How much of a tool's main argument the line shows."""
MAIN_ARGUMENTS = ("command", "path", "pattern", "file_path", "query", "url")
"""Argument names shown after a tool's name, in this order of preference."""


def draws_live_lines(stream: Any) -> bool:
    """Whether `stream` is a real terminal that can have a line drawn and then erased (not a
    pipe or a file, not TERM=dumb)."""
    isatty = getattr(stream, "isatty", None)
    try:
        on_terminal = bool(isatty()) if isatty is not None else False
    except ValueError:  # the file was closed
        return False
    return on_terminal and os.environ.get("TERM", "").lower() not in ("dumb", "unknown")


def wants_colour() -> bool:
    """Colour unless NO_COLOR is set (https://no-color.org: any non-empty value)."""
    return not os.environ.get("NO_COLOR")


def elapsed_text(seconds: float) -> str:
    """ "7 s", "2 min 05 s", "1 h 02 min"."""
    whole = int(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"


@dataclass
class _Activity:
    label: str
    started: float


class RunProgress:
    """What the status line says, kept up to date from the run's events: the current activity
    and when it began, the turn, and the session's tokens and cost so far (the budget's count
    before each turn, plus each reply since). `text()` is None when nothing should show."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._redact = Redactor()
        self._activity: _Activity | None = None
        self._running: dict[str, _Activity] = {}
        """Tool calls under way (by call id), in the order they started."""
        self.turn = 0
        self.tokens = 0
        self.cost_usd: float | None = None
        self.finished = False

    def follow(self, event: ev.Event) -> None:
        match event:
            case ev.RunStarted():
                self._begin("starting")
            case ev.ModelRequestSent():
                self.turn = event.iteration
                self._begin("thinking")
            case ev.ModelResponseReceived() | ev.SummaryCallMade():
                self._count(event.usage.total_tokens, event.cost_usd)
                self._begin("working")
            case ev.ToolCallStarted():
                call = _Activity(self._tool_label(event.call), self.clock())
                self._activity = self._running[event.call.id] = call
            case ev.ToolResultReceived():
                self._running.pop(event.result.call_id, None)
                if self._running:  # the latest call still running, with its own seconds
                    self._activity = next(reversed(self._running.values()))
                else:
                    self._begin("working")
            case ev.BudgetUpdated():
                self.tokens, self.cost_usd = event.total_tokens, event.cost_usd
            case ev.RunFinished():
                self.finished = True
            case _:
                pass

    def _begin(self, label: str) -> None:
        if self._activity is None or self._activity.label != label:
            self._activity = _Activity(label, self.clock())

    def _count(self, tokens: int, cost: float | None) -> None:
        self.tokens += tokens
        if cost is not None:
            self.cost_usd = (self.cost_usd or 0.0) + cost

    def _tool_label(self, call: Any) -> str:
        """ "run_command pytest -q": the tool's name and its main argument, on one line, with
        secrets masked and terminal controls shown as escapes (both come from the model)."""
        arguments: dict[str, Any] = call.arguments
        if call.id.startswith(CHECK_CALL_PREFIX):
            name, shown = "check", str(arguments.get("command", ""))
        else:
            name = call.name
            main = next((arguments[k] for k in MAIN_ARGUMENTS if k in arguments), None)
            if main is None:
                main = next((v for v in arguments.values() if isinstance(v, str)), "")
            shown = str(main)
        argument = one_line(printable_name(self._redact(shown)), ARGUMENT_CHARS)
        return f"{one_line(printable_name(name), ARGUMENT_CHARS)} {argument}".rstrip()

    def text(self) -> str | None:
        """The line as it reads now, or None (before the run or after it ended)."""
        if self._activity is None or self.finished:
            return None
        now = self.clock()
        seconds = now - self._activity.started
        frame = SPINNER_FRAMES[int(now * REDRAWS_PER_SECOND) % len(SPINNER_FRAMES)]
        parts = [f"{frame} {self._activity.label}", elapsed_text(seconds)]
        if len(self._running) > 1:
            parts[0] += f" (+{len(self._running) - 1} more)"
        if self.turn:
            parts.append(f"turn {self.turn}")
        if self.tokens:  # before the first reply there is nothing to count
            parts.append(f"{self.tokens:,} tokens")
            if self.cost_usd is not None:
                parts.append(f"${self.cost_usd:.4f}")
        return " · ".join(parts)


def fit(text: str, columns: int) -> str:
    """`text` cut to fewer cells than the terminal has columns (a line that wrapped could not be
    erased by clearing one row), ending in "…" when cut."""
    room = max(columns - 1, 1)
    if cell_len(text) <= room:
        return text
    return set_cell_size(text, room - 1) + ELLIPSIS


class StatusLine:
    """Draws `compose()` on `terminal` in place, `REDRAWS_PER_SECOND` times a second, and
    erases it before any other write to `sys.stdout` or `sys.stderr` (wrapped by `start`,
    restored by `close`). One lock orders the drawing thread and every wrapped write."""

    def __init__(
        self,
        terminal: IO[str],
        compose: Callable[[], str | None],
        *,
        colour: bool = True,
        columns: Callable[[], int] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.terminal = terminal
        self.clock = clock
        self.compose = compose
        self.colour = colour
        self.columns = columns or (lambda: shutil.get_terminal_size((80, 24)).columns)
        self._lock = threading.RLock()
        self._drawn = False
        self._at_line_start = True
        """Whether the last write ended a line: only then is the row below free to draw on."""
        self._partial_since: float | None = None
        """When the output (not stderr: a question waits there) last left a row unfinished."""
        self.ended_a_row = False
        """The line ended a row of streamed text, and nothing was written since."""
        self._held = False
        self._started = False
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._wrapped: list[tuple[str, IO[str], _ErasingStream]] = []

    @property
    def drawn(self) -> bool:
        return self._drawn

    def start(self, *, redraw_thread: bool = True) -> None:
        """Wrap stdout and stderr (those on a terminal), then redraw from a daemon thread."""
        if self._started or self._stopping.is_set():
            return
        self._started = True
        for name in ("stdout", "stderr"):
            stream = getattr(sys, name)
            if stream is self.terminal or draws_live_lines(stream):
                wrapper = _ErasingStream(stream, self)
                self._wrapped.append((name, stream, wrapper))
                setattr(sys, name, wrapper)
        if redraw_thread:
            self._thread = threading.Thread(target=self._redraw_often, daemon=True)
            self._thread.name = "journeyman-status-line"
            self._thread.start()

    def _redraw_often(self) -> None:
        while not self._stopping.wait(1 / REDRAWS_PER_SECOND):
            self.redraw()

    def redraw(self) -> None:
        """Draw the line as it reads now (or erase it when there is nothing to say)."""
        with self._lock:
            if self._stopping.is_set() or self._held:
                return
            text = self.compose()
            if not self._at_line_start and not (text and self._end_stalled_row()):
                return
            if text is None:
                self.erase()
                return
            line = fit(text, self.columns())
            if self.colour:
                line = f"{DIM}{line}{PLAIN}"
            self._drawn = self._write_raw(ERASE_LINE + line)

    def erase(self) -> None:
        with self._lock:
            if self._drawn:
                self._drawn = False
                self._write_raw(ERASE_LINE)

    def hold(self) -> None:
        """Erase the line and draw nothing until `release` (a question waits for an answer)."""
        with self._lock:
            self.erase()
            self._held = True

    def release(self) -> None:
        """Draw again, once a line is complete (a question's last write ends one: "allowed",
        "refused", "extension granted")."""
        with self._lock:
            self._held = False

    def _end_stalled_row(self) -> bool:
        """End the row of streamed text that stopped `ROW_END_AFTER_S` ago; True if it was."""
        since = self._partial_since
        if since is None or self.clock() - since < ROW_END_AFTER_S:
            return False
        if self._write_raw("\n"):
            self._at_line_start, self._partial_since, self.ended_a_row = True, None, True
        return self._at_line_start

    def before_write(self) -> None:
        self.erase()

    def after_write(self, text: str, *, on_output: bool) -> None:
        if text:
            self._at_line_start = text.endswith("\n")
            self.ended_a_row = False
            stalled = on_output and not self._at_line_start
            self._partial_since = self.clock() if stalled else None

    def _write_raw(self, text: str) -> bool:
        try:
            self.terminal.write(text)
            self.terminal.flush()
        except (OSError, ValueError):  # the terminal went away: nothing more to draw on
            self._stopping.set()
            return False
        return True

    def close(self) -> None:
        """Stop drawing, erase the line and give `sys.stdout`/`sys.stderr` back."""
        self._stopping.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=1)
        with self._lock:
            if self._drawn:
                self._drawn = False
                try:
                    self.terminal.write(ERASE_LINE)
                    self.terminal.flush()
                except (OSError, ValueError):
                    pass
            for name, original, wrapper in reversed(self._wrapped):
                if getattr(sys, name) is wrapper:
                    setattr(sys, name, original)
            self._wrapped.clear()


class _ErasingStream:
    """A text stream that erases the status line before each write to the stream it wraps."""

    def __init__(self, inner: IO[str], line: StatusLine) -> None:
        self._inner = inner
        self._line = line

    def write(self, text: str) -> int:
        with self._line._lock:
            self._line.before_write()
            written = self._inner.write(text)
            self._line.after_write(text, on_output=self._inner is self._line.terminal)
            return written

    def writelines(self, lines: Any) -> None:
        for text in lines:
            self.write(text)

    def flush(self) -> None:
        with self._line._lock:
            self._inner.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)
