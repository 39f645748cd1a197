"""A command cannot arm the workspace's git repository (config, hooks) against the user:
read-only under bubblewrap, reverted with a warning everywhere else."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from journeyman.core.messages import ToolResult
from journeyman.tools.context import ToolContext
from journeyman.tools.sandbox import BubblewrapSandbox, LocalSandbox, Sandbox, git_guard
from journeyman.tools.sandbox.bubblewrap import read_only_git_paths
from journeyman.tools.sandbox.git_guard import GitMetadataGuard
from journeyman.tools.shell import RunCommandArgs, RunCommandTool

from .sandboxes import needs_bwrap

ARM = (
    "git config core.fsmonitor 'touch PWNED'; "
    "printf '#!/bin/sh\\ntouch PWNED\\n' > .git/hooks/pre-commit; "
    "chmod +x .git/hooks/pre-commit; echo armed"
)


def git(*args: str, cwd: Path) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


@pytest.fixture
def repo(workspace: Path) -> Path:
    git("init", "-q", cwd=workspace)
    (workspace / "a.txt").write_text("a\n")
    git("add", "a.txt", cwd=workspace)
    git("commit", "-qm", "first", cwd=workspace)
    return workspace


async def run(sandbox: Sandbox, ctx: ToolContext, command: str) -> ToolResult:
    tool = RunCommandTool(sandbox=sandbox, kill_grace=0.5)
    return await tool.execute(RunCommandArgs(command=command, timeout=20), ctx)


def armed(git_dir: Path) -> bool:
    config = (git_dir / "config").read_text()
    return "fsmonitor" in config or (git_dir / "hooks" / "pre-commit").exists()


async def test_local_command_arming_git_is_reverted_with_a_warning(
    repo: Path, ctx: ToolContext
) -> None:
    config_before = (repo / ".git" / "config").read_bytes()
    sample = next((repo / ".git" / "hooks").glob("*.sample"))
    sample_before = sample.read_bytes()
    result = await run(LocalSandbox(repo), ctx, ARM + f"; echo x >> .git/hooks/{sample.name}")
    assert "armed" in result.content
    assert (repo / ".git" / "config").read_bytes() == config_before
    assert not (repo / ".git" / "hooks" / "pre-commit").exists()
    assert sample.read_bytes() == sample_before
    assert "reverted" in result.content and ".git/config" in result.content
    assert ".git/hooks/pre-commit" in result.metadata["warnings"][0]
    git("status", cwd=repo)
    assert not (repo / "PWNED").exists()


async def test_local_command_leaving_git_alone_gets_no_warning(
    repo: Path, ctx: ToolContext
) -> None:
    result = await run(LocalSandbox(repo), ctx, "git status --short; echo b > b.txt")
    assert "warning" not in result.content
    assert "warnings" not in result.metadata


async def test_worktree_pointer_and_main_config_are_guarded(tmp_path: Path, repo: Path) -> None:
    tree = tmp_path / "tree"
    git("worktree", "add", "-q", str(tree), cwd=repo)
    pointer = (tree / ".git").read_bytes()
    ctx = ToolContext(workspace=tree)
    result = await run(
        LocalSandbox(tree),
        ctx,
        "git config core.fsmonitor 'touch PWNED'; mkdir -p evil; echo 'gitdir: evil' > .git",
    )
    assert not armed(repo / ".git")
    assert (tree / ".git").read_bytes() == pointer
    assert "reverted" in result.content


async def test_a_repository_the_command_creates_is_reported(
    workspace: Path, ctx: ToolContext
) -> None:
    result = await run(LocalSandbox(workspace), ctx, "git init -q")
    assert "created a git repository" in result.content


def test_guard_removes_a_hooks_folder_swapped_for_a_link(repo: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "hooks-elsewhere"
    elsewhere.mkdir()
    (elsewhere / "pre-commit").write_text("#!/bin/sh\n")
    guard = GitMetadataGuard(repo)
    hooks = repo / ".git" / "hooks"
    samples = sorted(p.name for p in hooks.iterdir())
    subprocess.run(["rm", "-rf", str(hooks)], check=True)
    hooks.symlink_to(elsewhere)
    report = guard.restore()
    assert report.changed
    assert not hooks.is_symlink()
    assert sorted(p.name for p in hooks.iterdir()) == samples


# --- the guard reads each file once while it does not change ----------------------------------


def _age(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every file of the test old enough to be trusted by its stat."""
    monkeypatch.setattr(git_guard, "RACY_NS", 0)
    time.sleep(0.05)  # past the kernel's timestamp granularity


def _counting_reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    reads: list[Path] = []
    real = Path.read_bytes

    def counted(self: Path) -> bytes:
        reads.append(self)
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", counted)
    return reads


def test_a_guard_reuses_what_the_previous_one_read(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _age(monkeypatch)
    first = GitMetadataGuard(repo)
    assert not first.restore().changed
    reads = _counting_reads(monkeypatch)
    second = GitMetadataGuard(repo, first)
    assert not second.restore().changed
    assert reads == []


def test_a_same_size_rewrite_keeping_the_mtime_is_still_reverted(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _age(monkeypatch)
    config = repo / ".git" / "config"
    first = GitMetadataGuard(repo)
    first.restore()
    guard = GitMetadataGuard(repo, first)
    before = config.read_bytes()
    info = config.stat()
    time.sleep(0.02)
    config.write_bytes(before.replace(b"bare = false", b"bare = fAlse"))
    os.utime(config, ns=(info.st_atime_ns, info.st_mtime_ns))
    assert config.stat().st_size == info.st_size and config.read_bytes() != before
    report = guard.restore()
    assert report.reverted == [".git/config"]
    assert config.read_bytes() == before


def test_a_file_changed_just_before_the_guard_is_not_trusted_by_its_stat(repo: Path) -> None:
    hook = repo / ".git" / "hooks" / "pre-push"
    hook.write_text("#!/bin/sh\nexit 0\n")
    guard = GitMetadataGuard(repo)
    saved = guard._saved[hook]
    assert saved is not None and saved.stamp is None


# --- bubblewrap -------------------------------------------------------------------------------


@needs_bwrap
async def test_bubblewrap_mounts_git_read_only(repo: Path, ctx: ToolContext) -> None:
    guard_free = BubblewrapSandbox(repo)
    result = await run(guard_free, ctx, ARM + "; git status --short; echo rc=$?")
    assert "Read-only file system" in result.content or "could not lock" in result.content
    assert "rc=0" in result.content  # reading the repository still works
    assert not armed(repo / ".git")
    assert "warning" not in result.content  # nothing got through to revert


@needs_bwrap
async def test_bubblewrap_keeps_a_worktree_pointer_read_only(tmp_path: Path, repo: Path) -> None:
    tree = tmp_path / "tree"
    git("worktree", "add", "-q", str(tree), cwd=repo)
    pointer = (tree / ".git").read_bytes()
    result = await run(
        BubblewrapSandbox(tree), ToolContext(workspace=tree), "echo 'gitdir: evil' > .git"
    )
    assert "Read-only file system" in result.content
    assert (tree / ".git").read_bytes() == pointer


def test_git_folder_named_by_a_pointer_inside_the_workspace_is_read_only(
    workspace: Path,
) -> None:
    inner = workspace / "meta"
    inner.mkdir()
    git("init", "-q", "--bare", str(inner), cwd=workspace)
    (workspace / ".git").write_text("gitdir: meta\n")
    paths = read_only_git_paths(workspace)
    assert str(workspace.resolve() / ".git") in paths
    assert str(inner.resolve()) in paths
