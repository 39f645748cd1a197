"""The `Tool` protocol: a name, a description, a pydantic args model and an async `execute`.

A tool also declares what it is: its `kind` (`ToolKind`, re-exported here) and its
`permission_arg`, the argument permission rules match on. A tool that reads only is of kind
READ and `read_only`; each implies the other in `BaseTool`, `FunctionTool` and `tool`.

A tool whose permission argument is not itself a path but names several (apply_patch's patch
text) may also define ``paths_of(args: Mapping[str, Any]) -> list[str]``: permission rules
then match each path it lists (the registry's `paths_of` asks it).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from journeyman.core.messages import ToolResult, ToolSpec
from journeyman.core.tool_kind import ToolKind
from journeyman.tools.context import ToolContext


class ToolArgs(BaseModel):
    """Base for tool argument models: unknown fields are rejected so typos reach the model."""

    model_config = ConfigDict(extra="forbid")


@runtime_checkable
class Tool(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def args_model(self) -> type[BaseModel]: ...

    @property
    def read_only(self) -> bool:
        """The tool never changes the workspace or the outside world."""
        ...

    @property
    def parallel_safe(self) -> bool:
        """Calls may run concurrently with other parallel-safe calls of the same turn."""
        ...

    @property
    def kind(self) -> ToolKind:
        """What the tool does (read / edit / command / finish / other)."""
        ...

    @property
    def permission_arg(self) -> str | None:
        """The argument permission rules match on (`path`, `command`, ...), or None."""
        ...

    async def execute(self, args: Any, ctx: ToolContext) -> ToolResult: ...


def tool_spec(tool: Tool) -> ToolSpec:
    """The model-facing description of a tool, its schema derived from the args model."""
    schema = tool.args_model.model_json_schema()
    try:
        schema = model_facing_schema(schema)
    except RecursionError:  # an MCP server's schema nested beyond reason: sent as it is
        schema.pop("title", None)
    return ToolSpec(name=tool.name, description=tool.description, parameters=schema)


_SCHEMA_MAPS = frozenset({"properties", "$defs", "definitions", "patternProperties"})
"""Keywords whose value maps names (never keywords) to schemas."""
_SCHEMA_LISTS = frozenset({"anyOf", "oneOf", "allOf", "prefixItems"})
_SCHEMA_VALUES = frozenset({"items", "additionalProperties", "not"})
_NULL = {"type": "null"}


def model_facing_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` without what tells the model nothing: pydantic's `title` keywords (the field
    name again) and, for an optional field, the `anyOf [T, null]` with `default: null` (the
    field is simply not required). Every request carries the tool schemas, so each byte here
    is paid once per model call; arguments are still validated against the full model."""
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" and isinstance(value, str):
            continue
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            value = {name: _sub(item) for name, item in value.items()}
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            value = [_sub(item) for item in value]
        elif key in _SCHEMA_VALUES:
            value = _sub(value)
        out[key] = value
    options = out.get("anyOf")
    if "default" in out and out["default"] is None and isinstance(options, list):
        others = [option for option in options if option != _NULL]
        if len(options) == 2 and len(others) == 1 and isinstance(others[0], dict):
            rest = {k: v for k, v in out.items() if k not in ("anyOf", "default")}
            return {**others[0], **rest}
    return out


def _sub(value: Any) -> Any:
    return model_facing_schema(value) if isinstance(value, dict) else value


def ok(tool: str, content: str, **metadata: Any) -> ToolResult:
    """A successful result; the registry fills in the call id."""
    return ToolResult(call_id="", name=tool, content=content, metadata=metadata)


def fail(tool: str, content: str, **metadata: Any) -> ToolResult:
    """A failed result the model is shown; the registry fills in the call id."""
    return ToolResult(call_id="", name=tool, content=content, is_error=True, metadata=metadata)


class BaseTool:
    """Convenience base class: set the class attributes and implement `run`."""

    name: ClassVar[str]
    description: ClassVar[str]
    args_model: ClassVar[type[BaseModel]]
    read_only: ClassVar[bool] = False
    parallel_safe: ClassVar[bool] = False
    kind: ClassVar[ToolKind] = ToolKind.OTHER
    permission_arg: ClassVar[str | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.read_only and cls.kind is ToolKind.OTHER:
            cls.kind = ToolKind.READ
        elif cls.kind is ToolKind.READ:
            cls.read_only = True

    async def execute(self, args: Any, ctx: ToolContext) -> ToolResult:
        raise NotImplementedError


class FunctionTool:
    """A tool made from an async or sync function `(args, ctx) -> str | ToolResult`."""

    def __init__(
        self,
        func: Callable[[Any, ToolContext], Awaitable[str | ToolResult] | str | ToolResult],
        *,
        name: str,
        description: str,
        args_model: type[BaseModel],
        read_only: bool = False,
        parallel_safe: bool = False,
        kind: ToolKind | None = None,
        permission_arg: str | None = None,
    ) -> None:
        self._func = func
        self.name = name
        self.description = description
        self.args_model = args_model
        self.read_only = read_only or kind is ToolKind.READ
        self.parallel_safe = parallel_safe
        self.kind = kind or (ToolKind.READ if read_only else ToolKind.OTHER)
        self.permission_arg = permission_arg

    async def execute(self, args: Any, ctx: ToolContext) -> ToolResult:
        value = self._func(args, ctx)
        if inspect.isawaitable(value):
            value = await value
        if isinstance(value, ToolResult):
            return value
        return ok(self.name, str(value))


def tool(
    *,
    args: type[BaseModel],
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    parallel_safe: bool = False,
    kind: ToolKind | None = None,
    permission_arg: str | None = None,
) -> Callable[[Callable[..., Any]], FunctionTool]:
    """Decorator that turns `def f(args, ctx) -> str` into a registered-ready tool.

    The description defaults to the function's docstring. `kind` says what the tool does
    (default READ when `read_only`, else OTHER) and `permission_arg` names the argument that
    permission rules such as ``deploy(staging*)`` match on.
    """

    def wrap(func: Callable[..., Any]) -> FunctionTool:
        return FunctionTool(
            func,
            name=name or func.__name__,
            description=description or inspect.cleandoc(func.__doc__ or func.__name__),
            args_model=args,
            read_only=read_only,
            parallel_safe=parallel_safe,
            kind=kind,
            permission_arg=permission_arg,
        )

    return wrap


__all__ = [
    "BaseTool",
    "FunctionTool",
    "Tool",
    "ToolArgs",
    "ToolKind",
    "fail",
    "model_facing_schema",
    "ok",
    "tool",
    "tool_spec",
]
