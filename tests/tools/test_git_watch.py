"""The git guard skips its walk of the workspace while an inotify watch saw no folder change
(`FolderWatch`), and runs the work around a command on the event loop then. These tests check
that nothing the full walk caught slips past the shortcut: a repository created deep in a
folder listed long ago, one created between two commands by a process left running, a
nested repository's config appended to in place, a folder replaced by another at the same
path. Each attack is one the walk-every-time guard caught (see test_git_nested.py)."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import journeyman.tools.watch as watch_module
from journeyman.tools.context import ToolContext
from journeyman.tools.sandbox import LocalSandbox
from journeyman.tools.sandbox.git_scan import read_config
from journeyman.tools.shell import RunCommandArgs, RunCommandTool
from journeyman.tools.watch import FolderWatch

from .test_git_nested import host_git

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def folders(root: Path) -> dict[str, int]:
    found = {str(root): root.stat().st_ino}
    found |= {str(p): p.stat().st_ino for p in root.rglob("*") if p.is_dir()}
    return found


def test_a_watch_settles_after_a_scan_that_added_no_watch(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    watch = FolderWatch()
    assert not watch.settled()  # nothing watched yet
    watch.cover(folders(tmp_path))
    assert not watch.settled()  # the scan before this cover was not watched
    watch.cover(folders(tmp_path))
    assert watch.quiet() and watch.settled()


def test_entries_added_or_removed_unsettle_it_and_file_writes_do_not(tmp_path: Path) -> None:
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    (deep / "f.txt").write_text("x")
    watch = FolderWatch()
    watch.cover(folders(tmp_path))
    watch.cover(folders(tmp_path))
    (deep / "f.txt").write_text("changed")
    assert watch.quiet() and watch.settled()
    (deep / "new.txt").write_text("x")
    assert not watch.quiet()
    assert not watch.settled()
    watch.cover(folders(tmp_path))
    assert watch.settled()
    (deep / "new.txt").unlink()
    assert not watch.settled()


def test_a_folder_replaced_at_the_same_path_is_watched_again(tmp_path: Path) -> None:
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    watch = FolderWatch()
    watch.cover(folders(tmp_path))
    watch.cover(folders(tmp_path))
    shutil.rmtree(deep)
    deep.mkdir()  # the file system may give it the old inode number
    assert not watch.settled()
    watch.cover(folders(tmp_path))
    assert not watch.settled()  # a watch was added for the new folder: the next scan is full
    watch.cover(folders(tmp_path))
    assert watch.settled()
    (deep / "x").write_text("x")
    assert not watch.settled()


def test_a_watch_past_its_share_of_the_users_watches_gives_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Watching more folders than its share of the user's inotify watches would leave the
    user's editor without any: the watch stops, and every scan walks again."""
    for name in ("a", "b", "c", "d"):
        (tmp_path / name).mkdir()
    monkeypatch.setattr(watch_module, "watch_budget", lambda: 3)
    watch = FolderWatch()
    for _ in range(3):
        watch.cover(folders(tmp_path))
        assert not watch.settled()
    assert watch._fd is None  # the inotify instance and its watches are given back


def test_the_share_follows_the_users_limit() -> None:
    assert 0 < watch_module.watch_budget() <= watch_module.MAX_FOLDERS


def count_thread_hops(monkeypatch: pytest.MonkeyPatch) -> list[Callable[..., Any]]:
    hops: list[Callable[..., Any]] = []
    real = asyncio.to_thread

    async def counted(func: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        hops.append(func)
        return await real(func, *args, **kwargs)

    monkeypatch.setattr(asyncio, "to_thread", counted)
    return hops


async def settled_tool(workspace: Path) -> tuple[RunCommandTool, ToolContext]:
    """A tool that ran enough commands in `workspace` for its watch to settle."""
    tool = RunCommandTool(sandbox=LocalSandbox(workspace), kill_grace=0.5)
    ctx = ToolContext(workspace=workspace)
    for _ in range(2):
        await tool.execute(RunCommandArgs(command="true"), ctx)
    time.sleep(0.15)  # past the racy window, so the last scan's folders are trusted
    await tool.execute(RunCommandArgs(command="true"), ctx)
    assert tool._guards[ctx.workspace].cheap()
    return tool, ctx


async def test_quiet_commands_stay_on_the_event_loop(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (workspace / "src" / "pkg").mkdir(parents=True)
    (workspace / "src" / "pkg" / "out.txt").write_text("")
    host_git("init", "-q", cwd=workspace)
    tool, ctx = await settled_tool(workspace)
    hops = count_thread_hops(monkeypatch)
    result = await tool.execute(RunCommandArgs(command="echo hi > src/pkg/out.txt"), ctx)
    assert "exit code 0" in result.content
    assert hops == []
    await tool.execute(RunCommandArgs(command="mkdir src/pkg/more"), ctx)
    assert len(hops) == 1  # the walk after a folder changed runs off the loop


async def test_a_deep_new_repository_is_found_after_quiet_commands(
    workspace: Path, tmp_path: Path
) -> None:
    (workspace / "a" / "b" / "c").mkdir(parents=True)
    tool, ctx = await settled_tool(workspace)
    marker = tmp_path / "MARK"
    command = f"cd a/b/c && git init -q && git config core.fsmonitor 'touch {marker}; false'"
    result = await tool.execute(RunCommandArgs(command=command), ctx)
    assert "core.fsmonitor" in result.metadata["warnings"][0]
    host_git("status", cwd=workspace / "a" / "b" / "c")
    assert not marker.exists()


async def test_a_repository_made_between_commands_is_found_by_the_next_one(
    workspace: Path, tmp_path: Path
) -> None:
    (workspace / "lib").mkdir()
    tool, ctx = await settled_tool(workspace)
    marker = tmp_path / "MARK"
    host_git("init", "-q", cwd=workspace / "lib")  # as a process left running would
    host_git("config", "alias.pwn", f"!touch {marker}", cwd=workspace / "lib")
    result = await tool.execute(RunCommandArgs(command="true"), ctx)
    assert "alias.pwn" in result.metadata["warnings"][0]
    host_git("pwn", cwd=workspace / "lib")
    assert not marker.exists()


async def test_a_nested_config_appended_in_place_is_disarmed(
    workspace: Path, tmp_path: Path
) -> None:
    host_git("init", "-q", "lib", cwd=workspace)
    tool, ctx = await settled_tool(workspace)
    marker = tmp_path / "MARK"
    # an append writes the file where it is: no folder's listing changes
    line = f"printf '[core]\\n\\tfsmonitor = \"touch {marker}; false\"\\n' >> lib/.git/config"
    result = await tool.execute(RunCommandArgs(command=line), ctx)
    assert "core.fsmonitor" in result.metadata["warnings"][0]
    kept = read_config(workspace / "lib" / ".git" / "config") or []
    assert all(key != "core.fsmonitor" for key, _ in kept)
    subprocess.run(["git", "status"], cwd=workspace / "lib", capture_output=True, check=False)
    assert not marker.exists()
