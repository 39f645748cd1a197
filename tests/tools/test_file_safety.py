"""What the file tools refuse or bound: .git, huge files, huge arguments, undecodable names."""

from __future__ import annotations

import json
import os
import tracemalloc
from pathlib import Path

import pytest

from journeyman.tools.context import FileChangeIntent
from journeyman.tools.fileio import MAX_EDIT_BYTES

from .conftest import CallTool

# --------------------------------------------------------------------------------------------
# .git is never written by a file tool


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("write_file", {"path": ".git/config", "content": "[core]\n\tfsmonitor = ./x\n"}),
        ("write_file", {"path": ".git/hooks/pre-commit", "content": "#!/bin/sh\nid\n"}),
        ("edit_file", {"path": ".git/hooks/post-checkout", "old_string": "", "new_string": "id"}),
        ("edit_file", {"path": ".git/config", "old_string": "bare", "new_string": "x"}),
        ("write_file", {"path": "vendor/lib/.git/config", "content": "x"}),
        ("write_file", {"path": ".GIT/config", "content": "x"}),
    ],
)
async def test_file_tools_refuse_writes_under_git(
    call: CallTool,
    workspace: Path,
    journal: list[FileChangeIntent],
    tool: str,
    arguments: dict[str, str],
) -> None:
    (workspace / ".git/hooks").mkdir(parents=True)
    config = workspace / ".git/config"
    config.write_text("[core]\n\tbare = false\n")
    result = await call(tool, **arguments)
    assert result.is_error
    assert "which file tools never change" in result.content
    assert ".git/" in result.content.lower()
    assert config.read_text() == "[core]\n\tbare = false\n"
    assert list((workspace / ".git/hooks").iterdir()) == []
    assert not (workspace / "vendor").exists()
    assert journal == []


async def test_git_protection_sees_through_symlinks(call: CallTool, workspace: Path) -> None:
    (workspace / ".git/hooks").mkdir(parents=True)
    (workspace / "hooks").symlink_to(".git/hooks")
    result = await call("write_file", path="hooks/pre-commit", content="#!/bin/sh\nid\n")
    assert result.is_error and ".git/hooks/pre-commit" in result.content
    assert not (workspace / ".git/hooks/pre-commit").exists()


async def test_files_named_like_git_are_still_editable(call: CallTool, workspace: Path) -> None:
    result = await call("write_file", path="docs/.gitignore", content="*.tmp\n")
    assert not result.is_error, result.content
    assert (workspace / "docs/.gitignore").read_text() == "*.tmp\n"


# --------------------------------------------------------------------------------------------
# Huge files and huge arguments


def _huge_file(path: Path) -> None:
    """A 2 GB sparse file: 2000 text lines (more than the binary sniff reads), then zeros (no
    disk space used)."""
    with path.open("wb") as fh:
        fh.write(b"".join(b"line %d\n" % i for i in range(1, 2001)))
        fh.truncate(2 * 1024**3)


async def test_read_file_of_huge_file_reads_only_its_page(call: CallTool, workspace: Path) -> None:
    _huge_file(workspace / "huge.log")
    tracemalloc.start()
    try:
        result = await call("read_file", path="huge.log", limit=3)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert not result.is_error, result.content
    assert result.content.splitlines()[:3] == ["     1\tline 1", "     2\tline 2", "     3\tline 3"]
    assert "offset=4" in result.content
    assert peak < 20 * 1024**2, f"read_file held {peak:,} bytes at once"


async def test_read_file_into_a_huge_line_is_bounded(call: CallTool, workspace: Path) -> None:
    _huge_file(workspace / "huge.log")
    tracemalloc.start()
    try:
        before = await call("read_file", path="huge.log", offset=1996)
        into = await call("read_file", path="huge.log", offset=2001)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert not before.is_error and not into.is_error, (before.content, into.content)
    assert before.content.splitlines()[4] == "  2000\tline 2000"
    assert "not all counted" in before.content and "offset=2001" in before.content
    shown = into.content.splitlines()
    assert shown[0].startswith("  2001\t") and "line cut" in shown[0]
    assert len(into.content) < 10_000
    assert peak < 20 * 1024**2, f"read_file held {peak:,} bytes at once"


