"""An MCP server tool seen as a journeyman `Tool`: name, JSON Schema, arguments, result text.

Arguments. The registry validates a call with `args_model.model_validate(...)` and exports the
schema with `args_model.model_json_schema()`. MCP tools bring a JSON Schema rather than a
pydantic model, so each bridged tool gets its own subclass of `McpArgs` that
- accepts any object (extra="allow") and hands it to the server unchanged,
- returns the server's schema, untouched, from `model_json_schema()`,
- checks the arguments against that schema with `jsonschema` before the call. Validators are
  compiled once per tool, so the check costs microseconds, and a mistake reaches the model as an
  ordinary "invalid arguments" error (counted like any other) without a round trip. The server
  stays the authority: a schema `jsonschema` cannot compile, or a `$ref` it cannot resolve
  locally (remote references are never fetched), skips the local check.

Declarations. A bridged tool declares its kind and permission argument from what the server
publishes (`declared_kind`, `permission_arg_for`):
- kind READ (read-only, parallel-safe, runs without asking unless a rule says otherwise) only
  when the tool's annotations say `readOnlyHint: true` and do not also say
  `destructiveHint: true`; every other tool is OTHER (asked about by default, allowed in
  trusted and bypass modes, never treated as a file edit or a command for phases);
- permission argument: the top-level property named `path` or `command` whose schema type is
  string, when exactly one of the two exists. Rules such as ``fs_read_text(docs/**)`` then
  match that argument (`path` as a workspace path, `command` as a shell command line); a tool
  with neither or both is matched on its arguments as compact JSON.

Results. Text content is passed through; images and audio become a short placeholder (the
model cannot see them through a text tool result); resources show their URI and, for text,
their content; structured content is shown as JSON when there is no text. Output is capped.
"""

from __future__ import annotations

import base64
import binascii
import copy
import json
import re
from typing import Any, ClassVar, Protocol

import mcp_types as mt
from pydantic import BaseModel, ConfigDict, model_validator
from pydantic_core import PydanticCustomError

from journeyman.core.messages import ToolResult
from journeyman.tools.base import ToolKind, fail, ok
from journeyman.tools.context import ToolContext

MAX_NAME_LENGTH = 64
"""Longest tool name the model APIs accept (`^[a-zA-Z0-9_-]{1,64}$`)."""
MAX_RESULT_CHARS = 40_000
"""Longest tool result passed to the model; the middle of a longer one is cut out."""

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


class McpCallError(Exception):
    """A call that produced no result; `kind` is "timeout", "unavailable" or "protocol"."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind


class ToolCaller(Protocol):
    """What a bridged tool needs from its server connection."""

    @property
    def name(self) -> str: ...

    async def call_tool(self, tool: str, arguments: dict[str, Any]) -> mt.CallToolResult:
        """The server's result; raises `McpCallError` when there is none."""
        ...


class McpArgs(BaseModel):
    """Arguments of a bridged MCP tool: any JSON object, checked against the server's schema."""

    model_config = ConfigDict(extra="allow")

    mcp_input_schema: ClassVar[dict[str, Any]] = {"type": "object"}
    """The tool's JSON Schema as the server published it."""
    mcp_validator: ClassVar[Any] = None
    """Compiled `jsonschema` validator of that schema, or None to leave checking to the server."""

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """The server's schema, unchanged (a copy: callers may edit it)."""
        return copy.deepcopy(cls.mcp_input_schema)

    @model_validator(mode="before")
    @classmethod
    def _check_schema(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            raise PydanticCustomError("mcp_arguments", "arguments must be a JSON object")
        problems = schema_errors(cls.mcp_validator, data)
        if problems:
            raise PydanticCustomError("mcp_arguments", "{problems}", {"problems": problems})
        return data

    def arguments(self) -> dict[str, Any]:
        """The arguments as received, for the server."""
        return dict(self.model_extra or {})


def make_args_model(tool_name: str, schema: dict[str, Any]) -> type[McpArgs]:
    """A `McpArgs` subclass carrying one tool's schema and its compiled validator."""
    model: type[McpArgs] = type(
        f"{_UNSAFE.sub('_', tool_name)}_Args",
        (McpArgs,),
        {"__module__": __name__, "__doc__": f"Arguments of the MCP tool {tool_name}."},
    )
    model.mcp_input_schema = copy.deepcopy(schema)
    model.mcp_validator = compile_validator(schema)
    return model


def compile_validator(schema: dict[str, Any]) -> Any:
    """A `jsonschema` validator for `schema`, or None when the schema does not compile."""
    from jsonschema.exceptions import SchemaError  # type: ignore[import-untyped]
    from jsonschema.validators import validator_for  # type: ignore[import-untyped]
    from referencing import Registry

    try:
        cls = validator_for(schema)
        cls.check_schema(schema)
        return cls(schema, registry=Registry())  # an empty registry: never fetch remote $refs
    except (SchemaError, TypeError, ValueError):
        return None


def schema_errors(validator: Any, data: dict[str, Any], limit: int = 5) -> str:
    """What is wrong with `data` per `validator`, as one line; "" when it is fine or unknown."""
    if validator is None:
        return ""
    try:
        errors = sorted(
            validator.iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path]
        )
    except Exception:  # an unresolvable $ref and the like: the server will judge
        return ""
    parts = []
    for error in errors[:limit]:
        where = ".".join(str(p) for p in error.absolute_path)
        parts.append(f"{where}: {error.message}" if where else str(error.message))
    if len(errors) > limit:
        parts.append(f"and {len(errors) - limit} more")
    return "; ".join(parts)


