"""What a prompt cache can reuse, seen in the request bodies the OpenAI adapter sends (through
the official SDK, to the fake server): the tool schemas are the same bytes in every request,
each request starts with the previous one (the phased mode's phase switches and its memory
summary calls included), and old tool results are compacted past the newest few."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from journeyman import Agent, AgentConfig, FinishReason
from journeyman.context.compaction import MASKED_PREFIX, SUMMARY_REQUEST, CompactionSettings
from journeyman.context.memory import MemorySettings
from journeyman.loop.config import ModeName, PhasedSettings
from journeyman.providers.openai import OpenAIProvider
from journeyman.tools.choices import EditToolChoice
from journeyman.tools.sandbox import SandboxKind
from tests.fakes.agents import NO_RETRY
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.projects import CALC_TEST_COMMAND, calc_package
from tests.fakes.script import FakeToolCall, RecordedRequest, Reply, reply

SUMMARY_HEAD = SUMMARY_REQUEST.split("{transcript}")[0]
Script = list[Callable[[], Reply]]


def is_summary(body: dict[str, Any]) -> bool:
    last = body["messages"][-1]
    return last["role"] == "user" and str(last["content"]).startswith(SUMMARY_HEAD)


def tools_bytes(request: RecordedRequest) -> bytes:
    """The `tools` array exactly as it was sent."""
    encoded = json.dumps(request.json["tools"], ensure_ascii=False, separators=(",", ":"))
    assert encoded.encode() in request.raw_body
    return encoded.encode()


def shared_messages(previous: list[Any], current: list[Any]) -> int:
    count = 0
    for old, new in zip(previous, current, strict=False):
        if old != new:
            break
        count += 1
    return count


def run(tmp_path: Path, script: Script, **config: Any) -> tuple[list[RecordedRequest], Any]:
    """Play `script` (one reply a turn) through OpenAIProvider; summary calls get a summary."""
    turns = iter(script)

    def respond(request: RecordedRequest) -> Reply:
        if is_summary(request.json):
            return reply("EARLIER: add() subtracted; edits were tried.")
        return next(turns)()

    with FakeOpenAIServer(default=respond) as server:
        provider = OpenAIProvider("gpt-test", api_key="sk-test", base_url=server.base_url)
        agent = Agent(
            provider,
            workspace=tmp_path / "ws",
            config=AgentConfig(
                session_dir=tmp_path / "sessions",
                sandbox=SandboxKind.LOCAL,
                edit_tool=EditToolChoice.EDIT_FILE,
                stream=False,
                **config,
            ),
            retry_policy=NO_RETRY,
        )
        result = agent.run_sync("make add() add its arguments")
        return list(server.requests), result


def call(name: str, cid: str, **arguments: Any) -> Callable[[], Reply]:
    return lambda: reply(f"calling {name}", [FakeToolCall(name, arguments, id=cid)])


def edit(old: str, new: str, cid: str) -> Callable[[], Reply]:
    return call("edit_file", cid, path="calc/__init__.py", old_string=old, new_string=new)


def test_phased_requests_each_start_with_the_previous_one(tmp_path: Path) -> None:
    calc_package(tmp_path)
    tight = MemorySettings(
        keep_attempts=1,
        keep_tool_results=1,
        keep_modified_files=1,
        compress_above_chars=0,
        summarise_above_chars=0,
    )
    script = [
        edit("a - b", "a * b", "e1"),
        edit("a * b", "a // b", "e2"),
        edit("a // b", "a + b", "e3"),
        call("finish", "done", summary="fixed add"),
    ]
    requests, result = run(
        tmp_path,
        script,
        mode=ModeName.PHASED,
        verify_command=CALC_TEST_COMMAND,
        phased=PhasedSettings(memory=tight),
    )
    assert result.finish_reason is FinishReason.COMPLETED, result.error
    bodies = [r.json for r in requests]
    summaries = [i for i, body in enumerate(bodies) if is_summary(body)]
    assert summaries, "the memory was summarised by the model"
    # the same tool schemas, byte for byte, in every request, the summary calls included
    assert len({tools_bytes(r) for r in requests}) == 1
    for i in range(1, len(bodies)):
        previous, current = bodies[i - 1]["messages"], bodies[i]["messages"]
        # all of the previous request is the start of this one (the system prompt too); a
        # summary call's question is the one message the next request does not repeat
        expected = len(previous) - (1 if i - 1 in summaries else 0)
        assert shared_messages(previous, current) == expected, f"request {i}"
    # the phase switches happened in between: a check failed and the mode told the model
    told = [m["content"] for body in bodies for m in body["messages"] if m["role"] == "user"]
    assert any("failed" in str(text) for text in told)


def test_old_tool_results_are_compacted_past_the_newest_few(tmp_path: Path) -> None:
    calc_package(tmp_path)
    reads: Script = [
        call("read_file", f"r{i}", path=path, limit=limit)
        for i, (path, limit) in enumerate(
            (path, limit)
            for limit in (2, 3, 4, 5)
            for path in ("calc/__init__.py", "tests/test_calc.py")
        )
    ]
    keep = 2
    compaction = CompactionSettings(keep_recent_observations=keep, stale_observation_tokens=20)
    requests, result = run(
        tmp_path,
        [*reads, edit("a - b", "a + b", "e1"), call("finish", "done", summary="fixed add")],
        compaction=compaction,
        verify_command=CALC_TEST_COMMAND,
    )
    assert result.finish_reason is FinishReason.COMPLETED, result.error
    assert len({tools_bytes(r) for r in requests}) == 1

    last = requests[-1].json["messages"]
    results = [m for m in last if m["role"] == "tool"]
    full = [m for m in results if not m["content"].startswith(MASKED_PREFIX)]
    stubs = [m for m in results if m["content"].startswith(MASKED_PREFIX)]
    assert stubs and full
    assert all(len(m["content"]) < 120 and "read_file" in m["content"] for m in stubs)
    # the newest results are whole, the stubs are all older than them
    assert full[-keep:] == results[-keep:]
    assert last[1] == {"role": "user", "content": "make add() add its arguments"}
    # each call whose result was stubbed is still there with its arguments
    calls = {c["id"]: c for m in last for c in m.get("tool_calls") or ()}
    assert all(json.loads(calls[m["tool_call_id"]]["function"]["arguments"]) for m in stubs)
    # a compaction rewrites the history in batches: most requests start with the previous one
    bodies = [r.json["messages"] for r in requests]
    whole = sum(shared_messages(a, b) == len(a) for a, b in itertools.pairwise(bodies))
    assert whole >= len(bodies) - 1 - 3
