"""Attacks: files journeyman reads on the host (rules files, the project config) planted by a
hostile repository or a sandboxed command — links out of the workspace, FIFOs, huge files —
through the real CLI, asserting on what reached the fake model server."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import reply
from tests.support.cli import clean_env, jm

SECRET = "AKIAFAKESECRETDONOTLEAK0123456789"
FINISH = ("finish", {"summary": "done"})


def env_for(server: FakeOpenAIServer, tmp_path: Path) -> dict[str, str]:
    return clean_env(
        OPENAI_API_KEY="sk-test",
        OPENAI_BASE_URL=server.base_url,
        HOME=str(tmp_path / "home"),
        JOURNEYMAN_CONFIG_DIR=str(tmp_path / "user-config"),
        JOURNEYMAN_SESSION_DIR=str(tmp_path / "sessions"),
    )


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "home").mkdir()
    root = tmp_path / "ws"
    (root / ".journeyman").mkdir(parents=True)
    return root


@pytest.fixture
def secret_file(tmp_path: Path) -> Path:
    outside = tmp_path / "home" / ".aws"
    outside.mkdir(parents=True)
    path = outside / "credentials"
    path.write_text(f"[default]\naws_secret_access_key = {SECRET}\n")
    return path


def run_once(
    server: FakeOpenAIServer, tmp_path: Path, ws: Path, timeout: float = 60
) -> tuple[str, str]:
    """A run that finishes at once; the first request's body (as sent) and stderr."""
    server.enqueue(reply(tool_calls=[FINISH]))
    done = jm(
        "run",
        "say hi",
        "-w",
        str(ws),
        "--sandbox",
        "local",
        env=env_for(server, tmp_path),
        timeout=timeout,
    )
    assert server.requests, done.stderr
    return server.requests[0].raw_body.decode("utf-8", errors="replace"), done.stderr


@pytest.mark.parametrize("name", ["AGENTS.md", "CLAUDE.md", ".journeyman/rules.md"])
def test_a_rules_file_linking_out_of_the_workspace_is_not_read(
    name: str, fake_openai: FakeOpenAIServer, tmp_path: Path, ws: Path, secret_file: Path
) -> None:
    (ws / name).symlink_to(secret_file)
    (ws / "README.md").write_text("hello\n")
    body, stderr = run_once(fake_openai, tmp_path, ws)
    assert SECRET not in body
    assert f"rules file {name} skipped: it links outside the workspace" in stderr


def test_every_rules_file_linking_out_at_once_and_a_good_one_kept(
    fake_openai: FakeOpenAIServer, tmp_path: Path, ws: Path, secret_file: Path
) -> None:
    for name in ("AGENTS.md", "CLAUDE.md", ".journeyman/rules.md", ".agent/rules.md"):
        (ws / name).parent.mkdir(exist_ok=True)
        (ws / name).symlink_to(secret_file)
    (ws / "docs").mkdir()
    (ws / "docs" / "RULES.md").write_text("Use tabs, never spaces.\n")
    (ws / "AGENTS.md").unlink()
    (ws / "AGENTS.md").symlink_to("docs/RULES.md")  # a link inside the workspace is fine
    body, stderr = run_once(fake_openai, tmp_path, ws)
    assert SECRET not in body
    assert "Use tabs, never spaces." in body
    assert stderr.count("links outside the workspace") == 3


def test_a_fifo_named_agents_md_does_not_hang_the_run(
    fake_openai: FakeOpenAIServer, tmp_path: Path, ws: Path
) -> None:
    os.mkfifo(ws / "AGENTS.md")
    os.mkfifo(ws / "CLAUDE.md")
    body, stderr = run_once(fake_openai, tmp_path, ws, timeout=60)
    assert "rules file AGENTS.md skipped: it is not a regular file (a FIFO)" in stderr
    assert "rules file CLAUDE.md skipped" in stderr
    assert json.loads(body)["messages"]


def test_a_huge_agents_md_is_skipped_and_the_request_stays_small(
    fake_openai: FakeOpenAIServer, tmp_path: Path, ws: Path
) -> None:
    with (ws / "AGENTS.md").open("wb") as handle:  # 300 MB, sparse: no disk used
        handle.write(b"Follow these rules. " * 10)
        handle.truncate(300 * 1024 * 1024)
    body, stderr = run_once(fake_openai, tmp_path, ws)
    assert len(body) < 200_000
    assert "rules file AGENTS.md skipped: it is 314,572,800 bytes" in stderr


def test_a_project_config_linking_out_is_ignored_with_a_warning(
    fake_openai: FakeOpenAIServer, tmp_path: Path, ws: Path
) -> None:
    elsewhere = tmp_path / "elsewhere.toml"
    elsewhere.write_text('system_prompt = "leaked"\n')
    (ws / "journeyman.toml").symlink_to(elsewhere)
    body, stderr = run_once(fake_openai, tmp_path, ws)
    assert "journeyman.toml: ignored (every setting)" in stderr
    assert "links outside the workspace" in stderr
    assert "leaked" not in body


def test_a_fifo_project_config_does_not_hang(
    fake_openai: FakeOpenAIServer, tmp_path: Path, ws: Path
) -> None:
    os.mkfifo(ws / ".journeyman" / "config.toml")
    _, stderr = run_once(fake_openai, tmp_path, ws, timeout=60)
    assert "config.toml: ignored (every setting)" in stderr and "a FIFO" in stderr


def test_workspace_mcp_and_lsp_settings_linking_out_are_refused(
    tmp_path: Path, ws: Path, secret_file: Path
) -> None:
    from journeyman.core.errors import ConfigurationError
    from journeyman.integrations.lsp import load_lsp_config
    from journeyman.integrations.mcp.config import load_mcp_config

    (ws / ".journeyman" / "mcp.json").symlink_to(secret_file)
    (ws / ".journeyman" / "lsp.toml").symlink_to(secret_file)
    with pytest.raises(ConfigurationError, match="links outside the workspace") as mcp:
        load_mcp_config(ws)
    with pytest.raises(ConfigurationError, match="links outside the workspace") as lsp:
        load_lsp_config(ws)
    assert SECRET not in str(mcp.value) + str(lsp.value)
