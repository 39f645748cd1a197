"""Holds the run's tools, exports their schemas and executes model calls safely.

Whatever goes wrong in a call (unknown tool, invalid arguments, a timeout, an exception inside
the tool) becomes an error result that tells the model what happened; it never escapes.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterable

from pydantic import ValidationError

from journeyman.core.errors import AgentError
from journeyman.core.messages import ToolCall, ToolResult, ToolSpec
from journeyman.core.redact import redact_own_secrets
from journeyman.tools.base import Tool, ToolKind, tool_spec
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

    def kind_of(self, name: str) -> ToolKind | None:
        """What the named tool does; None when no such tool is registered."""
        tool = self._tools.get(name)
        return None if tool is None else tool.kind

    def specs(self) -> tuple[ToolSpec, ...]:
        return tuple(tool_spec(t) for t in self._tools.values())

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
        try:
            result = await asyncio.wait_for(tool.execute(args, ctx), timeout=timeout)
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
