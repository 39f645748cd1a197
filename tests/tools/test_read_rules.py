"""Listing and search tools leave out what the user's read rules cover, and say so.

The policy's `unreadable` reaches the tools through `ToolContext.unreadable`; each tool is run
on a real folder with both grep engines.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from journeyman.policy.permissions import PermissionPolicy
from journeyman.tools.context import ToolContext
from journeyman.tools.listing import GlobArgs, GlobTool, ListFilesArgs, ListFilesTool
from journeyman.tools.search import GrepArgs, GrepTool, find_ripgrep

SECRET = "hunter2-do-not-leak"
ENGINES = [
    pytest.param(True, marks=pytest.mark.skipif(find_ripgrep() is None, reason="no rg")),
    False,
]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "secrets" / "deep").mkdir(parents=True)
    (ws / "secrets" / "api.txt").write_text(f"TOKEN={SECRET}\n")
    (ws / "secrets" / "deep" / "db.txt").write_text(f"TOKEN={SECRET}\n")
    (ws / ".env").write_text(f"TOKEN={SECRET}\n")
    (ws / "src").mkdir()
    (ws / "src" / "app.py").write_text("TOKEN = os.environ['TOKEN']\n")
    (ws / "src" / "notes.txt").write_text("no token here\n")
    os.symlink("../secrets/api.txt", ws / "src" / "link.txt")
    return ws


def context(ws: Path, deny: list[str]) -> ToolContext:
    policy = PermissionPolicy("default", deny=deny, workspace=ws)
    return ToolContext(ws, unreadable=policy.unreadable)


DENY = ["read_file(secrets/**)", "read_file(.env)"]


@pytest.mark.parametrize("use_ripgrep", ENGINES)
async def test_grep_over_the_workspace_leaves_out_what_read_rules_cover(
    project: Path, use_ripgrep: bool
) -> None:
    result = await GrepTool(use_ripgrep=use_ripgrep).execute(
        GrepArgs(pattern="TOKEN"), context(project, DENY)
    )
    assert SECRET not in result.content
    assert "src/app.py:1:" in result.content
    assert "2 paths the deny rule `read_file(secrets/**)` covers" in result.content
    assert "1 path the deny rule `read_file(.env)` covers" in result.content
    assert result.metadata["count"] == 1


@pytest.mark.parametrize("use_ripgrep", ENGINES)
async def test_without_rules_grep_finds_everything(project: Path, use_ripgrep: bool) -> None:
    result = await GrepTool(use_ripgrep=use_ripgrep).execute(
        GrepArgs(pattern="TOKEN"), ToolContext(project)
    )
    assert SECRET in result.content and "left out" not in result.content


@pytest.mark.parametrize("use_ripgrep", ENGINES)
async def test_a_search_that_finds_only_covered_files_says_why_it_is_empty(
    project: Path, use_ripgrep: bool
) -> None:
    result = await GrepTool(use_ripgrep=use_ripgrep).execute(
        GrepArgs(pattern=SECRET), context(project, DENY)
    )
    assert result.metadata["count"] == 0 and not result.is_error
    assert SECRET not in result.content.replace(repr(SECRET), "")
    assert "left out" in result.content


@pytest.mark.parametrize("recursive", [True, False])
async def test_listings_leave_out_covered_files_and_folders(project: Path, recursive: bool) -> None:
    result = await ListFilesTool().execute(
        ListFilesArgs(path=".", recursive=recursive), context(project, DENY)
    )
    lines = result.content.splitlines()
    assert not any(line.startswith(("secrets", ".env")) for line in lines)
    assert "src/" in lines
    assert "left out" in result.content


async def test_a_link_to_a_covered_file_is_left_out_too(project: Path) -> None:
    result = await ListFilesTool().execute(
        ListFilesArgs(path="src"), context(project, ["read_file(secrets/**)"])
    )
    assert "src/link.txt@" not in result.content and "src/app.py" in result.content


async def test_glob_leaves_out_covered_matches(project: Path) -> None:
    result = await GlobTool().execute(GlobArgs(pattern="**/*.txt"), context(project, DENY))
    assert "secrets/" not in result.content.split("[left out")[0]
    assert "src/notes.txt" in result.content
    assert "covers" in result.content


async def test_any_read_tools_path_rule_filters_the_others(project: Path) -> None:
    """A rule written for grep holds for listings too: rules go by what the tool does."""
    result = await ListFilesTool().execute(
        ListFilesArgs(path=".", recursive=True), context(project, ["grep(secrets/**)"])
    )
    assert "secrets/api.txt" not in result.content and "grep(secrets/**)" in result.content


async def test_edit_and_command_rules_do_not_filter_reading(project: Path) -> None:
    deny = ["write_file(secrets/**)", "run_command(cat *)", "read_file"]
    result = await GrepTool(use_ripgrep=False).execute(
        GrepArgs(pattern="TOKEN"), context(project, deny)
    )
    assert "secrets/api.txt" in result.content and "left out" not in result.content
