"""The tool schemas the model is sent: nothing that repeats the field names, optional fields
without their `null` branch, and the same bytes every time they are exported."""

from __future__ import annotations

import json
from typing import Any

from pydantic import Field

from journeyman.tools.base import ToolArgs, model_facing_schema, tool_spec
from journeyman.tools.builtin import default_tools
from journeyman.tools.search import GrepArgs


def keys(schema: Any) -> set[str]:
    """Every key of every object in `schema`, at any depth."""
    if isinstance(schema, dict):
        return set(schema) | {k for value in schema.values() for k in keys(value)}
    if isinstance(schema, list):
        return {k for item in schema for k in keys(item)}
    return set()


class Page(ToolArgs):
    title: str = Field(description="A field that happens to be called title.")
    limit: int | None = Field(default=None, description="Most items; none means all.")
    tags: list[str | None] = Field(default_factory=list, description="Tags, some missing.")


def test_titles_and_null_branches_are_left_out_and_fields_named_title_kept() -> None:
    schema = model_facing_schema(Page.model_json_schema())
    assert schema["properties"]["title"] == {
        "description": "A field that happens to be called title.",
        "type": "string",
    }
    assert schema["properties"]["limit"] == {
        "type": "integer",
        "description": "Most items; none means all.",
    }
    assert "limit" not in schema["required"]
    # a null inside a list item is kept: only an optional field's own null branch goes
    assert {"type": "null"} in schema["properties"]["tags"]["items"]["anyOf"]
    assert "title" not in keys({k: v for k, v in schema.items() if k != "properties"})
    # the arguments are still checked by the full model, which accepts an explicit null
    assert GrepArgs.model_validate({"pattern": "x", "glob": None}).glob is None


def test_the_built_in_schemas_are_smaller_and_the_same_bytes_every_time() -> None:
    for tool in default_tools():
        spec = tool_spec(tool)
        full = tool.args_model.model_json_schema()
        sent = json.dumps(spec.parameters)
        assert len(sent) < len(json.dumps(full))
        assert json.dumps(tool_spec(tool).parameters) == sent
        assert '"title"' not in sent.replace('"title": {', "")
        assert set(spec.parameters["properties"]) == set(full["properties"])


def test_a_schema_nested_beyond_the_recursion_limit_is_sent_as_it_is() -> None:
    class Deep(ToolArgs):
        value: Any = None

    deep: dict[str, Any] = {"type": "string", "title": "Leaf"}
    for _ in range(5_000):
        deep = {"type": "array", "items": deep, "title": "Level"}
    schema = {"type": "object", "title": "Deep", "properties": {"value": deep}}

    class Tool:
        name, description = "deep", "A tool with a very deep schema."
        args_model = Deep

    Deep.model_json_schema = classmethod(lambda cls: dict(schema))  # type: ignore[method-assign]
    spec = tool_spec(Tool())  # type: ignore[arg-type]
    assert spec.parameters["properties"]["value"] is deep and "title" not in spec.parameters
