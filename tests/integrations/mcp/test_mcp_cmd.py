"""`journeyman mcp list` (the `mcp_list` function behind it) on a workspace config."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from journeyman.cli.mcp_cmd import EXIT_CONFIG, EXIT_OK, EXIT_SERVER_FAILED, mcp_list
from journeyman.integrations.mcp import CONFIG_FILE

from .conftest import SERVER_APP


def write(workspace: Path, servers: dict[str, object]) -> None:
    path = workspace / CONFIG_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"mcpServers": servers}))


def run(workspace: Path) -> tuple[int, str]:
    console = Console(record=True, width=200, force_terminal=False)
    code = mcp_list(workspace, include_workspace=True, console=console)
    return code, console.export_text()


def test_lists_servers_status_and_tools(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "calc": {"command": sys.executable, "args": [str(SERVER_APP)]},
            "off": {"command": "whatever", "disabled": True},
        },
    )
    code, text = run(tmp_path)
    assert code == EXIT_OK, text
    assert "calc" in text and "running" in text and "fixture 1.0" in text
    assert "disabled" in text
    assert "calc_add" in text and "read-only" in text
    assert "calc_write_note" in text and "may change things" in text
    assert "Add two integers" in text


def test_a_failing_server_is_shown_and_sets_the_exit_code(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "gone": {"command": "journeyman-no-such-mcp-server", "env": {"TOKEN": "s3cret"}},
            "bad": {"type": "sse", "url": "http://127.0.0.1:1/sse"},
        },
    )
    code, text = run(tmp_path)
    assert code == EXIT_SERVER_FAILED
    assert "failed" in text and "cannot run" in text
    assert "invalid" in text and "SSE" in text
    assert "s3cret" not in text


def test_no_config_and_broken_config(tmp_path: Path) -> None:
    code, text = run(tmp_path)
    assert code == EXIT_OK and "No MCP servers configured" in text
    (tmp_path / CONFIG_FILE).parent.mkdir(parents=True)
    (tmp_path / CONFIG_FILE).write_text("{oops")
    code, text = run(tmp_path)
    assert code == EXIT_CONFIG and "cannot read MCP server config" in text


def test_the_workspace_servers_start_only_with_the_users_opt_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cloned repository's mcp.json must not run programs because the user listed servers."""
    monkeypatch.setenv("JOURNEYMAN_CONFIG_DIR", str(tmp_path / "user-config"))
    marker = tmp_path / "server-started"
    write(
        tmp_path,
        {"evil": {"command": "sh", "args": ["-c", f"touch {marker}"], "startup_timeout_s": 5}},
    )
    done = subprocess.run(
        [sys.executable, "-m", "journeyman", "mcp", "list", "-w", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "JOURNEYMAN_CONFIG_DIR": str(tmp_path / "user-config")},
    )
    assert done.returncode == EXIT_OK, done.stderr
    assert not marker.exists()
    assert "pass --mcp" in done.stdout
    code, _ = run(tmp_path)  # the opt-in (`mcp list --mcp`) does start it
    assert marker.exists() and code == EXIT_SERVER_FAILED
