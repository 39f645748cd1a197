"""The pieces of the conversation screen: messages, tool cards, the status bar. Model and tool
text is always shown as plain `Text`, never parsed as markup; where a widget only takes markup
(a card's title), it goes through `literal` first."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import Collapsible, Static

from journeyman.core.display import printable
from journeyman.core.messages import ToolCall, ToolResult
from journeyman.core.text import clip
from journeyman.loop.check_runner import BEFORE_CALL_ID
from journeyman.policy.call_description import describe_call

RESULT_CHARS_SHOWN = 20_000
"""Characters of a tool result an expanded card shows; the rest is counted, not rendered."""
PREVIEW_LINES_SHOWN = 400
"""Lines of a call (a diff, a command) an expanded card shows; the rest is counted, not
rendered. The approval dialog is not cut: it shows the whole call."""
KEY_ARGUMENTS = ("command", "path", "pattern", "query", "url", "summary", "name")


def literal(text: str) -> str:
    """`text` as markup that shows exactly `text`: every `[` is escaped, so no part of it can
    open a tag (`[bold]`, `[$accent]`, `[@click=...]`) and restyle or fake what is around it."""
    return text.replace("[", "\\[")


def key_argument(call: ToolCall) -> str:
    """The one argument that says what a call is about (its command, path, pattern...)."""
    named = (call.arguments.get(name) for name in KEY_ARGUMENTS)
    strings = [v for v in (*named, *call.arguments.values()) if isinstance(v, str) and v.strip()]
    if not strings:
        return ""
    line = printable(strings[0]).strip().splitlines()[0]
    return clip(line, 60)


def styled_diff(described: str) -> Text:
    """`describe_call`'s text with added lines green, removed red (the +/- stay visible)."""
    text = Text()
    for line in described.splitlines():
        body = line.removeprefix("  │ ")
        style = ""
        if body.startswith("+") and not body.startswith("+++"):
            style = "green"
        elif body.startswith("-") and not body.startswith("---"):
            style = "red"
        elif body.startswith("@@"):
            style = "cyan"
        text.append(body + "\n", style=style)
    return text


class UserMessage(Static):
    DEFAULT_CSS = "UserMessage { margin: 1 0 0 0; color: $text; text-style: bold; }"

    def __init__(self, text: str) -> None:
        super().__init__(Text("> " + printable(text)))


class Note(Static):
    """A line from journeyman itself (command output, a run's ending, an error)."""

    DEFAULT_CSS = "Note { color: $text-muted; }"

    def __init__(self, text: str | Text) -> None:
        super().__init__(text if isinstance(text, Text) else Text(text))


BLOCK_CHARS = 4_000
"""A streamed reply is shown as blocks of about this many characters, cut at line ends: a new
fragment re-renders only the last block, so a fragment costs the same at the end of a long
reply as at its start."""
LONGEST_TAIL = 4 * BLOCK_CHARS
"""A line longer than this (no line end to cut at) is cut at its last space before it, where
the wrapped line would most likely have broken anyway, or right there if it has none."""
FLUSH_S = 1 / 20
"""Streamed fragments are shown together at most this often (the screen cannot show more)."""


def cut_block(tail: str, size: int | None = None) -> tuple[int, int]:
    """Where the first block of `tail` ends and the rest starts ((0, 0): not yet). A block ends
    before a line end (before a run of them), which the rest skips, and never takes the whole
    tail: the block and the rest, shown one under the other, read exactly as the uncut text."""
    size = BLOCK_CHARS if size is None else size
    if len(tail) <= size:
        return 0, 0
    end = len(tail) - 1
    cut = tail.find("\n", size, end)  # the first line end past `size`, else the last one
    if cut < 0:
        cut = tail.rfind("\n", 0, end)
    while cut > 0 and tail[cut - 1] == "\n":
        cut -= 1
    if cut > 0:
        return cut, cut + 1
    if len(tail) > LONGEST_TAIL:
        space = tail.rfind(" ", 1, LONGEST_TAIL)
        return (space, space + 1) if space > 0 else (LONGEST_TAIL, LONGEST_TAIL)
    return 0, 0


def split_blocks(shown: str, size: int | None = None) -> tuple[list[str], str]:
    """`shown` as whole blocks and the tail that may still grow."""
    blocks: list[str] = []
    start = 0
    while True:
        cut, rest = cut_block(shown[start : start + LONGEST_TAIL + 1], size)
        if not cut:
            return blocks, shown[start:]
        blocks.append(shown[start : start + cut])
        start += rest


