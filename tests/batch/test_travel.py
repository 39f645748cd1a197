"""A task's workspace packed for a Ray worker, rebuilt there, and its changes brought back
into the driver's copy: real git, real tar archives, hostile archives refused."""

from __future__ import annotations

import asyncio
import io
import os
import subprocess
import tarfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from journeyman.batch.task_file import BatchTask, TaskFileError, check_workspaces
from journeyman.batch.travel import (
    TravelError,
    WorkspaceChanges,
    apply_changes,
    collect_changes,
    pack_workspace,
    safe_extract,
    snapshot,
    unpack_workspace,
)
from journeyman.batch.workspaces import prepare_workspace
from tests.batch.support import model as batch_model
from tests.batch.support import scheduler, settings_for, task_text
from tests.fakes.openai_server import FakeOpenAIServer
from tests.support.git_daemon import serve_git


def git(folder: Path, *args: str) -> str:
    names = {
        f"GIT_{who}_{what}": "t" for who in ("AUTHOR", "COMMITTER") for what in ("NAME", "EMAIL")
    }
    done = subprocess.run(
        ["git", "-C", str(folder), *args],
        env={**os.environ, **names},
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def repository(folder: Path) -> str:
    """A repository with two commits, then a working tree that differs from its HEAD in every
    way a setup step or an earlier attempt can leave it."""
    folder.mkdir()
    git(folder, "init", "-q")
    (folder / ".gitignore").write_text("build/\n")
    (folder / "kept.py").write_text("x = 1\n")
    (folder / "gone.py").write_text("y = 2\n")
    (folder / "edited.py").write_text("z = 3\n")
    git(folder, "add", "-A")
    git(folder, "commit", "-qm", "one")
    (folder / "later.py").write_text("w = 4\n")
    git(folder, "add", "-A")
    git(folder, "commit", "-qm", "two")
    (folder / "gone.py").unlink()
    (folder / "edited.py").write_text("z = 30\n")
    (folder / "new.txt").write_text("untracked\n")
    (folder / "build").mkdir()
    (folder / "build" / "out.bin").write_bytes(bytes(range(256)))
    (folder / "run.sh").write_text("#!/bin/sh\n")
    (folder / "run.sh").chmod(0o755)
    (folder / "link").symlink_to("kept.py")
    return git(folder, "rev-parse", "HEAD")


def test_a_repository_travels_as_a_bundle_with_its_working_tree(tmp_path: Path) -> None:
    head = repository(tmp_path / "driver")
    pack = pack_workspace(tmp_path / "driver", "task t1")
    assert pack.kind == "bundle" and pack.head == head and pack.removed == ("gone.py",)
    unpack_workspace(pack, tmp_path / "worker")
    assert git(tmp_path / "worker", "rev-parse", "HEAD") == head
    assert snapshot(tmp_path / "worker") == snapshot(tmp_path / "driver")
    assert git(tmp_path / "worker", "remote") == ""


def test_a_plain_folder_travels_as_an_archive(tmp_path: Path) -> None:
    source = tmp_path / "plain"
    (source / "empty").mkdir(parents=True)
    (source / "a.txt").write_text("a")
    (source / "tool").write_text("#!/bin/sh\n")
    (source / "tool").chmod(0o750)
    (source / "to-a").symlink_to("a.txt")
    pack = pack_workspace(source, "task t2")
    assert pack.kind == "tar"
    unpack_workspace(pack, tmp_path / "copy")
    assert snapshot(tmp_path / "copy") == snapshot(source)


def test_the_changes_of_a_task_reach_the_drivers_copy(tmp_path: Path) -> None:
    head = repository(tmp_path / "driver")
    pack = pack_workspace(tmp_path / "driver", "task t3")
    worker = tmp_path / "worker"
    unpack_workspace(pack, worker)
    before = snapshot(worker)
    (worker / "kept.py").write_text("x = 100\n")
    (worker / "later.py").unlink()
    (worker / "build").rename(worker / "renamed")
    (worker / "pkg").mkdir()
    (worker / "pkg" / "mod.py").write_text("m = 1\n")
    git(worker, "add", "kept.py")
    git(worker, "commit", "-qm", "the agent's commit")
    changes = collect_changes(worker, before, pack.head)
    assert changes.head is not None and changes.head != head
    apply_changes(changes, tmp_path / "driver")
    assert snapshot(tmp_path / "driver") == snapshot(worker)
    assert git(tmp_path / "driver", "rev-parse", "HEAD") == changes.head
    assert git(tmp_path / "driver", "log", "-1", "--format=%s") == "the agent's commit"
    # nothing changed: nothing to carry
    assert collect_changes(worker, snapshot(worker), changes.head).empty
    # HEAD moved back to a commit the driver holds: no bundle, the same end state
    before = snapshot(worker)
    git(worker, "reset", "-q", "--hard", head)
    back = collect_changes(worker, before, changes.head)
    assert back.commits == b"" and back.head == head
    apply_changes(back, tmp_path / "driver")
    assert git(tmp_path / "driver", "rev-parse", "HEAD") == head
    assert snapshot(tmp_path / "driver") == snapshot(worker)


def test_a_workspace_over_the_limit_is_refused_by_name_with_its_size(tmp_path: Path) -> None:
    big = tmp_path / "big"
    big.mkdir()
    (big / "data.bin").write_bytes(os.urandom(3 * 1024 * 1024))
    says = r"task big-one: its workspace is 3\.0 MB packed, over the 1\.0 MB limit"
    with pytest.raises(TravelError, match=says):
        pack_workspace(big, "task big-one: its workspace", max_bytes=1024 * 1024)


def archive(*members: tuple[str, str, str]) -> bytes:
    """A tar of (name, kind, data-or-link-target) members."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, kind, value in members:
            info = tarfile.TarInfo(name)
            if kind == "link":
                info.type, info.linkname = tarfile.SYMTYPE, value
                tar.addfile(info)
            elif kind == "device":
                info.type = tarfile.CHRTYPE
                tar.addfile(info)
            else:
                info.size = len(value)
                tar.addfile(info, io.BytesIO(value.encode()))
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("members", "says"),
    [
        ([("/tmp/owned", "file", "x")], "an absolute path"),
        ([("../owned", "file", "x")], "an absolute path or `..`"),
        ([("a/../../owned", "file", "x")], "`..`"),
        ([("up", "link", "../outside")], "leads outside the workspace"),
        ([("abs", "link", "/etc/passwd")], "leads outside the workspace"),
        ([("d", "link", "."), ("d/../../x", "file", "x")], "`..`"),
        ([("via", "link", "sub"), ("via/f", "file", "x")], "on its way is a link"),
        ([("tty", "device", "")], "not a file, folder or link"),
    ],
)
def test_a_hostile_archive_is_refused_by_name(
    tmp_path: Path, members: list[tuple[str, str, str]], says: str
) -> None:
    target = tmp_path / "ws"
    target.mkdir()
    (target / "sub").mkdir()
    with pytest.raises(TravelError, match="refused"):
        safe_extract(archive(*members), target)
    with pytest.raises(TravelError, match=says.replace("`", ".").replace(".", r"\.?")):
        safe_extract(archive(*members), target)
    assert not (tmp_path / "owned").exists() and not list((target / "sub").iterdir())


def test_changes_never_write_through_a_link_left_in_the_drivers_copy(tmp_path: Path) -> None:
    """A link the driver's copy holds (say, to a folder outside) is replaced, not followed."""
    outside = tmp_path / "outside"
    outside.mkdir()
    driver = tmp_path / "driver"
    driver.mkdir()
    (driver / "out").symlink_to(outside)
    changes = WorkspaceChanges(archive(("out", "file", "now a file")), removed=())
    apply_changes(changes, driver)
    assert not (driver / "out").is_symlink() and (driver / "out").read_text() == "now a file"
    assert not list(outside.iterdir())


@pytest.fixture
def git_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    served = tmp_path / "served"
    served.mkdir()
    with serve_git(served) as base_url:
        yield base_url, served


def test_a_repository_given_by_url_is_cloned_for_its_task_and_travels_as_its_url(
    tmp_path: Path, git_server: tuple[str, Path]
) -> None:
    base_url, served = git_server
    head = repository(served / "project")
    git(served / "project", "stash", "--include-untracked")  # only its commits are served
    url = f"{base_url}/project"
    task = BatchTask(id="u1", task="t", workspace=url, base_commit=head)
    check_workspaces([("tasks.jsonl:1", task)])
    with pytest.raises(TaskFileError, match="is a repository URL, which needs a base_commit"):
        check_workspaces([("tasks.jsonl:2", BatchTask(id="u2", task="t", workspace=url))])

    copy = prepare_workspace(task, tmp_path / "workspaces")
    assert git(copy, "rev-parse", "HEAD") == head
    pack = pack_workspace(copy, "task u1", url=url)
    assert (pack.kind, pack.url, pack.head, pack.size) == ("url", url, head, 0)
    unpack_workspace(pack, tmp_path / "worker")
    assert snapshot(tmp_path / "worker") == snapshot(copy)
    assert git(tmp_path / "worker", "rev-parse", "HEAD") == head

    (copy / "kept.py").write_text("changed by an earlier attempt\n")
    assert pack_workspace(copy, "task u1", url=url).kind == "bundle"  # its changes travel too


def test_unpacked_files_lose_set_id_bits(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo("tool")
        info.size, info.mode, info.uid, info.uname = 2, 0o6755, 0, "root"
        tar.addfile(info, io.BytesIO(b"#!"))
    safe_extract(buffer.getvalue(), tmp_path)
    assert (tmp_path / "tool").stat().st_mode & 0o7777 == 0o755
    assert (tmp_path / "tool").stat().st_uid == os.getuid()


def test_a_local_batch_runs_a_task_whose_workspace_is_a_url(
    tmp_path: Path,
    git_server: tuple[str, Path],
    fake_openai: FakeOpenAIServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-batch")
    monkeypatch.setenv("JOURNEYMAN_EDIT_TOOL", "edit_file")
    fake_openai.default = batch_model
    base_url, served = git_server
    head = repository(served / "project")
    task = BatchTask(
        id="from-url", task=task_text(1), workspace=f"{base_url}/project", base_commit=head
    )
    settings = replace(settings_for(tmp_path, fake_openai), keep="all")
    summary = asyncio.run(scheduler([task], settings).run())
    assert summary.all_succeeded, summary.results
    copy = tmp_path / "out" / "workspaces" / "from-url" / "attempt-1"
    assert git(copy, "rev-parse", "HEAD") == head and (copy / "step1.txt").exists()
    assert not (served / "project" / "step1.txt").exists()
