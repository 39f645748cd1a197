"""Fixtures that run the real MCP server in `server_app.py`, over stdio and over HTTP."""

from __future__ import annotations

import http.client
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from journeyman.integrations.mcp import McpServerConfig

SERVER_APP = Path(__file__).with_name("server_app.py")
HANG_SCRIPT = "import sys, time; print('warming up', file=sys.stderr, flush=True); time.sleep(60)"


def stdio_server(**overrides: object) -> McpServerConfig:
    """The fixture server as a stdio subprocess of this interpreter."""
    fields: dict[str, object] = {"command": sys.executable, "args": [str(SERVER_APP)]}
    fields.update(overrides)
    return McpServerConfig.model_validate(fields)


@pytest.fixture
def fixture_stdio() -> McpServerConfig:
    return stdio_server()


@pytest.fixture(scope="session")
def http_url() -> Iterator[str]:
    """URL of one fixture server over streamable HTTP on 127.0.0.1, shared by the session."""
    proc = subprocess.Popen(
        [sys.executable, str(SERVER_APP), "--http"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("PORT "):
            pytest.fail(f"the HTTP fixture server did not start (said {line!r})")
        port = int(line.split()[1])
        _wait_until_answering(port, proc)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def _wait_until_answering(port: int, proc: subprocess.Popen[str], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"the HTTP fixture server exited with code {proc.returncode}")
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
        try:
            conn.request("GET", "/mcp")
            conn.getresponse().read()
            return  # any HTTP answer (405, 406, ...) means the app is serving
        except OSError:
            time.sleep(0.05)
        finally:
            conn.close()
    pytest.fail(f"the HTTP fixture server did not answer on port {port} within {timeout:g} s")
