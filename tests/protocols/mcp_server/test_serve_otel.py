"""`journeyman mcp serve` started with an OTLP endpoint in its environment: the runs clients
start are traced, and the protocol on stdout is undisturbed."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.proto", reason="the otel extra is not installed")

from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.projects import calc_package
from tests.fakes.script import reply
from tests.integrations.otel.receiver import OtlpReceiver
from tests.protocols.mcp_server.conftest import stdio_client


@pytest.mark.slow  # a server process starts (about 3 s)
async def test_runs_started_over_stdio_are_traced(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    workspace = calc_package(tmp_path)
    fake_openai.enqueue(
        reply(tool_calls=[("read_file", {"path": "calc/__init__.py"})]),
        reply(tool_calls=[("finish", {"summary": "read it"})]),
    )
    with OtlpReceiver() as receiver:
        endpoint = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint}
        async with stdio_client(
            tmp_path, workspace, fake_openai, "--yes", "--no-verify", env=endpoint
        ) as client:
            done = await client.call_tool("start_run", {"task": "read calc"})
            assert not done.is_error, done.content[0].text
            assert isinstance(done.structured_content, dict)
            session = done.structured_content["session_id"]
        # the server has stopped: its last spans were sent on the way out
    runs = [s for s in receiver.spans if s.name == "invoke_agent journeyman"]
    assert len(runs) == 1
    assert runs[0].attributes["gen_ai.conversation.id"] == session
    tools = sorted(s.name for s in receiver.spans if s.name.startswith("execute_tool"))
    assert tools == ["execute_tool finish", "execute_tool read_file"]
