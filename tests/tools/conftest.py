"""Shared fixtures: a workspace, a directory outside it, and a way to call tools by name."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from journeyman.core.messages import ToolCall, ToolResult
from journeyman.tools.builtin import default_tools
from journeyman.tools.context import FileChangeIntent, ToolContext
from journeyman.tools.registry import ToolRegistry

CallTool = Callable[..., Awaitable[ToolResult]]

SECRET = "top secret\n"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory next to the workspace holding a file no tool may read or change."""
    place = tmp_path / "outside"
    place.mkdir()
    (place / "secret.txt").write_text(SECRET)
    return place


@pytest.fixture
def ctx(workspace: Path) -> ToolContext:
    return ToolContext(workspace=workspace)


@pytest.fixture
def journal(ctx: ToolContext) -> list[FileChangeIntent]:
    """The file changes the tools report to the run's journal (attached to `ctx`)."""
    changes: list[FileChangeIntent] = []
    ctx.journal = changes.append
    return changes


@pytest.fixture
def registry() -> ToolRegistry:
    return ToolRegistry(default_tools())


@pytest.fixture
def call(registry: ToolRegistry, ctx: ToolContext) -> CallTool:
    """`await call("read_file", path="x")` runs one call through the registry (validating it)."""

    async def run(name: str, /, **arguments: Any) -> ToolResult:
        tool_call = ToolCall(id="call-1", name=name, arguments=arguments)
        return await registry.execute(tool_call, ctx, 30)

    return run
