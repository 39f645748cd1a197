"""A long streamed reply in the app: shown as it arrives, whole and as written at the end, read
exactly as the same text shown at once, and quitting does not wait for the stream to end."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from rich.text import Text
from textual.app import App, ComposeResult
from textual.widgets import Static

from journeyman.core.display import printable
from journeyman.providers.base import ModelRequest, ModelResponse, TextCallback
from journeyman.providers.scripted import ScriptedProvider
from journeyman.tui import widgets
from journeyman.tui.widgets import AssistantText
from tests.fakes.agents import call, turn
from tests.tui.harness import scripted_app, submit


def long_reply(lines: int) -> str:
    """Paragraphs, blank lines, a long line that wraps, control characters to escape."""
    parts = []
    for n in range(lines):
        parts.append(f"line {n}: the value is kept [bold]as written[/bold]\n")
        if n % 7 == 0:
            parts.append("\n\n")
        if n % 13 == 0:
            parts.append("wrapped " * 30 + "\x1b[2J\n")
    return "".join(parts)


class Streamed:
    """Makes a scripted provider stream each reply's text in small fragments, yielding to the
    event loop after each one as a network stream does."""

    def __init__(
        self, provider: ScriptedProvider, chunk: int = 8, hold_at: int | None = None
    ) -> None:
        self.hold_at = hold_at
        """After this many fragments the stream waits for `go_on`."""
        self.held = asyncio.Event()
        self.go_on = asyncio.Event()
        self.sent = 0
        self.total = 0
        self.chunk = chunk
        self._complete = provider.complete
        provider.complete = self.complete  # type: ignore[method-assign]

    async def complete(self, request: ModelRequest, on_text: TextCallback | None = None) -> Any:
        response: ModelResponse = await self._complete(request, None)
        if on_text is not None:
            starts = range(0, len(response.text), self.chunk)
            self.total = len(starts)
            for start in starts:
                on_text(response.text[start : start + self.chunk])
                self.sent += 1
                if self.sent == self.hold_at:
                    self.held.set()
                    await self.go_on.wait()
                await asyncio.sleep(0)
        return response


def shown_text(reply: AssistantText) -> str:
    """The reply's blocks as the screen shows them, one under the other."""
    return "\n".join(str(block.render()) for block in reply.query(Static))


def screen_lines(app: App[Any]) -> list[str]:
    strips = app.screen._compositor.render_strips()
    return [strip.text.rstrip() for strip in strips]


class OneMessage(App[None]):
    def __init__(self, widget: Static | AssistantText) -> None:
        super().__init__()
        self.widget = widget

    def compose(self) -> ComposeResult:
        yield self.widget


async def test_a_streamed_reply_reads_exactly_as_the_same_text_shown_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(widgets, "BLOCK_CHARS", 300)  # many blocks in a small screen,
    monkeypatch.setattr(widgets, "MERGED", 3)  # merged at both levels
    text = long_reply(40)
    whole = Static(Text(printable(text)))
    whole.styles.margin = (1, 0, 0, 0)
    async with OneMessage(whole).run_test(size=(60, 200)) as pilot:
        await pilot.pause()
        expected = screen_lines(pilot.app)
    streamed = AssistantText()
    async with OneMessage(streamed).run_test(size=(60, 200)) as pilot:
        for start in range(0, len(text), 5):
            streamed.append(text[start : start + 5])
            if start % 400 == 0:
                await pilot.pause()
        streamed.replace(text)
        await pilot.pause()
        levels = [block.level for block in streamed._blocks]
        assert widgets.TOP_LEVEL in levels  # cut into blocks, and merged
        assert len(streamed.query(Static)) == len(levels) + 1  # the merged ones are gone
        assert screen_lines(pilot.app) == expected
    assert "\\x1b[2J" in "\n".join(expected) and "[bold]as written[/bold]" in "\n".join(expected)


async def test_a_long_stream_is_shown_as_it_arrives_and_whole_at_the_end(tmp_path: Path) -> None:
    text = long_reply(1500)  # about 150 KB, some 19,000 fragments
    app, providers = scripted_app(
        tmp_path, [turn(call("finish", "fin", summary="streamed"), text=text)], stream=True
    )
    stream = Streamed(providers[0], hold_at=len(text) // 16)
    async with app.run_test(size=(100, 30)) as pilot:
        await submit(pilot, "a long answer please")
        await stream.held.wait()
        await pilot.pause(0.2)  # the stream waits half way: what came so far is on screen
        partial = shown_text(app.query(AssistantText).first())
        assert len(partial) > len(text) // 4 and printable(text).startswith(partial)
        assert len(partial) <= len(printable(text[: len(text) // 2]))
        stream.go_on.set()
        assert app.turn is not None
        await app.turn
        await pilot.pause()
        reply = app.query(AssistantText).first()
        assert reply.text == text
        assert shown_text(reply) == printable(text)
        assert app.results[0].success


async def test_quit_during_a_huge_stream_exits_before_the_stream_ends(tmp_path: Path) -> None:
    text = "word " * 400_000  # 2 MB, 250,000 fragments
    app, providers = scripted_app(
        tmp_path, [turn(call("finish", "fin", summary="streamed"), text=text)], stream=True
    )
    stream = Streamed(providers[0])
    async with app.run_test(size=(100, 30)) as pilot:
        await submit(pilot, "a huge answer please")
        while stream.sent < 2_000:
            await pilot.pause(0.01)
        await submit(pilot, "/quit")
        await pilot.pause()
    assert not app.is_running
    assert stream.sent < stream.total  # it quit in the middle of the stream
    assert app.turn is not None and app.turn.done()


def test_a_reply_is_cut_at_line_ends_and_a_line_too_long_at_a_space_or_anywhere() -> None:
    lines = "".join(f"line {n}\n\n" for n in range(2_000))
    blocks, tail = widgets.split_blocks(lines)
    assert len(blocks) > 3 and "\n".join([*blocks, tail]) == lines  # nothing lost or added
    spaced = "word " * 10_000
    blocks, tail = widgets.split_blocks(spaced)
    assert len(blocks) > 1 and " ".join([*blocks, tail]) == spaced
    blob = "x" * 50_000  # one line with no space: cut anyway, so the tail stays short
    blocks, tail = widgets.split_blocks(blob)
    assert len(blocks) == 3 and "".join([*blocks, tail]) == blob
    assert all(len(block) <= widgets.LONGEST_TAIL for block in blocks)
