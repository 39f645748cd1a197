"""`journeyman run --mcp`: the workspace's MCP servers lend their tools to a real CLI run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from journeyman.cli.options import MCP_CONFIG
from journeyman.integrations.mcp import CONFIG_FILE
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import reply
from tests.support.cli import clean_env, journeyman

from .conftest import SERVER_APP


def declare_calc_server(workspace: Path) -> None:
    config = workspace / CONFIG_FILE
    config.parent.mkdir(parents=True)
    servers = {"calc": {"command": sys.executable, "args": [str(SERVER_APP)]}}
    config.write_text(json.dumps({"mcpServers": servers}))


def run_in(
    workspace: Path, tmp_path: Path, env: dict[str, str], *args: str
) -> subprocess.CompletedProcess[str]:
    """`journeyman run --yes ARGS -w WORKSPACE` with a JSON result and sessions in tmp_path."""
    return journeyman(
        "run", "--yes", "--no-verify", *args, "-w", str(workspace),
        "--session-dir", str(tmp_path / "s"), "-o", "json", env=env,
    )  # fmt: skip


def test_the_cli_knows_where_the_mcp_config_lives() -> None:
    assert Path(CONFIG_FILE) == MCP_CONFIG


def test_run_with_mcp_offers_and_calls_the_server_tools(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    declare_calc_server(workspace)
    fake_openai.enqueue(
        reply(tool_calls=[("calc_add", {"a": 20, "b": 22})]),
        reply(tool_calls=[("finish", {"summary": "the sum is 42"})]),
    )
    env = clean_env(OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=fake_openai.base_url)
    done = run_in(workspace, tmp_path, env, "--mcp", "add 20 and 22")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["final_text"] == "the sum is 42"
    first, second = fake_openai.requests
    offered = {tool["function"]["name"] for tool in first.json["tools"]}
    assert {"calc_add", "calc_write_note", "read_file"} <= offered
    answer = next(m for m in second.json["messages"] if m["role"] == "tool")
    assert "42" in answer["content"]


def test_without_the_flag_no_server_starts_and_the_run_says_how(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    declare_calc_server(workspace)
    fake_openai.enqueue(reply("nothing to do"))
    env = clean_env(OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=fake_openai.base_url)
    done = run_in(workspace, tmp_path, env, "say hello")
    assert done.returncode == 0, done.stderr
    assert "pass --mcp to start them" in done.stderr
    offered = {tool["function"]["name"] for tool in fake_openai.requests[0].json["tools"]}
    assert not any(name.startswith("calc_") for name in offered)


def test_a_server_that_cannot_start_is_reported_and_the_run_goes_on(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    (workspace / ".journeyman").mkdir(parents=True)
    (workspace / CONFIG_FILE).write_text(
        json.dumps({"mcpServers": {"gone": {"command": "journeyman-no-such-mcp-server"}}})
    )
    fake_openai.enqueue(reply("done without it"))
    env = clean_env(OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=fake_openai.base_url)
    done = run_in(workspace, tmp_path, env, "--mcp", "say hello")
    assert done.returncode == 0, done.stderr
    assert "MCP server 'gone'" in done.stderr and "left out" in done.stderr


def test_the_users_own_servers_start_without_the_flag_and_not_with_no_mcp(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    user_dir = tmp_path / "user-config"
    user_dir.mkdir()
    servers = {"mine": {"command": sys.executable, "args": [str(SERVER_APP)]}}
    (user_dir / "mcp.json").write_text(json.dumps({"mcpServers": servers}))
    env = clean_env(
        OPENAI_API_KEY="sk-test",
        OPENAI_BASE_URL=fake_openai.base_url,
        JOURNEYMAN_CONFIG_DIR=str(user_dir),
    )
    fake_openai.enqueue(reply("hello"), reply("hello again"))
    for flags in ((), ("--no-mcp",)):
        done = run_in(workspace, tmp_path, env, *flags, "say hello")
        assert done.returncode == 0, done.stderr
    with_servers, without = fake_openai.requests
    assert "mine_add" in {tool["function"]["name"] for tool in with_servers.json["tools"]}
    assert not any(t["function"]["name"].startswith("mine_") for t in without.json["tools"])


def test_the_run_says_its_mcp_servers_run_outside_the_sandbox(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    """A sandbox line saying "network off" does not hold for MCP servers: the run says so,
    naming them, whenever a sandbox is in use (under --sandbox local nothing is inside)."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    declare_calc_server(workspace)
    fake_openai.default = reply("nothing to do")
    env = clean_env(OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=fake_openai.base_url)
    said = (
        "journeyman: note: MCP servers run outside the sandbox, as you, with your network "
        'and files: calc (docs/security.md; `"sandbox": true` in its entry starts one inside)'
    )
    boxed = run_in(workspace, tmp_path, env, "--mcp", "--sandbox", "bubblewrap", "say hello")
    assert boxed.returncode == 0, boxed.stderr
    assert said in boxed.stderr.splitlines()
    unboxed = run_in(workspace, tmp_path, env, "--mcp", "--sandbox", "local", "say hello")
    assert unboxed.returncode == 0, unboxed.stderr
    assert "outside the sandbox" not in unboxed.stderr
    without = run_in(workspace, tmp_path, env, "--sandbox", "bubblewrap", "say hello")
    assert "outside the sandbox" not in without.stderr
