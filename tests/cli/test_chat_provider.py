"""`journeyman chat` builds its provider as `run` does: a local server is looked for when
nothing is configured, and the tool format is passed on."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import typer

from journeyman.cli import chat_cmd
from journeyman.cli.chat_cmd import open_app
from journeyman.loop.launch import LaunchRequest, settle


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_chat_looks_for_a_local_server_when_nothing_is_configured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "JOURNEYMAN_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(chat_cmd, "terminal_problem", lambda: None)  # pytest has no terminal
    port = closed_port()
    monkeypatch.setenv("JOURNEYMAN_LOCAL_PORTS", f"Ollama={port}")
    with pytest.raises(typer.Exit) as stopped:
        open_app(settle(LaunchRequest(tmp_path)))
    assert stopped.value.exit_code == 2
    assert f"No local OpenAI-compatible server answered on 127.0.0.1: Ollama {port}" in (
        capsys.readouterr().err
    )
