"""`journeyman acp` with an OTLP endpoint in its environment: each prompt's run reaches the
receiver as a trace, while stdout stays the protocol's alone."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.proto", reason="the otel extra is not installed")

from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import reply
from tests.integrations.otel.receiver import OtlpReceiver
from tests.protocols.acp.conftest import EditorLauncher


@pytest.mark.slow  # a journeyman process per editor (~2 s to start on a busy machine)
async def test_each_prompt_of_an_acp_session_is_traced(
    editor: EditorLauncher, fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    (tmp_path / "ws" / "notes.txt").write_text("hello\n")
    fake_openai.enqueue(
        reply(tool_calls=[("read_file", {"path": "notes.txt"})]),
        reply("It says hello."),
        reply("Still hello."),
    )
    with OtlpReceiver() as receiver:
        async with editor.start(
            "--no-verify", env={"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint}
        ) as ed:
            session = await ed.new_session()
            assert await ed.prompt(session, "what do the notes say?") == "end_turn"
            assert await ed.prompt(session, "and now?") == "end_turn"
        # the process has ended: its last spans were sent on the way out
    runs = [s for s in receiver.spans if s.name == "invoke_agent journeyman"]
    assert len(runs) == 2, editor.stderr()
    assert {run.attributes["gen_ai.conversation.id"] for run in runs} == {session}
    assert [s.name for s in receiver.spans if s.name.startswith("execute_tool")] == [
        "execute_tool read_file"
    ]
    assert "Traceback" not in editor.stderr()
