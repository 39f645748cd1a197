"""`journeyman chat` with an OTLP endpoint: the app's agent is traced, its last spans are sent
when the app exits, and tracing's lines wait until then (the app owns the terminal)."""

from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.proto", reason="the otel extra is not installed")

from journeyman.cli import chat_cmd
from journeyman.cli.chat_cmd import chat
from journeyman.tui.app import ChatApp
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import reply
from tests.integrations.otel.receiver import OtlpReceiver


def chat_in(tmp_path: Path, fake: FakeOpenAIServer, **options: object) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    chat(
        workspace=workspace,
        provider="openai",
        model="gpt-4.1-mini",
        base_url=fake.base_url,
        session_dir=tmp_path / "sessions",
        lsp=False,
        mcp=False,
        **options,  # type: ignore[arg-type]
    )


@pytest.fixture
def app_runs_one_task(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> list[str]:
    """`ChatApp.run` replaced by one task of its agent; returns what reached stderr while the
    app was 'open'."""
    while_open: list[str] = []

    def run(self: ChatApp, **_: object) -> None:
        asyncio.run(self.agent.run("say hello"))
        while_open.append(capsys.readouterr().err)

    monkeypatch.setattr(ChatApp, "run", run)
    monkeypatch.setattr(chat_cmd, "terminal_problem", lambda: None)  # pytest has no terminal
    monkeypatch.setenv("JOURNEYMAN_CONFIG_DIR", str(tmp_path / "user-config"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    for name in [n for n in os.environ if n.startswith("OTEL_")]:
        monkeypatch.delenv(name)
    return while_open


def test_the_chat_agent_is_traced_and_flushed_when_the_app_exits(
    tmp_path: Path,
    fake_openai: FakeOpenAIServer,
    app_runs_one_task: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake_openai.enqueue(reply("Hello."))
    with OtlpReceiver() as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
        chat_in(tmp_path, fake_openai)
        runs = [s for s in receiver.spans if s.name == "invoke_agent journeyman"]
    assert len(runs) == 1
    assert [s.name for s in receiver.spans if s.name.startswith("chat ")] == ["chat gpt-4.1-mini"]


def test_tracing_warnings_wait_until_the_app_has_exited(
    tmp_path: Path,
    fake_openai: FakeOpenAIServer,
    app_runs_one_task: list[str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")
    fake_openai.enqueue(reply("Hello."))
    chat_in(tmp_path, fake_openai, otel=True)
    assert app_runs_one_task == [""]  # nothing on the terminal while the app was open
    after = capsys.readouterr().err.splitlines()
    warnings = [line for line in after if "traces could not be sent" in line]
    assert len(warnings) == 1 and warnings[0].startswith("journeyman: warning: ")