def bridged_name(server: str, tool: str, taken: set[str] | frozenset[str] = frozenset()) -> str:
    """`<server>_<tool>` limited to [A-Za-z0-9_-] and 64 characters, unique among `taken`."""
    base = _UNSAFE.sub("_", f"{server}_{tool}")[:MAX_NAME_LENGTH]
    name, number = base, 2
    while name in taken:
        suffix = f"_{number}"
        name = base[: MAX_NAME_LENGTH - len(suffix)] + suffix
        number += 1
    return name


class McpTool:
    """One tool of one MCP server, registered under its bridged name."""

    def __init__(self, caller: ToolCaller, definition: mt.Tool, name: str) -> None:
        self._caller = caller
        self.definition = definition
        self.name = name
        self.description = _description(definition, caller.name)
        self.args_model: type[BaseModel] = make_args_model(name, definition.input_schema)
        self.kind = declared_kind(definition)
        self.read_only = self.kind is ToolKind.READ
        # only a tool its server declares read-only may run alongside other calls
        self.parallel_safe = self.read_only
        self.permission_arg = permission_arg_for(definition.input_schema)

    def renamed(self, name: str) -> McpTool:
        """The same server tool under another name."""
        return McpTool(self._caller, self.definition, name)

    @property
    def server(self) -> str:
        return self._caller.name

    @property
    def remote_name(self) -> str:
        """The tool's name on its server."""
        return self.definition.name

    async def execute(self, args: Any, ctx: ToolContext) -> ToolResult:
        arguments = args.arguments() if isinstance(args, McpArgs) else dict(args)
        meta = {"mcp_server": self.server, "mcp_tool": self.remote_name}
        try:
            result = await self._caller.call_tool(self.remote_name, arguments)
        except McpCallError as exc:
            return fail(self.name, exc.message, error=exc.kind, **meta)
        text = render_result(result)
        if result.is_error:
            return fail(self.name, text, error="mcp_tool_error", **meta)
        return ok(self.name, text, **meta)


PERMISSION_ARG_NAMES = ("path", "command")
"""Argument names taken as an MCP tool's permission argument (see the module doc)."""


def declared_kind(definition: mt.Tool) -> ToolKind:
    """READ for a tool annotated read-only (and not destructive), else OTHER."""
    hints = definition.annotations
    if hints is None or hints.read_only_hint is not True or hints.destructive_hint is True:
        return ToolKind.OTHER
    return ToolKind.READ


def permission_arg_for(schema: Any) -> str | None:
    """The one string property named `path` or `command` in `schema`, or None."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict):
        return None
    found = [
        name
        for name in PERMISSION_ARG_NAMES
        if isinstance(properties.get(name), dict) and _is_string(properties[name])
    ]
    return found[0] if len(found) == 1 else None


def _is_string(schema: dict[str, Any]) -> bool:
    kind = schema.get("type")
    return kind == "string" or (isinstance(kind, list) and "string" in kind)


def render_result(result: mt.CallToolResult) -> str:
    """The text the model sees for an MCP tool result."""
    parts = [render_block(block) for block in result.content]
    text = "\n".join(p for p in parts if p)
    if not text.strip() and result.structured_content is not None:
        text = json.dumps(result.structured_content, ensure_ascii=False, indent=2, default=str)
    if not text.strip():
        text = "(the tool failed without a message)" if result.is_error else "(no output)"
    return _cap(text)


def render_block(block: mt.ContentBlock) -> str:
    if isinstance(block, mt.TextContent):
        return block.text
    if isinstance(block, mt.ImageContent):
        return f"[image: {block.mime_type}, {_decoded_size(block.data)} — not shown]"
    if isinstance(block, mt.AudioContent):
        return f"[audio: {block.mime_type}, {_decoded_size(block.data)} — not shown]"
    if isinstance(block, mt.ResourceLink):
        about = f" — {block.description}" if block.description else ""
        return f"[resource link: {block.name} <{block.uri}>{about}]"
    if isinstance(block, mt.EmbeddedResource):
        res = block.resource
        if isinstance(res, mt.TextResourceContents):
            return f"[resource {res.uri}]\n{res.text}"
        mime = res.mime_type or "binary"
        return f"[resource {res.uri}: {mime}, {_decoded_size(res.blob)} — not shown]"
    return f"[{getattr(block, 'type', 'unknown')} content — not shown]"


def _description(definition: mt.Tool, server: str) -> str:
    text = (definition.description or "").strip()
    title = definition.title or (definition.annotations.title if definition.annotations else None)
    if not text:
        text = title or f"The {definition.name!r} tool of the MCP server {server!r}."
    return text


def _decoded_size(data: str) -> str:
    try:
        size = len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        size = len(data) * 3 // 4
    if size < 1024:
        return f"{size} bytes"
    return f"{size / 1024:.1f} KiB"


def _cap(text: str) -> str:
    if len(text) <= MAX_RESULT_CHARS:
        return text
    head = MAX_RESULT_CHARS * 3 // 4
    tail = MAX_RESULT_CHARS - head
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... {cut} characters cut ...]\n{text[-tail:]}"
