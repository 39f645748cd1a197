"""No file tool reads, lists, searches or changes anything outside the workspace."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from journeyman.core.errors import ToolError
from journeyman.tools.context import ToolContext

from .conftest import SECRET, CallTool

# The name of each attack, and how to build the path from (workspace, outside).
ATTACKS: dict[str, Callable[[Path, Path], str]] = {
    "dotdot": lambda ws, out: f"../{out.name}/secret.txt",
    "absolute": lambda ws, out: str(out / "secret.txt"),
    "symlinked_file": lambda ws, out: "link_to_secret.txt",
    "symlinked_parent": lambda ws, out: "link_to_outside/secret.txt",
    "symlinked_parent_new_file": lambda ws, out: "link_to_outside/new.txt",
    "proc_root": lambda ws, out: f"/proc/self/root{out}/secret.txt",
}

# Per tool: the arguments that aim it at `target`.
CALLS: dict[str, Callable[[str], dict[str, Any]]] = {
    "read_file": lambda target: {"path": target},
    "write_file": lambda target: {"path": target, "content": "pwned\n"},
    "edit_file": lambda target: {"path": target, "old_string": "top", "new_string": "pwned"},
    "edit_file_create": lambda target: {"path": target, "old_string": "", "new_string": "pwned"},
    "list_files": lambda target: {"path": target},
    "glob": lambda target: {"pattern": "*", "path": target},
    "grep": lambda target: {"pattern": "secret", "path": target},
    "run_command": lambda target: {
        "command": "cat secret.txt; echo pwned > new.txt",
        "cwd": target,
    },
}

DIRECTORY_TOOLS = {"list_files", "glob", "run_command"}


@pytest.fixture
def armed(workspace: Path, outside: Path) -> Path:
    (workspace / "link_to_secret.txt").symlink_to(outside / "secret.txt")
    (workspace / "link_to_outside").symlink_to(outside)
    return workspace


def _snapshot(place: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(place.iterdir())}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
@pytest.mark.parametrize("tool", sorted(CALLS))
async def test_file_tools_refuse_paths_outside(
    call: CallTool, armed: Path, outside: Path, tool: str, attack: str
) -> None:
    target = ATTACKS[attack](armed, outside)
    if tool in DIRECTORY_TOOLS:
        # Aim directory tools at the directory that holds the secret.
        target = target.rsplit("/", 1)[0] if "/" in target else "link_to_outside"
    before = _snapshot(outside)
    result = await call(tool.removesuffix("_create"), **CALLS[tool](target))
    assert result.is_error, f"{tool} accepted {target!r}: {result.content}"
    assert "outside" in result.content or "'..'" in result.content
    assert "top secret" not in result.content
    assert _snapshot(outside) == before
    assert (outside / "secret.txt").read_text() == SECRET


async def test_writes_inside_symlinked_dir_target_stay_put(
    call: CallTool, armed: Path, outside: Path
) -> None:
    """Creating parents never follows a symlink out, however deep the new path."""
    result = await call("write_file", path="link_to_outside/a/b/c.txt", content="x")
    assert result.is_error
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


async def test_grep_does_not_follow_symlinks_while_walking(
    call: CallTool, armed: Path, outside: Path
) -> None:
    (armed / "inside.txt").write_text("no secrets here\n")
    result = await call("grep", pattern="secret")
    assert result.content == "inside.txt:1: no secrets here"


async def test_glob_and_list_do_not_descend_symlinked_dirs(call: CallTool, armed: Path) -> None:
    listing = await call("list_files", recursive=True)
    assert "link_to_outside/secret.txt" not in listing.content
    found = await call("glob", pattern="**/*.txt")
    assert "secret" not in found.content.replace("link_to_secret.txt", "")


# --------------------------------------------------------------------------------------------
# Property: whatever string the model sends, resolve() stays inside or refuses.

SEGMENTS = st.sampled_from(
    ["..", ".", "", "a", "b", "link", "loop", "~", "...", "a..b", "/", "//", "\\", "\x00", "-"]
)


@pytest.fixture(scope="module")
def property_workspace(tmp_path_factory: pytest.TempPathFactory) -> tuple[ToolContext, Path]:
    base = tmp_path_factory.mktemp("confine")
    root = base / "ws"
    (root / "a" / "b").mkdir(parents=True)
    (base / "outside").mkdir()
    (root / "link").symlink_to(base / "outside")
    (root / "a" / "up").symlink_to("../..")
    (root / "loop").symlink_to("loop")
    return ToolContext(workspace=root), base / "outside"


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(SEGMENTS, max_size=8), absolute=st.booleans())
def test_resolve_never_escapes(
    property_workspace: tuple[ToolContext, Path], parts: list[str], absolute: bool
) -> None:
    ctx, _ = property_workspace
    raw = "/".join(parts)
    if absolute:
        raw = f"{ctx.workspace}/{raw}"
    try:
        resolved = ctx.resolve(raw)
    except ToolError:
        return
    assert resolved == ctx.workspace or ctx.workspace in resolved.parents


@settings(max_examples=200, deadline=None)
@given(raw=st.text(max_size=30))
def test_resolve_never_escapes_arbitrary_text(
    property_workspace: tuple[ToolContext, Path], raw: str
) -> None:
    ctx, _ = property_workspace
    try:
        resolved = ctx.resolve(raw)
    except (ToolError, ValueError, OSError):
        return
    assert resolved == ctx.workspace or ctx.workspace in resolved.parents
