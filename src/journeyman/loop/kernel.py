"""The loop: gates in a fixed order, one mode turn, accounting, persistence.

One iteration, top to bottom (DESIGN.md, "One iteration"):
  1. gates: cancellation, iterations, consecutive mistakes, budget (tokens, USD, duration),
     no progress; the budget gate may also ask for an extension, nudge, or force text only
  2. pending nudges (budget, phase, loop) reach the model as one user message
  3. the context window is compacted when it is due (`context_window`)
  4. the mode runs one turn through the `TurnPort`: model calls (`model_calls`) and tool calls
     (`tool_runner`: permissions, hooks, concurrency, timeouts)
  5. the observer updates progress, loop and phase knowledge and queues nudges
  6. the step (messages, events, usage, checkpoint) is committed in one transaction
  7. a success is accepted only once the harness's check (`verdict`) and the Stop hooks
     agree (`_accept_success`)
"""

from __future__ import annotations

import asyncio
import logging
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from journeyman.context.compaction import Compactor
from journeyman.core import events as ev
from journeyman.core.errors import AgentError, CancellationError, ErrorCategory
from journeyman.core.lifecycle import LifecycleMachine
from journeyman.core.messages import Message, ToolCall, ToolResult
from journeyman.core.result import FinishCategory, FinishReason, RunResult
from journeyman.economics.approval import ExtensionApprover, deny_extensions
from journeyman.economics.budget import BudgetKind, ExecutionEconomics
from journeyman.economics.loop_detector import LoopCheck
from journeyman.loop import prompts
from journeyman.loop.budget_gate import BudgetGate, capacity_reason
from journeyman.loop.checkpoint import checkpoint_of, load_checkpoint, restore_run
from journeyman.loop.config import AgentConfig
from journeyman.loop.context_window import ContextWindow
from journeyman.loop.endings import HookHalt, Termination, error_ending
from journeyman.loop.hooks import LoopHooks
from journeyman.loop.model_calls import ModelCalls
from journeyman.loop.modes import Mode, RepetitionPolicy, StatefulMode
from journeyman.loop.observer import LOOP_NUDGE, TurnObserver, deliver_nudges
from journeyman.loop.port import pending_diff
from journeyman.loop.recorder import StepRecorder, run_started
from journeyman.loop.state import LoopState, TurnOutcome
from journeyman.loop.tool_runner import ToolRunner
from journeyman.loop.verdict import Ruling, Verdict
from journeyman.policy.hooks import HookEvent, HookRunner
from journeyman.policy.permissions import PermissionGate
from journeyman.providers.base import ModelResponse, Provider
from journeyman.session.store import SessionRecord, SessionStore, new_session_id
from journeyman.tools.base import ToolKind
from journeyman.tools.registry import ToolRegistry

log = logging.getLogger(__name__)


