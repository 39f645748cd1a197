"""`journeyman mcp serve` refuses what it cannot serve before any client connects: exit 2 and
one clear line, never a traceback."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAIServer
from tests.protocols.mcp_server.conftest import REPO, serve_args, server_env
from tests.support.cli import clean_env, journeyman


def test_a_missing_folder_is_refused(tmp_path: Path) -> None:
    done = journeyman("mcp", "serve", "-w", str(tmp_path / "nothere"), env=clean_env())
    assert done.returncode == 2
    assert "nothere is not a directory" in done.stderr and "Traceback" not in done.stderr


def test_the_whole_file_system_is_not_a_workspace() -> None:
    done = journeyman("mcp", "serve", env=clean_env(), cwd=Path("/"))
    assert done.returncode == 2
    assert "root of the file system" in done.stderr and "Traceback" not in done.stderr


def test_a_server_without_a_provider_says_so(tmp_path: Path) -> None:
    (tmp_path / "config").mkdir()
    env = clean_env(JOURNEYMAN_CONFIG_DIR=str(tmp_path / "config"))
    done = journeyman("mcp", "serve", "-w", str(tmp_path), "--no-lsp", env=env)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "No model provider is configured" in done.stderr


@pytest.mark.slow  # the server starts as far as its socket (about 2.5 s)
def test_a_port_in_use_is_refused(fake_openai: FakeOpenAIServer, tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = str(taken.getsockname()[1])
        done = subprocess.run(
            [
                sys.executable,
                *serve_args(tmp_path, fake_openai, "--transport", "http", "--port", port),
            ],
            env=server_env(tmp_path),
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=90,
        )
    assert done.returncode == 2, done.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr and "Traceback" not in done.stderr


def test_the_help_says_how_approvals_work(tmp_path: Path) -> None:
    done = journeyman("mcp", "serve", "--help", env=clean_env(COLUMNS="200"))
    assert done.returncode == 0
    assert "--yes" in done.stdout and "--root" in done.stdout and "127.0.0.1" in done.stdout


def test_a_zero_approval_timeout_is_refused(tmp_path: Path) -> None:
    done = journeyman(
        "mcp", "serve", "-w", str(tmp_path), "--approval-timeout", "0", env=clean_env()
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "--approval-timeout" in done.stderr


@pytest.mark.parametrize("transport", [[], ["--transport", "stdio"]])
def test_a_port_without_the_http_transport_is_refused(tmp_path: Path, transport: list[str]) -> None:
    done = journeyman(
        "mcp", "serve", "-w", str(tmp_path), "--port", "9000", *transport, env=clean_env()
    )
    assert done.returncode == 2
    assert done.stderr == "journeyman: --port needs --transport http (stdio has no port)\n"