MERGED = 8
"""This many blocks of one size in a row are merged into one: the screen lays out every block
on each refresh, so a long reply must stay a few dozen widgets, not thousands."""
TOP_LEVEL = 2
"""Blocks are merged up to BLOCK_CHARS * MERGED**TOP_LEVEL characters (about 256 KB): a merged
block is wrapped once, in one go, which should stay short enough not to hold the screen."""


@dataclass
class Block:
    """A finished stretch of a reply and the widget that shows it (once mounted)."""

    level: int
    text: str
    widget: Static | None = None


class AssistantText(Widget):
    """The model's text, growing as it streams: a column of finished blocks and a tail. A
    fragment only joins the pending ones; a timer shows them, re-rendering the tail alone."""

    DEFAULT_CSS = """
    AssistantText { margin: 1 0 0 0; height: auto; layout: vertical; }
    AssistantText > Static { height: auto; }
    """

    def __init__(self, text: str = "") -> None:
        super().__init__()
        self._parts = [text] if text else []
        self._joined: str | None = text
        self._pending: list[str] = []
        self._blocks: list[Block] = []
        self._tail_text = ""
        self._tail = Static(Text(""))
        self._flush_timer: Timer | None = None
        self._composed = False
        self._show_anew(text)

    @property
    def text(self) -> str:
        """Everything received so far, as received."""
        if self._joined is None:
            self._joined = "".join(self._parts)
            self._parts = [self._joined]
        return self._joined

    def compose(self) -> ComposeResult:
        self._composed = True
        for block in self._blocks:
            block.widget = Static(Text(block.text))
            yield block.widget
        self._tail = Static(Text(self._tail_text))
        yield self._tail

    def append(self, delta: str) -> None:
        self._parts.append(delta)
        self._joined = None
        self._pending.append(delta)
        if self._flush_timer is None:
            self._flush_timer = self.set_timer(FLUSH_S, self.flush)

    def flush(self) -> None:
        """Show the pending fragments now."""
        self._stop_timer()
        if not self._pending:
            return
        tail = self._tail_text + printable("".join(self._pending))
        self._pending.clear()
        cut, rest = cut_block(tail)
        while cut:
            self._add_block(tail[:cut])
            tail = tail[rest:]
            cut, rest = cut_block(tail)
        self._tail_text = tail
        self._tail.update(Text(tail))

    def replace(self, text: str) -> None:
        """The reply as it finally is: kept as shown when the stream said the same."""
        if text == self.text:
            self.flush()
            return
        self._stop_timer()
        self._parts, self._joined, self._pending = [text], text, []
        for block in self._blocks:
            if block.widget is not None:
                block.widget.remove()
        self._show_anew(text)

    def _show_anew(self, text: str) -> None:
        self._blocks = []
        blocks, self._tail_text = split_blocks(printable(text))
        for block in blocks:
            self._add_block(block)
        if self._composed:
            self._tail.update(Text(self._tail_text))

    def _stop_timer(self) -> None:
        if self._flush_timer is not None:
            self._flush_timer.stop()
            self._flush_timer = None

    def _add_block(self, text: str) -> None:
        blocks = self._blocks
        blocks.append(Block(0, text))
        while (
            len(blocks) >= MERGED
            and blocks[-1].level < TOP_LEVEL
            and all(b.level == blocks[-1].level for b in blocks[-MERGED:])
        ):
            merged = blocks[-MERGED:]
            del blocks[-MERGED:]
            for block in merged:
                if block.widget is not None:
                    block.widget.remove()
            joined = "\n".join(block.text for block in merged)
            blocks.append(Block(merged[0].level + 1, joined))
        if self._composed and blocks[-1].widget is None:
            blocks[-1].widget = Static(Text(blocks[-1].text))
            self.mount(blocks[-1].widget, before=self._tail)


CHECK_LABEL = "check by journeyman"
"""A card's name for the harness's run of the check (the model did not ask for it)."""
BEFORE_LABEL = "check by journeyman, before the first turn"
"""The check's run before the model starts: its failing tests are the task."""
STATUS_MARK = {"running": "…", "ok": "✓", "error": "✗", "cancelled": "■"}


