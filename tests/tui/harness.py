"""The app on a scripted agent: a factory that builds the agent around the app's hooks, and a
clock the tests move by hand."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from journeyman import Agent
from journeyman.providers.scripted import ScriptedProvider, ScriptStep
from journeyman.tui.app import ChatApp
from journeyman.tui.conversation import AgentHooks
from tests.fakes.agents import make_agent


class ManualClock:
    """A monotonic clock that moves only when a test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def scripted_app(
    tmp_path: Path,
    script: Iterable[ScriptStep],
    *,
    session_id: str | None = None,
    clock: ManualClock | None = None,
    **config: Any,
) -> tuple[ChatApp, list[ScriptedProvider]]:
    """A `ChatApp` whose agent plays `script` (workspace `tmp_path / "ws"`); `config` goes to
    `AgentConfig` (verification off unless given)."""
    providers: list[ScriptedProvider] = []
    config.setdefault("verify", False)

    def build(hooks: AgentHooks) -> Agent:
        agent, provider = make_agent(
            tmp_path,
            script,
            agent_options={
                "approver": hooks.extension_approver,
                "permission_approver": hooks.permission_approver,
            },
            **config,
        )
        agent.on_event = hooks.on_event
        providers.append(provider)
        return agent

    app = ChatApp(build, session_id=session_id, clock=clock or ManualClock())
    return app, providers


async def submit(pilot: Any, text: str) -> None:
    """Type `text` in the prompt and press Enter."""
    prompt = pilot.app.query_one("#prompt")
    prompt.value = text
    await pilot.press("enter")
    await pilot.pause()


async def finish_turn(pilot: Any) -> None:
    """Wait until the running turn is over."""
    app = pilot.app
    if app.turn is not None:
        await app.turn
    await pilot.pause()
