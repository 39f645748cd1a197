"""Sandboxes for real: local resource limits, bubblewrap isolation, docker's clear refusal,
`auto`'s choice, and the agent, config and command line wiring."""

from __future__ import annotations

import asyncio
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from journeyman.cli.app import app
from journeyman.core.errors import ConfigurationError
from journeyman.loop.agent import Agent
from journeyman.loop.config import AgentConfig
from journeyman.providers.scripted import ScriptedProvider
from journeyman.tools.context import ToolContext
from journeyman.tools.sandbox import (
    MARKER_VAR,
    BubblewrapSandbox,
    LocalSandbox,
    ResourceLimits,
    Sandbox,
    SandboxKind,
    marked_pids,
    open_sandbox,
)
from journeyman.tools.shell import RunCommandArgs, RunCommandTool

from .sandboxes import BWRAP_PROBLEM, IS_ROOT, needs_bwrap


async def run(sandbox: Sandbox, ctx: ToolContext, command: str, timeout: float = 10) -> str:
    tool = RunCommandTool(sandbox=sandbox, kill_grace=0.5)
    result = await tool.execute(RunCommandArgs(command=command, timeout=timeout), ctx)
    return result.content


# --- local ------------------------------------------------------------------------------------


async def test_local_sets_resource_limits(workspace: Path, ctx: ToolContext) -> None:
    limits = ResourceLimits(
        cpu_seconds=77, address_space_bytes=3 * 1024**3, processes=999, file_size_bytes=4096 * 512
    )
    out = await run(
        LocalSandbox(workspace, limits), ctx, "ulimit -t; ulimit -v; ulimit -u; ulimit -f"
    )
    assert out.split()[:4] == ["77", str(3 * 1024**2), "999", "2048"]  # bash shows KiB


async def test_local_file_size_limit_stops_a_runaway_writer(
    workspace: Path, ctx: ToolContext
) -> None:
    limits = ResourceLimits(file_size_bytes=1024 * 1024)
    out = await run(
        LocalSandbox(workspace, limits), ctx, "head -c 5000000 /dev/zero > big; echo $?"
    )
    assert (workspace / "big").stat().st_size == 1024 * 1024
    assert "File size limit exceeded" in out or out.split()[-6] != "0"


async def test_local_cpu_limit_kills_a_spinning_process(workspace: Path, ctx: ToolContext) -> None:
    limits = ResourceLimits(cpu_seconds=1)
    out = await run(LocalSandbox(workspace, limits), ctx, "while :; do :; done", timeout=20)
    assert "killed by SIGXCPU" in out or "killed by SIGKILL" in out or "CPU time limit" in out


async def test_local_address_space_limit_fails_big_allocations(
    workspace: Path, ctx: ToolContext
) -> None:
    limits = ResourceLimits(address_space_bytes=512 * 1024**2)
    out = await run(
        LocalSandbox(workspace, limits), ctx, "python3 -c 'b = bytearray(1024**3)'; echo rc=$?"
    )
    assert "MemoryError" in out and "rc=1" in out


