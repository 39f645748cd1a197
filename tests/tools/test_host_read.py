"""`read_host_file`: what the host reads of a workspace is a regular file inside it, bounded."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from journeyman.tools.host_read import RefusedFile, read_host_file


def read(path: Path, workspace: Path | None, limit: int = 1000) -> bytes:
    return read_host_file(path, limit=limit, inside=None if workspace is None else [workspace])


def test_a_regular_file_and_a_link_inside_are_read(workspace: Path) -> None:
    (workspace / "docs").mkdir()
    (workspace / "docs" / "rules.md").write_text("rules")
    (workspace / "AGENTS.md").symlink_to("docs/rules.md")
    assert read(workspace / "docs" / "rules.md", workspace) == b"rules"
    assert read(workspace / "AGENTS.md", workspace) == b"rules"


@pytest.mark.parametrize("how", ["file link", "folder link", "absolute link", "link chain"])
def test_links_out_of_the_workspace_are_refused(how: str, workspace: Path, outside: Path) -> None:
    target = outside / "secret.txt"
    if how == "file link":
        (workspace / "AGENTS.md").symlink_to(os.path.relpath(target, workspace))
        path = workspace / "AGENTS.md"
    elif how == "folder link":
        (workspace / "docs").symlink_to(outside)
        path = workspace / "docs" / "secret.txt"
    elif how == "absolute link":
        (workspace / "AGENTS.md").symlink_to(target)
        path = workspace / "AGENTS.md"
    else:
        (workspace / "a").symlink_to("b")
        (workspace / "b").symlink_to(target)
        path = workspace / "a"
    with pytest.raises(RefusedFile, match="links outside the workspace"):
        read(path, workspace)
    assert read(path, None) == target.read_bytes()  # a file of the user's own may link anywhere


def test_special_files_are_refused_without_blocking(workspace: Path) -> None:
    os.mkfifo(workspace / "fifo")
    (workspace / "folder").mkdir()
    (workspace / "zero").symlink_to("/dev/zero")
    with pytest.raises(RefusedFile, match="a FIFO"):
        read(workspace / "fifo", workspace)
    with pytest.raises(RefusedFile, match="a folder"):
        read(workspace / "folder", workspace)
    with pytest.raises(RefusedFile, match="a device"):
        read(workspace / "zero", None)


def test_a_file_over_the_limit_is_refused_and_a_missing_one_is_not_found(
    workspace: Path,
) -> None:
    (workspace / "big").write_bytes(b"x" * 1001)
    (workspace / "fits").write_bytes(b"x" * 1000)
    with pytest.raises(RefusedFile, match="1,001 bytes, over the 1,000-byte limit"):
        read(workspace / "big", workspace)
    assert len(read(workspace / "fits", workspace)) == 1000
    with pytest.raises(FileNotFoundError):
        read(workspace / "missing", workspace)
    (workspace / "dangling").symlink_to("missing")
    with pytest.raises(FileNotFoundError):
        read(workspace / "dangling", workspace)
