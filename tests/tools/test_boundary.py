"""The boundary a command meets: an allow-listed environment under every sandbox, and under
bubblewrap journeyman's own Python read-only and the user's private folders invisible, wherever
they lie (the CLI-level attacks are in tests/reliability/test_boundary.py)."""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from journeyman.core import redact
from journeyman.tools.context import ToolContext
from journeyman.tools.sandbox import (
    BubblewrapSandbox,
    LocalSandbox,
    Sandbox,
    bubblewrap,
    open_sandbox,
)
from journeyman.tools.sandbox.environment import allowed, command_env
from journeyman.tools.shell import RunCommandArgs, RunCommandTool

from .sandboxes import needs_bwrap


async def run(sandbox: Sandbox, workspace: Path, command: str) -> str:
    tool = RunCommandTool(sandbox=sandbox, kill_grace=0.5, journal_changes=False)
    result = await tool.execute(RunCommandArgs(command=command), ToolContext(workspace))
    return result.content


@pytest.fixture
def outside_tmp() -> Iterator[Path]:
    """A folder outside $HOME and /tmp, which bubblewrap would otherwise show read-only."""
    root = Path(tempfile.mkdtemp(prefix="jm-boundary-", dir="/var/tmp"))
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize(
    ("name", "passes"),
    [
        ("PATH", True),
        ("LC_ALL", True),
        ("XDG_CACHE_HOME", True),
        ("VIRTUAL_ENV", True),
        ("PYTHONPATH", True),
        ("GH_PAT", False),
        ("MYSQL_PWD", False),
        ("DOCKER_AUTH_CONFIG", False),
        ("CI_JOB_JWT", False),
        ("SENTRY_DSN", False),
        ("OPENAI_API_KEY", False),
        ("SSH_AUTH_SOCK", False),
        ("LD_PRELOAD", False),
    ],
)
def test_the_allow_list(name: str, passes: bool) -> None:
    assert allowed(name) is passes


def test_pass_env_adds_names_and_prefixes_but_never_the_run_s_provider_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(redact, "_provider_keys", {"sk-the-runs-own-key-123"})
    env = {
        "AWS_REGION": "eu",
        "AWS_PROFILE": "dev",
        "GH_PAT": "ghp-x",
        "OPENAI_API_KEY": "sk-the-runs-own-key-123",
        "OTHER": "holds sk-the-runs-own-key-123 inside",
        "HOME": "/home/me",
    }
    got = command_env(env, ["AWS_*", "GH_PAT", "OPENAI_API_KEY", "OTHER"])
    assert got["AWS_REGION"] == "eu" and got["AWS_PROFILE"] == "dev" and got["GH_PAT"] == "ghp-x"
    assert "OPENAI_API_KEY" not in got and "OTHER" not in got
    assert got["HOME"] == "/home/me" and got["PAGER"] == "cat"


async def test_local_commands_get_the_allow_list_and_what_the_user_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GH_PAT", "s3cret-pat")
    monkeypatch.setenv("MY_TOOL_HOME", "/opt/tool")
    out = await run(LocalSandbox(tmp_path, pass_env=("MY_TOOL_*",)), tmp_path, "env")
    assert "s3cret-pat" not in out and "MY_TOOL_HOME=/opt/tool" in out


@needs_bwrap
async def test_bubblewrap_hides_the_session_store_and_config_outside_home_and_tmp(
    tmp_path: Path, outside_tmp: Path
) -> None:
    sessions, config = outside_tmp / "srv" / "sessions", outside_tmp / "config"
    sessions.mkdir(parents=True)
    config.mkdir()
    (sessions / "journeyman.db").write_text("private-task-words")
    (config / "config.toml").write_text("private-config-words")
    (outside_tmp / "srv" / "other.txt").write_text("still-visible")
    sandbox = open_sandbox("bubblewrap", tmp_path, hidden=(sessions, config))
    out = await run(
        sandbox,
        tmp_path,
        f"cat {sessions}/journeyman.db {config}/config.toml; ls -a {sessions}; "
        f"cat {outside_tmp}/srv/other.txt",
    )
    assert "private-task-words" not in out and "private-config-words" not in out
    assert "still-visible" in out  # only the named folders are hidden


@needs_bwrap
async def test_bubblewrap_hides_a_session_store_inside_the_workspace(tmp_path: Path) -> None:
    sessions = tmp_path / ".sessions"
    sessions.mkdir()
    (sessions / "journeyman.db").write_text("private-task-words")
    sandbox = open_sandbox("bubblewrap", tmp_path, hidden=(sessions,))
    out = await run(sandbox, tmp_path, "cat .sessions/journeyman.db; echo x > .sessions/new")
    assert "private-task-words" not in out
    assert not (sessions / "new").exists()  # writes land in memory, not in the store


