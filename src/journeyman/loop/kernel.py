"""The loop: gates in a fixed order, one mode turn, tools, accounting, persistence.

One iteration, top to bottom (DESIGN.md, "One iteration"):
  1. gates: cancellation, iterations, consecutive mistakes, budget (tokens, USD, duration),
     no progress; the budget gate may also ask for an extension, nudge, or force text only
  2. pending nudges (budget, phase, loop) reach the model as one user message
  3. the mode builds the request and calls the provider (retries live in `resilient`)
  4. tool calls pass the permission gate and PreToolUse hooks, then run: parallel-safe ones
     concurrently, the rest in order, each under a timeout; file writes are journaled before
     they happen; PostToolUse hooks may add to results
  5. the observer updates progress, loop and phase knowledge and queues nudges
  6. the step (messages, events, usage, checkpoint) is committed in one transaction
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import traceback
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from journeyman.context import compaction
from journeyman.context.compaction import Compactor
from journeyman.core import events as ev
from journeyman.core.errors import AgentError, ErrorCategory, ProviderError
from journeyman.core.lifecycle import AgentState, LifecycleMachine
from journeyman.core.messages import Message, ToolCall, ToolResult, Usage
from journeyman.core.result import FinishCategory, FinishReason, RunResult
from journeyman.economics.approval import ExtensionApprover, deny_extensions
from journeyman.economics.budget import BudgetKind, ExecutionEconomics
from journeyman.economics.phases import Phase
from journeyman.economics.usage_log import UsageRow
from journeyman.loop import prompts
from journeyman.loop.budget_gate import BudgetGate, capacity_reason
from journeyman.loop.config import AgentConfig
from journeyman.loop.modes import Mode, StatefulMode
from journeyman.loop.observer import TurnObserver
from journeyman.loop.recorder import StepRecorder
from journeyman.loop.state import LoopState, TurnOutcome
from journeyman.loop.verdict import Ruling, Verdict
from journeyman.policy.hooks import HookEvent, HookPayload, HookRunner, HookRunResult
from journeyman.policy.permissions import PermissionGate
from journeyman.providers.base import ModelRequest, ModelResponse, Provider
from journeyman.providers.pricing import add_costs, cost_usd
from journeyman.session.store import HISTORY_START, SessionRecord, SessionStore
from journeyman.tools.context import ToolContext
from journeyman.tools.registry import ToolRegistry

log = logging.getLogger(__name__)

MODE_STATE = "mode"
"""Checkpoint key of a `StatefulMode`'s own state."""


