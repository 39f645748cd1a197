"""Permissions, config files and rules as a user meets them on the command line."""

from __future__ import annotations

import json
from pathlib import Path

from journeyman.session.store import SessionStore
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import reply
from tests.support.cli import clean_env, journeyman

WRITE = ("write_file", {"path": "out.txt", "content": "hi\n"})
FINISH = ("finish", {"summary": "done"})


def env_for(server: FakeOpenAIServer, tmp_path: Path, **extra: str) -> dict[str, str]:
    return clean_env(
        OPENAI_API_KEY="sk-test",
        OPENAI_BASE_URL=server.base_url,
        JOURNEYMAN_CONFIG_DIR=str(tmp_path / "user-config"),
        **extra,
    )


def tool_results(server: FakeOpenAIServer, request: int) -> list[str]:
    body = json.loads(server.requests[request].raw_body)
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


def test_without_a_terminal_writes_are_refused_with_a_way_out(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    fake_openai.enqueue(reply(tool_calls=[WRITE]), reply(tool_calls=[FINISH]))
    done = journeyman(
        "run",
        "write",
        "-w",
        str(ws),
        "--session-dir",
        str(tmp_path / "s"),
        env=env_for(fake_openai, tmp_path),
    )
    # the model finished, but the write it needed was refused: the task is not done
    assert done.returncode == 1, done.stderr
    assert "refused: 1 edit/command call(s) were refused" in done.stderr
    assert "refused: write_file(out.txt)" in done.stdout  # the summary lists it
    assert not (ws / "out.txt").exists()
    (refusal,) = tool_results(fake_openai, 1)
    assert "--yes" in refusal and "--permission-mode" in refusal


def test_plan_mode_refuses_even_with_yes(fake_openai: FakeOpenAIServer, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    fake_openai.enqueue(reply(tool_calls=[WRITE]), reply(tool_calls=[FINISH]))
    done = journeyman(
        "run",
        "write",
        "-w",
        str(ws),
        "--session-dir",
        str(tmp_path / "s"),
        "--yes",
        "--permission-mode",
        "plan",
        env=env_for(fake_openai, tmp_path),
    )
    assert done.returncode == 0, done.stderr
    assert not (ws / "out.txt").exists()
    assert "not allowed" in tool_results(fake_openai, 1)[0]


def test_project_config_adds_deny_rules_but_cannot_grant_itself_more(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "journeyman.toml").write_text(
        "max_iterations = 7\n"
        "[permissions]\n"
        'mode = "bypass"\n'
        'allow = ["run_command"]\n'
        'deny = ["write_file(out.txt)"]\n'
    )
    fake_openai.enqueue(reply(tool_calls=[WRITE]), reply(tool_calls=[FINISH]))
    sessions = tmp_path / "s"
    done = journeyman(
        "run",
        "write",
        "-w",
        str(ws),
        "--session-dir",
        str(sessions),
        "--yes",
        env=env_for(fake_openai, tmp_path),
    )
    assert done.returncode == 1, done.stderr  # the write the model needed was denied
    assert "change the deny rule" in done.stderr
    assert "journeyman.toml: ignored permissions.allow = " in done.stderr
    assert "ignored permissions.mode = 'bypass'" in done.stderr
    assert not (ws / "out.txt").exists()
    assert "not allowed" in tool_results(fake_openai, 1)[0]
    store = SessionStore(sessions)
    try:
        (summary,) = store.list_sessions()
        config = summary.record.settings["config"]
    finally:
        store.close()
    assert config["max_iterations"] == 7
    assert config["permissions"]["mode"] == "default"
    assert summary.record.settings["assume_yes"] is True


def test_user_config_and_environment_layer_under_the_flags(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    user = tmp_path / "user-config"
    user.mkdir()
    (user / "config.toml").write_text('[permissions]\nmode = "trusted"\n')
    fake_openai.enqueue(reply(tool_calls=[WRITE]), reply(tool_calls=[("list_files", {})]))
    done = journeyman(
        "run",
        "write",
        "-w",
        str(ws),
        "--session-dir",
        str(tmp_path / "s"),
        env=env_for(fake_openai, tmp_path, JOURNEYMAN_MAX_ITERATIONS="2"),
    )
    assert (ws / "out.txt").read_text() == "hi\n"  # trusted from the user file: no asking
    assert done.returncode == 1 and "max_iterations" in done.stderr  # from the environment


def test_a_broken_config_file_is_a_configuration_error(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / ".journeyman").mkdir(parents=True)
    (ws / ".journeyman" / "config.toml").write_text("max_iteratons = 3\n")
    done = journeyman("run", "x", "-w", str(ws), env=clean_env(OPENAI_API_KEY="sk-x"))
    assert done.returncode == 2
    assert "unknown setting(s) max_iteratons" in done.stderr


def test_rules_command_lists_sources_by_priority(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / ".journeyman").mkdir(parents=True)
    (ws / ".journeyman" / "rules.md").write_text("Prefer small commits.\n")
    (ws / "AGENTS.md").write_text("")
    done = journeyman("rules", "-w", str(ws), env=clean_env(HOME=str(tmp_path / "home")))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "loaded" in lines[0] and lines[0].endswith("(22 bytes)")
    assert ".journeyman/rules.md" in lines[0]
    assert any("empty" in line and "AGENTS.md" in line for line in lines)
    assert lines[-1].startswith("1 file(s) loaded")