@needs_bwrap
async def test_bubblewrap_keeps_journeymans_editable_source_in_the_workspace_read_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # journeyman installed in editable mode from the workspace: code the host imports next
    src = tmp_path / "src"
    (src / "journeyman").mkdir(parents=True)
    monkeypatch.setattr(bubblewrap, "journeyman_root", lambda: src)
    out = await run(
        BubblewrapSandbox(tmp_path),
        tmp_path,
        "echo 'import os' > src/sitecustomize.py || echo ro-1; "
        "echo x >> src/journeyman/__init__.py || echo ro-2; mv src src2 || echo ro-3; "
        "echo fine > elsewhere.txt && cat elsewhere.txt",
    )
    assert "ro-1" in out and "ro-2" in out and "ro-3" in out and "fine" in out
    assert not (src / "sitecustomize.py").exists() and not (tmp_path / "src2").exists()


@needs_bwrap
async def test_a_projects_own_source_on_the_python_path_stays_writable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the project installed in editable mode in the same virtualenv: the model's work is there
    src = tmp_path / "src"
    (src / "app").mkdir(parents=True)
    monkeypatch.setattr(sys, "path", [*sys.path, str(src)])
    out = await run(BubblewrapSandbox(tmp_path), tmp_path, "echo 'x = 1' > src/app/m.py && echo ok")
    assert "ok" in out and (src / "app" / "m.py").read_text() == "x = 1\n"


def test_a_python_path_entry_that_is_a_hidden_home_stays_hidden(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setattr(sys, "path", [*sys.path, str(home)])  # PYTHONPATH=$HOME
    argv = BubblewrapSandbox(tmp_path / "ws").argv("true", tmp_path)
    binds = [argv[i + 1] for i, arg in enumerate(argv[:-1]) if arg in ("--ro-bind", "--bind")]
    assert (
        str(home) not in binds
        and ["--tmpfs", str(home)] == argv[argv.index(str(home)) - 1 : argv.index(str(home)) + 1]
    )


@needs_bwrap
async def test_bubblewrap_shows_no_process_but_the_command_s_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GH_PAT", "s3cret-in-the-agent")  # in this (the agent's) environ block
    out = await run(
        open_sandbox("bubblewrap", tmp_path),
        tmp_path,
        "ls /proc | grep -c '^[0-9]'; cat /proc/[0-9]*/environ | tr '\\0' '\\n'",
    )
    assert "s3cret" not in out
    assert int(out.split()[0]) < 8  # bwrap's init, bash and the pipeline: no agent there


def test_pass_env_comes_from_the_user_s_environment_variable(tmp_path: Path) -> None:
    from journeyman.loop.config_file import load_config

    loaded = load_config(tmp_path, env={"JOURNEYMAN_PASS_ENV": "GH_PAT, AWS_*"})
    assert loaded.build().pass_env == ["GH_PAT", "AWS_*"]


def test_docker_mounts_journeymans_python_in_the_workspace_read_only_and_hides_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from journeyman.tools.sandbox.docker import inner_mounts

    venv, sessions = tmp_path / ".venv", tmp_path / ".sessions"
    venv.mkdir()
    sessions.mkdir()
    monkeypatch.setattr(sys, "prefix", str(venv))
    args = inner_mounts(tmp_path, (sessions, Path("/elsewhere")))
    assert f"type=bind,source={venv},target={venv},readonly" in args
    assert args[-2:] == ["--tmpfs", str(sessions)] and "/elsewhere" not in args


@pytest.mark.parametrize("tool", ["write_file", "edit_file"])
async def test_file_tools_never_write_into_journeymans_own_python_in_the_workspace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tool: str
) -> None:
    from journeyman.core.messages import ToolCall
    from journeyman.tools.builtin import default_tools
    from journeyman.tools.registry import ToolRegistry

    site_packages = tmp_path / ".venv" / "lib" / "site-packages"
    site_packages.mkdir(parents=True)
    monkeypatch.setattr(sys, "prefix", str(tmp_path / ".venv"))
    monkeypatch.setattr(sys, "path", [*sys.path, str(tmp_path)])  # holds the workspace: ignored
    registry = ToolRegistry(default_tools(LocalSandbox(tmp_path), edit_tool="both"))
    target = ".venv/lib/site-packages/evil.pth"
    args = (
        {"path": target, "content": "import os\n"}
        if tool == "write_file"
        else {"path": target, "old_string": "", "new_string": "import os\n"}
    )
    result = await registry.execute(ToolCall("c", tool, args), ToolContext(tmp_path), 30)
    assert result.is_error and "loads its code from" in result.content
    assert not (site_packages / "evil.pth").exists()
    fine = ToolCall("d", "write_file", {"path": "app.py", "content": "x = 1\n"})
    assert not (await registry.execute(fine, ToolContext(tmp_path), 30)).is_error
