"""`journeyman mcp serve` as a client meets it: a subprocess over stdio or streamable HTTP on
127.0.0.1, or the same tools in this process, always against the fake OpenAI server."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from journeyman.protocols.mcp_server import ServerPolicy, build_server
from journeyman.providers.factory import create_provider
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.projects import CALC_TEST_COMMAND
from tests.support.cli import clean_env

REPO = Path(__file__).resolve().parents[3]


def server_env(tmp_path: Path) -> dict[str, str]:
    """A clean environment whose user config folder and sessions are the test's own."""
    (tmp_path / "config").mkdir(exist_ok=True)
    return clean_env(
        OPENAI_API_KEY="sk-test",
        JOURNEYMAN_SESSION_DIR=str(tmp_path / "sessions"),
        JOURNEYMAN_CONFIG_DIR=str(tmp_path / "config"),
    )


def serve_args(workspace: Path, fake: FakeOpenAIServer, *extra: str) -> list[str]:
    """`journeyman mcp serve` on `workspace`, on the fake server's model, checked by the calc
    package's test, with a price so that costs are known."""
    return [
        "-m", "journeyman", "mcp", "serve", "-w", str(workspace),
        "--provider", "openai", "--model", "fake-model", "--base-url", fake.base_url,
        "--verify", CALC_TEST_COMMAND, "--price-per-mtok", "3,15", "--no-lsp", *extra,
    ]  # fmt: skip


@asynccontextmanager
async def stdio_client(
    tmp_path: Path,
    workspace: Path,
    fake: FakeOpenAIServer,
    *extra: str,
    env: dict[str, str] | None = None,
    elicitation_callback: Any = None,
    mode: Any = "auto",
) -> AsyncIterator[Client]:
    """The SDK's client on a `journeyman mcp serve` subprocess over stdio (`env`: variables
    added to its environment)."""
    params = StdioServerParameters(
        command=sys.executable,
        args=serve_args(workspace, fake, *extra),
        env={**server_env(tmp_path), **(env or {})},
        cwd=REPO,
    )
    async with Client(params, elicitation_callback=elicitation_callback, mode=mode) as client:
        yield client


@contextmanager
def http_server(
    tmp_path: Path, workspace: Path, fake: FakeOpenAIServer, *extra: str
) -> Iterator[tuple[str, list[str]]]:
    """A `journeyman mcp serve --transport http --port 0` subprocess: (its URL, its stderr
    lines so far). Stopped with SIGTERM, then SIGKILL, on the way out."""
    args = serve_args(workspace, fake, "--transport", "http", "--port", "0", *extra)
    proc = subprocess.Popen(
        [sys.executable, *args],
        env=server_env(tmp_path),
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    found = threading.Event()
    url: list[str] = []

    def read_stderr() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if "listening on " in line and not url:
                url.append(line.rsplit("listening on ", 1)[1].strip())
                found.set()
        found.set()

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    try:
        found.wait(60)
        if not url:
            pytest.fail(f"the HTTP server did not start; stderr: {''.join(lines)}")
        yield url[0], lines
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        reader.join(timeout=5)
        assert proc.stdout is not None
        proc.stdout.close()


@asynccontextmanager
async def in_process_client(
    tmp_path: Path,
    workspace: Path,
    fake: FakeOpenAIServer,
    monkeypatch: pytest.MonkeyPatch,
    *,
    roots: tuple[Path, ...] = (),
    assume_yes: bool = True,
    elicitation_callback: Any = None,
    approval_timeout_s: float = 60.0,
    client_mode: Any = "auto",
    **flags: Any,
) -> AsyncIterator[Client]:
    """The same tools served in this process (for the many refusal tests: no subprocess)."""
    for name, value in server_env(tmp_path).items():
        if name.startswith(("JOURNEYMAN_", "OPENAI_")):
            monkeypatch.setenv(name, value)
    policy = ServerPolicy(
        roots=(workspace, *roots),
        flags={
            "verify_command": CALC_TEST_COMMAND,
            "price_per_mtok": (3.0, 15.0),
            "session_dir": tmp_path / "sessions",
            **flags,
        },
        assume_yes=assume_yes,
        approval_timeout_s=approval_timeout_s,
        lsp=False,
    )
    server, tools = build_server(
        policy, lambda: create_provider("openai", "fake-model", fake.base_url, api_key="sk-test")
    )
    try:
        async with Client(
            server, elicitation_callback=elicitation_callback, mode=client_mode
        ) as client:
            yield client
    finally:
        await tools.registry.aclose()
