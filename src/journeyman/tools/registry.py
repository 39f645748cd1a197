"""Holds the run's tools, exports their schemas and executes model calls safely.

It also answers what each call's tool declares (`kind_of`, `permission_arg_of`), so that the
permission policy, the phase tracker and the executor never keep lists of tool names.

Whatever goes wrong in a call (unknown tool, invalid arguments, a timeout, an exception inside
the tool) becomes an error result that tells the model what happened; it never escapes.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from journeyman.core.errors import AgentError
from journeyman.core.messages import ToolCall, ToolResult, ToolSpec
from journeyman.core.redact import redact_own_secrets
from journeyman.core.tool_kind import ToolKind
from journeyman.tools.base import Tool, tool_spec
from journeyman.tools.context import ToolContext


class ToolRegistry:
    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for t in tools:
            self.register(t)

    def register(self, tool: Tool) -> None:
        if tool.name in self._tools:
            raise ValueError(f"a tool named {tool.name!r} is already registered")
        self._tools[tool.name] = tool

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    def restricted_to(self, kinds: Iterable[ToolKind]) -> ToolRegistry:
        """A registry of only the tools of these kinds (e.g. read and finish for a question)."""
        wanted = frozenset(kinds)
        return ToolRegistry(t for t in self._tools.values() if t.kind in wanted)

    def specs(self) -> tuple[ToolSpec, ...]:
        return tuple(tool_spec(t) for t in self._tools.values())

    def kind_of(self, call: ToolCall | str) -> ToolKind | None:
        """The kind the called tool declares; None when no such tool is registered.

        A tool that says it is `read_only` but declares no kind beyond "other" is READ, as in
        `BaseTool` and `FunctionTool`."""
        tool = self._tools.get(_name(call))
        if tool is None:
            return None
        if tool.read_only and tool.kind == ToolKind.OTHER:
            return ToolKind.READ
        return tool.kind

    def permission_arg_of(self, call: ToolCall | str) -> str | None:
        """The argument permission rules match on; None for an unknown tool or none declared."""
        tool = self._tools.get(_name(call))
        return None if tool is None else tool.permission_arg

    def paths_of(self, call: ToolCall | str, args: Mapping[str, Any]) -> list[str] | None:
        """The workspace paths a call touches, for a tool that defines `paths_of(args)`
        (see `tools.base`); None for other tools, or when the hook itself answers None. The
        tool's own errors propagate."""
        hook = getattr(self._tools.get(_name(call)), "paths_of", None)
        paths = hook(args) if callable(hook) else None
        return None if paths is None else [p for p in paths if isinstance(p, str)]

    def is_read_only(self, call: ToolCall) -> bool | None:
        """Whether the called tool only reads; None when no such tool is registered."""
        tool = self._tools.get(call.name)
        return None if tool is None else tool.read_only

    def is_parallel_safe(self, call: ToolCall) -> bool:
        tool = self._tools.get(call.name)
        return tool is not None and (tool.parallel_safe or tool.read_only)

    async def execute(self, call: ToolCall, ctx: ToolContext, timeout: float) -> ToolResult:
        """Validate and run one call under `timeout` seconds; always returns a result, its text
        scrubbed of the agent's own secrets whatever the tool and the sandbox."""
        result = await self._execute(call, ctx, timeout)
        return dataclasses.replace(result, content=redact_own_secrets(result.content))

    async def _execute(self, call: ToolCall, ctx: ToolContext, timeout: float) -> ToolResult:
        tool = self._tools.get(call.name)
        if tool is None:
            known = ", ".join(sorted(self._tools)) or "none"
            return _error(call, f"unknown tool {call.name!r}; available tools: {known}", "unknown")
        try:
            args = tool.args_model.model_validate(call.arguments)
        except ValidationError as exc:
            return _error(call, f"{call.name}: invalid arguments: {_describe(exc)}", "invalid")
        timeout = getattr(tool, "timeout_s", None) or timeout  # a tool may bring its own
        try:
            # ctx is shared by the turn's calls; a copy, not `dataclasses.replace`, which would
            # resolve the workspace's real path again (its `__post_init__`)
            own = copy.copy(ctx)
            own.call_id = call.id
            result = await asyncio.wait_for(tool.execute(args, own), timeout=timeout)
        except TimeoutError:
            return _error(
                call,
                f"{call.name}: timed out after {timeout:g} s and was stopped",
                "timeout",
            )
        except AgentError as exc:
            return _error(call, exc.message, exc.category.value)
        except Exception as exc:  # a tool bug must not end the run
            return _error(call, f"{call.name} failed: {type(exc).__name__}: {exc}", "exception")
        return dataclasses.replace(result, call_id=call.id, name=call.name)


def _name(call: ToolCall | str) -> str:
    return call if isinstance(call, str) else call.name


def _error(call: ToolCall, message: str, kind: str) -> ToolResult:
    return ToolResult(
        call_id=call.id, name=call.name, content=message, is_error=True, metadata={"error": kind}
    )


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors(include_url=False):
        where = ".".join(str(p) for p in err["loc"]) or "arguments"
        parts.append(f"{where}: {err['msg']}")
    return "; ".join(parts)
