"""The tool bridge without a server: names, schema pass-through, argument checks, rendering."""

from __future__ import annotations

import base64
from typing import Any

import mcp_types as mt
import pytest
from pydantic import ValidationError

from journeyman.integrations.mcp.bridge import (
    MAX_RESULT_CHARS,
    McpArgs,
    McpCallError,
    McpTool,
    bridged_name,
    make_args_model,
    permission_arg_for,
    render_result,
)
from journeyman.tools.base import Tool, ToolKind, tool_spec

SCHEMA: dict[str, Any] = {
    "type": "object",
    "title": "addArguments",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer", "minimum": 0}},
    "required": ["a", "b"],
    "additionalProperties": False,
}


class Caller:
    name = "srv"

    def __init__(self, result: mt.CallToolResult | McpCallError) -> None:
        self.result = result
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def call_tool(self, tool: str, arguments: dict[str, Any]) -> mt.CallToolResult:
        self.calls.append((tool, arguments))
        if isinstance(self.result, McpCallError):
            raise self.result
        return self.result


def test_names_are_sanitised_truncated_and_unique() -> None:
    assert bridged_name("git hub", "search.code/v2") == "git_hub_search_code_v2"
    long = bridged_name("s" * 40, "t" * 40)
    assert len(long) == 64 and long.startswith("s" * 40 + "_")
    taken = {long}
    second = bridged_name("s" * 40, "t" * 40, taken)
    assert second != long and len(second) == 64 and second.endswith("_2")


def test_schema_is_passed_through_unchanged() -> None:
    model = make_args_model("srv_add", SCHEMA)
    exported = model.model_json_schema()
    assert exported == SCHEMA
    exported["title"] = "changed"  # callers (tool_spec) edit the copy, never the original
    assert model.model_json_schema()["title"] == "addArguments"


def test_arguments_are_checked_against_the_json_schema() -> None:
    model = make_args_model("srv_add", SCHEMA)
    args = model.model_validate({"a": 1, "b": 2})
    assert isinstance(args, McpArgs) and args.arguments() == {"a": 1, "b": 2}
    with pytest.raises(ValidationError) as info:
        model.model_validate({"a": "one", "b": -1, "c": True})
    text = str(info.value)
    assert "a: 'one' is not of type 'integer'" in text
    assert "b: -1 is less than the minimum of 0" in text
    assert "'c' was unexpected" in text


def test_a_schema_that_does_not_compile_leaves_checking_to_the_server() -> None:
    model = make_args_model("srv_odd", {"type": "object", "properties": {"x": {"type": 12}}})
    assert model.model_validate({"x": object()}).arguments()["x"] is not None
    remote = {"type": "object", "properties": {"x": {"$ref": "https://example.invalid/s.json"}}}
    assert make_args_model("srv_ref", remote).model_validate({"x": 1}).arguments() == {"x": 1}


def tool_def(**fields: Any) -> mt.Tool:
    return mt.Tool(name="add", input_schema=SCHEMA, **fields)


def test_read_only_hint_decides_read_only_and_parallel_safety() -> None:
    caller = Caller(mt.CallToolResult(content=[]))
    hinted = McpTool(caller, tool_def(annotations=mt.ToolAnnotations(read_only_hint=True)), "a")
    plain = McpTool(caller, tool_def(), "b")
    writer = McpTool(caller, tool_def(annotations=mt.ToolAnnotations(read_only_hint=False)), "c")
    assert (hinted.read_only, hinted.parallel_safe) == (True, True)
    assert (plain.read_only, plain.parallel_safe) == (False, False)
    assert (writer.read_only, writer.parallel_safe) == (False, False)
    assert isinstance(hinted, Tool)
    spec = tool_spec(hinted)
    assert spec.name == "a" and "title" not in spec.parameters
    assert spec.parameters["required"] == ["a", "b"]
    assert McpTool(caller, tool_def(description=""), "d").description  # never empty


