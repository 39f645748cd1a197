"""Attacks: a command plants git configuration or hooks that the user's own git would run on
the host, anywhere in the workspace (a fresh `git init`, a nested `vendor/lib/.git`, a bare
repository, a `.git` file pointing out). After the command, the user's git must run nothing.

Each attack is first checked to work against plain git on the host (`test_*_is_real`), so
that the defence tests cannot pass because the attack was harmless."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from journeyman.core.messages import ToolResult
from journeyman.core.safe_git import safe_git_command, safe_git_env
from journeyman.tools.context import ToolContext
from journeyman.tools.sandbox import BubblewrapSandbox, LocalSandbox, Sandbox, git_scan
from journeyman.tools.sandbox.git_scan import is_program_key, read_config, scan
from journeyman.tools.shell import RunCommandArgs, RunCommandTool

from .sandboxes import needs_bwrap


def host_git(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """git as the user would type it: no safe overrides, only no global config of the test
    machine (so that the test does not depend on it)."""
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    env.update({"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t"})
    env.update({"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"})
    return subprocess.run(
        ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=30
    )


async def run(sandbox: Sandbox, workspace: Path, command: str) -> tuple[ToolResult, RunCommandTool]:
    tool = RunCommandTool(sandbox=sandbox, kill_grace=0.5)
    result = await tool.execute(
        RunCommandArgs(command=command, timeout=30), ToolContext(workspace=workspace)
    )
    return result, tool


def user_touches(repo: Path) -> None:
    """What a user (or a git-aware prompt) does in a repository: each may run a program."""
    host_git("status", cwd=repo)
    host_git("pwn", cwd=repo)
    (repo / "new.txt").write_text("x\n")
    host_git("add", "new.txt", cwd=repo)
    host_git("commit", "-qm", "c", cwd=repo)
    host_git("diff", "HEAD~1", cwd=repo)


def attacks(marker: Path) -> dict[str, str]:
    """Shell lines run inside a repository, each arming it so that `user_touches` runs
    `touch <marker>-<name>`."""
    touch = "touch " + str(marker)
    return {
        "fsmonitor": f"git config core.fsmonitor '{touch}-fsmonitor; false'",
        "alias": f"git config alias.pwn '!{touch}-alias'",
        "filter": (
            f"git config filter.x.clean '{touch}-filter; cat' && "
            "echo '* filter=x' >> .gitattributes"
        ),
        "textconv": (
            f"git config diff.x.textconv '{touch}-textconv; cat' && "
            "echo '* diff=x' >> .gitattributes"
        ),
        "external": f"git config diff.external '{touch}-external'",
        "hookspath": (
            f"mkdir -p .h && printf '#!/bin/sh\\n{touch}-hookspath\\n' > .h/pre-commit && "
            "chmod +x .h/pre-commit && git config core.hooksPath .h"
        ),
        "hook": (
            f"printf '#!/bin/sh\\n{touch}-hook\\n' > $(git rev-parse --git-dir)/hooks/pre-commit"
            " && chmod +x $(git rev-parse --git-dir)/hooks/pre-commit"
        ),
        "include": (
            f"printf '[core]\\n\\tfsmonitor = \"{touch}-include; false\"\\n' > ../inc.cfg && "
            "git config include.path $(cd .. && pwd)/inc.cfg"
        ),
    }


def marks(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in tmp_path.glob("MARK-*"))


def arm_all(marker: Path) -> str:
    return " ; ".join(attacks(marker).values())


SETUP = "git -c user.name=t -c user.email=t@t commit -q --allow-empty -m base"


# --- the attacks are real (each one alone) --------------------------------------------


@pytest.mark.parametrize("name", sorted(attacks(Path("/m"))))
def test_each_planted_setting_runs_a_program_on_the_host_without_the_guard(
    name: str, tmp_path: Path
) -> None:
    repo = tmp_path / "plain"
    repo.mkdir()
    host_git("init", "-q", cwd=repo)
    line = attacks(tmp_path / "MARK")[name]
    subprocess.run(["bash", "-c", f"{SETUP} && {line}"], cwd=repo, check=True)
    user_touches(repo)
    assert marks(tmp_path) == [f"MARK-{name}"]


# --- local sandbox ---------------------------------------------------------------------------


async def test_a_fresh_git_init_is_disarmed(workspace: Path, tmp_path: Path) -> None:
    marker = tmp_path / "MARK"
    result, _ = await run(
        LocalSandbox(workspace), workspace, f"git init -q && {SETUP} && {arm_all(marker)}"
    )
    warning = result.metadata["warnings"][0]
    assert "core.fsmonitor" in warning and "alias.pwn" in warning and "include.path" in warning
    user_touches(workspace)
    assert marks(tmp_path) == []


@pytest.mark.parametrize("name", sorted(attacks(Path("/m"))))
async def test_each_setting_in_a_nested_repository_is_disarmed(
    name: str, workspace: Path, tmp_path: Path
) -> None:
    host_git("init", "-q", cwd=workspace)
    marker = tmp_path / "MARK"
    line = attacks(marker)[name]
    command = f"mkdir -p vendor/lib && cd vendor/lib && git init -q && {SETUP} && {line}"
    result, _ = await run(LocalSandbox(workspace), workspace, command)
    assert "warnings" in result.metadata, result.content
    user_touches(workspace / "vendor" / "lib")
    assert marks(tmp_path) == []


async def test_a_bare_repository_in_the_workspace_is_disarmed(
    workspace: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "MARK"
    command = f"git init -q --bare evil.git && git -C evil.git config alias.pwn '!touch {marker}'"
    result, _ = await run(LocalSandbox(workspace), workspace, command)
    assert "alias.pwn" in result.metadata["warnings"][0]
    host_git("pwn", cwd=workspace / "evil.git")
    assert not marker.exists()


async def test_a_git_file_pointing_outside_the_workspace_is_moved_aside(
    workspace: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    marker = tmp_path / "MARK"
    command = (
        f"git init -q --bare {elsewhere} && git --git-dir={elsewhere} config core.bare false && "
        f"git --git-dir={elsewhere} config core.fsmonitor 'touch {marker}; false' && "
        f"mkdir sub && echo 'gitdir: {elsewhere}' > sub/.git"
    )
    result, _ = await run(LocalSandbox(workspace), workspace, command)
    assert "sub/.git" in result.metadata["warnings"][0]
    assert not (workspace / "sub" / ".git").exists()
    host_git("status", cwd=workspace / "sub")
    assert not marker.exists()


async def test_links_named_git_are_removed(workspace: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    host_git("init", "-q", str(elsewhere), cwd=tmp_path)
    result, _ = await run(
        LocalSandbox(workspace), workspace, f"mkdir sub && ln -s {elsewhere}/.git sub/.git"
    )
    assert "sub/.git" in result.metadata["warnings"][0]
    assert not os.path.lexists(workspace / "sub" / ".git")


async def test_what_a_nested_repository_already_held_is_kept(
    workspace: Path, tmp_path: Path
) -> None:
    lib = workspace / "lib"
    lib.mkdir()
    host_git("init", "-q", cwd=lib)
    host_git("config", "alias.hello", "!echo hello", cwd=lib)
    marker = tmp_path / "MARK"
    result, _ = await run(
        LocalSandbox(workspace),
        workspace,
        f"cd lib && git config core.fsmonitor 'touch {marker}; false' && git config user.name x",
    )
    warning = result.metadata["warnings"][0]
    assert "lib/.git/config: core.fsmonitor" in warning and "alias.hello" not in warning
    values = dict(read_config(lib / ".git" / "config") or [])
    assert values["alias.hello"] == "!echo hello" and values["user.name"] == "x"
    assert "core.fsmonitor" not in values


async def test_a_changed_user_alias_is_put_back(workspace: Path, tmp_path: Path) -> None:
    lib = workspace / "lib"
    lib.mkdir()
    host_git("init", "-q", cwd=lib)
    host_git("config", "alias.pwn", "!echo hello", cwd=lib)
    marker = tmp_path / "MARK"
    await run(
        LocalSandbox(workspace), workspace, f"cd lib && git config alias.pwn '!touch {marker}'"
    )
    assert host_git("pwn", cwd=lib).stdout.strip() == "hello"
    assert not marker.exists()


async def test_a_config_git_cannot_read_is_moved_aside(workspace: Path) -> None:
    result, _ = await run(
        LocalSandbox(workspace),
        workspace,
        "git init -q lib && printf '[core\\n\\tfsmonitor = x\\n' >> lib/.git/config",
    )
    assert "lib/.git/config" in result.metadata["warnings"][0]
    assert not (workspace / "lib" / ".git" / "config").exists()
    assert (workspace / "lib" / ".git" / "config.disabled-by-journeyman").exists()


async def test_a_process_outliving_its_command_is_caught_at_the_end_of_the_run(
    workspace: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "MARK"
    host_git("init", "-q", "lib", cwd=workspace)
    later = f"(sleep 1; git -C lib config core.fsmonitor 'touch {marker}; false') >/dev/null 2>&1 &"
    result, tool = await run(LocalSandbox(workspace), workspace, later)
    assert "warnings" not in result.metadata
    await asyncio.sleep(2)
    message = await asyncio.to_thread(tool.disarm_git, workspace)
    assert message is not None and "core.fsmonitor" in message
    host_git("status", cwd=workspace / "lib")
    assert not marker.exists()


async def test_commands_leaving_git_alone_get_no_warning(workspace: Path) -> None:
    host_git("init", "-q", "lib", cwd=workspace)
    result, tool = await run(LocalSandbox(workspace), workspace, "git -C lib status >/dev/null")
    assert "warnings" not in result.metadata
    assert tool.disarm_git(workspace) is None


# --- bubblewrap ------------------------------------------------------------------------------


@needs_bwrap
async def test_bubblewrap_fresh_init_and_nested_repository_are_disarmed(
    workspace: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "MARK"
    command = (
        f"git init -q && {SETUP} && {arm_all(marker)} && mkdir -p vendor/lib && cd vendor/lib && "
        f"git init -q && {SETUP} && {arm_all(marker)}"
    )
    result, _ = await run(BubblewrapSandbox(workspace), workspace, command)
    warning = result.metadata["warnings"][0]
    assert "vendor/lib/.git/config: core.fsmonitor" in warning
    assert ".git/config: core.fsmonitor" in warning.replace("vendor/lib/", "")
    user_touches(workspace)
    user_touches(workspace / "vendor" / "lib")
    assert marks(tmp_path) == []


# --- the scan ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value", "dangerous"),
    [
        ("core.fsmonitor", "x", True),
        ("core.sshcommand", "x", True),
        ("core.pager", "less", True),
        ("gpg.ssh.program", "x", True),
        ("gpg.ssh.defaultkeycommand", "x", True),
        ("filter.lfs.process", "x", True),
        ("merge.ours.driver", "true", True),
        ("credential.https://h.helper", "x", True),
        ("remote.origin.uploadpack", "x", True),
        ("includeIf.gitdir:/x/.path", "x", True),
        ("protocol.ext.allow", "always", True),
        ("pager.log", "x", True),
        ("mergetool.x.path", "/bin/x", True),
        ("merge.tool", "vimdiff", True),
        ("imap.tunnel", "x", True),
        ("sendemail.sendmailcmd", "x", True),
        ("interactive.difffilter", "x", True),
        ("uploadpack.packobjectshook", "x", True),
        ("trailer.sign.command", "x", True),
        ("alias.st", "status", False),
        ("status.showuntrackedfiles", "all", False),
        ("branch.main.remote", "origin", False),
        ("core.repositoryformatversion", "0", False),
        ("core.filemode", "true", False),
        ("core.logallrefupdates", "true", False),
        ("alias.st", " !sh", True),
        ("submodule.a.update", "!sh", True),
        ("submodule.a.update", "rebase", False),
        ("user.name", "x", False),
        ("core.bare", None, False),
        ("remote.origin.url", "https://h/r", False),
    ],
)
def test_program_keys(key: str, value: str | None, dangerous: bool) -> None:
    assert is_program_key(key, value) is dangerous


def test_the_scan_does_not_enter_git_folders(workspace: Path) -> None:
    host_git("init", "-q", "a", cwd=workspace)
    host_git("init", "-q", "--bare", "b.git", cwd=workspace)
    found = scan(workspace)
    names = sorted(str(p.relative_to(workspace.resolve())) for p in found.entries)
    assert "a/.git/config" in names and "b.git/config" in names
    assert not any("objects" in name for name in names)


def test_journeymans_own_git_runs_nothing_a_repository_names(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    host_git("init", "-q", cwd=repo)
    marker = tmp_path / "MARK"
    subprocess.run(["bash", "-c", f"{SETUP}; {arm_all(marker)}"], cwd=repo, check=True)
    names = [key for key, _ in read_config(repo / ".git" / "config") or []]
    env = safe_git_env(os.environ)
    env.update({"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t"})
    env.update({"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"})
    runs: list[Callable[[], object]] = []
    for args in (
        ("status",),
        ("add", "-A"),
        ("commit", "-qm", "c"),
        ("diff", "--no-ext-diff", "--no-textconv", "HEAD~1"),
        ("log", "-p", "--no-ext-diff", "--no-textconv"),
    ):
        runs.append(
            lambda args=args: subprocess.run(
                safe_git_command(*args, config_names=names),
                cwd=repo,
                env=env,
                capture_output=True,
                check=True,
            )
        )
    (repo / "f.txt").write_text("x\n")
    for call in runs:
        call()
    assert [p.name for p in tmp_path.glob("MARK-*")] == []


def test_a_scan_given_the_previous_one_still_finds_a_deep_new_repository(
    workspace: Path,
) -> None:
    deep = workspace / "a" / "b" / "c"
    deep.mkdir(parents=True)
    (workspace / "a" / "other").mkdir()
    first = scan(workspace, racy_ns=0)
    time.sleep(0.05)  # past the timestamp granularity, so `first` is trusted
    host_git("init", "-q", cwd=deep)
    again = scan(workspace, first, racy_ns=0)
    assert deep.resolve() / ".git" / "config" in again.entries
    assert (
        again.folders[str(workspace.resolve() / "a" / "other")]
        is first.folders[str(workspace.resolve() / "a" / "other")]
    )


async def test_a_workspace_too_large_to_scan_is_said_once(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(git_scan, "MAX_ENTRIES", 5)
    for index in range(10):
        (workspace / f"f{index}").write_text("x")
    tool = RunCommandTool(sandbox=LocalSandbox(workspace), kill_grace=0.5)
    ctx = ToolContext(workspace=workspace)
    first = await tool.execute(RunCommandArgs(command="true"), ctx)
    second = await tool.execute(RunCommandArgs(command="true"), ctx)
    assert "over 5 entries" in first.metadata["warnings"][0]
    assert "warnings" not in second.metadata


async def test_ordinary_git_work_in_a_nested_repository_gets_no_warning(
    workspace: Path, tmp_path: Path
) -> None:
    upstream = tmp_path / "upstream"
    host_git("init", "-q", str(upstream), cwd=tmp_path)
    host_git("commit", "-q", "--allow-empty", "-m", "u", cwd=upstream)
    command = (
        f"git init -q lib && git -C lib remote add origin https://example.invalid/r.git && "
        f"git -C lib config user.name x && git -C lib config core.autocrlf false && "
        f"git clone -q {upstream} vendor/up && git -C vendor/up branch -q topic"
    )
    result, _ = await run(LocalSandbox(workspace), workspace, command)
    assert "exit code 0" in result.content, result.content
    assert "warnings" not in result.metadata
