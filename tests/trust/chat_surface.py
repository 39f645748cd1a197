"""`journeyman chat` in this process: the command builds its app (its `run` replaced by nothing,
as `tests/tui/test_chat_cmd.py` does), then Pilot types the task and waits for the turn."""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
from collections.abc import Iterator
from typing import Any

import click
import pytest

from journeyman.cli import chat_cmd
from journeyman.cli.chat_cmd import chat
from journeyman.tools.choices import SandboxKind
from journeyman.tui.app import ChatApp
from tests.trust.surfaces import MODEL, Scene
from tests.tui.harness import submit

TURN_LIMIT_S = 120.0


@contextlib.contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    """This process's environment replaced by `values` for the block."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(values)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def chat_options(flags: tuple[str, ...]) -> dict[str, Any]:
    """The run flags of a scene as `chat`'s keyword arguments."""
    options: dict[str, Any] = {}
    words = list(flags)
    while words:
        word = words.pop(0)
        if word == "--verify":
            options["verify"] = words.pop(0)
        elif word == "--no-verify":
            options["no_verify"] = True
        elif word == "--sandbox":
            options["sandbox"] = SandboxKind(words.pop(0))
        else:
            raise AssertionError(f"chat takes no {word}")
    return options


def app_text(app: ChatApp) -> tuple[str, str]:
    """Everything the app's widgets show, and its error notes."""
    shown: list[str] = []
    for widget in app.query("*"):
        try:
            shown.append(str(widget.render()))
        except Exception:  # a container renders nothing of its own
            continue
    errors = [line for line in shown if line.startswith("error:") or "stopped:" in line]
    return "\n".join(shown), "\n".join(errors)


async def chat_once(scene: Scene) -> tuple[int | None, str, str]:
    opened: list[ChatApp] = []
    printed = io.StringIO()
    code: int | None = None
    with (
        pytest.MonkeyPatch.context() as patch,
        environment(scene.environment()),
        contextlib.redirect_stderr(printed),
        contextlib.redirect_stdout(printed),
    ):
        patch.setattr(ChatApp, "run", lambda self, **_: opened.append(self))
        patch.setattr(chat_cmd, "terminal_problem", lambda: None)
        try:
            chat(
                workspace=scene.ws,
                provider="openai",
                model=MODEL,
                base_url=scene.server.base_url,
                session_dir=scene.sessions,
                yes=True,
                lsp=False,
                mcp=False,
                **chat_options(scene.flags),
            )
        except click.exceptions.Exit as leaving:
            code = leaving.exit_code
        if not opened:
            return code, printed.getvalue(), printed.getvalue()
        app = opened[-1]
        async with app.run_test(size=(120, 40)) as pilot:
            await submit(pilot, scene.task)
            if app.turn is not None:
                await asyncio.wait_for(asyncio.shield(app.turn), TURN_LIMIT_S)
            await pilot.pause()
            shown, errors = app_text(app)
    return code, printed.getvalue() + "\n" + shown, printed.getvalue() + "\n" + errors