class Kernel:
    def __init__(
        self,
        *,
        provider: Provider,
        registry: ToolRegistry,
        mode: Mode,
        workspace: Path,
        config: AgentConfig,
        economics: ExecutionEconomics,
        store: SessionStore,
        settings: dict[str, Any] | None = None,
        on_event: ev.EventHandler | None = None,
        cancel_event: asyncio.Event | None = None,
        approver: ExtensionApprover = deny_extensions,
        permissions: PermissionGate | None = None,
        hooks: HookRunner | None = None,
        rules: str = "",
    ) -> None:
        self.provider = provider
        self.permissions = permissions
        self.hooks = hooks or HookRunner(cwd=workspace)
        self.registry = registry
        self.mode = mode
        self.workspace = workspace
        self.config = config
        self.economics = economics
        self.store = store
        self.settings = settings or {}
        self.cancel_event = cancel_event or asyncio.Event()
        self.observer = TurnObserver(config, kind_of=registry.kind_of)
        self.budget = BudgetGate(
            economics, config, approver, self.emit, lambda: f"{provider.name}:{provider.model}"
        )
        self.lifecycle = LifecycleMachine()
        self.system_prompt = prompts.system_prompt(workspace, config.system_prompt, rules)
        self.tool_specs = registry.specs()
        self.compactor = Compactor(config.compaction) if config.compaction else None
        self.history_meter = compaction.HistoryMeter()
        self.token_ratio = 1.0
        """Reported prompt tokens / estimated ones at the last call (calibrates the estimate)."""
        self._on_event = on_event
        self._recorder: StepRecorder | None = None
        self.on_restore: Callable[[], object] | None = None
        """Called after a resumed session's state is loaded (e.g. to apply new limits)."""
        self.lifecycle.on_transition(
            lambda a, b, _meta: self.emit(ev.StateChanged(a.value, b.value))
        )
        self.verdict = Verdict(
            workspace=workspace,
            config=config,
            registry=registry,
            store=store,
            permissions=permissions,
            emit=self.emit,
            journal=lambda: self._recorder.journal if self._recorder else None,
        )
        """The harness's check of success claims, refused calls and changed files."""

    # --- events -------------------------------------------------------------------------

    def emit(self, event: ev.Event) -> None:
        if self._recorder is not None:
            self._recorder.event(event)
        if self._on_event is not None:
            try:
                self._on_event(event)
            except Exception:  # a broken UI callback must not end the run
                log.exception("on_event callback failed for %s", event.type)

    # --- starting a run -----------------------------------------------------------------

    async def run(
        self,
        task: str,
        *,
        session_id: str | None = None,
        parent_session_id: str | None = None,
        history: Sequence[Message] = (),
        forked_at_step: int | None = None,
    ) -> RunResult:
        """A new session; `history` (a fork's first steps) comes before the task."""
        state = LoopState(
            task=task,
            session_id=session_id or new_session_id(),
            parent_session_id=parent_session_id,
            messages=[*history, Message.user(task)],
        )
        self.store.create_session(
            SessionRecord(
                id=state.session_id,
                task=task,
                workspace=str(self.workspace),
                settings=self.settings,
                system_prompt=self.system_prompt,
                parent_id=parent_session_id,
                forked_at_step=forked_at_step,
            )
        )
        self._recorder = StepRecorder(self.store, state.session_id)
        # step 0 holds the starting history, so a crash before the first step loses nothing
        self._recorder.commit(0, state.messages, {})
        self.economics.start()
        if self.economics.calls == 0:
            self.economics.set_baseline(estimate_tokens(self.system_prompt, self.tool_specs))
        self.observer.replay(history)
        return await self._drive(state, resumed=False)

    async def _start_hooks(self, state: LoopState, *, resumed: bool) -> bool:
        """SessionStart (and UserPromptSubmit for a new task); False when a hook stops the run."""
        start = await self._hook(
            HookEvent.SESSION_START, state, prompt=state.task, extra={"resumed": resumed}
        )
        if start is not None and start.halted:
            return self._halt(state, start)
        if resumed:
            return True
        submitted = await self._hook(HookEvent.USER_PROMPT_SUBMIT, state, prompt=state.task)
        if submitted is not None and submitted.denied:
            state.error = f"the task was refused by a hook: {submitted.reason}"
            state.finish_reason = FinishReason.HALTED
            return False
        return True

    def _halt(self, state: LoopState, outcome: HookRunResult) -> bool:
        state.error = f"stopped by a {outcome.event} hook: {outcome.reason}"
        state.finish_reason = FinishReason.HALTED
        return False

    async def _hook(
        self, event: HookEvent, state: LoopState, **fields: Any
    ) -> HookRunResult | None:
        """Run `event`'s hooks, queueing their messages for the model; None when none listen."""
        if not self.hooks.has(event):
            return None
        payload = HookPayload(session_id=state.session_id, cwd=str(self.workspace), **fields)
        outcome = await self.hooks.run(event, payload)
        for error in outcome.errors:
            self.emit(
                ev.ErrorOccurred(
                    ErrorCategory.INTERNAL.value,
                    f"{event} hook {error.hook!r} failed ({error.kind}): {error.message}",
                    False,
                    {},
                )
            )
        if outcome.message:
            state.pending_nudges.append(("hook", outcome.message))
        return outcome

    async def resume(self, session_id: str) -> RunResult:
        """Continue a stored session exactly where its last completed step left it."""
        record = self.store.load_session(session_id)
        step, checkpoint = self.store.checkpoint(session_id)
        messages = self.store.messages(session_id)
        self.system_prompt = record.system_prompt
        state = LoopState(
            task=record.task,
            session_id=session_id,
            parent_session_id=record.parent_id,
            messages=messages,
        )
        if checkpoint:
            counters = checkpoint["counters"]
            state.iterations = counters["iterations"]
            state.tool_calls_made = counters["tool_calls_made"]
            state.consecutive_mistakes = counters["consecutive_mistakes"]
            state.pending_nudges = [(kind, text) for kind, text in checkpoint["pending_nudges"]]
            self.token_ratio = float(checkpoint.get("token_ratio", 1.0))
            self.economics.restore(checkpoint["economics"])
            self.budget.restore(checkpoint["budget_gate"])
            if isinstance(self.mode, StatefulMode) and MODE_STATE in checkpoint:
                self.mode.restore(checkpoint[MODE_STATE])
        else:
            self.economics.start()
            self.economics.set_baseline(estimate_tokens(self.system_prompt, self.tool_specs))
        if self.on_restore is not None:
            self.on_restore()
        self.observer.replay(messages)
        self.store.clear_outcome(session_id)
        self._recorder = StepRecorder(
            self.store,
            session_id,
            saved_messages=len(messages),
            history_start=int(checkpoint.get(HISTORY_START, 0)),
        )
        assert step == state.iterations
        return await self._drive(state, resumed=True)

    async def _drive(self, state: LoopState, *, resumed: bool) -> RunResult:
        try:
            self.lifecycle.initialize()
            self.emit(
                ev.RunStarted(
                    session_id=state.session_id,
                    task=state.task,
                    provider=self.provider.name,
                    model=self.provider.model,
                    workspace=str(self.workspace),
                    parent_session_id=state.parent_session_id,
                    resumed_at_step=state.iterations if resumed else None,
                )
            )
            self.lifecycle.start()
            if await self._start_hooks(state, resumed=resumed):
                await self._loop(state, resumed=resumed)
        except asyncio.CancelledError:
            state.finish_reason = FinishReason.CANCELLED
            state.error = "cancelled by the user"
        except AgentError as error:
            state.finish_reason = finish_reason_for(error)
            state.error = error.message
            self.emit(
                ev.ErrorOccurred(
                    error.category.value, error.message, error.retryable, _safe_details(error)
                )
            )
        except Exception as error:  # the run must end with a result, whatever happened
            state.finish_reason = FinishReason.INTERNAL_ERROR
            state.error = f"{type(error).__name__}: {error}"
            self.emit(
                ev.ErrorOccurred(
                    ErrorCategory.INTERNAL.value,
                    state.error,
                    False,
                    {"traceback": traceback.format_exc(limit=8)},
                )
            )
        ending = state.finish_reason or FinishReason.INTERNAL_ERROR
        with contextlib.suppress(asyncio.CancelledError):  # a second Ctrl-C skips the hook
            await self._hook(
                HookEvent.SESSION_END,
                state,
                message=state.final_text or None,
                extra={"finish_reason": ending.value},
            )
        return self._finish(state)

    # --- the loop -----------------------------------------------------------------------

    async def _loop(self, state: LoopState, *, resumed: bool) -> None:
        continuing = self.economics.calls and not resumed
        if continuing and not self.economics.allow_task_continuation():
            # an agent reused for another task: refuse to start on a nearly spent budget
            state.budget = self.economics.check()
            state.error = (
                f"not starting a new task: {self.budget.capacity_message(state.budget)} "
                "leaves too little for it"
            )
            state.finish_reason = capacity_reason(state.budget)
            return
        while True:
            reason = await self._check_gates(state)
            if reason is not None:
                state.finish_reason = reason
                return
            self._deliver_nudges(state)
            if self._recorder is not None:
                self._recorder.step = state.iterations + 1
            await self.compact(state)
            if state.halted:
                return
            outcome = await self.mode.iterate(state, self)
            self._account(state, outcome)
            self._commit(state)
            if state.halted:
                return
            if outcome.finish_reason is not None and outcome.finish_reason.is_success:
                ruling = await self.verdict.review(state, outcome)
                if ruling is Ruling.RETRY:
                    continue
                if ruling is Ruling.REJECT:
                    return
                objection = await self._hook(HookEvent.STOP, state, message=outcome.final_text)
                if objection is not None and objection.halted:
                    self._halt(state, objection)
                    return
                if objection is not None and objection.denied:
                    # the hook wants more work: its reason goes back to the model
                    state.pending_nudges.append(
                        ("hook", f"Not done yet, says a Stop hook: {objection.reason}")
                    )
                    continue
            if outcome.finish_reason is not None:
                state.finish_reason = outcome.finish_reason
                state.final_text = outcome.final_text
                if outcome.finish_reason.category is FinishCategory.CAPACITY and state.budget:
                    state.error = (
                        f"{self.budget.capacity_message(state.budget)}; tools were withheld "
                        "and the model wrote a closing report"
                    )
                return

    async def _check_gates(self, state: LoopState) -> FinishReason | None:
        cfg = self.config
        if self.cancel_event.is_set():
            state.error = "cancelled"
            return FinishReason.CANCELLED
        status, nudges = await self.budget.check()
        state.budget = status
        if status.stop and status.driver is BudgetKind.ITERATIONS:
            state.error = self.budget.capacity_message(status)
            return FinishReason.MAX_ITERATIONS
        if state.consecutive_mistakes >= cfg.max_consecutive_mistakes:
            state.error = (
                f"{state.consecutive_mistakes} turns in a row produced only failed or "
                "malformed tool calls"
            )
            return FinishReason.MAX_CONSECUTIVE_MISTAKES
        if status.stop:
            state.error = self.budget.capacity_message(status)
            return capacity_reason(status)
        if self.observer.unproductive_streak >= cfg.max_unproductive_iterations:
            state.error = (
                f"{self.observer.unproductive_streak} turns in a row repeated earlier calls "
                "and results without anything new"
            )
            state.no_progress_snapshot = state.messages[-cfg.snapshot_messages :]
            return FinishReason.NO_PROGRESS
        state.pending_nudges.extend(nudges)
        return None

    def _deliver_nudges(self, state: LoopState) -> None:
        if not state.pending_nudges:
            return
        for kind, message in state.pending_nudges:
            self.emit(ev.NudgeInjected(kind, message))
        text = "\n\n".join(dict.fromkeys(m for _, m in state.pending_nudges))
        state.messages.append(Message.user(f"[journeyman] {text}"))
        state.pending_nudges.clear()

    def _account(self, state: LoopState, outcome: TurnOutcome) -> None:
        state.iterations += 1
        self.economics.record_iteration()
        state.tool_calls_made += len(outcome.calls)
        state.consecutive_mistakes = state.consecutive_mistakes + 1 if outcome.mistake else 0
        state.pending_nudges.extend(
            self.observer.observe(outcome.text, outcome.calls, outcome.results)
        )

    def _commit(self, state: LoopState) -> None:
        if self._recorder is None:
            return
        mode_state = self.mode.snapshot() if isinstance(self.mode, StatefulMode) else None
        self._recorder.commit(
            state.iterations,
            state.messages,
            {
                **({MODE_STATE: mode_state} if mode_state is not None else {}),
                "counters": {
                    "iterations": state.iterations,
                    "tool_calls_made": state.tool_calls_made,
                    "consecutive_mistakes": state.consecutive_mistakes,
                },
                "pending_nudges": [list(n) for n in state.pending_nudges],
                "economics": self.economics.snapshot(),
                "budget_gate": self.budget.snapshot(),
                "token_ratio": self.token_ratio,
                "lifecycle": self.lifecycle.state.value,
            },
        )

    def _finish(self, state: LoopState) -> RunResult:
        reason = state.finish_reason or FinishReason.INTERNAL_ERROR
        try:
            if self.lifecycle.state is AgentState.RUNNING:
                if reason.category is FinishCategory.FATAL:
                    self.lifecycle.fail(state.error)
                else:
                    self.lifecycle.complete()
                    self.lifecycle.finish()
            elif self.lifecycle.state is AgentState.INITIALIZING:
                self.lifecycle.fail(state.error)
        finally:
            result = RunResult(
                final_text=state.final_text,
                finish_reason=reason,
                iterations=state.iterations,
                tool_calls_made=state.tool_calls_made,
                usage=state.usage,
                cost_usd=state.cost_usd if state.model_calls else 0.0,
                duration_s=time.monotonic() - state.started_at,
                session_id=state.session_id,
                parent_session_id=state.parent_session_id,
                error=None if reason.is_success else state.error,
                no_progress_snapshot=state.no_progress_snapshot,
                store_path=str(self.store.path),
            )
            self.verdict.annotate(state, result)
            self.emit(ev.RunFinished(result))
            if self._recorder is not None:
                self._recorder.finish(
                    state.iterations, reason.value, state.final_text, result.error
                )
        return result

    # --- services for modes ---------------------------------------------------------------

    async def call_model(
        self, state: LoopState, *, tools_enabled: bool = True, extra: Sequence[Message] = ()
    ) -> ModelResponse:
        """One model call with the current history; emits events and accounts usage/cost."""

        def build() -> ModelRequest:
            return ModelRequest(
                system=self.system_prompt,
                messages=(*state.messages, *extra),
                tools=self.tool_specs if tools_enabled else (),
                max_output_tokens=self.config.max_output_tokens,
                temperature=self.config.temperature,
            )

        request = build()
        iteration = state.iterations + 1
        self.emit(ev.ModelRequestSent(iteration, len(request.messages), len(request.tools)))
        on_text = (lambda text: self.emit(ev.TextDelta(text))) if self.config.stream else None
        started = time.monotonic()
        try:
            response = await self.provider.complete(request, on_text)
        except ProviderError as error:
            # the provider says the prompt is too long: compact hard, then try once more
            if not error.details.get("context_overflow"):
                raise
            if not await self.compact(state, overflow=True):
                raise
            request = build()
            response = await self.provider.complete(request, on_text)
        latency = time.monotonic() - started
        self._calibrate(state, extra, request, response.usage)
        call_cost = cost_usd(self.provider.name, self.provider.model, response.usage)
        self._account_call(state, response.usage, call_cost, latency, tools_enabled)
        self.emit(
            ev.ModelResponseReceived(
                iteration=iteration,
                text=response.text,
                tool_calls=response.tool_calls,
                usage=response.usage,
                cost_usd=call_cost,
                stop_reason=response.stop_reason,
                latency_s=latency,
            )
        )
        return response

    def _calibrate(
        self, state: LoopState, extra: Sequence[Message], request: ModelRequest, usage: Usage
    ) -> None:
        """`request` was the history plus `extra`; compare its estimated size with the report."""
        reported = usage.total_input_tokens
        estimated = self.history_meter.tokens(
            state.messages, compaction.estimate_tokens(extra, self._fixed_tokens(request))
        )
        if reported > 0 and estimated > 0:
            self.token_ratio = min(4.0, max(0.25, reported / estimated))

    def _fixed_tokens(self, request: ModelRequest | None = None) -> int:
        tools = self.tool_specs if request is None else request.tools
        return estimate_tokens(self.system_prompt, tools)

    async def compact(self, state: LoopState, *, overflow: bool = False) -> bool:
        """Shrink the history when its projected size passes the trigger (always, on overflow).

        Returns whether the history changed. The budget baseline moves to the new size, so
        tokens that compaction removed stop counting against the token budget.
        """
        if self.compactor is None:
            return False
        window = self.provider.capabilities.context_window
        fixed = self._fixed_tokens()
        projected = int(self.history_meter.tokens(state.messages, fixed) * self.token_ratio)
        over_size = overflow or self.compactor.should_compact(projected, window)
        if not over_size and not self.compactor.stale_observations_due(
            state.messages, self.history_meter
        ):
            return False
        pre = await self._hook(
            HookEvent.PRE_COMPACT, state, extra={"tokens": projected, "overflow": overflow}
        )
        if pre is not None and pre.halted:
            self._halt(state, pre)
            return False
        if pre is not None and pre.denied and not overflow:
            return False  # a hook may veto a routine compaction, not a refused request
        if over_size:
            result = await self.compactor.compact(
                state.messages,
                context_window=int(window / self.token_ratio),
                fixed_tokens=fixed,
                summarise=lambda transcript: self._summarise(state, transcript),
                force=overflow,
            )
        else:
            result = await self.compactor.mask_stale(state.messages)
            result.tokens_before += fixed
            result.tokens_after += fixed
        if not result.changed:
            return False
        state.messages[:] = result.messages
        self.history_meter.reset()
        if self._recorder is not None:
            self._recorder.history_replaced()
        before = int(result.tokens_before * self.token_ratio)
        after = int(result.tokens_after * self.token_ratio)
        self.economics.update_baseline(after)
        self.emit(
            ev.ContextCompacted(
                "overflow" if overflow else "threshold" if over_size else "stale_observations",
                tuple(stage.value for stage in result.stages),
                before,
                after,
            )
        )
        await self._hook(
            HookEvent.POST_COMPACT,
            state,
            extra={"tokens_before": before, "tokens_after": after, "stages": result.stages},
        )
        return True

    async def _summarise(self, state: LoopState, transcript: str) -> str:
        """The compaction's model call; a failure only skips the summary stage."""
        request = ModelRequest(
            system=self.system_prompt,
            messages=(Message.user(compaction.SUMMARY_REQUEST.format(transcript=transcript)),),
            max_output_tokens=min(2_048, self.config.max_output_tokens),
            temperature=self.config.temperature,
        )
        started = time.monotonic()
        try:
            response = await self.provider.complete(request, None)
        except AgentError as error:
            log.warning("compaction summary failed: %s", error.message)
            return ""
        call_cost = cost_usd(self.provider.name, self.provider.model, response.usage)
        self._account_call(state, response.usage, call_cost, time.monotonic() - started, tools=True)
        return response.text

    def _account_call(
        self, state: LoopState, usage: Usage, call_cost: float | None, latency: float, tools: bool
    ) -> None:
        state.cost_usd = add_costs(state.cost_usd, call_cost, first=state.model_calls == 0)
        state.model_calls += 1
        state.usage = state.usage + usage
        record = self.economics.record_call(
            usage,
            call_cost,
            model=self.provider.model,
            latency_s=latency,
            phase=self.observer.phases.phase if tools else Phase.WRAPUP,
        )
        if self._recorder is not None:
            self._recorder.usage(
                UsageRow(
                    session_id=state.session_id,
                    call_index=record.index,
                    provider=self.provider.name,
                    model=self.provider.model,
                    usage=usage,
                    cost_usd=call_cost,
                    latency_s=latency,
                )
            )

    async def run_tools(self, state: LoopState, calls: Sequence[ToolCall]) -> list[ToolResult]:
        """Run one turn's calls: consecutive parallel-safe calls as a concurrent batch, others
        one at a time, keeping the model's order in the returned results."""
        ctx = ToolContext(
            self.workspace,
            session_id=state.session_id,
            iteration=state.iterations,
            journal=self._recorder.journal if self._recorder else None,
        )
        limit = asyncio.Semaphore(self.config.max_concurrency)
        iteration = state.iterations + 1
        allowed = _allowed_calls(state)
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
                result = await self._guarded_execute(state, call, ctx)
                self.emit(ev.ToolResultReceived(iteration, result, time.monotonic() - started))
                return result

        results: list[ToolResult] = []
        index = 0
        while index < len(calls):
            end = index + 1
            if self.registry.is_parallel_safe(calls[index]):
                while end < len(calls) and self.registry.is_parallel_safe(calls[end]):
                    end += 1
            results.extend(await asyncio.gather(*(one(c) for c in calls[index:end])))
            index = end
        for result in refused:
            self.emit(ev.ToolResultReceived(iteration, result, 0.0))
        return results + refused

    async def _guarded_execute(
        self, state: LoopState, call: ToolCall, ctx: ToolContext
    ) -> ToolResult:
        """Permission gate, PreToolUse hooks, the call itself, then PostToolUse hooks."""
        if state.halted:
            return _not_run(call, "not run: a hook stopped the run")
        read_only = self.registry.is_read_only(call)
        if self.permissions is not None and read_only is not None:  # unknown tools fail below
            refusal = await self.permissions.check_call(call, read_only=read_only)
            if refusal is not None:
                return refusal
        pre = await self._hook(
            HookEvent.PRE_TOOL_USE, state, tool_name=call.name, tool_args=call.arguments
        )
        if pre is not None and pre.halted:
            self._halt(state, pre)
            return _not_run(call, f"not run: {state.error}")
        if pre is not None and pre.denied:
            return _not_run(call, f"not run: a PreToolUse hook refused it: {pre.reason}")
        result = await self.registry.execute(call, ctx, self.config.tool_timeout_s)
        event = HookEvent.POST_TOOL_USE_FAILURE if result.is_error else HookEvent.POST_TOOL_USE
        post = await self._hook(
            event,
            state,
            tool_name=call.name,
            tool_args=call.arguments,
            tool_result=result.content,
            is_error=result.is_error,
        )
        if post is None:
            return result
        if post.halted:
            self._halt(state, post)
        return post.apply_to(result)