class ToolCard(Collapsible):
    """One tool call: "✓ ok edit_file calc/stats.py 0.02s", expanding to its full result."""

    DEFAULT_CSS = "ToolCard { margin: 0; padding: 0; border: none; }"

    def __init__(self, call: ToolCall, workspace: str, *, is_check: bool = False) -> None:
        self.call = call
        self.is_check = is_check
        """The harness's own run of the check, not a call the model made."""
        self.status = "running"
        self.duration_s: float | None = None
        self.preview = self._preview(workspace)
        self.body = Static(self.preview)
        super().__init__(self.body, title=self._heading(), collapsed=True)

    def _preview(self, workspace: str) -> Text:
        args = self.call.arguments
        if "old_string" in args or "content" in args or "patch" in args or "command" in args:
            lines = describe_call(self.call.name, args, workspace).split("\n")
            if len(lines) > PREVIEW_LINES_SHOWN:
                hidden = len(lines) - PREVIEW_LINES_SHOWN
                lines = [*lines[:PREVIEW_LINES_SHOWN], f"... {hidden:,} more lines (/diff)"]
            return styled_diff("\n".join(lines))
        return Text("")

    def _heading(self) -> str:
        """The title (markup, as a collapsible's title is parsed): all of it literal."""
        took = "" if self.duration_s is None else f" {self.duration_s:.2f}s"
        name = printable(self.call.name)
        if self.is_check:
            name = BEFORE_LABEL if self.call.id == BEFORE_CALL_ID else CHECK_LABEL
        mark = STATUS_MARK.get(self.status, "✗")
        return literal(f"{mark} {self.status} {name} {key_argument(self.call)}{took}")

    def cancelled(self, why: str) -> None:
        """The call will never get a result: its turn was cancelled or its run stopped."""
        self.status = "cancelled"
        self.title = self._heading()
        body = self.preview.copy()
        body.append(why)
        self.body.update(body)

    def finished(self, result: ToolResult, duration_s: float) -> None:
        exit_code = result.metadata.get("exit_code")
        self.status = "error" if result.is_error else "ok"
        if not result.is_error and exit_code not in (None, 0):
            self.status = f"exit {exit_code}"  # a failing command is a result, not an error
        self.duration_s = duration_s
        self.title = self._heading()
        shown = printable(result.content[:RESULT_CHARS_SHOWN])
        hidden = len(result.content) - RESULT_CHARS_SHOWN
        body = self.preview.copy()
        if exit_code is not None:
            body.append(f"exit code {exit_code}\n", style="bold")
        body.append(shown)
        if hidden > 0:
            body.append(f"\n... {hidden:,} more characters not shown")
        self.body.update(body)


class Transcript(VerticalScroll):
    """The conversation; only the last `max_items` widgets stay mounted, so a long session
    does not grow memory without bound (the whole history stays in the session store)."""

    def __init__(self, max_items: int = 200) -> None:
        super().__init__(id="transcript")
        self.max_items = max_items
        self.dropped = 0
        self._dropped_note: Note | None = None

    def add(self, widget: Widget) -> None:
        self.mount(widget)
        excess = len(self.children) + 1 - self.max_items
        if excess > 0:
            old = [c for c in self.children if c is not self._dropped_note][:excess]
            self.dropped += len(old)
            for child in old:
                child.remove()
            note = f"({self.dropped} earlier items are not shown; the session store keeps them)"
            if self._dropped_note is None:
                self._dropped_note = Note(note)
                self.mount(self._dropped_note, before=0)
            else:
                self._dropped_note.update(Text(note))
        self.scroll_end(animate=False)


@dataclass
class StatusFacts:
    """What the status bar says, all of it as text."""

    model: str = ""
    tokens_in: int = 0
    tokens_out: int = 0
    cache_read: int = 0
    cost_usd: float | None = 0.0
    budget_fraction: float = 0.0
    budget_level: str = "none"
    phase: str = "exploration"
    state: str = "idle"
    session_id: str = ""
    mode: str = ""

    def segments(self) -> list[str]:
        """The bar's parts; a narrow terminal wraps between them, never inside one."""
        cost = "cost n/a" if self.cost_usd is None else f"${self.cost_usd:.4f}"
        session = f"session {self.session_id}" if self.session_id else "new session"
        return [
            self.model,
            f"in {self.tokens_in:,} out {self.tokens_out:,} cache {self.cache_read:,}",
            cost,
            f"budget {self.budget_fraction:.0%} {self.budget_level.upper()}",
            f"phase {self.phase}",
            self.state.upper(),
            f"mode {self.mode}" if self.mode else "",
            session,
        ]

    def render(self, width: int = 0) -> str:
        """The segments joined by " | ", in lines of at most `width` characters (0: one line)."""
        lines: list[str] = []
        for segment in (s for s in self.segments() if s):
            if lines and (not width or len(lines[-1]) + 3 + len(segment) <= width):
                lines[-1] += f" | {segment}"
            else:
                lines.append(segment)
        return "\n".join(lines)


class StatusBar(Static):
    DEFAULT_CSS = "StatusBar { height: auto; background: $panel; }"

    def __init__(self) -> None:
        self.facts = StatusFacts()
        super().__init__(Text(self.facts.render()), id="status")

    def refresh_facts(self) -> None:
        self.update(Text(self.facts.render(self.content_size.width)))

    def on_resize(self) -> None:
        self.refresh_facts()
