"""The loop: gates in a fixed order, one mode turn, tools, accounting, persistence.

One iteration, top to bottom (DESIGN.md, "One iteration"):
  1. gates: cancellation, iterations, consecutive mistakes, budget (tokens, USD, duration),
     no progress; the budget may instead ask for an extension, nudge, or force text only
  2. pending nudges (budget, phase, loop) reach the model as one user message
  3. the mode builds the request and calls the provider (retries live in `resilient`)
  4. tool calls run: parallel-safe ones concurrently, the rest in order, each under a timeout
  5. every event is appended to the trajectory and every call to the usage log as it happens
  6. progress, mistakes, loop detector and phase tracker update
"""

from __future__ import annotations

import asyncio
import logging
import time
import traceback
import uuid
from collections.abc import Sequence
from pathlib import Path

from journeyman.core import events as ev
from journeyman.core.errors import AgentError, ErrorCategory, ProviderError
from journeyman.core.lifecycle import AgentState, LifecycleMachine
from journeyman.core.messages import Message, ToolCall, ToolResult
from journeyman.core.result import FinishCategory, FinishReason, RunResult
from journeyman.economics.approval import ExtensionApprover, deny_extensions
from journeyman.economics.budget import (
    BudgetKind,
    BudgetStatus,
    EnforcementLevel,
    ExecutionEconomics,
)
from journeyman.economics.loop_detector import LoopDetector, result_digest
from journeyman.economics.phases import Phase, PhaseTracker
from journeyman.economics.usage_log import DATABASE_FILE, UsageLog, UsageRow
from journeyman.loop import prompts
from journeyman.loop.config import AgentConfig
from journeyman.loop.modes import Mode
from journeyman.loop.state import LoopState, TurnOutcome
from journeyman.providers.base import ModelRequest, ModelResponse, Provider
from journeyman.providers.pricing import add_costs, cost_usd
from journeyman.session.trajectory import TrajectoryWriter, default_session_root
from journeyman.tools.context import ToolContext
from journeyman.tools.registry import ToolRegistry

