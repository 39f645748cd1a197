"""Replies in Anthropic's wire format that no real model should send, through the official SDK
and a whole run: a tool_use input that is a string, a list or null, a block of an unknown
type, negative token counts. Each is an error the model sees (or a clamped count with a note),
never an `internal_error`, and the run goes on to finish."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.fakes.anthropic_server import FakeAnthropicServer, raw_message, raw_stream
from tests.fakes.script import RawBody, reply

from journeyman import Agent, AgentConfig, FinishReason
from journeyman.core import events as ev
from journeyman.providers.anthropic import AnthropicProvider
from journeyman.providers.resilient import RetryPolicy

FINISH = reply(tool_calls=[("finish", {"summary": "done"})])


def tool_use(value: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": "toolu_odd", "name": "read_file", "input": value}


def streamed_call(start_input: Any, partial_json: str | None) -> list[dict[str, Any]]:
    block = {**tool_use(start_input), "input": start_input}
    events: list[dict[str, Any]] = [
        {"type": "content_block_start", "index": 0, "content_block": block}
    ]
    if partial_json is not None:
        delta = {"type": "input_json_delta", "partial_json": partial_json}
        events.append({"type": "content_block_delta", "index": 0, "delta": delta})
    return [*events, {"type": "content_block_stop", "index": 0}]


def unknown_then_call() -> list[dict[str, Any]]:
    mystery = {"type": "hologram", "payload": "\x1b[31m"}
    delta = {"type": "hologram_delta", "more": 1}
    good = {"type": "input_json_delta", "partial_json": '{"path": "a.txt"}'}
    return [
        {"type": "content_block_start", "index": 0, "content_block": mystery},
        {"type": "content_block_delta", "index": 0, "delta": delta},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {**tool_use({})}},
        {"type": "content_block_delta", "index": 1, "delta": good},
        {"type": "content_block_stop", "index": 1},
    ]


MODEL_SEES = "must be a JSON object"
UNKNOWN = "is not one journeyman reads"

CASES: dict[str, tuple[RawBody, str | None]] = {
    "input string": (raw_message([tool_use("a.txt")]), f"{MODEL_SEES}, not a string"),
    "input list": (raw_message([tool_use(["a.txt"])]), f"{MODEL_SEES}, not an array"),
    "input null": (raw_message([tool_use(None)]), f"{MODEL_SEES}, not null"),
    "unknown block": (
        raw_message([{"type": "hologram", "data": "x"}, tool_use({"path": "a.txt"})]),
        UNKNOWN,
    ),
    "only an unknown block": (raw_message([{"type": "hologram"}], stop_reason="end_turn"), UNKNOWN),
    "stream input string": (
        raw_stream(streamed_call({}, '"a.txt"')),
        f"{MODEL_SEES}, not a string",
    ),
    "stream input null": (raw_stream(streamed_call(None, None)), f"{MODEL_SEES}, not null"),
    "stream input list": (raw_stream(streamed_call(["x"], None)), f"{MODEL_SEES}, not an array"),
    "stream unknown block": (raw_stream(unknown_then_call()), UNKNOWN),
}


def agent_on(server: FakeAnthropicServer, tmp_path: Path, *, stream: bool) -> Agent:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "a.txt").write_text("hello\n")
    provider = AnthropicProvider("claude-test", api_key="k", base_url=server.base_url)
    config = AgentConfig(session_dir=tmp_path / "sessions", stream=stream, verify=False)
    policy = RetryPolicy(max_retries=0, base_delay_s=0.0, jitter=0.0)
    return Agent(provider, workspace=workspace, config=config, retry_policy=policy)


def sent_back(server: FakeAnthropicServer) -> str:
    """What the second request told the model about its first reply."""
    return json.dumps(server.requests[1].json["messages"][-1]["content"])


@pytest.mark.parametrize("case", list(CASES))
async def test_an_odd_reply_is_told_to_the_model_and_the_run_goes_on(
    tmp_path: Path, case: str
) -> None:
    body, told = CASES[case]
    with FakeAnthropicServer([body], default=FINISH) as server:
        agent = agent_on(server, tmp_path, stream=case.startswith("stream"))
        result = await agent.run("read a.txt")
    assert result.finish_reason is FinishReason.COMPLETED, result.error
    assert len(server.requests) == 2
    assert told is not None and told in sent_back(server)
    assert "\x1b" not in sent_back(server)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_negative_usage_is_counted_as_zero_with_a_note(tmp_path: Path, stream: bool) -> None:
    negative = {"input_tokens": -100, "output_tokens": -5, "cache_read_input_tokens": -3}
    call = tool_use({"path": "a.txt"})
    if stream:
        good = {"type": "input_json_delta", "partial_json": '{"path": "a.txt"}'}
        body = raw_stream(
            [
                {"type": "content_block_start", "index": 0, "content_block": tool_use({})},
                {"type": "content_block_delta", "index": 0, "delta": good},
                {"type": "content_block_stop", "index": 0},
            ],
            usage=negative,
            final_usage={"output_tokens": -9},
        )
    else:
        body = raw_message([call], usage=negative)
    notes: list[ev.ErrorOccurred] = []
    with FakeAnthropicServer([body], default=FINISH) as server:
        agent = agent_on(server, tmp_path, stream=stream)
        agent.on_event = lambda e: notes.append(e) if isinstance(e, ev.ErrorOccurred) else None
        result = await agent.run("read a.txt")
    assert result.finish_reason is FinishReason.COMPLETED, result.error
    assert min(result.usage.to_dict().values()) >= 0
    # the counts clamped to 0 leave no prompt count: the call is also charged its worst case
    [note] = [n for n in notes if "negative token counts" in n.message]
    assert "input_tokens=-" in note.message
    assert "hello" in sent_back(server)  # the call itself ran
