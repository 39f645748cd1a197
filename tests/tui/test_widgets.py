"""Model and tool text on the conversation screen is shown as written: markup in it neither
styles nor hides anything (a model cannot fake a card's status)."""

from __future__ import annotations

import pytest
from textual.app import App, ComposeResult
from textual.widget import Widget
from textual.widgets import Static
from textual.widgets._collapsible import CollapsibleTitle

from journeyman.core.messages import ToolCall, ToolResult
from journeyman.tui.widgets import AssistantText, Note, ToolCard, UserMessage

MARKUP = [
    "done [bold]x[/bold]",
    "[$success]✓ ok[/] fine",
    "[@click=app.quit]click[/]",
    "[B]loud",
    "a\\[b]c and [] and [1, 2]",
]


class OneCard(App[None]):
    def __init__(self, card: ToolCard) -> None:
        super().__init__()
        self.card = card

    def compose(self) -> ComposeResult:
        yield self.card


@pytest.mark.parametrize("summary", MARKUP)
async def test_a_cards_title_shows_the_models_text_as_written(summary: str) -> None:
    call = ToolCall("c1", "finish", {"summary": summary})
    card = ToolCard(call, ".")
    async with OneCard(card).run_test() as pilot:
        card.finished(ToolResult("c1", "finish", "ok"), 0.01)
        await pilot.pause()
        shown = card.query_one(CollapsibleTitle).label.plain
    assert shown.startswith("✓ ok finish ")
    assert summary in shown


def shown(widget: Widget) -> str:
    """What a message shows (the model's text is a column of blocks)."""
    parts = widget.query(Static) if isinstance(widget, AssistantText) else [widget]
    return "\n".join(str(part.render()) for part in parts)


@pytest.mark.parametrize("text", MARKUP)
async def test_messages_and_notes_show_markup_as_written(text: str) -> None:
    widgets = [AssistantText(text), UserMessage(text), Note(text)]

    class Screen(App[None]):
        def compose(self) -> ComposeResult:
            yield from widgets

    async with Screen().run_test() as pilot:
        await pilot.pause()
        for widget in widgets:
            assert text in shown(widget)
