"""An MCP server whose entry says `"sandbox": true` is started inside the run's bubblewrap
sandbox, through the real CLI: it sees what commands see (no network when theirs is off, nothing
writable outside the workspace); a run without bubblewrap does not start it at all, and says
why. The others run outside, as the run's note says."""

from __future__ import annotations

import json
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from journeyman.integrations.mcp import CONFIG_FILE, McpServerConfig
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import reply
from tests.support.cli import clean_env, journeyman

from .conftest import SERVER_APP
from .test_run_with_mcp import run_in

pytestmark = pytest.mark.skipif(
    sys.platform != "linux", reason="the bubblewrap sandbox is Linux only"
)


@pytest.fixture
def listener() -> Iterator[int]:
    """A port on 127.0.0.1 that accepts connections (reachable from outside the sandbox)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield sock.getsockname()[1]


def declare(workspace: Path, **servers: dict[str, object]) -> None:
    config = workspace / CONFIG_FILE
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(json.dumps({"mcpServers": servers}))


def fixture_server(**extra: object) -> dict[str, object]:
    return {"command": sys.executable, "args": [str(SERVER_APP)], **extra}


def reach_twice(server: FakeOpenAIServer, port: int, inside: Path, outside: Path) -> None:
    """The model calls both servers' `reach`, then answers."""
    server.enqueue(
        reply(
            tool_calls=[
                ("boxed_reach", {"port": port, "path": str(inside)}),
                ("free_reach", {"port": port, "path": str(outside)}),
            ]
        ),
        reply("done"),
    )


def tool_results(server: FakeOpenAIServer) -> list[str]:
    return [m["content"] for m in server.requests[-1].json["messages"] if m["role"] == "tool"]


def test_a_server_asking_for_the_sandbox_runs_inside_it(
    fake_openai: FakeOpenAIServer, tmp_path: Path, listener: int
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    declare(workspace, boxed=fixture_server(sandbox=True), free=fixture_server())
    outside = tmp_path / "outside"
    outside.mkdir()
    reach_twice(fake_openai, listener, workspace / "boxed.txt", outside / "free.txt")
    env = clean_env(OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=fake_openai.base_url)
    done = run_in(workspace, tmp_path, env, "--mcp", "--sandbox", "bubblewrap", "look around")
    assert done.returncode == 0, done.stderr
    boxed, free = tool_results(fake_openai)
    assert "connect failed" in boxed and "write ok" in boxed, boxed  # the workspace, no network
    assert "connect ok" in free and "write ok" in free, free  # outside: as the user
    assert (workspace / "boxed.txt").read_text() == "from the server"
    # only the free server is named as running outside
    note = [line for line in done.stderr.splitlines() if "outside the sandbox" in line]
    assert len(note) == 1 and ": free (" in note[0] and "boxed" not in note[0], done.stderr
    # inside, a folder outside the workspace is read-only to it
    fake_openai.enqueue(
        reply(tool_calls=[("boxed_reach", {"port": listener, "path": str(outside / "x")})]),
        reply("done"),
    )
    again = run_in(workspace, tmp_path, env, "--mcp", "--sandbox", "bubblewrap", "look again")
    assert again.returncode == 0, again.stderr
    assert "write failed" in tool_results(fake_openai)[0]
    assert not (outside / "x").exists()


def test_without_bubblewrap_such_a_server_is_not_started(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    declare(workspace, boxed=fixture_server(sandbox=True))
    fake_openai.enqueue(reply("done"))
    env = clean_env(OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=fake_openai.base_url)
    done = run_in(workspace, tmp_path, env, "--mcp", "--sandbox", "local", "say hello")
    assert done.returncode == 0, done.stderr
    offered = {t["function"]["name"] for t in fake_openai.requests[0].json["tools"]}
    assert not any(name.startswith("boxed_") for name in offered)
    assert "no bubblewrap sandbox is in use" in done.stderr, done.stderr


def test_mcp_list_starts_such_a_server_inside_the_sandbox(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    declare(workspace, boxed=fixture_server(sandbox=True))
    listed = journeyman("mcp", "list", "--mcp", "-w", str(workspace), env=clean_env(COLUMNS="400"))
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert "(in the sandbox)" in listed.stdout and "running" in listed.stdout, listed.stdout
    assert "boxed_reach" in listed.stdout or "reach" in listed.stdout


def test_an_http_server_cannot_ask_for_the_sandbox() -> None:
    with pytest.raises(ValueError, match="stdio servers"):
        McpServerConfig.model_validate({"url": "http://127.0.0.1:9/mcp", "sandbox": True})
