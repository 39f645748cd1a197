"""The app's conversation when its first message cannot start a session: nothing is stored,
and the next message starts a session again instead of asking for one that does not exist."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from journeyman.core.errors import ConfigurationError, ErrorCategory, ProviderError
from journeyman.core.result import FinishReason
from journeyman.session.store import SessionStore
from journeyman.tui.conversation import Conversation
from tests.fakes.agents import finish, make_agent


async def test_a_first_message_refused_by_the_settings_leaves_no_session_behind(
    tmp_path: Path,
) -> None:
    agent, _ = make_agent(tmp_path, [finish("done")], sessions="s", max_budget_usd=1.0)  # unpriced
    conversation = Conversation(agent)
    for _ in range(2):
        with pytest.raises(ConfigurationError, match="price"):
            await conversation.send("fix it")
        assert conversation.session_id is None
    store = SessionStore(agent.session_root)
    try:
        assert store.list_sessions() == []
    finally:
        store.close()


async def test_a_first_message_cancelled_mid_run_keeps_its_session(tmp_path: Path) -> None:
    agent, _ = make_agent(tmp_path, [finish("done")], sessions="s")
    conversation = Conversation(agent)
    stored = asyncio.Event()
    real_run = agent.run

    async def run_then_hang(task: str, **kwargs: Any) -> Any:
        await real_run(task, **kwargs)
        stored.set()
        await asyncio.Event().wait()  # stands for a run still going when the user cancels

    agent.run = run_then_hang  # type: ignore[method-assign]
    sending = asyncio.create_task(conversation.send("fix it"))
    await asyncio.wait_for(stored.wait(), 30)
    sending.cancel()
    with pytest.raises(asyncio.CancelledError):
        await sending
    assert conversation.session_id is not None  # stored: the next message continues it


async def test_a_first_message_whose_key_is_refused_leaves_no_session_behind(
    tmp_path: Path,
) -> None:
    refused = ProviderError(
        "the server rejected the API key",
        provider="openai",
        status_code=401,
        retryable=False,
        category=ErrorCategory.CONFIGURATION,
    )
    agent, _ = make_agent(tmp_path, [refused, finish("done")], sessions="s")
    conversation = Conversation(agent)
    first = await conversation.send("fix it")
    assert first.finish_reason is FinishReason.CONFIGURATION_ERROR
    assert conversation.session_id is None  # the next message must not ask for it
    second = await conversation.send("fix it")
    assert second.success and conversation.session_id == second.session_id
    store = SessionStore(agent.session_root)
    try:
        assert [s.record.id for s in store.list_sessions()] == [second.session_id]
    finally:
        store.close()
