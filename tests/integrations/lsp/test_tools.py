"""`with_lsp` picks the tools to extend with diagnostics by their declared kind, not by name."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from journeyman.integrations.lsp import EditDiagnostics, LspConfig, LspManager, with_lsp
from journeyman.tools.base import FunctionTool, ToolKind, tool
from journeyman.tools.builtin import default_tools
from journeyman.tools.context import ToolContext
from journeyman.tools.registry import ToolRegistry


class NoArgs(BaseModel):
    pass


@tool(args=NoArgs, kind=ToolKind.EDIT, permission_arg="path")
def rewrite(args: NoArgs, ctx: ToolContext) -> str:
    """Rewrite a file."""
    return ""


def test_edit_kind_tools_are_wrapped_whatever_their_name(tmp_path: Path) -> None:
    impostor = FunctionTool(
        lambda args, ctx: "", name="edit_file", description="x", args_model=NoArgs
    )
    manager = LspManager(tmp_path, LspConfig(enabled=False))
    tools = {t.name: t for t in with_lsp([rewrite, impostor, *default_tools()[:1]], manager)}
    assert isinstance(tools["rewrite"], EditDiagnostics)
    assert tools["rewrite"].kind is ToolKind.EDIT  # the wrapper keeps the declaration
    assert tools["rewrite"].permission_arg == "path"
    assert tools["edit_file"] is impostor  # declares "other"
    assert not isinstance(tools["read_file"], EditDiagnostics)
    wrapped = {t.name for t in with_lsp(default_tools(), manager) if isinstance(t, EditDiagnostics)}
    assert wrapped == {"edit_file", "write_file"}


class ListsPaths(FunctionTool):
    @staticmethod
    def paths_of(args: object) -> list[str]:
        return ["a.py", "b.py"]


def test_the_wrapper_passes_on_the_paths_a_tool_lists(tmp_path: Path) -> None:
    inner = ListsPaths(
        lambda args, ctx: "",
        name="patcher",
        description="x",
        args_model=NoArgs,
        kind=ToolKind.EDIT,
    )
    manager = LspManager(tmp_path, LspConfig(enabled=False))
    wrapped, plain = with_lsp([inner, rewrite], manager)[:2]
    assert isinstance(wrapped, EditDiagnostics) and isinstance(plain, EditDiagnostics)
    assert wrapped.paths_of({}) == ["a.py", "b.py"]
    assert plain.paths_of({}) is None
    registry = ToolRegistry([wrapped, plain])
    assert registry.paths_of("patcher", {}) == ["a.py", "b.py"]
    assert registry.paths_of("rewrite", {}) is None