async def test_read_file_counts_lines_past_a_page(call: CallTool, workspace: Path) -> None:
    (workspace / "a.txt").write_text("x\n" * 10 + "last")
    result = await call("read_file", path="a.txt", limit=4)
    assert "showing lines 1-4 of 11" in result.content
    assert result.metadata["total_lines"] == 11


@pytest.mark.parametrize("tool", ["edit_file", "write_file"])
async def test_editing_a_huge_file_is_refused_cheaply(
    call: CallTool, workspace: Path, journal: list[FileChangeIntent], tool: str
) -> None:
    _huge_file(workspace / "huge.log")
    arguments = (
        {"old_string": "line 1", "new_string": "line one"}
        if tool == "edit_file"
        else {"content": "small\n"}
    )
    tracemalloc.start()
    try:
        result = await call(tool, path="huge.log", **arguments)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.is_error
    assert f"{2 * 1024**3:,} bytes" in result.content
    assert f"{MAX_EDIT_BYTES:,}" in result.content and "run_command" in result.content
    assert peak < 20 * 1024**2, f"{tool} held {peak:,} bytes at once"
    assert journal == []
    assert os.path.getsize(workspace / "huge.log") == 2 * 1024**3


async def test_huge_content_is_refused_and_not_echoed(
    call: CallTool, workspace: Path, journal: list[FileChangeIntent]
) -> None:
    content = "x" * (MAX_EDIT_BYTES + 1)
    result = await call("write_file", path="big.txt", content=content)
    assert result.is_error and "too large" in result.content
    assert len(result.content) < 1000
    assert not (workspace / "big.txt").exists() and journal == []


async def test_huge_path_and_pattern_are_not_echoed(call: CallTool) -> None:
    for result in (
        await call("read_file", path="a/" * 500_000),
        await call("glob", pattern="/" + "x" * 1_000_000),
        await call("list_files", path="../" + "y" * 1_000_000),
        await call("grep", pattern="z" * 100_000),
        await call("grep", pattern="(" * 100_000),
    ):
        assert len(result.content) < 1000, result.content[:200]


# --------------------------------------------------------------------------------------------
# File names that are not UTF-8


@pytest.fixture
def bad_name(workspace: Path) -> Path:
    raw = os.fsencode(workspace) + b"/sub/bad\xff.txt"
    os.makedirs(os.fsencode(workspace) + b"/sub")
    try:
        with open(raw, "wb") as fh:
            fh.write(b"needle\n")
    except OSError as exc:  # e.g. a file system that insists on UTF-8 names
        pytest.skip(f"cannot create a non-UTF-8 file name here: {exc}")
    return Path(os.fsdecode(raw))


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("list_files", {"recursive": True}),
        ("glob", {"pattern": "**/*.txt"}),
        ("grep", {"pattern": "needle"}),
        ("read_file", {"path": "sub/nothere.txt"}),
    ],
)
async def test_non_utf8_names_come_back_escaped(
    call: CallTool, bad_name: Path, tool: str, arguments: dict[str, object]
) -> None:
    result = await call(tool, **arguments)
    result.content.encode("utf-8")  # what the store does: must not raise
    json.dumps(result.metadata, ensure_ascii=False).encode("utf-8")
    if tool != "read_file":
        assert "sub/bad\\xff.txt" in result.content


async def test_non_utf8_names_through_the_python_grep(
    call: CallTool, bad_name: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import journeyman.tools.search as search

    monkeypatch.setattr(search, "find_ripgrep", lambda: None)
    result = await call("grep", pattern="needle")
    assert "sub/bad\\xff.txt" in result.content
    result.content.encode("utf-8")