log = logging.getLogger(__name__)


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
        on_event: ev.EventHandler | None = None,
        cancel_event: asyncio.Event | None = None,
        approver: ExtensionApprover = deny_extensions,
    ) -> None:
        self.provider = provider
        self.registry = registry
        self.mode = mode
        self.workspace = workspace
        self.config = config
        self.cancel_event = cancel_event or asyncio.Event()
        self.economics = economics
        self.approver = approver
        self.loop_detector = LoopDetector(threshold=config.loop_threshold)
        self.phases = PhaseTracker(config.exploration_saturation)
        self._usage_log: UsageLog | None = None
        self._last_level = EnforcementLevel.NONE
        self._last_nudge: str | None = None
        self._extension_asked_for: object = None
        self.lifecycle = LifecycleMachine()
        self.system_prompt = prompts.system_prompt(workspace, config.system_prompt)
        self.tool_specs = registry.specs()
        self._on_event = on_event
        self._writer: TrajectoryWriter | None = None
        self._warned_unpriced = False
        self.lifecycle.on_transition(
            lambda a, b, _meta: self.emit(ev.StateChanged(a.value, b.value))
        )

    # --- events -------------------------------------------------------------------------

    def emit(self, event: ev.Event) -> None:
        if self._writer is not None:
            self._writer.write(event)
        if self._on_event is not None:
            try:
                self._on_event(event)
            except Exception:  # a broken UI callback must not end the run
                log.exception("on_event callback failed for %s", event.type)

    # --- the run ------------------------------------------------------------------------

    async def run(
        self, task: str, *, session_id: str | None = None, parent_session_id: str | None = None
    ) -> RunResult:
        state = LoopState(
            task=task,
            session_id=session_id or new_session_id(),
            parent_session_id=parent_session_id,
            messages=[Message.user(task)],
        )
        root = self.config.session_dir or default_session_root()
        self._writer = TrajectoryWriter(root, state.session_id)
        self._usage_log = UsageLog(root / DATABASE_FILE)
        self.economics.start()
        if self.economics.calls == 0:
            self.economics.set_baseline(estimate_tokens(self.system_prompt, self.tool_specs))
        try:
            self.lifecycle.initialize()
            self.emit(
                ev.RunStarted(
                    session_id=state.session_id,
                    task=task,
                    provider=self.provider.name,
                    model=self.provider.model,
                    workspace=str(self.workspace),
                    parent_session_id=parent_session_id,
                )
            )
            self.lifecycle.start()
            await self._loop(state)
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
        return self._finish(state)

    async def _loop(self, state: LoopState) -> None:
        if self.economics.calls and not self.economics.allow_task_continuation():
            # an agent reused for another task: refuse to start on a nearly spent budget
            state.budget = self.economics.check()
            state.error = (
                f"not starting a new task: {self._capacity_message(state.budget)} "
                "leaves too little for it"
            )
            state.finish_reason = self.capacity_reason(state)
            return
        while True:
            reason = await self._check_gates(state)
            if reason is not None:
                state.finish_reason = reason
                return
            self._deliver_nudges(state)
            outcome = await self.mode.iterate(state, self)
            self._account(state, outcome)
            if outcome.finish_reason is not None:
                state.finish_reason = outcome.finish_reason
                state.final_text = outcome.final_text
                if outcome.finish_reason.category is FinishCategory.CAPACITY and state.budget:
                    state.error = (
                        f"{self._capacity_message(state.budget)}; tools were withheld and "
                        "the model wrote a closing report"
                    )
                return

    async def _check_gates(self, state: LoopState) -> FinishReason | None:
        cfg = self.config
        if self.cancel_event.is_set():
            state.error = "cancelled"
            return FinishReason.CANCELLED
        status = await self._budget_status(state)
        if status.stop and status.driver is BudgetKind.ITERATIONS:
            state.error = f"reached the limit of {cfg.max_iterations} iterations"
            return FinishReason.MAX_ITERATIONS
        if state.consecutive_mistakes >= cfg.max_consecutive_mistakes:
            state.error = (
                f"{state.consecutive_mistakes} turns in a row produced only failed or "
                "malformed tool calls"
            )
            return FinishReason.MAX_CONSECUTIVE_MISTAKES
        if status.stop:
            state.error = self._capacity_message(status)
            return self.capacity_reason(state)
        if state.progress.unproductive_streak >= cfg.max_unproductive_iterations:
            state.error = (
                f"{state.progress.unproductive_streak} turns in a row repeated earlier calls "
                "and results without anything new"
            )
            state.no_progress_snapshot = state.messages[-cfg.snapshot_messages :]
            return FinishReason.NO_PROGRESS
        return None

    async def _budget_status(self, state: LoopState) -> BudgetStatus:
        """The economics verdict for this turn, after asking for an extension if it helps."""
        if self.config.max_budget_usd is not None and self.economics.cost_usd is None:
            self._warn_unpriced()
        status = self.economics.check()
        extendable = status.driver in (BudgetKind.TOKENS, BudgetKind.USD)
        if (status.stop or status.text_only) and extendable and await self._try_extension(status):
            status = self.economics.check()
        state.budget = status
        self.emit(
            ev.BudgetUpdated(
                level=status.level.value,
                previous_level=self._last_level.value,
                fraction=round(status.fraction, 4),
                driver=status.driver.value if status.driver else None,
                incremental_tokens=self.economics.incremental_tokens,
                total_tokens=self.economics.total_tokens,
                cost_usd=self.economics.cost_usd,
                text_only=status.text_only,
                max_tool_calls=status.max_tool_calls,
            )
        )
        self._last_level = status.level
        if status.nudge and status.nudge != self._last_nudge and not status.stop:
            self._last_nudge = status.nudge
            state.pending_nudges.append(("budget", status.nudge))
        if status.text_only and self.phases.phase is not Phase.WRAPUP:
            state.pending_nudges.append(("budget", prompts.TEXT_ONLY))
        return status

    async def _try_extension(self, status: BudgetStatus) -> bool:
        """Ask the approver once per limit setting; True when the budget was extended."""
        limits = self.economics.limits
        if self._extension_asked_for == limits:
            return False
        self._extension_asked_for = limits
        share = self.config.extension_share
        add_tokens = int((self.config.max_total_tokens or 0) * share)
        add_usd = (self.config.max_budget_usd or 0.0) * share
        reason = f"the {status.driver.noun if status.driver else ''} budget is nearly spent"
        request = self.economics.request_extension(
            additional_tokens=add_tokens, additional_usd=add_usd, reason=reason
        )
        if not request.can_request:
            self.emit(ev.ExtensionDecided(False, add_tokens, add_usd, request.refusal or ""))
            return False
        self.emit(
            ev.ExtensionRequested(
                add_tokens, add_usd, reason, request.extensions_granted, request.max_extensions
            )
        )
        try:
            granted = bool(await self.approver(request))
        except Exception:  # an approver failure is a denial, never a crash
            log.exception("budget extension approver failed")
            granted = False
        self.emit(ev.ExtensionDecided(granted, add_tokens, add_usd))
        if granted:
            self.economics.record_extension(add_tokens, add_usd)
            self._last_nudge = None
        return granted

    def capacity_reason(self, state: LoopState) -> FinishReason:
        """The finish reason for the limit that drives the current budget status."""
        driver = state.budget.driver if state.budget else None
        return {
            BudgetKind.TOKENS: FinishReason.MAX_TOKENS,
            BudgetKind.USD: FinishReason.MAX_BUDGET_USD,
            BudgetKind.ITERATIONS: FinishReason.MAX_ITERATIONS,
            BudgetKind.DURATION: FinishReason.MAX_DURATION,
        }.get(driver or BudgetKind.TOKENS, FinishReason.MAX_TOKENS)

    def _capacity_message(self, status: BudgetStatus) -> str:
        eco, cfg = self.economics, self.config
        match status.driver:
            case BudgetKind.TOKENS:
                return (
                    f"used {eco.incremental_tokens:,} of {eco.limits.max_total_tokens:,} "
                    "budgeted tokens"
                )
            case BudgetKind.USD:
                return f"spent ${eco.cost_usd or 0:.4f} of the ${eco.limits.max_usd:g} limit"
            case BudgetKind.DURATION:
                return f"ran {eco.elapsed_s:.0f} s of the {cfg.max_duration_s:g} s limit"
            case _:
                return f"reached the limit of {cfg.max_iterations} iterations"

    def _deliver_nudges(self, state: LoopState) -> None:
        if not state.pending_nudges:
            return
        for kind, message in state.pending_nudges:
            self.emit(ev.NudgeInjected(kind, message))
        text = "\n\n".join(dict.fromkeys(m for _, m in state.pending_nudges))
        state.messages.append(Message.user(f"[journeyman] {text}"))
        state.pending_nudges.clear()

    def _warn_unpriced(self) -> None:
        if not self._warned_unpriced:
            self._warned_unpriced = True
            self.emit(
                ev.ErrorOccurred(
                    ErrorCategory.BUDGET.value,
                    f"the price of {self.provider.name}:{self.provider.model} is unknown, so "
                    "--max-budget-usd cannot be enforced; other limits still apply",
                    False,
                )
            )

    def _account(self, state: LoopState, outcome: TurnOutcome) -> None:
        state.iterations += 1
        self.economics.record_iteration()
        state.tool_calls_made += len(outcome.calls)
        state.consecutive_mistakes = state.consecutive_mistakes + 1 if outcome.mistake else 0
        state.progress.observe(outcome.text, outcome.calls, outcome.results)
        if not outcome.calls and outcome.text.strip():
            self.phases.record_text()
        for call, result in zip(outcome.calls, outcome.results, strict=False):
            path = call.arguments.get("path")
            nudges = self.phases.record(
                call.name, is_error=result.is_error, path=path if isinstance(path, str) else None
            )
            state.pending_nudges.extend((n.kind.value, n.message) for n in nudges)
            check = self.loop_detector.record(
                call.name, call.arguments, result_digest(result.content)
            )
            if check.is_loop:
                stuck = self.phases.note_loop(check)
                state.pending_nudges.append(("loop", check.message))
                if stuck is not None:
                    state.pending_nudges.append((stuck.kind.value, stuck.message))

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
                trajectory_path=str(self._writer.path) if self._writer else None,
            )
            self.emit(ev.RunFinished(result))
            if self._writer is not None:
                self._writer.close()
            if self._usage_log is not None:
                self._usage_log.close()
        return result

    # --- services for modes ---------------------------------------------------------------

    async def call_model(
        self, state: LoopState, *, tools_enabled: bool = True, extra: Sequence[Message] = ()
    ) -> ModelResponse:
        """One model call with the current history; emits events and accounts usage/cost."""
        request = ModelRequest(
            system=self.system_prompt,
            messages=(*state.messages, *extra),
            tools=self.tool_specs if tools_enabled else (),
            max_output_tokens=self.config.max_output_tokens,
            temperature=self.config.temperature,
        )
        iteration = state.iterations + 1
        self.emit(ev.ModelRequestSent(iteration, len(request.messages), len(request.tools)))
        on_text = (lambda text: self.emit(ev.TextDelta(text))) if self.config.stream else None
        started = time.monotonic()
        response = await self.provider.complete(request, on_text)
        latency = time.monotonic() - started
        call_cost = cost_usd(self.provider.name, self.provider.model, response.usage)
        state.cost_usd = add_costs(state.cost_usd, call_cost, first=state.model_calls == 0)
        state.model_calls += 1
        state.usage = state.usage + response.usage
        record = self.economics.record_call(
            response.usage,
            call_cost,
            model=self.provider.model,
            latency_s=latency,
            phase=self.phases.phase if tools_enabled else Phase.WRAPUP,
        )
        if self._usage_log is not None:
            self._usage_log.append(
                UsageRow(
                    session_id=state.session_id,
                    call_index=record.index,
                    provider=self.provider.name,
                    model=self.provider.model,
                    usage=response.usage,
                    cost_usd=call_cost,
                    latency_s=latency,
                )
            )
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

    async def run_tools(self, state: LoopState, calls: Sequence[ToolCall]) -> list[ToolResult]:
        """Run one turn's calls: consecutive parallel-safe calls as a concurrent batch, others
        one at a time, keeping the model's order in the returned results."""
        ctx = ToolContext(self.workspace, session_id=state.session_id, iteration=state.iterations)
        limit = asyncio.Semaphore(self.config.max_concurrency)
        iteration = state.iterations + 1
        allowed = self._allowed_calls(state)
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
                result = await self.registry.execute(call, ctx, self.config.tool_timeout_s)
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

    @staticmethod
    def _allowed_calls(state: LoopState) -> int:
        budget = state.budget
        if budget is None:
            return 1_000_000
        if budget.text_only:
            return 0
        return budget.max_tool_calls if budget.max_tool_calls is not None else 1_000_000


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