class Kernel:
    """Runs the iteration; implements the `TurnPort` that modes use."""

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
        skills: str = "",
        lifecycle: LifecycleMachine | None = None,
        parent_call: str | None = None,
    ) -> None:
        self.parent_call = parent_call  # a subagent's: the spawn_agent call that started it
        self.provider = provider
        self.registry = registry
        self.mode = mode
        self.workspace = workspace
        self.config = config
        self.economics = economics
        self.store = store
        self.settings = settings or {}
        self.cancel_event = cancel_event or asyncio.Event()
        self.observer = TurnObserver(config, registry.kind_of)
        self.lifecycle = lifecycle or LifecycleMachine()
        name, pause = f"{provider.name}:{provider.model}", self.lifecycle.paused
        self.budget = BudgetGate(economics, config, approver, self.emit, lambda: name, pause)
        self.hooks = LoopHooks(hooks or HookRunner(cwd=workspace), workspace, self.emit)
        self.model = ModelCalls(
            provider,
            config,
            economics,
            self.emit,
            lambda: self.observer.phases.phase,
            registry.specs(),
            prompts.system_prompt(workspace, registry.names, config.system_prompt, rules, skills),
        )
        compactor = Compactor(config.compaction) if config.compaction else None
        self.window = ContextWindow(compactor, self.model, self.hooks, economics, self.emit)
        self.model.compact_on_overflow = self.window.overflow
        self.tools = ToolRunner(registry, workspace, config, self.hooks, permissions, self.emit)
        self._on_event = on_event
        self._recorder: StepRecorder | None = None
        self.on_restore: Callable[[LoopState], object] | None = None
        """Called with a resumed run's state once loaded (new limits, a follow-up message)."""
        self._unlisten = self.lifecycle.on_transition(
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
        self.check_command, self.run_check = self.verdict.command, self.verdict.check
        self.summarise = self.model.summarise

    # --- the TurnPort ---------------------------------------------------------------------

    def emit(self, event: ev.Event) -> None:
        if self._recorder is not None:
            self._recorder.event(event)
        if self._on_event is not None:
            try:
                self._on_event(event)
            except Exception:  # a broken UI callback must not end the run
                log.exception("on_event callback failed for %s", event.type)

    async def call_model(
        self, state: LoopState, *, tools_enabled: bool = True, extra: Sequence[Message] = ()
    ) -> ModelResponse:
        return await self.model.call(state, tools_enabled=tools_enabled, extra=extra)

    async def run_tools(self, state: LoopState, calls: Sequence[ToolCall]) -> list[ToolResult]:
        return await self.tools.run(state, calls)

    def tool_kind(self, call: ToolCall) -> ToolKind | None:
        tool = self.registry.get(call.name)
        return None if tool is None else tool.kind

    def record_repetition(
        self, name: str, arguments: Mapping[str, Any], result_digest: str
    ) -> LoopCheck:
        return self.observer.loops.record(name, dict(arguments), result_digest)

    def forget_repetitions(self) -> None:
        self.observer.loops.reset()

    def pending_diff(self, session_id: str) -> str:
        return pending_diff(self.store, session_id, self.workspace)

    # --- starting a run -------------------------------------------------------------------

    async def run(
        self,
        task: str,
        *,
        session_id: str | None = None,
        parent_session_id: str | None = None,
        history: Sequence[Message] = (),
        forked_at_step: int | None = None,
    ) -> RunResult:
        """A new session; `history` (a fork's first steps) comes before the task.

        Raises `ConfigurationError`, storing nothing, for a setting that rules out any run."""
        self.budget.require_price(self.model.priced)
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
                system_prompt=self.model.system_prompt,
                parent_id=parent_session_id,
                forked_at_step=forked_at_step,
            )
        )
        self._attach(StepRecorder(self.store, state.session_id))
        # step 0 holds the starting history, so a crash before the first step loses nothing
        self._recorder_commit(state, {})
        self.economics.start()
        if self.economics.calls == 0:
            self.economics.set_baseline(self.model.fixed_tokens())
        self.economics.iterations = 0  # the iteration limit counts this run's turns
        self.observer.replay(history)
        return await self._drive(state, resumed=False)

    async def resume(self, session_id: str, *, follow_up: bool = False) -> RunResult:
        """Continue a stored session exactly where its last completed step left it;
        `follow_up` when `on_restore` adds a new user message, which is a new task to the
        budget (the same continuation gate as a second `run`)."""
        record = self.store.load_session(session_id)
        step, stored = self.store.checkpoint(session_id)
        messages = self.store.messages(session_id)
        if self.config.system_prompt is not None or not prompts.names_unoffered(
            record.system_prompt, self.registry.names
        ):
            self.model.system_prompt = record.system_prompt
        # else the stored prompt names tools this run does not offer (it was written for
        # another provider's edit tool): the prompt built for this run's tools replaces it
        state = LoopState(
            task=record.task,
            session_id=session_id,
            parent_session_id=record.parent_id,
            messages=messages,
        )
        history_start = 0
        if stored:
            checkpoint = load_checkpoint(stored, session_id=session_id)
            restore_run(state, checkpoint, self.economics, self.budget, self.mode)
            history_start = checkpoint.history_start
        else:
            self.economics.start()
            self.economics.set_baseline(self.model.fixed_tokens())
        if self.on_restore is not None:
            self.on_restore(state)
        self.observer.replay(messages)
        self.store.clear_outcome(session_id)
        # on_restore stores what it adds (a follow-up) at once: the recorder starts after it
        recorder = StepRecorder(self.store, session_id, len(state.messages), history_start)
        self._attach(recorder)
        await recorder.reconcile_interrupted_command(self.workspace, step + 1)
        assert step == state.iterations
        return await self._drive(state, resumed=True, new_task=follow_up)

    def _attach(self, recorder: StepRecorder) -> None:
        self._recorder = self.model.recorder = self.window.recorder = self.tools.recorder = recorder

    async def _drive(self, state: LoopState, *, resumed: bool, new_task: bool = True) -> RunResult:
        """Run the loop to its ending; every way out of it is caught here, once."""
        try:
            self.lifecycle.begin_run()
            self.emit(run_started(state, self.provider, self.workspace, resumed, self.parent_call))
            state.ending = await self.hooks.start(state, resumed=resumed)
            if state.ending is None:
                state.ending = await self._loop(state, new_task=new_task, resumed=resumed)
        except HookHalt as halt:
            state.ending = Termination(FinishReason.HALTED, halt.message)
        except asyncio.CancelledError:
            state.ending = error_ending(self.emit, CancellationError("cancelled by the user"))
        except AgentError as error:
            state.ending = error_ending(self.emit, error)
        except Exception as error:  # the run must end with a result, whatever happened
            message = f"{type(error).__name__}: {error}"
            details = {"traceback": traceback.format_exc(limit=8)}
            self.emit(ev.ErrorOccurred(ErrorCategory.INTERNAL.value, message, False, details))
            state.ending = Termination(FinishReason.INTERNAL_ERROR, message)
        await self._disarm_git()
        await self.hooks.end(state, state.ending)
        return self._finish(state, state.ending, resumed=resumed)

    async def _disarm_git(self) -> None:
        """Git metadata a left-over process changed after the last command is disarmed too;
        the user is told what was removed."""
        try:
            warnings = await self.tools.disarm_git()
        except Exception as error:  # never lose the run's result to this check
            log.warning("could not check the workspace's git metadata: %s", error)
            return
        for warning in warnings:
            details = {"warning": "git_disarmed"}
            self.emit(ev.ErrorOccurred(ErrorCategory.TOOL.value, warning, False, details))

    # --- the loop ---------------------------------------------------------------------------

    async def _loop(self, state: LoopState, *, new_task: bool, resumed: bool) -> Termination:
        self.budget.require_price(self.model.priced)  # a resumed session may now lack a price
        if new_task and self.economics.calls and not self.economics.allow_task_continuation():
            # another task on a budget already used (a reused agent, a follow-up message):
            # refuse to start it on a nearly spent budget
            state.budget = self.economics.check()
            spent = self.budget.capacity_message(state.budget.driver)
            refusal = f"not starting a new task: {spent} leaves too little for it"
            return Termination(capacity_reason(state.budget), refusal)
        if not resumed:
            await self.verdict.prepare(state)  # the check is fixed before the first turn
        self.lifecycle.start()  # initialised: hooks ran, the check is fixed and has its baseline
        while True:
            ending = await self._check_gates(state)
            if ending is not None:
                return ending
            deliver_nudges(state, self.emit)
            if self._recorder is not None:
                self._recorder.step = state.iterations + 1
            await self.window.compact(state)
            if state.budget is not None and state.budget.text_only:
                self.lifecycle.begin_completing()  # this turn writes the closing report
            outcome = await self.mode.iterate(state, self)
            stop = self._account(state, outcome)
            self._commit(state)
            if stop is not None:
                return stop
            reason = outcome.finish_reason
            if reason is None:
                continue
            if reason.is_success:
                accepted = await self._accept_success(state, outcome)
                if accepted is None:
                    continue
                return accepted
            state.final_text = outcome.final_text
            message = outcome.error
            if reason.category is FinishCategory.CAPACITY and state.budget is not None:
                spent = self.budget.capacity_message(state.budget.driver)
                message = f"{spent}; tools were withheld and the model wrote a closing report"
            return Termination(reason, message)

    async def _accept_success(self, state: LoopState, outcome: TurnOutcome) -> Termination | None:
        """The one place where a success claim is accepted (its ending), sent back to work
        (None) or turned down (a failing ending): first the harness's own check (`verdict`),
        then the Stop hooks, whose reason for more work goes back to the model."""
        assert outcome.finish_reason is not None
        ruling = await self.verdict.review(state, outcome)
        if isinstance(ruling, Termination):
            return ruling
        if ruling is Ruling.RETRY:
            return None
        objection = await self.hooks.run(HookEvent.STOP, state, message=outcome.final_text)
        if objection is not None and objection.denied:
            state.pending_nudges.append(
                ("hook", f"Not done yet, says a Stop hook: {objection.reason}")
            )
            return None
        state.final_text = outcome.final_text
        return Termination(outcome.finish_reason, outcome.error)

    async def _check_gates(self, state: LoopState) -> Termination | None:
        """Cancellation, iterations, mistakes, the budget, progress; a cancellation or a
        capacity stop raises its error, the others end the run with a Termination."""
        cfg = self.config
        if self.cancel_event.is_set():
            raise CancellationError("cancelled")
        status, nudges = await self.budget.check()
        state.budget = status
        hard = self.budget.hard_limit()
        if BudgetKind.ITERATIONS in (hard, status.driver if status.stop else None):
            raise self.budget.exhausted(BudgetKind.ITERATIONS)
        if state.consecutive_mistakes >= cfg.max_consecutive_mistakes:
            message = (
                f"{state.consecutive_mistakes} turns in a row produced only failed or "
                "malformed tool calls"
            )
            return Termination(FinishReason.MAX_CONSECUTIVE_MISTAKES, message)
        if status.stop or hard is not None:
            raise self.budget.exhausted(status.driver if status.stop else hard)
        streak = self.observer.unproductive_streak
        if streak >= cfg.max_unproductive_iterations:
            state.no_progress_snapshot = state.messages[-cfg.snapshot_messages :]
            message = (
                f"{streak} turns in a row repeated earlier calls and results without anything new"
            )
            return Termination(FinishReason.NO_PROGRESS, message)
        state.pending_nudges.extend(nudges)
        return None

    def _account(self, state: LoopState, outcome: TurnOutcome) -> Termination | None:
        """Count the turn and let the observer learn from it; a mode with its own answer to
        repeated actions gets the repetition instead of the plain loop nudge."""
        state.iterations += 1
        self.economics.record_iteration()
        state.tool_calls_made += len(outcome.calls)
        state.consecutive_mistakes = state.consecutive_mistakes + 1 if outcome.mistake else 0
        nudges = self.observer.observe(outcome)
        loop = self.observer.last_loop
        if loop is None or not isinstance(self.mode, RepetitionPolicy):
            state.pending_nudges.extend(nudges)
            return None
        state.pending_nudges.extend(n for n in nudges if n[0] != LOOP_NUDGE)
        return self.mode.on_repetition(state, loop, self)

    # --- persistence ------------------------------------------------------------------------

    def _commit(self, state: LoopState) -> None:
        mode_state = self.mode.snapshot() if isinstance(self.mode, StatefulMode) else None
        checkpoint = checkpoint_of(
            state, self.economics, self.budget, mode_state, self.lifecycle.state
        )
        self._recorder_commit(state, checkpoint.to_json())

    def _recorder_commit(self, state: LoopState, checkpoint: dict[str, Any]) -> None:
        if self._recorder is not None:
            self._recorder.commit(state.iterations, state.messages, checkpoint)

    def _finish(self, state: LoopState, ending: Termination, *, resumed: bool) -> RunResult:
        reason = ending.reason
        try:
            self.lifecycle.settle(
                failed=reason.category is FinishCategory.FATAL, error=ending.message
            )
        finally:
            result = state.result(ending, str(self.store.path))
            self.verdict.annotate(state, result)
            discard = not resumed and never_reached_the_model(result)
            if discard:  # nothing to resume or inspect: the same command, fixed, starts again
                self.store.delete_session(state.session_id)
                result.store_path = None
            self.emit(ev.RunFinished(result))
            if self._recorder is not None and not discard:
                self._recorder.finish(
                    state.iterations, reason.value, state.final_text, result.error
                )
            self._unlisten()
        return result


def never_reached_the_model(result: RunResult) -> bool:
    """A new session that ended on a configuration error (a key the server refused, a model
    it does not have) before any model call was answered: it holds nothing worth keeping."""
    return (
        result.finish_reason is FinishReason.CONFIGURATION_ERROR
        and result.iterations == 0
        and result.usage.total_tokens == 0
        and not result.cost_usd
    )
