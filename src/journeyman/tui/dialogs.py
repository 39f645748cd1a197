"""The two questions the agent asks the user: may this call run (yes / no / always), and may the
budget grow (Y / N, no answer in 60 s denies). Each is a modal screen; the agent waits on the
answer through an asyncio future while its lifecycle is PAUSED."""

from __future__ import annotations

from collections.abc import Callable

from rich.cells import cell_len, get_character_cell_size
from rich.segment import Segment
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.geometry import Size
from textual.screen import ModalScreen
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widgets import Button, Static

from journeyman.core.display import printable, printable_name
from journeyman.economics.budget import ExtensionRequest
from journeyman.policy.call_description import describe_call
from journeyman.policy.permissions import ApprovalAnswer, ApprovalRequest
from journeyman.tui.widgets import styled_diff

EXTENSION_TIMEOUT_S = 60.0
"""No answer to the budget extension dialog within this many seconds denies it (the seed's)."""

DIALOG_CSS = """
{name} {{ align: center middle; }}
{name} > Vertical {{
    width: 90%; max-width: 120; height: auto; max-height: 90%;
    border: thick $accent; background: $surface; padding: 0 1;
}}
{name} Horizontal {{ height: auto; }}
{name} Button {{ margin: 0 1 0 0; min-width: 10; }}
"""


