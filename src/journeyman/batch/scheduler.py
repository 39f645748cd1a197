"""The batch runner: every task of a batch through an `Executor`, under one global ledger.

Order of business for each task:
  1. reserve its allocation from the ledger (its per-task budget, or a fair share of what is
     left among the tasks still to start, never less than its first model call costs:
     `opening_floor`); a refusal stops all new work — tasks in flight finish within their
     allocations and the batch ends "budget exhausted after K of N", the tasks never started
     reported "not run" (a later run of the batch with more budget runs them);
  2. prepare its workspace (a copy or clone, never the original) and run the attempt;
  3. settle the reservation with what the session store says the attempt spent;
  4. record the result (appended and synced), or requeue: an infrastructure error is retried
     from the session's last step (up to `max_infra_retries`); an attempt that gave up on a
     rate limit (its calls wait out 429s through the shared limiter, `providers.rate_limit`,
     so this is rare) lowers the concurrency for that provider and retries later; an agent
     failure is final unless `retry_failed`.

Resuming (`resume_state`): the store is the truth. Each task's sessions are found by their
deterministic ids, the ledger is charged with everything they already spent, finished tasks
are skipped and interrupted ones resumed. Nothing is charged twice: what an attempt spent is
always read back from its usage rows, never added up from reports.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections import deque
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from journeyman.batch.events import (
    RATE_LIMITED,
    BatchEvent,
    BatchEventHandler,
    BatchFinished,
    BatchStarted,
    BudgetExhausted,
    SettingIgnored,
    Spend,
    TaskCounts,
    TaskFinished,
    TaskRequeued,
    TaskSkipped,
    TaskStarted,
)
from journeyman.batch.executor import Executor
from journeyman.batch.job import (
    INFRA_REASONS,
    Spending,
    TaskJob,
    TaskOutcome,
    session_id_for,
    session_spending,
)
from journeyman.batch.results import TaskResult, append_result
from journeyman.batch.task_file import BatchTask
from journeyman.batch.workspaces import WorkspaceError, prepare_workspace
from journeyman.core.result import FinishCategory, FinishReason
from journeyman.core.text import one_line
from journeyman.economics.ledger import (
    AllocationRefused,
    Amount,
    BudgetLedger,
    LedgerPolicy,
    LedgerStats,
    Reservation,
)
from journeyman.session.store import SessionNotFoundError, SessionStore

MAX_ATTEMPTS_PROBED = 20
"""Fresh attempts of one task a resumed batch looks for in the store."""
BUDGET_EXHAUSTED = "budget_exhausted"
"""Finish reason of a task never started because the global budget could not cover it."""


class LedgerClient(Protocol):
    """The global ledger as the scheduler uses it (a `BudgetLedger`, or a proxy to one that
    lives where every node of a cluster sees it)."""

    def reserve(
        self,
        holder: str,
        *,
        sharers: int = 1,
        request: Amount | None = None,
        floor: Amount | None = None,
    ) -> Reservation: ...

    def settle(self, reservation: Reservation, used: Amount) -> Amount: ...

    def charge(self, used: Amount) -> None: ...

    def stats(self) -> LedgerStats: ...


@dataclass
class BatchSettings:
    """How a batch runs (everything but the tasks and the executor)."""

    batch_id: str
    out: Path
    """Where results, reports and the task workspaces go."""
    store_path: Path
    """The session store of the batch's sessions."""
    model: str | None = None
    provider: str | None = None
    base_url: str | None = None
    mode: str = "react"
    verify: str | None = None
    """The batch's check command (a task's own `verify` wins)."""
    global_usd: float | None = None
    global_tokens: int | None = None
    per_task_usd: float | None = None
    per_task_tokens: int | None = None
    retry_failed: bool = False
    """Give tasks that failed (the agent's failure, not the infrastructure's) a fresh attempt."""
    max_infra_retries: int = 2
    """Retries of a task whose attempt ended with an infrastructure error, per run of the batch."""
    infra_retry_delay_s: float = 1.0
    """Pause before the first retry after an infrastructure error; doubled for each next one."""
    max_rate_limit_requeues: int = 20
    """Times one task may be put back after a 429 before it counts as an infrastructure error."""
    rate_limit_backoff_s: float = 2.0
    """First pause after a 429 when the provider names none; doubled each time, up to a minute."""
    config: dict[str, Any] = field(default_factory=dict)
    """Further `AgentConfig` fields for every task (JSON values)."""
    trace: bool = False
    """Send OpenTelemetry traces of every attempt (one trace each)."""
    container_problem: str | None = None
    """Why tasks that name a container image cannot run here (no engine answers); those
    tasks end "not run" with it, the others run. None: they run (`batch.containers`)."""


