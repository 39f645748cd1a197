"""A session whose very first model call is refused for its configuration (a key the server
turns down) holds nothing worth keeping, so it is not kept; a session that got any answer, or
one being resumed, is always kept, whatever ends it."""

from __future__ import annotations

from pathlib import Path

from journeyman import Agent, AgentConfig, FinishReason
from journeyman.session.store import SessionStore
from journeyman.tools.sandbox import SandboxKind
from tests.fakes.fixtures import fake_openai  # noqa: F401
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import error, reply, tool_call

REFUSED = error(401, "Incorrect API key provided", code="invalid_api_key")


def agent_for(server: FakeOpenAIServer, tmp_path: Path) -> Agent:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    config = AgentConfig(session_dir=tmp_path / "sessions", sandbox=SandboxKind.LOCAL, verify=False)
    return Agent(
        "openai:gpt-4.1-mini",
        base_url=server.base_url,
        api_key="sk-wrong",
        workspace=workspace,
        config=config,
    )


def stored(tmp_path: Path) -> list[str]:
    store = SessionStore(tmp_path / "sessions")
    try:
        return [s.record.id for s in store.list_sessions()]
    finally:
        store.close()


async def test_a_key_refused_at_the_first_call_keeps_no_session(
    fake_openai: FakeOpenAIServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    fake_openai.default = REFUSED
    agent = agent_for(fake_openai, tmp_path)
    result = await agent.run("fix it")
    assert result.finish_reason is FinishReason.CONFIGURATION_ERROR
    assert result.store_path is None and agent.session_id is None
    assert stored(tmp_path) == []
    # the same agent, once the server takes the key, starts afresh
    fake_openai.default = reply("done")
    again = await agent.run("fix it")
    assert again.success and again.store_path is not None
    assert stored(tmp_path) == [again.session_id]


async def test_a_refusal_after_an_answer_keeps_the_session(
    fake_openai: FakeOpenAIServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    fake_openai.enqueue(reply("looking", [tool_call("list_files", {"path": "."})]))
    fake_openai.default = REFUSED  # e.g. the key was revoked during the run
    result = await agent_for(fake_openai, tmp_path).run("fix it")
    assert result.finish_reason is FinishReason.CONFIGURATION_ERROR
    assert result.store_path is not None
    assert stored(tmp_path) == [result.session_id]  # its answered call and its cost stay


async def test_a_resumed_session_is_never_removed(
    fake_openai: FakeOpenAIServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    fake_openai.enqueue(reply("done"))
    first = await agent_for(fake_openai, tmp_path).run("fix it")
    assert first.success
    fake_openai.default = REFUSED
    follow_up = await agent_for(fake_openai, tmp_path).send(first.session_id, "and a test")
    assert follow_up.finish_reason is FinishReason.CONFIGURATION_ERROR
    assert follow_up.store_path is not None
    assert stored(tmp_path) == [first.session_id]