class CallView(ScrollView, can_focus=True):
    """The call under question, in a scrolling box that renders only the rows on screen: a call
    of 50,000 lines opens as fast as one of 50. Lines are folded at the box's width, at the
    column rather than at a word, so every character of the call stays on screen; styled as
    `styled_diff` styles them."""

    DEFAULT_CSS = "CallView { height: auto; max-height: 16; }"

    def __init__(self, described: str, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.lines = styled_diff(described).split("\n")
        self.rows: list[Text] = []
        self.folded_at = 0

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        self._fold(width - self.styles.scrollbar_size_vertical)
        return len(self.rows)

    def _fold(self, width: int) -> None:
        width = max(width, 10)
        if width == self.folded_at:
            return
        rows: list[Text] = []
        for line in self.lines:
            rows.extend(_folded(line, width))
        self.rows, self.folded_at = rows, width
        self.virtual_size = Size(width, len(rows))

    def render_line(self, y: int) -> Strip:
        index = self.scroll_offset.y + y
        style = self.rich_style
        if index >= len(self.rows):
            return Strip.blank(self.size.width, style)
        segments = Segment.apply_style(self.rows[index].render(self.app.console), style)
        return Strip(list(segments)).crop_extend(0, self.size.width, style)


def _folded(line: Text, width: int) -> list[Text]:
    """`line` cut into rows of at most `width` cells (tabs expanded first)."""
    if "\t" in line.plain:
        line.expand_tabs()
    plain = line.plain
    if cell_len(plain) <= width:
        return [line]
    offsets: list[int] = []
    used = 0
    for index, char in enumerate(plain):
        size = get_character_cell_size(char)
        if used + size > width:
            offsets.append(index)
            used = 0
        used += size
    return list(line.divide(offsets))


class ApprovalDialog(ModalScreen[ApprovalAnswer]):
    """Shows the call in full (an edit as a diff, a command whole) in a scrolling box and asks
    yes / no / always. Yes and always are taken only once the end of the call has been on
    screen: a change taller than the box must be scrolled to its end first (↓, PgDn, space,
    End or the mouse), and until then a line under the box counts the rows not yet shown."""

    DEFAULT_CSS = DIALOG_CSS.format(name="ApprovalDialog") + (
        "ApprovalDialog #unread { color: $warning; text-style: bold; }"
    )
    BINDINGS = [  # noqa: RUF012
        Binding("y", "answer('allow')", "yes"),
        Binding("n", "answer('deny')", "no"),
        Binding("escape", "answer('deny')", "no"),
        Binding("a", "answer('always')", "always"),
        Binding("space", "page_down", "next page", show=False),
    ]

    def __init__(self, request: ApprovalRequest) -> None:
        super().__init__()
        self.request = request
        self.described = describe_call(request.tool_name, request.args, request.project)
        self.end_seen = False
        """Whether the last row of the call has been on screen (then yes can be answered)."""
        self.change = CallView(self.described, id="change")
        self.unread = Static(id="unread")
        self.unread.display = False

    def compose(self) -> ComposeResult:
        request = self.request
        heading = Text(
            f"{printable_name(request.tool_name)} needs your approval: {printable(request.reason)}",
            style="bold",
        )
        always = (
            f"[a]lways (remembers {', '.join(printable_name(r) for r in request.remember_as)})"
            if request.remember_as
            else ""
        )
        with Vertical():
            yield Static(heading)
            yield self.change
            yield self.unread
            yield Static(Text(f"Allow it? [y]es  [n]o  {always}"))
            with Horizontal():
                yield Button("Yes (y)", id="allow", variant="success", disabled=True)
                yield Button("No (n)", id="deny", variant="error")
                if request.remember_as:
                    yield Button("Always (a)", id="always", disabled=True)

    def on_mount(self) -> None:
        self.watch(self.change, "scroll_y", self._note_position, init=False)
        self.call_after_refresh(self._note_position)

    def on_resize(self) -> None:
        self.call_after_refresh(self._note_position)

    def _note_position(self, _: object = None) -> None:
        """Record whether the end of the call is on screen, and say what is left below."""
        if self.end_seen or not self.change.size.height:  # seen already, or not laid out yet
            return
        below = round(self.change.max_scroll_y - self.change.scroll_y)
        if below > 0:
            self.unread.update(
                Text(
                    f"{below:,} more rows below: scroll to the end (↓, PgDn, space, End) "
                    "before answering yes"
                )
            )
            self.unread.display = True
            return
        self.end_seen = True
        self.unread.display = False
        for button in self.query(Button):
            button.disabled = False

    def action_page_down(self) -> None:
        self.change.scroll_page_down()

    def action_answer(self, answer: str) -> None:
        if answer == "always" and not self.request.remember_as:
            return
        if answer != "deny" and not self.end_seen:
            self._note_position()
            if not self.end_seen:
                if not self.change.size.height:  # pressed before the first layout
                    self.call_after_refresh(self._answer_once_laid_out, answer)
                else:
                    self.unread.styles.background = "red"
                return
        self.dismiss(ApprovalAnswer(answer))

    def _answer_once_laid_out(self, answer: str) -> None:
        if self.is_current and self.change.size.height:
            self.action_answer(answer)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.action_answer(event.button.id or "deny")


class BudgetDialog(ModalScreen[bool]):
    """Y grants the extension, N denies it (the agent wraps up); silence denies after 60 s,
    measured on `clock` (injectable, so tests need not wait)."""

    DEFAULT_CSS = DIALOG_CSS.format(name="BudgetDialog")
    BINDINGS = [  # noqa: RUF012
        Binding("y", "answer(True)", "grant"),
        Binding("n", "answer(False)", "deny"),
        Binding("escape", "answer(False)", "deny"),
    ]

    def __init__(
        self,
        request: ExtensionRequest,
        clock: Callable[[], float],
        timeout_s: float = EXTENSION_TIMEOUT_S,
        tick_s: float = 0.1,
    ) -> None:
        super().__init__()
        self.request = request
        self.clock = clock
        self.timeout_s = timeout_s
        self.tick_s = tick_s
        self.opened_at = clock()
        self.countdown = Static(self._countdown_text())

    def _remaining(self) -> float:
        return max(0.0, self.timeout_s - (self.clock() - self.opened_at))

    def _countdown_text(self) -> Text:
        return Text(f"No answer in {self._remaining():.0f} s denies the extension.")

    def compose(self) -> ComposeResult:
        request = self.request
        extra = []
        if request.additional_tokens:
            extra.append(f"+{request.additional_tokens:,} tokens")
        if request.additional_usd:
            extra.append(f"+${request.additional_usd:.2f}")
        by = " and ".join(extra) or "more"
        with Vertical():
            yield Static(Text(f"Budget: {printable(request.reason)}", style="bold"))
            yield Static(
                Text(
                    f"Extend the budget by {by}? This would be extension "
                    f"{request.extensions_granted + 1} of {request.max_extensions}."
                )
            )
            yield Static(Text("[Y] grant   [N] deny (the agent wraps up)"))
            yield self.countdown
            with Horizontal():
                yield Button("Grant (y)", id="grant", variant="success")
                yield Button("Deny (n)", id="deny", variant="error")

    def on_mount(self) -> None:
        self.set_interval(self.tick_s, self._tick)

    def _tick(self) -> None:
        if self._remaining() <= 0:
            self.action_answer(False)
            return
        self.countdown.update(self._countdown_text())

    def action_answer(self, granted: bool) -> None:
        if self.is_current:
            self.dismiss(granted)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.action_answer(event.button.id == "grant")