async def test_limits_are_set_without_a_python_hook_in_the_child(
    workspace: Path, ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A preexec_fn forces CPython's slow fork path; the shell sets the limits instead.
    hooks: list[object] = []
    real_popen = subprocess.Popen

    def spy(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        hooks.append(kwargs.get("preexec_fn"))
        return real_popen(*args, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", spy)
    limits = ResourceLimits(cpu_seconds=55, processes=777)
    out = await run(LocalSandbox(workspace, limits), ctx, "ulimit -t; ulimit -u")
    assert hooks == [None]
    assert out.split()[:2] == ["55", "777"]


async def test_limits_above_the_agents_hard_limit_are_capped_not_refused(
    workspace: Path, ctx: ToolContext
) -> None:
    hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
    if hard == resource.RLIM_INFINITY:
        pytest.skip("the agent has no hard CPU limit to stay under")
    out = await run(
        LocalSandbox(workspace, ResourceLimits(cpu_seconds=hard + 100)), ctx, "ulimit -t"
    )
    assert out.split()[0] == str(hard)


async def test_the_commands_first_line_is_still_line_1(workspace: Path, ctx: ToolContext) -> None:
    out = await run(LocalSandbox(workspace), ctx, "echo $LINENO\nnot-a-command-xyz")
    assert out.split()[0] == "1"
    assert "line 2" in out


async def test_local_reaches_the_network_and_says_so(workspace: Path, ctx: ToolContext) -> None:
    sandbox = open_sandbox("local", workspace, allow_network=False)
    assert sandbox.network and "no isolation" in sandbox.description
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        out = await run(sandbox, ctx, f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected")
    assert "connected" in out


async def test_every_process_carries_the_marker(workspace: Path, ctx: ToolContext) -> None:
    sandbox = LocalSandbox(workspace)
    out = await run(sandbox, ctx, f"echo ${MARKER_VAR}")
    assert out.startswith(f"{sandbox.ident}:")


async def test_close_stops_daemons_that_left_the_group(workspace: Path, ctx: ToolContext) -> None:
    sandbox = LocalSandbox(workspace)
    await run(sandbox, ctx, "setsid sleep 60 > /dev/null 2>&1 &")
    assert marked_pids(f"{sandbox.ident}:", prefix=True)  # still running after the command
    await sandbox.close(grace=0.5)
    assert marked_pids(f"{sandbox.ident}:", prefix=True) == []


# --- bubblewrap ---------------------------------------------------------------------------------


@needs_bwrap
async def test_bubblewrap_isolation(workspace: Path, ctx: ToolContext, outside: Path) -> None:
    host_tmp = Path("/tmp") / f"jm-host-{os.getpid()}"
    host_tmp.write_text("host\n")
    sandbox = open_sandbox("bubblewrap", workspace)
    assert sandbox.kind is SandboxKind.BUBBLEWRAP and not sandbox.network
    out = await run(
        sandbox,
        ctx,
        "echo in > inside.txt && cat inside.txt; "
        "touch /etc/jm-probe 2>/dev/null || echo etc-read-only; "
        f"ls {outside} 2>/dev/null || echo outside-hidden; "
        f"test -e {host_tmp} && echo tmp-shared || echo tmp-private; "
        "touch /tmp/made-inside; ls -A /run | wc -l; "
        "ps -e --no-headers | wc -l; "
        "grep CapEff /proc/self/status; "
        "{ echo x > /proc/sys/kernel/hostname; } 2>/dev/null || echo proc-sys-read-only; "
        "cat /sys/class/net/*/operstate 2>/dev/null | sort -u | tr '\\n' ' '; echo",
    )
    lines = out.splitlines()
    assert lines[:3] == ["in", "etc-read-only", "outside-hidden"]
    host_tmp.unlink()
    assert lines[3:5] == ["tmp-private", "0"]  # private /tmp and /run
    assert not Path("/tmp/made-inside").exists()
    assert int(lines[5]) <= 4  # bash, ps, wc (and bwrap's init): no host processes
    assert lines[6].split() == ["CapEff:", "0000000000000000"]
    assert lines[7] == "proc-sys-read-only"
    assert (workspace / "inside.txt").read_text() == "in\n"
    assert not Path("/etc/jm-probe").exists()


@pytest.fixture
def fake_home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A home folder with credentials in it, outside /tmp (which bubblewrap hides anyway)."""
    home = Path(tempfile.mkdtemp(prefix="jm-home-", dir="/var/tmp"))
    for name in (".npmrc", ".aws/credentials", ".ssh/id_ed25519", ".config/gcloud/token"):
        secret = home / name
        secret.parent.mkdir(parents=True, exist_ok=True)
        secret.write_text(f"home-secret-{name}\n")
        secret.chmod(0o600)
    (home / ".local" / "bin").mkdir(parents=True)
    (home / ".local" / "bin" / "mytool").write_text("#!/bin/sh\necho toolchain-ok\n")
    (home / ".local" / "bin" / "mytool").chmod(0o755)
    monkeypatch.setenv("HOME", str(home))
    yield home
    shutil.rmtree(home, ignore_errors=True)


@needs_bwrap
async def test_bubblewrap_hides_the_home_folder_but_not_a_workspace_in_it(
    fake_home: Path,
) -> None:
    project = fake_home / "project"
    project.mkdir()
    (project / "data.txt").write_text("workspace-visible\n")
    out = await run(
        open_sandbox("bubblewrap", project),
        ToolContext(workspace=project),
        f"cat {fake_home}/.npmrc ~/.aws/credentials ~/.ssh/id_ed25519 ~/.config/gcloud/token "
        "2>&1; cat data.txt; ~/.local/bin/mytool; echo x > ~/.local/bin/mytool || echo tool-ro; "
        "echo scratch > ~/note && cat ~/note",
    )
    assert "home-secret" not in out
    assert "No such file or directory" in out
    assert "workspace-visible" in out
    assert "toolchain-ok" in out and "tool-ro" in out
    assert "scratch" in out  # the home folder is writable, in memory
    assert not (fake_home / "note").exists()


@needs_bwrap
async def test_bubblewrap_hides_system_secrets(workspace: Path, ctx: ToolContext) -> None:
    out = await run(open_sandbox("bubblewrap", workspace), ctx, "cat /etc/shadow; ls -A /root")
    try:
        host_shadow = Path("/etc/shadow").read_text().splitlines()
    except OSError:
        host_shadow = []  # not readable here anyway; the mount is still checked below
    assert all(line not in out for line in host_shadow if line)
    assert "/etc/shadow" in BubblewrapSandbox(workspace).argv("true", workspace)


@needs_bwrap
async def test_bubblewrap_network_off_unless_allowed(workspace: Path, ctx: ToolContext) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        probe = f"exec 3<>/dev/tcp/127.0.0.1/{port} 2>/dev/null && echo connected || echo refused"
        assert "refused" in await run(open_sandbox("bubblewrap", workspace), ctx, probe)
        allowed = open_sandbox("bubblewrap", workspace, allow_network=True)
        assert allowed.network and "network allowed" in allowed.description
        assert "connected" in await run(allowed, ctx, probe)


@needs_bwrap
async def test_bubblewrap_ends_background_processes_with_the_command(
    workspace: Path, ctx: ToolContext
) -> None:
    sandbox = open_sandbox("bubblewrap", workspace)
    await run(sandbox, ctx, "setsid sleep 60 > /dev/null 2>&1 & echo started")
    for _ in range(100):
        if not marked_pids(f"{sandbox.ident}:", prefix=True):
            break
        await asyncio.sleep(0.02)
    assert marked_pids(f"{sandbox.ident}:", prefix=True) == []


async def test_bubblewrap_missing_is_an_error_when_asked_for(workspace: Path) -> None:
    sandbox = BubblewrapSandbox(workspace, bwrap="/nonexistent/bwrap")
    with pytest.raises(ConfigurationError, match="not installed"):
        sandbox.check()


async def test_bubblewrap_that_fails_its_trial_is_an_error(workspace: Path, tmp_path: Path) -> None:
    broken = tmp_path / "bwrap"
    broken.write_text(
        "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n"
    )
    broken.chmod(0o755)
    with pytest.raises(ConfigurationError, match="No permissions to create new namespace"):
        BubblewrapSandbox(workspace, bwrap=str(broken)).check()


# --- docker and auto ----------------------------------------------------------------------------


def test_docker_without_an_engine_names_the_reason(workspace: Path, tmp_path: Path) -> None:
    try:
        sandbox = open_sandbox("docker", workspace)
    except ConfigurationError as error:
        assert error.message.startswith("docker sandbox: ")
        assert "not installed" in error.message or "does not answer" in error.message
    else:  # an engine answers here
        assert sandbox.kind is SandboxKind.DOCKER


def test_auto_reports_its_choice(workspace: Path) -> None:
    sandbox = open_sandbox("auto", workspace)
    if BWRAP_PROBLEM is None:
        assert sandbox.kind is SandboxKind.BUBBLEWRAP
        assert sandbox.description.startswith("bubblewrap")
    else:
        assert sandbox.kind is SandboxKind.LOCAL
        assert "bubblewrap unusable" in sandbox.description


def test_auto_falls_back_to_local_when_bwrap_is_missing(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    sandbox = open_sandbox("auto", workspace)
    assert sandbox.kind is SandboxKind.LOCAL
    assert "bubblewrap unusable: 'bwrap' is not installed" in sandbox.description
    with pytest.raises(ConfigurationError):
        open_sandbox("bubblewrap", workspace)


# --- wiring ---------------------------------------------------------------------------------------


def test_agent_opens_the_configured_sandbox(workspace: Path, tmp_path: Path) -> None:
    config = AgentConfig(sandbox=SandboxKind.LOCAL, session_dir=tmp_path / "s")
    agent = Agent(ScriptedProvider([]), workspace=workspace, config=config)
    assert agent.sandbox.kind is SandboxKind.LOCAL
    assert agent.settings["config"]["sandbox"] == "local"  # remembered for resume
    assert agent.settings["config"]["allow_network"] is False
    tool = agent.registry.get("run_command")
    assert isinstance(tool, RunCommandTool) and tool.sandbox is agent.sandbox


def test_agent_refuses_a_sandbox_that_cannot_start(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    config = AgentConfig(sandbox=SandboxKind.DOCKER, session_dir=tmp_path / "s")
    with pytest.raises(ConfigurationError, match="docker sandbox"):
        Agent(ScriptedProvider([]), workspace=workspace, config=config)


def test_cli_explicit_sandbox_that_cannot_start_exits_2(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("JOURNEYMAN_CONFIG_DIR", str(tmp_path / "cfg"))
    monkeypatch.setenv("PATH", "/nonexistent")
    result = CliRunner().invoke(
        app,
        [
            "run",
            "hi",
            "-w",
            str(workspace),
            "--sandbox",
            "bubblewrap",
            "--session-dir",
            str(tmp_path / "s"),
        ],
    )
    assert result.exit_code == 2
    assert "bubblewrap sandbox: 'bwrap' is not installed" in result.output


def test_cli_header_names_the_sandbox(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_openai: object
) -> None:
    base_url = getattr(fake_openai, "base_url", None)
    if base_url is None:
        pytest.skip("the fake OpenAI server fixture has no base_url attribute")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("JOURNEYMAN_CONFIG_DIR", str(tmp_path / "cfg"))
    result = CliRunner().invoke(
        app,
        [
            "run",
            "hi",
            "-w",
            str(workspace),
            "--provider",
            "openai",
            "--base-url",
            str(base_url),
            "--sandbox",
            "local",
            "--allow-network",
            "--session-dir",
            str(tmp_path / "s"),
        ],
    )
    assert "sandbox: local (no isolation" in result.output


def test_config_fields() -> None:
    assert AgentConfig().sandbox is SandboxKind.AUTO and AgentConfig().allow_network is False
    assert AgentConfig(sandbox="bubblewrap").sandbox is SandboxKind.BUBBLEWRAP  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        AgentConfig(sandbox="chroot")  # type: ignore[arg-type]


def test_root_is_not_held_to_the_process_limit() -> None:
    """A fact the runaway tests rely on: RLIMIT_NPROC does not apply to uid 0."""
    assert (os.geteuid() == 0) == IS_ROOT


@needs_bwrap
async def test_bubblewrap_keeps_its_own_python_visible_when_it_lives_in_tmp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a clean clone under /tmp has its virtualenv there too; the sandbox empties /tmp, and a
    # check running that virtualenv's python must still find it (read-only)
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text("#!/bin/sh\necho venv-python-ok\n")
    (venv / "bin" / "python").chmod(0o755)
    (tmp_path / "elsewhere.txt").write_text("other-tmp-file\n")
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.setattr(sys, "prefix", str(venv))
    out = await run(
        open_sandbox("bubblewrap", project),
        ToolContext(workspace=project),
        f"{venv}/bin/python; echo x > {venv}/bin/python || echo venv-ro; "
        f"cat {tmp_path}/elsewhere.txt 2>&1",
    )
    assert "venv-python-ok" in out and "venv-ro" in out
    assert "other-tmp-file" not in out  # the rest of /tmp stays private


def test_bubblewrap_mounts_its_python_inside_the_workspace_read_only_after_the_workspace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "project"
    venv = project / ".venv"
    venv.mkdir(parents=True)
    monkeypatch.setattr(sys, "prefix", str(venv))
    argv = BubblewrapSandbox(project).argv("true", project)
    ro = [i for i, arg in enumerate(argv) if arg == str(venv) and argv[i - 2] == "--ro-bind"]
    rw = argv.index("--bind")
    assert ro and ro[0] > rw  # mounted over the writable workspace, so it wins
