"""The default tool set, its schemas, and the finish tool."""

from __future__ import annotations

import importlib.util

import pytest
from pydantic import BaseModel

from journeyman.core.messages import ToolCall, ToolResult
from journeyman.tools import builtin
from journeyman.tools.base import BaseTool, Tool, ToolKind, tool, tool_spec
from journeyman.tools.builtin import default_tools
from journeyman.tools.context import ToolContext
from journeyman.tools.registry import ToolRegistry

from .conftest import CallTool

EXPECTED = [
    "read_file",
    "list_files",
    "glob",
    "grep",
    "edit_file",
    "write_file",
    "run_command",
    "finish",
]
READ_ONLY = {"read_file", "list_files", "glob", "grep", "finish"}


def test_default_tools_names_and_flags() -> None:
    tools = default_tools()
    assert [t.name for t in tools] == EXPECTED
    for t in tools:
        assert isinstance(t, Tool)
        assert t.read_only is (t.name in READ_ONLY)
        assert t.parallel_safe is (t.name in READ_ONLY - {"finish"})
    assert default_tools()[0] is not tools[0]  # fresh instances each time


@pytest.mark.parametrize("tool", default_tools(), ids=lambda t: t.name)
def test_every_argument_is_described(tool: Tool) -> None:
    spec = tool_spec(tool)
    assert spec.description
    assert spec.parameters["type"] == "object"
    assert spec.parameters.get("additionalProperties") is False
    model: type[BaseModel] = tool.args_model
    for name, field in model.model_fields.items():
        assert field.description, f"{tool.name}.{name} has no description"
        assert spec.parameters["properties"][name]["description"] == field.description


def test_registry_accepts_the_default_set() -> None:
    registry = ToolRegistry(default_tools())
    assert registry.names == EXPECTED
    assert registry.is_parallel_safe(ToolCall("1", "grep", {}))
    assert not registry.is_parallel_safe(ToolCall("1", "edit_file", {}))


async def test_finish_terminates_with_the_summary(call: CallTool) -> None:
    result = await call("finish", summary="  Fixed the bug; tests pass.  ")
    assert result.terminate is True
    assert not result.is_error
    assert result.content == "Fixed the bug; tests pass."
    assert result.call_id == "call-1"


async def test_finish_needs_a_summary(call: CallTool, ctx: ToolContext) -> None:
    for blank in ("", "   "):
        result = await call("finish", summary=blank)
        assert result.is_error and not result.terminate
    missing = await call("finish")
    assert missing.is_error and "summary" in missing.content


DECLARED = {
    "read_file": (ToolKind.READ, "path"),
    "list_files": (ToolKind.READ, "path"),
    "glob": (ToolKind.READ, "path"),
    "grep": (ToolKind.READ, "path"),
    "edit_file": (ToolKind.EDIT, "path"),
    "write_file": (ToolKind.EDIT, "path"),
    "run_command": (ToolKind.COMMAND, "command"),
    "finish": (ToolKind.FINISH, None),
}
"""What each built-in tool declares (list_files and glob are matched on their JSON arguments
until they declare `path`)."""


def test_the_registry_answers_what_each_tool_declares() -> None:
    registry = ToolRegistry(default_tools())
    for name, (kind, argument) in DECLARED.items():
        call = ToolCall("1", name, {})
        assert (registry.kind_of(call), registry.permission_arg_of(call)) == (kind, argument)
        assert registry.kind_of(name) is kind
    assert registry.kind_of("nope") is None and registry.permission_arg_of("nope") is None


class NoArgs(BaseModel):
    pass


def test_read_only_and_the_read_kind_imply_each_other() -> None:
    class Reader(BaseTool):
        name = "reader"
        description = "reads"
        args_model = NoArgs
        read_only = True

    class Declared(BaseTool):
        name = "declared"
        description = "reads"
        args_model = NoArgs
        kind = ToolKind.READ

    class Writer(BaseTool):
        name = "writer"
        description = "writes"
        args_model = NoArgs

    assert (Reader.kind, Declared.read_only, Writer.kind) == (ToolKind.READ, True, ToolKind.OTHER)

    @tool(args=NoArgs, kind=ToolKind.READ)
    def look(args: NoArgs, ctx: ToolContext) -> str:
        """Look."""
        return ""

    @tool(args=NoArgs, read_only=True)
    def peek(args: NoArgs, ctx: ToolContext) -> str:
        """Peek."""
        return ""

    @tool(args=NoArgs, kind=ToolKind.COMMAND, permission_arg="script")
    def run(args: NoArgs, ctx: ToolContext) -> str:
        """Run."""
        return ""

    assert (look.read_only, look.kind) == (True, ToolKind.READ)
    assert (peek.read_only, peek.kind) == (True, ToolKind.READ)
    assert (run.read_only, run.kind, run.permission_arg) == (False, ToolKind.COMMAND, "script")
    registry = ToolRegistry([look, run])
    assert registry.is_read_only(ToolCall("1", "look", {})) is True
    assert registry.is_parallel_safe(ToolCall("1", "look", {}))
    assert not registry.is_parallel_safe(ToolCall("1", "run", {}))


# ------------------------------------------------------------------ choosing the edit tool


def edit_names(choice: str, provider: str | None) -> list[str]:
    return [t.name for t in builtin.edit_tools(choice, provider)]


@pytest.mark.parametrize(
    ("choice", "provider", "expected"),
    [
        ("auto", "openai", ["apply_patch"]),
        ("auto", "anthropic", ["edit_file"]),
        ("auto", None, ["edit_file"]),
        ("edit_file", "openai", ["edit_file"]),
        ("apply_patch", "anthropic", ["apply_patch"]),
        ("both", None, ["edit_file", "apply_patch"]),
    ],
)
def test_the_edit_tool_follows_the_choice_and_the_provider(
    choice: str, provider: str | None, expected: list[str]
) -> None:
    assert edit_names(choice, provider) == expected
    names = [t.name for t in default_tools(edit_tool=choice, provider=provider)]
    assert names == [
        "read_file",
        "list_files",
        "glob",
        "grep",
        *expected,
        "write_file",
        "run_command",
        "finish",
    ]


def test_an_unknown_edit_tool_choice_names_the_choices() -> None:
    with pytest.raises(ValueError, match="'sed' is not one of 'auto', 'edit_file'"):
        builtin.edit_tools("sed")


def test_the_real_apply_patch_tool_is_offered_to_openai_compatible_providers() -> None:
    if importlib.util.find_spec("journeyman.tools.patch") is None:
        pytest.skip("journeyman.tools.patch (the apply_patch tool) is not in this tree yet")
    tools = builtin.edit_tools("auto", "openai")
    assert [t.name for t in tools] == ["apply_patch"]
    assert tools[0].kind is ToolKind.EDIT


class HandMade:
    """A tool written against the protocol alone, flags set by hand."""

    name = "hand_made"
    description = "reads"
    args_model = NoArgs
    read_only = True
    parallel_safe = False
    kind = ToolKind.OTHER
    permission_arg = None

    async def execute(self, args: NoArgs, ctx: ToolContext) -> ToolResult:
        return ToolResult("", self.name, "")


def test_a_protocol_tool_that_only_says_read_only_counts_as_a_read() -> None:
    registry = ToolRegistry([HandMade()])
    assert registry.kind_of("hand_made") is ToolKind.READ