def _not_run(call: ToolCall, message: str) -> ToolResult:
    return ToolResult(
        call.id, call.name, f"{call.name}: {message}", is_error=True, metadata={"error": "hook"}
    )


def _allowed_calls(state: LoopState) -> int:
    budget = state.budget
    if budget is None or (budget.max_tool_calls is None and not budget.text_only):
        return 1_000_000
    return 0 if budget.text_only else budget.max_tool_calls or 0


def estimate_tokens(system: str, tools: Sequence[object]) -> int:
    """Rough size of the fixed prompt (4 characters a token) before the provider reports it."""
    return (len(system) + sum(len(repr(t)) for t in tools)) // 4


def new_session_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:8]


def finish_reason_for(error: AgentError) -> FinishReason:
    if error.category is ErrorCategory.CONFIGURATION:
        return FinishReason.CONFIGURATION_ERROR
    if error.category is ErrorCategory.CANCELLATION:
        return FinishReason.CANCELLED
    if isinstance(error, ProviderError) and error.details.get("exhausted"):
        return FinishReason.PROVIDER_UNAVAILABLE
    if error.category in (ErrorCategory.PROVIDER, ErrorCategory.LLM):
        return FinishReason.PROVIDER_UNAVAILABLE if error.retryable else FinishReason.PROVIDER_ERROR
    if error.category is ErrorCategory.BUDGET:
        return FinishReason.MAX_BUDGET_USD
    return FinishReason.INTERNAL_ERROR


def _safe_details(error: AgentError) -> dict[str, object]:
    return {k: v for k, v in error.details.items() if isinstance(v, str | int | float | bool)}