async def test_execute_maps_results_and_failures(tmp_path: Any) -> None:
    from journeyman.tools.context import ToolContext

    ctx = ToolContext(tmp_path)
    good = Caller(mt.CallToolResult(content=[mt.TextContent(text="3")]))
    tool = McpTool(good, tool_def(), "srv_add")
    result = await tool.execute(tool.args_model.model_validate({"a": 1, "b": 2}), ctx)
    assert (result.content, result.is_error) == ("3", False)
    assert good.calls == [("add", {"a": 1, "b": 2})]
    assert result.metadata == {"mcp_server": "srv", "mcp_tool": "add"}

    bad = Caller(mt.CallToolResult(content=[mt.TextContent(text="no")], is_error=True))
    result = await McpTool(bad, tool_def(), "x").execute(McpArgs(), ctx)
    assert result.is_error and result.content == "no"

    down = Caller(McpCallError("server gone", "unavailable"))
    result = await McpTool(down, tool_def(), "x").execute(McpArgs(), ctx)
    assert result.is_error and result.content == "server gone"
    assert result.metadata["error"] == "unavailable"


def test_rendering_of_every_content_kind() -> None:
    png = base64.b64encode(bytes(2048)).decode()
    result = mt.CallToolResult(
        content=[
            mt.TextContent(text="caption"),
            mt.ImageContent(data=png, mime_type="image/png"),
            mt.AudioContent(data=base64.b64encode(b"abc").decode(), mime_type="audio/wav"),
            mt.ResourceLink(name="readme", uri="file:///r.md", description="the readme"),
            mt.EmbeddedResource(
                resource=mt.TextResourceContents(uri="file:///a.txt", text="hello")
            ),
            mt.EmbeddedResource(
                resource=mt.BlobResourceContents(uri="file:///b.bin", blob=png, mime_type=None)
            ),
        ]
    )
    assert render_result(result).splitlines() == [
        "caption",
        "[image: image/png, 2.0 KiB — not shown]",
        "[audio: audio/wav, 3 bytes — not shown]",
        "[resource link: readme <file:///r.md> — the readme]",
        "[resource file:///a.txt]",
        "hello",
        "[resource file:///b.bin: binary, 2.0 KiB — not shown]",
    ]


def test_structured_only_empty_and_huge_results() -> None:
    structured = mt.CallToolResult(content=[], structured_content={"result": 5})
    assert '"result": 5' in render_result(structured)
    assert render_result(mt.CallToolResult(content=[])) == "(no output)"
    failed = mt.CallToolResult(content=[], is_error=True)
    assert "failed" in render_result(failed)
    huge = render_result(mt.CallToolResult(content=[mt.TextContent(text="x" * 100_000)]))
    assert len(huge) < MAX_RESULT_CHARS + 100 and "characters cut" in huge


def schema_with(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


@pytest.mark.parametrize(
    ("annotations", "kind"),
    [
        (None, ToolKind.OTHER),
        (mt.ToolAnnotations(read_only_hint=True), ToolKind.READ),
        (mt.ToolAnnotations(read_only_hint=False), ToolKind.OTHER),
        (mt.ToolAnnotations(destructive_hint=True), ToolKind.OTHER),
        # a server contradicting itself is taken at its more cautious word
        (mt.ToolAnnotations(read_only_hint=True, destructive_hint=True), ToolKind.OTHER),
    ],
)
def test_kind_comes_from_the_annotations(
    annotations: mt.ToolAnnotations | None, kind: ToolKind
) -> None:
    tool = McpTool(Caller(mt.CallToolResult(content=[])), tool_def(annotations=annotations), "t")
    assert tool.kind is kind
    assert tool.read_only is (kind is ToolKind.READ)


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        (schema_with(path={"type": "string"}, limit={"type": "integer"}), "path"),
        (schema_with(command={"type": "string"}), "command"),
        (schema_with(command={"type": ["string", "null"]}), "command"),
        (schema_with(path={"type": "string"}, command={"type": "string"}), None),  # which one?
        (schema_with(path={"type": "array"}), None),
        (schema_with(file={"type": "string"}), None),
        (SCHEMA, None),
        ({"type": "object"}, None),
    ],
)
def test_permission_argument_is_a_single_path_or_command(
    schema: dict[str, Any], expected: str | None
) -> None:
    assert permission_arg_for(schema) == expected
    definition = mt.Tool(name="t", input_schema=schema)
    assert McpTool(Caller(mt.CallToolResult(content=[])), definition, "t").permission_arg == (
        expected
    )