@dataclass
class TaskState:
    """What the scheduler knows of one task."""

    task: BatchTask
    attempt: int = 1
    spent: Spending = field(default_factory=lambda: Spending(0.0, 0))
    """All its sessions together, as the store counts them."""
    result: TaskResult | None = None
    """Set once the task is finished (for this run of the batch)."""
    infra_retries: int = 0
    rate_limit_requeues: int = 0
    duration_s: float = 0.0
    resumed: bool = False
    """An earlier run of the batch left its session unfinished."""
    runs: int = 0
    """Times the task was started, over every run of the batch (a resume after an
    infrastructure error or a 429 counts, as does a fresh attempt)."""
    retry_delay_s: float = 0.0
    """Pause before the next attempt (after an infrastructure error)."""


@dataclass
class ProviderGate:
    """How many attempts may run at once against one provider: lowered on a 429, restored
    step by step as calls succeed again."""

    ceiling: int
    limit: int = 0
    running: int = 0
    paused_until: float = 0.0
    backoff_s: float = 0.0
    successes: int = 0

    def __post_init__(self) -> None:
        self.limit = self.limit or self.ceiling

    def open(self, now: float) -> bool:
        return self.running < self.limit and now >= self.paused_until

    def rate_limited(self, now: float, retry_after: float | None, first_backoff: float) -> None:
        self.limit = max(1, self.limit // 2)
        self.backoff_s = min(60.0, self.backoff_s * 2 if self.backoff_s else first_backoff)
        wait = max(self.backoff_s, retry_after or 0.0)
        self.paused_until = max(self.paused_until, now + wait)
        self.successes = 0

    def succeeded(self) -> None:
        self.successes += 1
        if self.limit < self.ceiling and self.successes >= self.limit:
            self.limit += 1
            self.successes = 0
        if self.limit == self.ceiling:
            self.backoff_s = 0.0


@dataclass
class BatchSummary:
    """How a batch ended."""

    batch_id: str
    results: list[TaskResult]
    budget_exhausted: bool
    spent: Amount
    cap: Amount
    overspend: Amount
    started_tasks: int
    """Tasks that ran (or had run) at least once."""

    def count(self, status: str) -> int:
        return sum(1 for r in self.results if r.status == status)

    @property
    def all_succeeded(self) -> bool:
        return bool(self.results) and all(r.status == "succeeded" for r in self.results)

    def line(self) -> str:
        total = len(self.results)
        parts = [
            f"{self.count('succeeded')} succeeded",
            f"{self.count('failed')} failed",
            f"{self.count('infra_error')} infrastructure errors",
            f"{self.count('not_run')} not run",
        ]
        text = f"batch {self.batch_id}: {tasks_count(total)}: " + ", ".join(parts)
        if self.budget_exhausted:
            text += f"; budget exhausted after {self.started_tasks} of {tasks_count(total)}"
        text += f"; spent {describe_spend(self.spent, self.cap)}"
        return text


def tasks_count(n: int) -> str:
    """ "1 task", "3 tasks"."""
    return f"{n} task" if n == 1 else f"{n} tasks"


def describe_spend(spent: Amount, cap: Amount) -> str:
    parts = []
    if spent.usd is not None:
        parts.append(f"${spent.usd:.4f}" + (f" of ${cap.usd:.4f}" if cap.usd is not None else ""))
    if spent.tokens is not None:
        of = f" of {cap.tokens:,}" if cap.tokens is not None else ""
        parts.append(f"{spent.tokens:,}{of} tokens")
    return " and ".join(parts) or "nothing"


def open_ledger(settings: BatchSettings, task_count: int) -> BudgetLedger:
    """The batch's one ledger: no share kept back for an owner, no cap on one holder's share
    but its allocation; a task with a per-task budget starts only when all of it can be
    reserved, and no task gets less than its first model call costs (the floor each
    reservation brings, `opening_floor`). `task_count` is kept for callers' convenience."""
    del task_count  # fair shares are sized at each reservation, among the tasks left
    return BudgetLedger(
        Amount(settings.global_tokens, settings.global_usd),
        LedgerPolicy(
            reserve_share=0.0,
            max_share=1.0,
            min_tokens=settings.per_task_tokens or 1,
            min_usd=settings.per_task_usd or 0.0,
        ),
    )


def opening_floor(task: BatchTask, settings: BatchSettings) -> Amount:
    """The least the first model call of `task` costs: its prompt (the built-in system prompt
    with the workspace's rules, the tools, the task) bounded as the run will bound it, and the
    shortest useful reply, at the batch's model's price. No smaller allocation is granted."""
    from journeyman.context.rules import RulesLoader, render_rules_section
    from journeyman.loop import prompts
    from journeyman.loop.agent import ASK_TOOL_KINDS
    from journeyman.loop.call_budget import opening_call_floor
    from journeyman.providers.factory import DEFAULT_MODELS, detect_provider, parse_spec
    from journeyman.providers.pricing import model_pricer
    from journeyman.tools.builtin import default_tools
    from journeyman.tools.registry import ToolRegistry

    name, spec_model = parse_spec(settings.provider) if settings.provider else (None, None)
    name = name or detect_provider() or ("openai" if settings.base_url else "")
    model = (
        settings.model
        or spec_model
        or os.environ.get("JOURNEYMAN_MODEL")
        or DEFAULT_MODELS.get(name, "")
    )
    config = settings.config
    workspace = Path(task.workspace)
    rules = render_rules_section(RulesLoader(workspace)) if workspace.is_dir() else ""
    tools = ToolRegistry(
        default_tools(
            journal_commands=False, edit_tool=config.get("edit_tool", "auto"), provider=name
        )
    )
    if settings.mode == "ask":
        tools = tools.restricted_to(ASK_TOOL_KINDS)
    system = prompts.system_prompt(workspace, tools.names, config.get("system_prompt"), rules)
    price = config.get("price_per_mtok")
    per_mtok = None if price is None else (float(price[0]), float(price[1]))
    floor = opening_call_floor(
        system, tools.specs(), task.task, model_pricer(per_mtok, name, model)
    )
    return Amount(floor.tokens, floor.usd)


def resume_state(
    tasks: list[BatchTask],
    settings: BatchSettings,
    store: SessionStore,
    previous: dict[str, TaskResult],
) -> list[TaskState]:
    """Each task's state as the store (and the results an earlier run wrote) leave it."""
    states = []
    for task in tasks:
        state = TaskState(task)
        usd, tokens, last = 0.0, 0, 0
        for attempt in range(1, MAX_ATTEMPTS_PROBED + 1):
            session_id = session_id_for(settings.batch_id, task.id, attempt)
            spent = session_spending(store, session_id)
            usd, tokens = usd + spent.usd, tokens + spent.tokens
            if _exists(store, session_id):
                last = attempt
        state.spent = Spending(usd, tokens)
        earlier = previous.get(task.id)
        if last:
            state.attempt = last
            summary = store.summary(session_id_for(settings.batch_id, task.id, last))
            reason = _reason(summary.finish_reason)
            # the time its earlier runs took: from their row, else from the stored steps
            if earlier is not None and earlier.session_id is not None:
                state.duration_s, state.runs = earlier.duration_s, max(earlier.attempts, 1)
            else:
                state.duration_s, state.runs = _stored_duration(store, summary.record), last
            if reason is None or reason in INFRA_REASONS:
                state.resumed = True
            elif reason.category is FinishCategory.SUCCESS or not settings.retry_failed:
                state.result = _stored_result(task, state, summary, reason, earlier)
            else:
                state.attempt = last + 1  # --retry-failed: a fresh attempt, in a fresh copy
        states.append(state)
    return states


def batch_spending(store: SessionStore, batch_id: str) -> Amount:
    """What every session of the batch spent, tasks since removed from its file included."""
    prefix = f"{batch_id}-t"  # the shape of `session_id_for`
    tokens, usd = 0, 0.0
    for row in store.usage_rows():
        if row.session_id.startswith(prefix):
            tokens += row.usage.total_tokens
            usd += row.cost_usd or 0.0
    return Amount(tokens, usd)


def _stored_duration(store: SessionStore, record: Any) -> float:
    """How long a session ran, as its stored steps tell (from its start to its last step):
    the estimate for a run whose row the batch never wrote (it was killed first)."""
    last = None
    for _step, stored_at, _checkpoint in store.step_checkpoints(record.id):
        last = stored_at
    return max(0.0, last - record.created_at) if last is not None else 0.0


def _reason(value: str | None) -> FinishReason | None:
    if value is None:
        return None
    try:
        return FinishReason(value)
    except ValueError:
        return FinishReason.INTERNAL_ERROR


def _exists(store: SessionStore, session_id: str) -> bool:
    try:
        store.load_session(session_id)
    except SessionNotFoundError:
        return False
    return True


def _stored_result(
    task: BatchTask,
    state: TaskState,
    summary: Any,
    reason: FinishReason,
    earlier: TaskResult | None,
) -> TaskResult:
    """A finished task's row: the earlier run's, when it wrote one for this session; else
    rebuilt from the store (the batch died between the session's end and its row)."""
    session_id = summary.record.id
    if earlier is not None and earlier.session_id == session_id:
        return earlier
    return TaskResult(
        id=task.id,
        status="succeeded" if reason.category is FinishCategory.SUCCESS else "failed",
        finish_reason=reason.value,
        cost_usd=round(state.spent.usd, 10),
        tokens=state.spent.tokens,
        duration_s=round(state.duration_s, 3),
        iterations=summary.steps,
        verify_passed=None,
        session_id=session_id,
        attempts=state.runs,
        error=summary.error,
        task=_short(task.task),
    )


def _short(text: str, limit: int = 200) -> str:
    return one_line(text, limit)


class Scheduler:
    """Runs one batch; `run` returns its summary."""

    def __init__(
        self,
        tasks: list[BatchTask],
        settings: BatchSettings,
        executor: Executor,
        *,
        ledger: LedgerClient | None = None,
        on_event: BatchEventHandler | None = None,
    ) -> None:
        self.tasks = tasks
        self.settings = settings
        self.executor = executor
        self.ledger: LedgerClient = ledger or open_ledger(settings, len(tasks))
        self.on_event: BatchEventHandler = on_event or (lambda event: None)
        self.states: list[TaskState] = []
        self.gate = ProviderGate(ceiling=executor.max_parallel)
        self.budget_exhausted = False
        self._floors: dict[str, Amount] = {}
        self._wake = asyncio.Event()
        self._failures: list[BaseException | None] = []
        """Exceptions of the scheduler's own attempt coroutines (a bug, raised after the run)."""
        self._rate_limiter: Any = None
        """How the attempts reach the shared rate limiter (`executor.rate_limiter()`)."""

    # --- public ---------------------------------------------------------------------------

    async def run(self) -> BatchSummary:
        settings = self.settings
        (settings.out / "workspaces").mkdir(parents=True, exist_ok=True)
        from journeyman.batch.results import read_results

        store = SessionStore(settings.store_path)
        try:
            self.states = resume_state(self.tasks, settings, store, read_results(settings.out))
            already = batch_spending(store, settings.batch_id)
        finally:
            store.close()
        if already.tokens or already.usd:
            self.ledger.charge(already)  # what earlier runs of the batch spent
        self._refuse_without_engine()
        pending = deque(s for s in self.states if s.result is None)
        shared = getattr(self.executor, "rate_limiter", None)  # every executor of ours has one
        if pending and callable(shared):
            self._rate_limiter = await asyncio.to_thread(shared)
        self._emit(
            BatchStarted(
                self.settings.batch_id,
                tasks=len(self.states),
                to_run=len(pending),
                finished_before=len(self.states) - len(pending),
                resumed=sum(1 for s in pending if s.resumed),
                spent_before_usd=already.usd,
                spent_before_tokens=already.tokens,
                counts=self.counts(),
            )
        )
        for state in self.states:
            if state.result is not None:
                skipped = TaskSkipped(
                    self.settings.batch_id, state.task.id, state.result.status, self.counts()
                )
                self._emit(skipped)
        await self._drive(pending)
        for failure in self._failures:
            if failure is not None:
                raise failure
        for state in self.states:
            if state.result is None:  # never started: the budget ran out first
                state.result = self._not_run(state)
                append_result(settings.out, state.result)
        stats = self.ledger.stats()
        summary = BatchSummary(
            batch_id=settings.batch_id,
            results=[s.result for s in self.states if s.result is not None],
            budget_exhausted=self.budget_exhausted,
            spent=stats.spent,
            cap=stats.total,
            overspend=stats.overspend,
            started_tasks=sum(1 for s in self.states if s.result and s.result.attempts > 0),
        )
        self._emit(BatchFinished(settings.batch_id, summary.line(), self._spend(), self.counts()))
        return summary

    # --- the loop -------------------------------------------------------------------------

    async def _drive(self, pending: deque[TaskState]) -> None:
        running: set[asyncio.Task[None]] = set()
        while (pending and not self.budget_exhausted) or running:
            now = time.monotonic()
            waiting_for_budget = False
            while pending and not self.budget_exhausted and self.gate.open(now):
                state = pending.popleft()
                reservation = self._reserve(state, len(pending) + 1)
                if reservation is None:
                    pending.appendleft(state)
                    if running:  # what they leave unspent goes back: try again after them
                        waiting_for_budget = True
                        break
                    self.budget_exhausted = True
                    self._emit(
                        BudgetExhausted(
                            self.settings.batch_id,
                            task_id=state.task.id,
                            not_started=len(pending),  # this one included
                            spend=self._spend(),
                            counts=self.counts(),
                        )
                    )
                    break
                self.gate.running += 1
                job = asyncio.create_task(self._attempt(state, reservation, pending))
                running.add(job)
                job.add_done_callback(lambda done: self._finished(done, running))
            if not running and (not pending or self.budget_exhausted):
                break
            self._wake.clear()
            timeout = None
            if (
                pending
                and not self.budget_exhausted
                and not waiting_for_budget
                and self.gate.running < self.gate.limit
            ):
                timeout = max(0.01, self.gate.paused_until - time.monotonic())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)

    def _finished(self, job: asyncio.Task[None], running: set[asyncio.Task[None]]) -> None:
        running.discard(job)
        self._wake.set()
        if not job.cancelled() and job.exception() is not None:
            self._failures.append(job.exception())

    def _reserve(self, state: TaskState, sharers: int) -> Reservation | None:
        settings = self.settings
        limits = state.task.limits
        usd = _least(settings.per_task_usd, limits.max_budget_usd)
        tokens = _least(settings.per_task_tokens, limits.max_total_tokens)
        if usd is not None:  # a task's own budget covers all its attempts
            usd = max(0.0, usd - state.spent.usd)
        if tokens is not None:
            tokens = max(0, tokens - state.spent.tokens)
        per_task = settings.per_task_usd is not None or settings.per_task_tokens is not None
        floor = self._floors.get(state.task.id)
        if floor is None:
            floor = self._floors[state.task.id] = opening_floor(state.task, settings)
        try:
            return self.ledger.reserve(
                state.task.id,
                sharers=1 if per_task else sharers,
                request=Amount(tokens, usd),
                floor=floor,
            )
        except AllocationRefused:
            return None

    async def _attempt(
        self, state: TaskState, reservation: Reservation, pending: deque[TaskState]
    ) -> None:
        settings = self.settings
        task = state.task
        session_id = session_id_for(settings.batch_id, task.id, state.attempt)
        if state.retry_delay_s:  # an infrastructure error: give it a moment to clear
            await asyncio.sleep(state.retry_delay_s)
        before = await asyncio.to_thread(self._spending, session_id)
        state.runs += 1
        outcome: TaskOutcome | None = None
        try:
            workspace = await asyncio.to_thread(
                prepare_workspace, task, settings.out / "workspaces", state.attempt
            )
            job = TaskJob(
                batch_id=settings.batch_id,
                task=task,
                workspace_dir=str(workspace),
                store_path=str(settings.store_path),
                session_id=session_id,
                model=settings.model,
                base_url=settings.base_url,
                provider=settings.provider,
                mode=settings.mode,
                verify=task.verify or settings.verify,
                granted_tokens=reservation.granted.tokens,
                granted_usd=reservation.granted.usd,
                attempt=state.attempt,
                resume=True,
                config=settings.config,
                parent_session_id=settings.batch_id,
                trace=settings.trace,
                rate_limiter=self._rate_limiter,
            )
            self._emit(
                TaskStarted(
                    settings.batch_id,
                    task_id=task.id,
                    session_id=session_id,
                    attempt=state.attempt,
                    resumed=state.resumed
                    or state.infra_retries > 0
                    or state.rate_limit_requeues > 0,
                    granted_usd=reservation.granted.usd,
                    granted_tokens=reservation.granted.tokens,
                    counts=self.counts(),
                )
            )
            outcome = await self.executor.run(job)
        except WorkspaceError as error:
            outcome = _failed_outright(task.id, session_id, "setup_failed", error.message)
        except Exception as error:  # one task's trouble never ends the batch
            outcome = replace(
                _failed_outright(task.id, session_id, FinishReason.INTERNAL_ERROR.value, ""),
                status="infra_error",
                error=f"task {task.id} could not run: {type(error).__name__}: {error}",
            )
        finally:
            after = await asyncio.to_thread(self._spending, session_id)
            used_tokens = max(0, after.tokens - before.tokens)
            used_usd = max(0.0, after.usd - before.usd)
            self.ledger.settle(reservation, Amount(used_tokens, used_usd))
            state.spent = Spending(state.spent.usd + used_usd, state.spent.tokens + used_tokens)
            self.gate.running -= 1
            self._wake.set()
        state.duration_s += outcome.duration_s
        self._settled(state, outcome, pending)

    def _settled(self, state: TaskState, outcome: TaskOutcome, pending: deque[TaskState]) -> None:
        """Record the attempt's end, or put the task back in the queue."""
        settings = self.settings
        task_id = state.task.id
        now = time.monotonic()
        for note in outcome.ignored_settings:
            self._emit(SettingIgnored(settings.batch_id, task_id, note))
        if outcome.status == "rate_limited":
            self.gate.rate_limited(now, outcome.retry_after_s, settings.rate_limit_backoff_s)
            state.rate_limit_requeues += 1
            if state.rate_limit_requeues <= settings.max_rate_limit_requeues:
                pending.appendleft(state)
                self._emit(
                    TaskRequeued(
                        settings.batch_id,
                        task_id=task_id,
                        reason=RATE_LIMITED,
                        counts=self.counts(),
                        concurrency=self.gate.limit,
                        pause_s=round(max(0.0, self.gate.paused_until - now), 2),
                    )
                )
                return
            outcome = _as_infra(outcome, "rate-limited on every try")
        elif outcome.status == "infra_error":
            state.infra_retries += 1
            state.retry_delay_s = min(
                30.0, settings.infra_retry_delay_s * 2 ** (state.infra_retries - 1)
            )
            if state.infra_retries <= settings.max_infra_retries:
                pending.appendleft(state)
                self._emit(
                    TaskRequeued(
                        settings.batch_id,
                        task_id=task_id,
                        reason="infra_error",
                        counts=self.counts(),
                        error=outcome.error,
                        retry=state.infra_retries,
                    )
                )
                return
        else:
            self.gate.succeeded()
        state.result = TaskResult(
            id=task_id,
            status=outcome.status if outcome.status != "rate_limited" else "infra_error",
            finish_reason=outcome.finish_reason,
            cost_usd=round(state.spent.usd, 10),
            tokens=state.spent.tokens,
            duration_s=round(state.duration_s, 3),
            iterations=outcome.iterations,
            verify_passed=outcome.verify_passed,
            receipt=outcome.receipt,
            session_id=outcome.session_id,
            attempts=state.runs,
            error=outcome.error,
            workspace=str(
                (settings.out / "workspaces").joinpath(
                    state.task.id if state.attempt == 1 else f"{task_id}.attempt{state.attempt}"
                )
            ),
            task=_short(state.task.task),
            grade=_grade_dict(outcome.grade),
            files_changed=list(outcome.files_changed),
        )
        append_result(settings.out, state.result)
        self._emit(
            TaskFinished(
                settings.batch_id,
                task_id=task_id,
                status=state.result.status,
                finish_reason=state.result.finish_reason,
                cost_usd=state.result.cost_usd,
                tokens=state.result.tokens,
                session_id=state.result.session_id,
                spend=self._spend(),
                counts=self.counts(),
            )
        )

    # --- helpers --------------------------------------------------------------------------

    def _spending(self, session_id: str) -> Spending:
        store = SessionStore(self.settings.store_path, check_integrity=False)
        try:
            return session_spending(store, session_id)
        finally:
            store.close()

    def _refuse_without_engine(self) -> None:
        """Tasks that name an image while no container engine answers: "not run", saying why
        (a later run of the batch with an engine runs them)."""
        from journeyman.batch.containers import NEEDS_ENGINE, not_run_reason

        problem = self.settings.container_problem
        for state in self.states:
            if problem is None or state.result is not None or state.task.image is None:
                continue
            state.result = replace(
                self._not_run(state), finish_reason=NEEDS_ENGINE, error=not_run_reason(problem)
            )
            append_result(self.settings.out, state.result)

    def _not_run(self, state: TaskState) -> TaskResult:
        return TaskResult(
            id=state.task.id,
            status="not_run",
            finish_reason=BUDGET_EXHAUSTED,
            cost_usd=round(state.spent.usd, 10),
            tokens=state.spent.tokens,
            duration_s=round(state.duration_s, 3),
            iterations=0,
            verify_passed=None,
            session_id=None,
            attempts=0,
            error=self._unfunded(state),
            task=_short(state.task.task),
        )

    def _unfunded(self, state: TaskState) -> str:
        """Why a task was never started: what the cap had left, and what its first call needs."""
        stats = self.ledger.stats()
        floor = self._floors.get(state.task.id) or opening_floor(state.task, self.settings)
        why = "not run: budget exhausted — the global budget could not cover its allocation"
        if stats.total.usd is not None and floor.usd is not None:
            left = stats.total.usd - (stats.spent.usd or 0.0) - (stats.reserved.usd or 0.0)
            why += f" (${max(0.0, left):.4f} left, its first call needs about ${floor.usd:.4f})"
        elif stats.total.tokens is not None:
            left_tokens = stats.total.tokens - (stats.spent.tokens or 0)
            why += f" ({max(0, left_tokens):,} tokens left, its first call needs about "
            why += f"{floor.tokens:,})"
        return why + "; run the batch again with more budget to run it"

    def _spend(self) -> Spend:
        stats = self.ledger.stats()
        return Spend(
            spent_usd=stats.spent.usd,
            spent_tokens=stats.spent.tokens,
            reserved_usd=stats.reserved.usd,
            cap_usd=stats.total.usd,
            cap_tokens=stats.total.tokens,
        )

    def _emit(self, event: BatchEvent) -> None:
        self.on_event(event)

    def counts(self) -> TaskCounts:
        """Finished tasks by status, and the attempts in flight."""
        counts = {"succeeded": 0, "failed": 0, "infra_error": 0, "not_run": 0}
        for state in self.states:
            if state.result is not None:
                counts[state.result.status] += 1
        return TaskCounts(total=len(self.states), **counts, running=self.gate.running)


def _least(*values: Any) -> Any:
    given = [v for v in values if v is not None]
    return min(given) if given else None


def _failed_outright(task_id: str, session_id: str, reason: str, error: str) -> TaskOutcome:
    return TaskOutcome(
        task_id=task_id,
        session_id=session_id,
        status="failed",
        finish_reason=reason,
        cost_usd=0.0,
        tokens=0,
        duration_s=0.0,
        iterations=0,
        verify_passed=None,
        error=error,
    )


def _as_infra(outcome: TaskOutcome, why: str) -> TaskOutcome:
    return replace(outcome, status="infra_error", error=f"{outcome.error or ''} ({why})".strip())


def _grade_dict(grade: Any) -> dict[str, Any] | None:
    if grade is None:
        return None
    if isinstance(grade, dict):
        return grade
    from dataclasses import asdict, is_dataclass

    if is_dataclass(grade) and not isinstance(grade, type):
        return asdict(grade)
    return {"value": str(grade)}


__all__ = [
    "BUDGET_EXHAUSTED",
    "BatchSettings",
    "BatchSummary",
    "LedgerClient",
    "ProviderGate",
    "Scheduler",
    "TaskState",
    "describe_spend",
    "open_ledger",
    "opening_floor",
    "resume_state",
]
