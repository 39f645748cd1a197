"""A server that refuses `tools` outright (Ollama answers HTTP 400 "... does not support tools"
for a model whose template has no tool support), against the fake Chat Completions API."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.fakes import FakeOpenAIServer, error, reply
from tests.fakes.script import RecordedRequest, ScriptItem

from journeyman.core.errors import ProviderError
from journeyman.core.messages import Message, Role
from journeyman.providers.base import ModelRequest, ToolSpec
from journeyman.providers.openai import OpenAIProvider
from journeyman.providers.tool_modes import ToolModeRecords

READ = ToolSpec(
    "read_file",
    "Read a file of the workspace.",
    {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)
OLLAMA_REFUSAL = "registry.ollama.ai/library/gemma3:270m does not support tools"
PROBE_OK = '{"probe": "jm-probe"}'


def ollama(*after: ScriptItem) -> list[ScriptItem]:
    """Ollama's answer to a request with `tools` (its OpenAI-compatible error body), then
    `after` for the requests without them."""

    def refuse(request: RecordedRequest) -> ScriptItem:
        assert isinstance(request.body, dict) and "tools" in request.body
        return error(400, OLLAMA_REFUSAL, error_type="api_error")

    return [refuse, *after]


def request() -> ModelRequest:
    return ModelRequest(
        system="You are a coding agent.",
        messages=(Message(Role.USER, "Fix the failing test."),),
        tools=(READ,),
    )


@pytest.fixture
def records(tmp_path: Path) -> ToolModeRecords:
    return ToolModeRecords(tmp_path / "tool_modes.json")


def provider(server: FakeOpenAIServer, records: ToolModeRecords, **kwargs: Any) -> OpenAIProvider:
    kwargs.setdefault("tool_format", "auto")
    return OpenAIProvider(
        "gemma3:270m", base_url=server.base_url, timeout=5.0, mode_records=records, **kwargs
    )


@pytest.mark.parametrize("streaming", [False, True])
async def test_auto_switches_mode_records_it_and_sends_the_request_again_on_a_tools_refusal(
    fake_openai: FakeOpenAIServer, records: ToolModeRecords, streaming: bool
) -> None:
    fake_openai.enqueue(
        *ollama(
            reply(PROBE_OK),  # response_format is honoured
            reply('{"tool": "read_file", "arguments": {"path": "calc/ops.py"}}'),
        )
    )
    notices: list[str] = []
    model = provider(fake_openai, records, on_notice=notices.append)
    shown: list[str] = []

    response = await model.complete(request(), shown.append if streaming else None)

    assert [(c.name, c.arguments) for c in response.tool_calls] == [
        ("read_file", {"path": "calc/ops.py"})
    ]
    last = fake_openai.requests[-1].body
    assert "tools" not in last and last["response_format"]["type"] == "json_schema"
    assert model.tool_format == "json_schema" and not model.capabilities.native_tools
    recorded = records.get(model._base_url, "gemma3:270m")
    assert recorded is not None and recorded.mode == "json_schema"
    assert "does not support tools" in recorded.reason
    assert "refused native tool calls" in notices[0]
    assert model.tool_mode_description.startswith("json_schema")


async def test_the_next_provider_for_that_model_starts_in_the_recorded_mode(
    fake_openai: FakeOpenAIServer, records: ToolModeRecords
) -> None:
    fake_openai.enqueue(*ollama(reply(PROBE_OK), reply('{"answer": "done"}')))
    await provider(fake_openai, records).complete(request())
    fake_openai.reset()
    fake_openai.enqueue(reply('{"answer": "again"}'))
    second = provider(fake_openai, records)
    assert (await second.complete(request())).text == "again"
    assert len(fake_openai.requests) == 1 and "tools" not in fake_openai.requests[0].body


async def test_a_forced_native_mode_fails_once_and_says_which_tool_format_to_use(
    fake_openai: FakeOpenAIServer, records: ToolModeRecords
) -> None:
    fake_openai.enqueue(*ollama())
    model = provider(fake_openai, records, tool_format="native")
    with pytest.raises(ProviderError) as caught:
        await model.complete(request())
    assert not caught.value.retryable
    assert OLLAMA_REFUSAL in caught.value.message and "--tool-format" in caught.value.message
    assert len(fake_openai.requests) == 1 and not records.path.exists()
