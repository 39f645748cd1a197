"""`.journeyman/mcp.json` parsing: shapes, transports, `${VAR}` expansion, bad entries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from journeyman.core.errors import ConfigurationError
from journeyman.integrations.mcp import (
    CONFIG_FILE,
    McpManager,
    McpServerConfig,
    ServerState,
    load_mcp_config,
    parse_mcp_config,
)


def write_config(workspace: Path, data: object) -> None:
    path = workspace / CONFIG_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)


def test_missing_file_means_no_servers(tmp_path: Path) -> None:
    config = load_mcp_config(tmp_path)
    assert config.servers == {} and config.problems == {} and config.path is None


def test_common_shape_with_both_transports(tmp_path: Path) -> None:
    write_config(
        tmp_path,
        {
            "mcpServers": {
                "files": {"command": "npx", "args": ["-y", "srv"], "env": {"A": "1"}, "cwd": "sub"},
                "web": {
                    "type": "streamable-http",
                    "url": "https://u:p@example.test/mcp",
                    "headers": {"Authorization": "Bearer x"},
                },
                "plain": {"url": "http://127.0.0.1:1/mcp", "alwaysAllow": ["x"]},
                "off": {"command": "x", "disabled": True},
            }
        },
    )
    config = load_mcp_config(tmp_path)
    assert config.path == tmp_path / CONFIG_FILE and not config.problems
    files, web = config.servers["files"], config.servers["web"]
    assert files.transport == "stdio" and files.args == ["-y", "srv"] and files.cwd == "sub"
    assert files.target() == "npx -y srv"
    assert web.transport == "http" and web.headers == {"Authorization": "Bearer x"}
    assert web.target() == "https://example.test/mcp"  # credentials never shown
    assert config.servers["plain"].transport == "http"
    assert config.servers["off"].disabled


def test_environment_variables_are_expanded() -> None:
    data = {
        "mcpServers": {
            "a": {
                "command": "${TOOL_BIN}/srv",
                "env": {"TOKEN": "${SECRET}"},
                "args": ["--level=${LEVEL:-info}"],
            },
            "b": {"url": "http://h/mcp", "headers": {"Authorization": "Bearer ${MISSING}"}},
        }
    }
    config = parse_mcp_config(data, environ={"TOOL_BIN": "/opt/bin", "SECRET": "s3"})
    a = config.servers["a"]
    assert a.command == "/opt/bin/srv" and a.env == {"TOKEN": "s3"} and a.args == ["--level=info"]
    assert "b" not in config.servers
    assert "MISSING is not set" in config.problems["b"]


def test_bad_entries_become_problems_not_errors() -> None:
    data = {
        "mcpServers": {
            "good": {"command": "srv"},
            "neither": {"args": ["x"]},
            "sse": {"type": "sse", "url": "http://h/sse"},
            "weird": {"type": "carrier-pigeon", "url": "http://h"},
            "list": ["not", "an", "object"],
            "stdio_no_command": {"type": "stdio", "url": "http://h"},
        }
    }
    config = parse_mcp_config(data)
    assert list(config.servers) == ["good"]
    assert "`command`" in config.problems["neither"]
    assert "SSE transport is not supported" in config.problems["sse"]
    assert "unknown type" in config.problems["weird"]
    assert "not a JSON object" in config.problems["list"]
    assert "needs a `command`" in config.problems["stdio_no_command"]


@pytest.mark.parametrize("content", ["{not json", '{"servers": {}}', "[]"])
def test_unreadable_file_is_a_configuration_error(tmp_path: Path, content: str) -> None:
    write_config(tmp_path, content)
    with pytest.raises(ConfigurationError, match="mcp"):
        load_mcp_config(tmp_path)


def test_from_workspace_merges_code_servers_and_reports_problems(tmp_path: Path) -> None:
    write_config(
        tmp_path,
        {"mcpServers": {"a": {"command": "from-file"}, "b": {"command": "b"}, "bad": {}}},
    )
    manager = McpManager.from_workspace(tmp_path, {"a": McpServerConfig(command="from-code")})
    rows = {s.name: s for s in manager.status()}
    assert rows["a"].target == "from-code"
    assert rows["b"].state is ServerState.PENDING
    assert rows["bad"].state is ServerState.INVALID and rows["bad"].error
    assert not rows["bad"].healthy


def test_user_file_comes_first_and_the_workspace_wins_a_clash(tmp_path: Path) -> None:
    user = tmp_path / "user" / "mcp.json"
    user.parent.mkdir()
    user.write_text(
        json.dumps(
            {"mcpServers": {"docs": {"url": "http://127.0.0.1:9/mcp"}, "shared": {"command": "a"}}}
        )
    )
    workspace = tmp_path / "ws"
    write_config(workspace, {"mcpServers": {"shared": {"command": "b"}, "bad": {"args": []}}})

    both = load_mcp_config(workspace, user_file=user)
    assert set(both.servers) == {"docs", "shared"} and set(both.problems) == {"bad"}
    assert both.servers["shared"].command == "b"

    mine = load_mcp_config(workspace, user_file=user, include_workspace=False)
    assert set(mine.servers) == {"docs", "shared"} and mine.problems == {}
    assert mine.servers["shared"].command == "a" and mine.path == user
