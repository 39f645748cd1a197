"""The interactive app showing a long streamed reply: does a chunk cost the same at the end of
a reply as at its start?

Scope: one real `ChatApp`, headless under Textual's Pilot (100x30), on a scripted agent (real
SQLite store, streaming on, the stream redactor in the path). Its provider hands out one reply
of `--sizes` characters (markdown-like paragraphs, headings and bullet lists, about 70
characters a line) in 8-character fragments, yielding to the event loop after each one as a
network stream would; the reply ends with a `finish` call. For each size it prints the wall
time from pressing Enter to the end of the turn, and the mean time per chunk over the first and
the last 1,000 chunks (what the app's renders cost shows up between two chunks). It also
checks that the reply's full text is what the app ended up showing. The provider, the model
loop and the store are the same before and after a change to the app; only the app's rendering
differs.

    .venv/bin/python bench/tui_stream.py [--sizes 50000,200000,2000000] [--chunk 8]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "src"))
sys.path.insert(0, str(REPO_ROOT))

from tests.fakes.agents import call, turn  # noqa: E402
from tests.tui.harness import scripted_app, submit  # noqa: E402

from journeyman.providers.base import ModelRequest, ModelResponse, TextCallback  # noqa: E402
from journeyman.providers.scripted import ScriptedProvider  # noqa: E402
from journeyman.tui.widgets import AssistantText  # noqa: E402

WINDOW = 1_000
"""Chunks averaged at the start and at the end of a reply."""


def long_reply(size: int) -> str:
    """About `size` characters of markdown-like text: paragraphs, headings, bullet lists."""
    parts: list[str] = []
    total = n = 0
    while total < size:
        n += 1
        block = (
            f"## Part {n}\n\n"
            f"The function `step_{n}` reads the input, checks its bounds and returns the\n"
            f"sum of the values it kept; a value past the limit is *skipped*, not clipped.\n\n"
            f"- first item of list {n}: keep the order of the records as read\n"
            f"- second item of list {n}: report the count of skipped values\n\n"
        )
        parts.append(block)
        total += len(block)
    return "".join(parts)[:size]


def stream_in_chunks(provider: ScriptedProvider, chunk: int, stamps: list[float]) -> None:
    """Make `provider` stream each reply's text in `chunk`-character fragments, yielding to
    the event loop between fragments; `stamps` gets the time of each fragment."""
    complete = provider.complete

    async def streaming(request: ModelRequest, on_text: TextCallback | None = None) -> Any:
        response: ModelResponse = await complete(request, None)
        if on_text is not None:
            for start in range(0, len(response.text), chunk):
                on_text(response.text[start : start + chunk])
                stamps.append(time.perf_counter())
                await asyncio.sleep(0)
        return response

    provider.complete = streaming  # type: ignore[method-assign]


async def one_reply(root: Path, size: int, chunk: int) -> None:
    text = long_reply(size)
    script = [turn(call("finish", "fin", summary="streamed"), text=text)]
    app, providers = scripted_app(root, script, stream=True)
    stamps: list[float] = []
    stream_in_chunks(providers[0], chunk, stamps)
    async with app.run_test(size=(100, 30)) as pilot:
        started = time.perf_counter()
        await submit(pilot, "write a long answer")
        assert app.turn is not None
        await app.turn
        await pilot.pause()
        took = time.perf_counter() - started
        streaming = stamps[-1] - started
        shown = app.query(AssistantText).first().text
    window = min(WINDOW, len(stamps) // 2)
    first = (stamps[window] - stamps[0]) / window * 1000
    last = (stamps[-1] - stamps[-1 - window]) / window * 1000
    whole = "full text shown" if shown == text else "TEXT DIFFERS"
    print(
        f"{size:>9,} chars, {len(stamps):>7,} chunks: {took:7.2f} s per reply "
        f"({streaming:.2f} s to the last chunk); "
        f"{first:6.3f} ms/chunk over the first {window:,}, {last:6.3f} ms/chunk over the "
        f"last {window:,} ({whole})",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="50000,200000,2000000")
    parser.add_argument("--chunk", type=int, default=8)
    args = parser.parse_args()
    for n, size in enumerate(int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / str(n)
            root.mkdir()
            asyncio.run(one_reply(root, size, args.chunk))


if __name__ == "__main__":
    main()
