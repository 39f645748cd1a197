"""Running one turn's tool calls: the per-turn call cap, the permission gate, PreToolUse and
PostToolUse hooks, concurrency for parallel-safe calls, and the per-call timeout."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from journeyman.core import events as ev
from journeyman.core.errors import ToolError, ToolNotFoundError
from journeyman.core.messages import ToolCall, ToolResult
from journeyman.loop.config import AgentConfig
from journeyman.loop.hooks import LoopHooks
from journeyman.loop.recorder import StepRecorder
from journeyman.loop.state import LoopState
from journeyman.policy.hooks import HookEvent
from journeyman.policy.permissions import PermissionGate
from journeyman.tools.context import ToolContext, tool_session_id
from journeyman.tools.registry import ToolRegistry
from journeyman.tools.shell import RunCommandTool

UNLIMITED_CALLS = 1_000_000


class ToolRunner:
    def __init__(
        self,
        registry: ToolRegistry,
        workspace: Path,
        config: AgentConfig,
        hooks: LoopHooks,
        permissions: PermissionGate | None,
        emit: Callable[[ev.Event], None],
    ) -> None:
        self.registry = registry
        self.workspace = workspace
        self.config = config
        self.hooks = hooks
        self.permissions = permissions
        self.emit = emit
        self.recorder: StepRecorder | None = None
        """Journals file changes before they happen (set when the run starts)."""

    async def disarm_git(self) -> list[str]:
        """At the end of a run: each command tool disarms the git metadata changed in the
        workspace since its last command (see `tools.sandbox.git_scan`); what each did."""
        found = []
        for name in self.registry.names:
            tool = self.registry.get(name)
            if isinstance(tool, RunCommandTool):
                message = await asyncio.to_thread(tool.disarm_git, self.workspace)
                if message is not None:
                    found.append(message)
        return found

    async def run(self, state: LoopState, calls: Sequence[ToolCall]) -> list[ToolResult]:
        """Run one turn's calls: consecutive parallel-safe calls as a concurrent batch, others
        one at a time, keeping the model's order in the returned results."""
        ctx = ToolContext(
            self.workspace,
            session_id=tool_session_id(state.session_id),
            run_session_id=state.session_id,
            iteration=state.iterations,
            journal=self.recorder.journal if self.recorder else None,
            offered=frozenset(self.registry.names),
            unreadable=self.permissions.policy.unreadable if self.permissions else None,
        )
        limit = asyncio.Semaphore(self.config.max_concurrency)
        iteration = state.iterations + 1
        allowed = allowed_calls(state)
        refused = [
            ToolResult(
                call.id,
                call.name,
                f"{call.name}: not run — the budget allows only {allowed} tool call(s) per turn "
                "now; send the most important call alone",
                is_error=True,
                metadata={"error": "budget_restricted"},
            )
            for call in calls[allowed:]
        ]
        calls = calls[:allowed]

        async def one(call: ToolCall) -> ToolResult:
            async with limit:
                self.emit(ev.ToolCallStarted(iteration, call))
                started = time.monotonic()
                try:
                    result = await self._guarded(state, call, ctx)
                except ToolError as error:  # the model is told, and may try something else
                    result = failed_call(call, error)
                self.emit(ev.ToolResultReceived(iteration, result, time.monotonic() - started))
                return result

        results: list[ToolResult] = []
        index = 0
        while index < len(calls):
            end = index + 1
            if self.registry.is_parallel_safe(calls[index]):
                while end < len(calls) and self.registry.is_parallel_safe(calls[end]):
                    end += 1
            # a task group: a hook halt in one call cancels its siblings
            try:
                async with asyncio.TaskGroup() as group:
                    batch = [group.create_task(one(c)) for c in calls[index:end]]
            except BaseExceptionGroup as failed:
                raise failed.exceptions[0] from None
            results.extend(task.result() for task in batch)
            index = end
        for result in refused:
            self.emit(ev.ToolResultReceived(iteration, result, 0.0))
        return results + refused

    async def _guarded(self, state: LoopState, call: ToolCall, ctx: ToolContext) -> ToolResult:
        """Permission gate, PreToolUse hooks, the call itself, then PostToolUse hooks."""
        tool = self.registry.get(call.name)
        if tool is None:
            known = ", ".join(sorted(self.registry.names)) or "none"
            raise ToolNotFoundError(
                f"unknown tool {call.name!r}; available tools: {known}",
                details={"error": "unknown"},
            )
        if self.permissions is not None:
            refusal, outcome = await self.permissions.decide_call(call, read_only=tool.read_only)
            if outcome is not None:
                self.emit(
                    ev.ApprovalDecided(
                        ctx.iteration + 1,
                        call.id,
                        call.name,
                        outcome.granted,
                        outcome.decided_by.value,
                        outcome.reason,
                    )
                )
            if refusal is not None:
                return refusal
        pre = await self.hooks.run(
            HookEvent.PRE_TOOL_USE, state, tool_name=call.name, tool_args=call.arguments
        )
        if pre is not None and pre.denied:
            return ToolResult(
                call.id,
                call.name,
                f"{call.name}: not run: a PreToolUse hook refused it: {pre.reason}",
                is_error=True,
                metadata={"error": "hook"},
            )
        result = await self.registry.execute(call, ctx, self.config.tool_timeout_s)
        event = HookEvent.POST_TOOL_USE_FAILURE if result.is_error else HookEvent.POST_TOOL_USE
        post = await self.hooks.run(
            event,
            state,
            tool_name=call.name,
            tool_args=call.arguments,
            tool_result=result.content,
            is_error=result.is_error,
        )
        return result if post is None else post.apply_to(result)


def failed_call(call: ToolCall, error: ToolError) -> ToolResult:
    """The result that tells the model about `error`."""
    kind = str(error.details.get("error", error.category.value))
    return ToolResult(
        call.id,
        call.name,
        error.message,
        is_error=True,
        metadata={"error": kind, "category": error.category.value, "retryable": error.retryable},
    )


def allowed_calls(state: LoopState) -> int:
    """How many calls the budget lets this turn run."""
    budget = state.budget
    if budget is None or (budget.max_tool_calls is None and not budget.text_only):
        return UNLIMITED_CALLS
    return 0 if budget.text_only else budget.max_tool_calls or 0
