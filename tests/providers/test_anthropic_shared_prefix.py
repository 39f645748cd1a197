"""The shared prefix of swarm workers' system prompts as its own cached block on Anthropic:
through the official SDK against the fake Messages API, whose prompt cache reports reads the way
the real one does."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.fakes import FakeAnthropicServer, FakeOpenAIServer, reply
from tests.fakes.anthropic_cache import FakePromptCache, prompt_blocks
from tests.fakes.anthropic_swarm import anthropic_reply
from tests.fakes.swarm import SwarmModel, git_repo, openai_reply, system_of, write_then_finish

from journeyman import Agent
from journeyman.core.messages import Message
from journeyman.loop.config import AgentConfig
from journeyman.providers.anthropic import AnthropicProvider, to_anthropic_system
from journeyman.providers.base import ModelRequest, Provider, ToolSpec
from journeyman.providers.openai import OpenAIProvider
from journeyman.swarm.orchestrator import Swarm, SwarmConfig
from journeyman.tools.sandbox import SandboxKind

EPHEMERAL = {"type": "ephemeral"}
SHARED = "You are one worker of a swarm. " * 200  # about 1,550 tokens at 4 characters a token
WORKER_FILES = ("a.txt", "b.txt")
TEAM = SwarmModel(
    [{"title": n, "task": f"Update {n}.", "files": [n]} for n in WORKER_FILES],
    {f"w{i}": write_then_finish(n, f"{n} done\n") for i, n in enumerate(WORKER_FILES, start=1)},
)
READ = ToolSpec(
    "read_file", "Read a file.", {"type": "object", "properties": {"path": {"type": "string"}}}
)


def provider(server: FakeAnthropicServer) -> AnthropicProvider:
    return AnthropicProvider(
        "claude-test", api_key="sk-ant-test", base_url=server.base_url, timeout=5.0
    )


def worker_request(task: str, shared_chars: int) -> ModelRequest:
    return ModelRequest(
        system=f"{SHARED}\n## Your subtask\n{task}\n",
        messages=(Message.user(task),),
        tools=(READ,),
        max_output_tokens=100,
        system_shared_chars=shared_chars,
    )


def two_worker_swarm(tmp_path: Path, client: Provider) -> Swarm:
    """A swarm of two workers that each write their file and finish, on `client`."""
    repo = git_repo(tmp_path / "repo", {n: "todo\n" for n in WORKER_FILES})
    return Swarm(
        client,
        workspace=repo,
        config=SwarmConfig(workers=2, verify_command="true"),
        agent_config=AgentConfig(session_dir=tmp_path / "sessions", sandbox=SandboxKind.LOCAL),
    )


def test_the_system_splits_after_the_shared_part_only_inside_it() -> None:
    assert to_anthropic_system("abcdef", 2) == [
        {"type": "text", "text": "ab", "cache_control": EPHEMERAL},
        {"type": "text", "text": "cdef", "cache_control": EPHEMERAL},
    ]
    for shared in (0, 6, 99):  # nothing marked, or all of it: one block as before
        assert to_anthropic_system("abcdef", shared) == [
            {"type": "text", "text": "abcdef", "cache_control": EPHEMERAL}
        ]
    assert to_anthropic_system("", 3) == []


def test_two_workers_send_the_same_first_block_and_the_second_reads_it_from_the_cache() -> None:
    cache = FakePromptCache()
    with FakeAnthropicServer(prompt_cache=cache, default=reply("ok")) as server:
        client = provider(server)

        async def both() -> list[Any]:
            first = await client.complete(worker_request("Fix a.py.", len(SHARED)))
            second = await client.complete(worker_request("Test b.py.", len(SHARED)))
            await client.aclose()
            return [first, second]

        first, second = asyncio.run(both())
    systems = [r.json["system"] for r in server.requests]
    assert [len(s) for s in systems] == [2, 2]
    shared_block = {"type": "text", "text": SHARED, "cache_control": EPHEMERAL}
    assert systems[0][0] == systems[1][0] == shared_block
    assert systems[0][1] != systems[1][1]
    assert all(s[1]["cache_control"] == EPHEMERAL for s in systems)
    assert first.usage.cache_read_tokens == 0
    shared_tokens = second.usage.cache_read_tokens
    assert shared_tokens >= len(SHARED) // 4  # the tools and the shared part, read
    assert second.usage.input_tokens + second.usage.cache_write_tokens < shared_tokens // 10


def test_without_a_marked_prefix_the_second_worker_reads_nothing() -> None:
    cache = FakePromptCache()
    with FakeAnthropicServer(prompt_cache=cache, default=reply("ok")) as server:
        client = provider(server)

        async def both() -> Any:
            await client.complete(worker_request("Fix a.py.", 0))
            second = await client.complete(worker_request("Test b.py.", 0))
            await client.aclose()
            return second

        second = asyncio.run(both())
    assert [len(r.json["system"]) for r in server.requests] == [1, 1]
    assert second.usage.cache_read_tokens == 0


def test_the_fake_cache_reads_the_longest_written_prefix_and_needs_the_minimum() -> None:
    cache = FakePromptCache(min_tokens=50, chars_per_token=1)
    long, short = "x" * 40, "y" * 5

    def body(*texts: str) -> dict[str, Any]:
        blocks = [{"type": "text", "text": t, "cache_control": EPHEMERAL} for t in texts]
        return {"model": "m", "system": blocks, "messages": [{"role": "user", "content": "q"}]}

    first = cache.account(body(long, "a"))
    assert first.cache_read_tokens == 0 and first.cache_write_tokens > 40
    again = cache.account(body(long, "b"))
    long_block, _ = prompt_blocks(body(long))[0]
    assert again.cache_read_tokens == len(long_block)  # up to the first breakpoint only
    assert again.cache_write_tokens == first.cache_write_tokens - len(long_block)
    assert cache.account(body(short)).cache_read_tokens == 0
    assert cache.account(body(short)).cache_read_tokens == 0  # under the minimum: never stored
    assert cache.account({**body(long, "a"), "model": "other"}).cache_read_tokens == 0


def test_an_agent_marks_the_configured_prefix_and_keeps_it_first(tmp_path: Path) -> None:
    with FakeAnthropicServer(default=reply("done")) as server:
        for shared in (len(SHARED), len(SHARED) + 10_000):
            config = AgentConfig(
                session_dir=tmp_path / "sessions",
                system_prompt=SHARED + "\n## Your subtask\nFix a.py.\n",
                system_prompt_shared_chars=shared,
                sandbox=SandboxKind.LOCAL,
            )
            workspace = tmp_path / f"ws-{shared}"
            workspace.mkdir()
            agent = Agent(provider(server), workspace=workspace, config=config)
            asyncio.run(agent.run("Fix a.py."))
    marked, too_long = (r.json["system"] for r in server.requests[:2])
    assert marked[0] == {"type": "text", "text": SHARED, "cache_control": EPHEMERAL}
    assert len(marked) == 2
    assert len(too_long) == 1  # a mark past the end of the prompt is not used


def test_swarm_workers_share_their_first_system_block(tmp_path: Path) -> None:
    with FakeAnthropicServer(default=anthropic_reply(TEAM)) as server:
        result = asyncio.run(two_worker_swarm(tmp_path, provider(server)).run("update both"))
    assert result.success, result.summary()
    workers = [r.json["system"] for r in server.requests if "Subtask id:" in str(r.json["system"])]
    firsts = {block[0]["text"] for block in workers}
    assert len(workers) == 4 and len(firsts) == 1
    assert all(len(blocks) == 2 and blocks[0]["cache_control"] == EPHEMERAL for blocks in workers)
    assert {block[1]["text"].count("Subtask id: w") for block in workers} == {1}


def test_openai_workers_start_with_the_same_tools_and_system_prefix(tmp_path: Path) -> None:
    """OpenAI caches by prefix on its own: the shared part must come first, identical."""
    with FakeOpenAIServer(default=openai_reply(TEAM)) as server:
        client = OpenAIProvider("gpt-test", api_key="sk-test", base_url=server.base_url)
        swarm = two_worker_swarm(tmp_path, client)
        result = asyncio.run(swarm.run("update both"))
    assert result.success, result.summary()
    prefix = swarm.engine.shared_prefix()
    firsts = [
        r.json
        for r in server.requests
        if "Subtask id:" in system_of(r) and len(r.json["messages"]) == 2
    ]
    assert len(firsts) == 2
    assert firsts[0]["tools"] == firsts[1]["tools"]
    for body in firsts:
        assert body["messages"][0]["role"] == "system"
        assert body["messages"][0]["content"].startswith(prefix)


def test_each_call_of_a_run_reads_the_history_the_previous_one_sent(tmp_path: Path) -> None:
    cache = FakePromptCache()
    turns = [
        reply(tool_calls=[("read_file", {"path": "a.txt"})]),
        reply(tool_calls=[("read_file", {"path": "a.txt"})]),
        reply(tool_calls=[("finish", {"summary": "read it"})]),
    ]
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "a.txt").write_text("a line of text\n" * 20)
    with FakeAnthropicServer(turns, prompt_cache=cache) as server:
        config = AgentConfig(session_dir=tmp_path / "sessions", sandbox=SandboxKind.LOCAL)
        asyncio.run(Agent(provider(server), workspace=workspace, config=config).run("Read a.txt"))
    bodies = [r.json for r in server.requests]
    assert len(bodies) == 3
    for body in bodies:
        marked = [
            block
            for message in body["messages"]
            for block in message["content"]
            if "cache_control" in block
        ]
        assert marked == [body["messages"][-1]["content"][-1]]
    first, second, third = cache.reports
    # each call reads the tools, the system prompt and the history up to the previous call's
    # last message, not only the fixed part (which stays the same from call to call)
    assert 0 == first.cache_read_tokens < second.cache_read_tokens < third.cache_read_tokens
    assert third.cache_read_tokens == second.prompt_tokens
    assert third.input_tokens == 0
