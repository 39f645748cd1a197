"""How `mcp serve` finds a session from a partial id: by the beginning or the end of the id,
among the sessions inside its own folders only, so that sessions elsewhere in the same store
neither make an id ambiguous nor are named by one."""

from __future__ import annotations

from pathlib import Path

import pytest

from journeyman.session.store import SessionStore
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.projects import calc_package
from tests.fakes.store import new_session
from tests.protocols.mcp_server.conftest import in_process_client
from tests.protocols.mcp_server.test_trust import answer, refusal


def seed(tmp_path: Path, sessions: dict[str, Path]) -> None:
    store = SessionStore(tmp_path / "sessions")
    try:
        for session_id, workspace in sessions.items():
            new_session(store, session_id, workspace=str(workspace))
    finally:
        store.close()


async def test_sessions_outside_the_folders_do_not_make_an_id_ambiguous(
    fake_openai: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mine = calc_package(tmp_path / "mine")
    elsewhere = calc_package(tmp_path / "elsewhere")
    seed(
        tmp_path,
        {
            "20261127-221500-k3x9qm": mine,
            "20261127-221501-7az2kr": elsewhere,
            "20261127-221502-pq4mnt": elsewhere,
        },
    )
    async with in_process_client(tmp_path, mine, fake_openai, monkeypatch) as client:
        for partial in ("20261127", "k3x9qm", "9qm"):
            status = answer(await client.call_tool("get_status", {"session_id": partial}))
            assert status["session_id"] == "20261127-221500-k3x9qm", partial
        text = refusal(await client.call_tool("get_status", {"session_id": "7az2kr"}))
        assert "no session '7az2kr'" in text  # the end of an id outside: not this server's
        text = refusal(await client.call_tool("get_diff", {"session_id": "%"}))
        assert "no session '%'" in text


async def test_ambiguity_counts_only_the_sessions_inside_the_folders(
    fake_openai: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mine = calc_package(tmp_path / "mine")
    elsewhere = calc_package(tmp_path / "elsewhere")
    seed(
        tmp_path,
        {
            "20261127-221500-k3x9qm": mine,
            "20261127-221501-7az2kr": mine,
            "20261127-221502-pq4mnt": elsewhere,
        },
    )
    async with in_process_client(tmp_path, mine, fake_openai, monkeypatch) as client:
        text = refusal(await client.call_tool("get_status", {"session_id": "20261127"}))
        assert "ambiguous: 2 sessions match" in text
        assert "pq4mnt" not in text
