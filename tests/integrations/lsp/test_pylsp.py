"""The manager and the agent tools against a real python-lsp-server on the fixture project."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from journeyman.core.messages import ToolCall, ToolResult
from journeyman.integrations.lsp import LspManager, with_lsp
from journeyman.tools.builtin import default_tools
from journeyman.tools.context import ToolContext
from journeyman.tools.registry import ToolRegistry

from .conftest import builtin, needs_pylsp, only

pytestmark = [needs_pylsp, pytest.mark.slow]


async def call(registry: ToolRegistry, ctx: ToolContext, name: str, **arguments: Any) -> ToolResult:
    return await registry.execute(ToolCall(f"id-{name}", name, arguments), ctx, timeout=60)


async def test_navigation_across_files(project: Path) -> None:
    async with only(builtin("pylsp"), project) as manager:
        # `area` used in main.py is defined in shapes.py
        found = await manager.definition("pkg/main.py", 5, 12)
        assert found.ok and found.server == "pylsp", found.problem
        assert [(d.path, d.line, d.column) for d in found.value] == [("pkg/shapes.py", 4, 5)]
        assert found.value[0].preview.startswith("def area(")

        refs = await manager.references("pkg/shapes.py", 4, 5)
        assert refs.ok, refs.problem
        assert {(r.path, r.line) for r in refs.value} == {
            ("pkg/shapes.py", 4),
            ("pkg/shapes.py", 14),
            ("pkg/main.py", 1),
            ("pkg/main.py", 5),
        }
        refs = await manager.references("pkg/shapes.py", 4, 5, include_declaration=False)
        assert ("pkg/shapes.py", 4) not in {(r.path, r.line) for r in refs.value}

        hover = await manager.hover("pkg/main.py", 5, 12)
        assert hover.ok and hover.value is not None
        assert "area(width: int, height: int) -> int" in hover.value.text
        assert "Area of a rectangle." in hover.value.text

        symbols = await manager.symbols("", "pkg/shapes.py")
        names = {(s.kind, s.name, s.container) for s in symbols.value}
        assert {("function", "area", None), ("class", "Square", None)} <= names
        assert ("method", "size", "Square") in names

        status = {s.name: s for s in manager.status()}["pylsp"]
        assert status.running and status.pid is not None
        assert {"definition", "references", "hover", "diagnostics"} <= set(status.capabilities)

        # a line past the end of the file is refused without bothering the server
        beyond = await manager.definition("pkg/main.py", 99, 1)
        assert not beyond.ok and "has 6 lines" in (beyond.problem or "")


async def test_tools_and_diagnostics_after_edits(project: Path) -> None:
    manager = only(builtin("pylsp"), project)
    registry = ToolRegistry(with_lsp(default_tools(), manager))
    ctx = ToolContext(project)
    try:
        # nothing runs yet, so an edit gets no diagnostics (and starts nothing)
        quiet = await call(
            registry, ctx, "edit_file", path="pkg/main.py", old_string="2, 3", new_string="3, 2"
        )
        assert not quiet.is_error and "pylsp" not in quiet.content
        assert manager.running_for(project / "pkg/main.py") is None

        found = await call(
            registry, ctx, "lsp_definition", path="pkg/main.py", line=5, symbol="area"
        )
        assert not found.is_error, found.content
        assert "pkg/shapes.py:4:5  def area(width: int, height: int) -> int:" in found.content
        assert found.metadata["server"] == "pylsp"

        refs = await call(
            registry, ctx, "lsp_references", path="pkg/shapes.py", line=9, symbol="Square"
        )
        assert "3 references to 'Square' (pkg/shapes.py:9:7) in 2 files:" in refs.content
        assert "pkg/main.py:1:" in refs.content and "pkg/main.py:5:" in refs.content

        hover = await call(registry, ctx, "lsp_hover", path="pkg/shapes.py", line=13, column=9)
        assert "size" in hover.content and not hover.is_error

        symbols = await call(registry, ctx, "lsp_symbols", query="squ")
        assert "class Square  pkg/shapes.py:9:" in symbols.content

        clean = await call(registry, ctx, "lsp_diagnostics", path="pkg/shapes.py")
        assert clean.content == "no problems reported in pkg/shapes.py"

        # the server now runs: an edit that breaks main.py reports it ...
        broken = await call(
            registry, ctx, "edit_file",
            path="pkg/main.py", old_string="return area(3, 2)", new_string="return aera(3, 2)",
        )  # fmt: skip
        assert not broken.is_error
        assert "pylsp reports 1 error" in broken.content, broken.content
        assert "5:12 error: undefined name 'aera' [pyflakes]" in broken.content
        assert broken.metadata["lsp"]["errors"] == 1
        assert (
            (ctx.workspace / "pkg/main.py")
            .read_text()
            .endswith("return aera(3, 2) + Square(4).size()\n")
        )

        listed = await call(registry, ctx, "lsp_diagnostics", path="pkg/main.py")
        assert "pkg/main.py:5:12 error: undefined name 'aera'" in listed.content

        # ... and the fix clears it; write_file gets the same treatment
        fixed = await call(
            registry, ctx, "write_file", path="pkg/main.py",
            content=(project / "pkg/main.py").read_text().replace("aera", "area"),
        )  # fmt: skip
        assert not fixed.is_error
        assert fixed.content.endswith("pylsp: no problems reported in pkg/main.py"), fixed.content

        missing = await call(
            registry, ctx, "lsp_definition", path="pkg/main.py", line=5, symbol="nope"
        )
        assert missing.is_error and "'nope' does not occur on line 5" in missing.content
        outside = await call(registry, ctx, "lsp_hover", path="../x.py", line=1, column=1)
        assert outside.is_error
    finally:
        await manager.aclose()
    assert manager.running_for(project / "pkg/main.py") is None


async def test_many_diagnostics_are_bounded(project: Path) -> None:
    manager = only(builtin("pylsp"), project, edit_diagnostics=3)
    registry = ToolRegistry(with_lsp(default_tools(), manager))
    ctx = ToolContext(project)
    async with manager:
        await call(registry, ctx, "lsp_diagnostics", path="pkg/main.py")
        body = "".join(f"x{i} = undefined_{i}\n" for i in range(8))
        result = await call(registry, ctx, "write_file", path="pkg/main.py", content=body)
    assert "pylsp reports 8 errors" in result.content, result.content
    shown = [line for line in result.content.splitlines() if "error: undefined name" in line]
    assert len(shown) == 3
    assert "... and 5 more (lsp_diagnostics lists them all)" in result.content


async def test_workspace_without_pyright_uses_the_pylsp_fallback(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(Path(project)))  # hides pyright-langserver, if installed
    manager = LspManager(project)
    assert manager.server_for("pkg/main.py") == "pylsp"  # found beside the running Python
    status = {s.name: s for s in manager.status()}
    assert not status["pyright"].installed and status["pylsp"].shadowed_by is None
    assert status["pylsp"].detected and status["pylsp"].markers == ["pyproject.toml"]
    await manager.aclose()


async def test_an_agent_with_lsp_offers_the_tools_and_reports_diagnostics(
    project: Path, tmp_path: Path
) -> None:
    from journeyman import Agent, AgentConfig, FinishReason
    from journeyman.core.messages import Usage
    from journeyman.providers.base import ModelResponse
    from journeyman.providers.scripted import ScriptedProvider

    def turn(call: ToolCall) -> ModelResponse:
        return ModelResponse(text="", tool_calls=(call,), usage=Usage(10, 5))

    edit = {"path": "pkg/main.py", "old_string": "area(2, 3)", "new_string": "aera(2, 3)"}
    provider = ScriptedProvider(
        [
            turn(ToolCall("c1", "lsp_hover", {"path": "pkg/main.py", "line": 5, "symbol": "area"})),
            turn(ToolCall("c2", "edit_file", edit)),
            turn(ToolCall("c3", "finish", {"summary": "done"})),
        ]
    )
    manager = only(builtin("pylsp"), project)
    agent = Agent(
        provider,
        workspace=project,
        config=AgentConfig(session_dir=tmp_path / "s", verify=False),
        lsp=manager,
    )
    assert "lsp_hover" not in agent.registry.names  # offered while connected (during a run)
    result = await agent.run("look at area, then break it")

    assert result.finish_reason is FinishReason.COMPLETED, result.error
    assert "lsp_hover" in {spec.name for spec in provider.requests[0].tools}
    seen = provider.requests[-1].messages
    results = {m.tool_result.call_id: m.tool_result for m in seen if m.tool_result is not None}
    assert "Area of a rectangle." in results["c1"].content
    assert "undefined name 'aera'" in results["c2"].content
    assert manager.running_for(project / "pkg/main.py") is None  # stopped when the run ended
