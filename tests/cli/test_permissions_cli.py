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


def test_a_write_refused_twice_counts_twice_and_is_listed_once(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    fake_openai.enqueue(
        reply(tool_calls=[WRITE]), reply(tool_calls=[WRITE]), reply(tool_calls=[FINISH])
    )
    done = journeyman(
        "run", "write", "-w", str(ws), "--session-dir", str(tmp_path / "s"),
        env=env_for(fake_openai, tmp_path),
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "refused: 2 edit/command call(s) were refused" in done.stderr
    assert "write_file(out.txt) (2 times):" in done.stderr
    assert done.stdout.count("refused: write_file(out.txt) (2 times)") == 1, done.stdout


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


SECRET = "hunter2-do-not-leak"
PATCH_SETUP = {
    "patch": "*** Begin Patch\n*** Update File: setup.py\n@@\n-old\n+new\n*** End Patch\n"
}


def offered_tools(server: FakeOpenAIServer) -> set[str]:
    body = json.loads(server.requests[0].raw_body)
    return {tool["function"]["name"] for tool in body.get("tools", [])}


def test_user_edit_rules_hold_for_apply_patch_and_read_rules_for_grep(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    (ws / "secrets").mkdir(parents=True)
    (ws / "secrets" / "api.txt").write_text(f"TOKEN={SECRET}\n")
    (ws / "setup.py").write_text("old\n")
    (ws / "app.py").write_text("TOKEN = 1\n")
    user = tmp_path / "user-config"
    user.mkdir()
    (user / "config.toml").write_text(
        '[permissions]\nmode = "bypass"\ndeny = ["edit_file(setup.py)", "read_file(secrets/**)"]\n'
    )
    fake_openai.enqueue(
        reply(tool_calls=[("apply_patch", PATCH_SETUP)]),
        reply(tool_calls=[("grep", {"pattern": "TOKEN", "path": "."})]),
        reply(tool_calls=[("list_files", {"path": ".", "recursive": True})]),
        reply(tool_calls=[("read_file", {"path": "secrets/api.txt"})]),
        reply(tool_calls=[FINISH]),
    )
    done = journeyman(
        "run",
        "tidy up",
        "-w",
        str(ws),
        "--session-dir",
        str(tmp_path / "s"),
        env=env_for(fake_openai, tmp_path, JOURNEYMAN_EDIT_TOOL="apply_patch"),
    )
    assert "apply_patch" in offered_tools(fake_openai)
    assert "edit_file" not in offered_tools(fake_openai)
    assert (ws / "setup.py").read_text() == "old\n"
    (refused,) = tool_results(fake_openai, 1)
    assert "not allowed" in refused and "edit_file(setup.py)" in refused
    (grep,) = tool_results(fake_openai, 2)[1:]
    assert "app.py:1: TOKEN = 1" in grep and "`read_file(secrets/**)` covers" in grep
    listing = tool_results(fake_openai, 3)[-1]
    assert "secrets/api.txt" not in listing and "app.py" in listing
    assert "not allowed" in tool_results(fake_openai, 4)[-1]
    assert all(SECRET.encode() not in request.raw_body for request in fake_openai.requests)
    assert SECRET not in done.stdout + done.stderr


def test_a_repository_cannot_choose_the_edit_tool(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    (ws / ".journeyman").mkdir(parents=True)
    (ws / ".journeyman" / "config.toml").write_text('edit_tool = "apply_patch"\n')
    user = tmp_path / "user-config"
    user.mkdir()
    (user / "config.toml").write_text('edit_tool = "edit_file"\n')
    fake_openai.enqueue(reply(tool_calls=[FINISH]))
    # the user's file chooses edit_file (the test environment's JOURNEYMAN_EDIT_TOOL is unset)
    done = journeyman(
        "run",
        "x",
        "--no-verify",
        "-w",
        str(ws),
        "--session-dir",
        str(tmp_path / "s"),
        env={
            k: v for k, v in env_for(fake_openai, tmp_path).items() if k != "JOURNEYMAN_EDIT_TOOL"
        },
    )
    assert done.returncode == 0, done.stderr
    assert "ignored edit_tool = 'apply_patch'" in done.stderr
    assert ".journeyman/config.toml" in done.stderr
    tools = offered_tools(fake_openai)
    assert "edit_file" in tools and "apply_patch" not in tools


def test_deny_rules_refuse_a_git_push_however_it_is_spelled(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    user = tmp_path / "user-config"
    user.mkdir()
    (user / "config.toml").write_text(
        '[permissions]\nmode = "bypass"\ndeny = ["run_command(git push*)"]\n'
    )
    spellings = ["git -C . push", "strace -f git push", "alias g=git; g push", "echo hi"]
    fake_openai.enqueue(
        *[reply(tool_calls=[("run_command", {"command": c})]) for c in spellings],
        reply(tool_calls=[FINISH]),
    )
    journeyman(
        "run",
        "push it",
        "-w",
        str(ws),
        "--session-dir",
        str(tmp_path / "s"),
        "--sandbox",
        "local",
        env=env_for(fake_openai, tmp_path),
    )
    results = [tool_results(fake_openai, n)[-1] for n in range(1, len(spellings) + 1)]
    assert all("not allowed" in r and "git push*" in r for r in results[:3]), results
    assert "`alias`" in results[2]
    assert "not allowed" not in results[3] and "hi" in results[3]
