"""The batch runner: every task of a batch through an `Executor`, under one global ledger.

Order of business for each task:
  1. reserve its allocation from the ledger (its per-task budget, or what finished tasks say
     it will need, `batch.allocation`; never less than its first model call costs:
     `opening_floor`); when what is left cannot cover it and nothing runs, no new work
     starts — the batch ends "budget exhausted after K of N", the tasks never started
     reported "not run" (a later run of the batch with more budget runs them);
  2. prepare its workspace (a copy or clone, never the original) and run the attempt; while it
     runs, its spend so far is reported to the ledger (from the store, or by the worker
     after each model call when the ledger travels to workers), so the progress shows it;
  3. settle the reservation with what the attempt spent: what the worker reported, checked
     against what the session store holds (a difference is a `SpendMismatch`, shown and kept
     in the task's result; the larger is charged);
  4. record the result (appended and synced), or requeue: an infrastructure error is retried
     from the session's last step (up to `max_infra_retries`); an attempt that gave up on a
     rate limit (its calls wait out 429s through the shared limiter, `providers.rate_limit`,
     so this is rare) lowers the concurrency for that provider and retries later; an agent
     failure is final unless `retry_failed`.

Resuming (`resume_state`): the store is the truth. Each task's sessions are found by their
deterministic ids, the ledger is charged with everything they already spent (less what it
already counted for the batch, `batch.ledgers`), finished tasks are skipped and interrupted
ones resumed. Nothing is charged twice. A graded task whose agent finished but whose grade was
never recorded (the batch was killed while grading) is graded first, without running its agent
again and without a reservation (grading spends nothing).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import statistics
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from journeyman.batch.allocation import CostModel, GrantRequest, needed_for, plan_grant
from journeyman.batch.events import (
    RATE_LIMITED,
    BatchEvent,
    BatchEventHandler,
    BatchFinished,
    BatchStarted,
    BudgetExhausted,
    Pace,
    SettingIgnored,
    Spend,
    SpendMismatch,
    SpendUpdated,
    TaskCounts,
    TaskFinished,
    TaskRequeued,
    TaskSkipped,
    TaskStarted,
)
from journeyman.batch.executor import Executor
from journeyman.batch.job import (
    BUDGET_REASONS,
    INFRA_REASONS,
    Spending,
    TaskJob,
    TaskOutcome,
    session_id_for,
    session_spending,
)
from journeyman.batch.ledgers import LedgerClient, LocalLedger
from journeyman.batch.results import TaskResult, append_result
from journeyman.batch.task_file import BatchTask, is_git_url
from journeyman.batch.workspaces import (
    LAYOUT_VERSION,
    WORKSPACES,
    WorkspaceError,
    Workspaces,
    check_out_folder,
    legacy_collisions,
)
from journeyman.core.errors import ConfigurationError
from journeyman.core.pins import pinned_sources, workspace_key
from journeyman.core.result import FinishCategory, FinishReason
from journeyman.core.text import one_line
from journeyman.economics.ledger import AllocationRefused, Amount, Reservation
from journeyman.session.store import SessionNotFoundError, SessionStore

MAX_ATTEMPTS_PROBED = 20
"""Fresh attempts of one task a resumed batch looks for in the store."""
BUDGET_EXHAUSTED = "budget_exhausted"
"""Finish reason of a task never started because the global budget could not cover it."""
IN_FLIGHT_POLL_S = 1.0
"""How often the spend of running attempts is read from the store and the progress told."""
OTHERS_POLL_S = 0.5
"""How often a batch waiting for other batches on a shared ledger to return budget looks."""
OTHERS_IDLE_S = 600.0
"""Other batches' holds on a shared ledger are waited for while the ledger moved within this
time; after it, a batch that cannot be funded ends "budget exhausted"."""


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
    keep: str = "failed"
    """Which tasks' workspaces stay once they end: "all", "failed" (every task that did not
    succeed, an eval's unresolved ones included) or "none" (infrastructure errors are always
    kept: a later run resumes them in place)."""
    workspace_layout: int = LAYOUT_VERSION
    """How `--out/workspaces` is laid out (1: a batch started before the current layout)."""
    ledger: str | None = None
    """`--ledger`: a Redis url or a Ray actor's name for a ledger several batches share;
    None: the batch's own."""

    container_problem: str | None = None
    """Why tasks that name a container image cannot run here (no engine answers); those
    tasks end "not run" with it, the others run. None: they run (`batch.containers`)."""

    @property
    def cap(self) -> Amount:
        """The global cap (None in a dimension: not limited)."""
        return Amount(self.global_tokens, self.global_usd)

    @property
    def fixed_allocation(self) -> bool:
        """The user fixed each task's allocation (`--per-task-budget-*`)."""
        return self.per_task_usd is not None or self.per_task_tokens is not None


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
    ungraded: TaskResult | None = None
    """The row of a graded task whose agent finished in an earlier run but which was never
    graded (killed while grading): it is graded, not run again."""
    ran_s: float = 0.0
    """Time its attempts took in this run of the batch (for the ETA)."""
    running_since: float | None = None
    """When its attempt started on a worker (monotonic); None when none is running."""
    spend_mismatch: str | None = None
    """What a worker reported differed from the store (`SpendMismatch`)."""


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
    wall_s: float = 0.0
    """How long this run of the batch took."""
    finished_in_run: int = 0
    """Tasks this run finished (not those an earlier run had finished)."""
    workspaces: Path | None = None
    """The folder of the tasks' workspaces."""
    keep: str = "failed"
    """The `--keep` of this run."""

    ledger_spent: Amount | None = None
    """What every batch sharing the ledger spent, when it is shared (`--ledger`)."""

    @property
    def tasks_per_min(self) -> float | None:
        """Tasks this run finished per minute of its wall time."""
        return self.finished_in_run * 60 / self.wall_s if self.wall_s > 0 else None

    @property
    def kept_workspaces(self) -> list[TaskResult]:
        return [r for r in self.results if r.workspace]

    def count(self, status: str) -> int:
        return sum(1 for r in self.results if r.status == status)

    @property
    def spend_mismatches(self) -> int:
        return sum(1 for r in self.results if r.spend_mismatch)

    @property
    def all_succeeded(self) -> bool:
        """Every task succeeded, and every attempt's reported spend matched the store."""
        return (
            bool(self.results)
            and all(r.status == "succeeded" for r in self.results)
            and not self.spend_mismatches
        )

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
        if self.wall_s > 0:
            text += f"; {describe_duration(self.wall_s)}"
            if self.tasks_per_min is not None and self.finished_in_run:
                text += f", {self.tasks_per_min:.1f} tasks/min"
        if self.ledger_spent is not None:
            text += f" (all batches on the ledger: {describe_spend(self.ledger_spent, self.cap)})"
        if self.spend_mismatches:
            text += (
                f"; SPEND MISMATCH on {tasks_count(self.spend_mismatches)}: what the worker "
                "reported differs from the session store (see spend_mismatch in results.jsonl)"
            )
        return text


def tasks_count(n: int) -> str:
    """ "1 task", "3 tasks"."""
    return f"{n} task" if n == 1 else f"{n} tasks"


def describe_duration(seconds: float) -> str:
    """ "45 s", "3m07s", "2h05m"."""
    whole = round(seconds)
    if whole < 60:
        return f"{seconds:.0f} s" if seconds >= 1 else f"{seconds:.1f} s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def describe_spend(spent: Amount, cap: Amount) -> str:
    parts = []
    if spent.usd is not None:
        parts.append(f"${spent.usd:.4f}" + (f" of ${cap.usd:.4f}" if cap.usd is not None else ""))
    if spent.tokens is not None:
        of = f" of {cap.tokens:,}" if cap.tokens is not None else ""
        parts.append(f"{spent.tokens:,}{of} tokens")
    return " and ".join(parts) or "nothing"


def open_ledger(settings: BatchSettings) -> LocalLedger:
    """The batch's own ledger, in this process (`batch.ledgers` has the shared ones)."""
    return LocalLedger(settings.cap)


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
        usd, tokens, last, last_spent = 0.0, 0, 0, Spending(0.0, 0)
        for attempt in range(1, MAX_ATTEMPTS_PROBED + 1):
            session_id = session_id_for(settings.batch_id, task.id, attempt)
            spent = session_spending(store, session_id)
            usd, tokens = usd + spent.usd, tokens + spent.tokens
            if _exists(store, session_id):
                last, last_spent = attempt, spent
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
            elif reason in BUDGET_REASONS and not (last_spent.usd or last_spent.tokens):
                state.attempt = last + 1  # its grant paid for no call: it was not run
                state.runs = max(0, state.runs - 1)
            elif reason.category is FinishCategory.SUCCESS or not settings.retry_failed:
                state.result = _stored_result(task, settings, state, summary, reason, earlier)
                if task.grading is not None and state.result.grade is None:
                    state.ungraded, state.result = state.result, None
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
    settings: BatchSettings,
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
    folder = workspaces_of(settings).attempt_folder(task.id, state.attempt)
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
        workspace=str(folder) if folder.is_dir() else None,
        task=_short(task.task),
    )


def workspaces_of(settings: BatchSettings) -> Workspaces:
    """The batch's task workspaces, in the layout its record names."""
    return Workspaces(settings.out / WORKSPACES, legacy=settings.workspace_layout < 2)


def keeps_workspace(result: TaskResult, keep: str) -> bool:
    """Whether `--keep` keeps the workspace of a task that ended as `result`: "all" keeps
    every one, "failed" those of tasks that did not succeed (or that an eval graded
    unresolved), "none" only those of infrastructure errors (a later run resumes them)."""
    if keep == "all" or result.status in ("infra_error", "not_run"):
        return True
    if keep == "none":
        return False
    unresolved = result.grade is not None and not result.grade.get("resolved")
    return result.status != "succeeded" or unresolved


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
        self.ledger: LedgerClient = ledger or open_ledger(settings)
        self.shared_ledger = settings.ledger is not None
        """Other batches may draw on the ledger too (`--ledger`)."""
        self._ledger_seen: tuple[Any, ...] = ()
        self._ledger_changed_at = time.monotonic()
        self.on_event: BatchEventHandler = on_event or (lambda event: None)
        self.states: list[TaskState] = []
        self.gate = ProviderGate(ceiling=executor.max_parallel)
        self.budget_exhausted = False
        self.costs = CostModel()
        """What this batch's finished tasks cost: what the next one is expected to."""
        self._floors: dict[str, Amount] = {}
        self._learning = 0
        """Tasks that ended and whose cost is not yet in `costs`."""
        self._in_flight: dict[str, tuple[Reservation, Spending]] = {}
        """Running attempts by session id: their reservation and the store's count at start."""
        self._wake = asyncio.Event()
        self._approvals = pinned_sources(
            Path(t.workspace).expanduser() for t in tasks if not is_git_url(t.workspace)
        )
        """The user's approvals of the pinned folders tasks are copied from (by real path):
        each copy is judged by its original's, wherever it runs."""
        self._failures: list[BaseException | None] = []
        """Exceptions of the scheduler's own attempt coroutines (a bug, raised after the run)."""
        self.workspaces = workspaces_of(settings)
        self._started_at = time.monotonic()
        self._finished_in_run = 0
        self._ran: list[float] = []
        """How long each task this run finished took (its attempts in this run)."""
        self._rate_limiter: Any = None
        """How the attempts reach the shared rate limiter (`executor.rate_limiter()`)."""

    # --- public ---------------------------------------------------------------------------

    async def run(self) -> BatchSummary:
        settings = self.settings
        self._check_folders()
        self.workspaces.root.mkdir(parents=True, exist_ok=True)
        self.workspaces.clear_staging()
        self._started_at = time.monotonic()
        from journeyman.batch.results import read_results

        store = SessionStore(settings.store_path)
        try:
            self.states = resume_state(self.tasks, settings, store, read_results(settings.out))
            already = batch_spending(store, settings.batch_id)
        finally:
            store.close()
        # what earlier runs of the batch spent, less what the ledger already counted for it
        self.ledger.join(settings.batch_id, settings.cap, already)
        for state in self.states:
            if state.result is not None and state.result.status in ("succeeded", "failed"):
                await asyncio.to_thread(self._learn, state)
        self._refuse_without_engine()
        ungraded = [s for s in self.states if s.ungraded is not None]
        pending = deque(s for s in self.states if s.result is None and s.ungraded is None)
        shared = getattr(self.executor, "rate_limiter", None)  # every executor of ours has one
        if (pending or ungraded) and callable(shared):
            self._rate_limiter = await asyncio.to_thread(shared)
        self._emit(
            BatchStarted(
                self.settings.batch_id,
                tasks=len(self.states),
                to_run=len(pending) + len(ungraded),
                finished_before=len(self.states) - len(pending),
                resumed=sum(1 for s in pending if s.resumed),
                spent_before_usd=already.usd,
                spent_before_tokens=already.tokens,
                counts=self.counts(),
                pace=self.pace(),
            )
        )
        for state in self.states:
            if state.result is not None:
                skipped = TaskSkipped(
                    self.settings.batch_id,
                    state.task.id,
                    state.result.status,
                    self.counts(),
                    self.pace(),
                )
                self._emit(skipped)
        await asyncio.gather(*(self._grade_only(state) for state in ungraded))
        watcher = asyncio.create_task(self._watch_spend())
        try:
            await self._drive(pending)
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
        self.workspaces.clear_staging()
        for failure in self._failures:
            if failure is not None:
                raise failure
        summary = self._summary()
        self._emit(
            BatchFinished(
                settings.batch_id, summary.line(), self._spend(), self.counts(), self.pace()
            )
        )
        return summary

    def _summary(self) -> BatchSummary:
        """The batch's summary once nothing runs: a task never started is "not run" (the
        budget ran out first)."""
        settings = self.settings
        for state in self.states:
            if state.result is None:  # never started: the budget ran out first
                state.result = self._not_run(state)
                append_result(settings.out, state.result)
        stats = self.ledger.stats()
        summary = BatchSummary(
            batch_id=settings.batch_id,
            results=[s.result for s in self.states if s.result is not None],
            budget_exhausted=self.budget_exhausted,
            spent=self.ledger.account(settings.batch_id),  # this batch's, on a shared ledger
            cap=stats.total,
            overspend=stats.overspend,
            started_tasks=sum(
                1
                for s in self.states
                if s.result and s.result.attempts > 0 and s.result.status != "not_run"
            ),
            wall_s=time.monotonic() - self._started_at,
            finished_in_run=self._finished_in_run,
            workspaces=self.workspaces.root,
            keep=settings.keep,
            ledger_spent=stats.spent if self.shared_ledger else None,
        )
        return summary

    def _check_folders(self) -> None:
        """Refuse what would lose or mix work before anything is written: `--out` and a
        workspace inside one another, or a batch of the legacy layout whose task ids name the
        same folders there."""
        check_out_folder(self.settings.out, self.tasks)
        if not self.workspaces.legacy:
            return
        clashes = legacy_collisions(t.id for t in self.tasks)
        if clashes:
            shown = ", ".join(f"{a!r} and {b!r}" for a, b in clashes[:3])
            raise WorkspaceLayoutError(
                f"batch {self.settings.batch_id} in {self.settings.out} was started by an "
                f"earlier journeyman, whose workspace folders mix up tasks {shown}; it cannot "
                "be resumed safely. Start it again with another --out (or delete "
                f"{self.settings.out} to start over there)"
            )

    # --- the loop -------------------------------------------------------------------------

    async def _drive(self, pending: deque[TaskState]) -> None:
        running: set[asyncio.Task[None]] = set()
        while (pending and not self.budget_exhausted) or running:
            now = time.monotonic()
            waiting_for_budget = waiting_on_others = False
            while pending and not self.budget_exhausted and self.gate.open(now):
                state = pending.popleft()
                startable = min(len(pending) + 1, self.gate.limit - self.gate.running)
                reservation = self._reserve(state, startable)
                if reservation is None:
                    pending.appendleft(state)
                    if running:  # what they leave unspent goes back: try again after them
                        waiting_for_budget = True
                        break
                    if self._others_may_return():
                        waiting_for_budget = waiting_on_others = True
                        break
                    self.budget_exhausted = True
                    self._emit(
                        BudgetExhausted(
                            self.settings.batch_id,
                            task_id=state.task.id,
                            not_started=len(pending),  # this one included
                            spend=self._spend(),
                            counts=self.counts(),
                            pace=self.pace(),
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
            if waiting_on_others:  # they settle in their own process: look again soon
                timeout = OTHERS_POLL_S
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)

    def _others_may_return(self) -> bool:
        """Whether other batches on a shared ledger hold reservations whose unspent part may
        come back: they hold some, and the ledger moved (a reservation, a report after a
        model call, a settlement) within `OTHERS_IDLE_S`. A batch killed while holding some
        moves nothing; its holds are closed when it runs again."""
        if not self.shared_ledger:
            return False
        stats = self.ledger.stats()
        if not stats.open_reservations:
            return False
        seen = (stats.spent, stats.reserved, stats.in_flight, stats.open_reservations)
        now = time.monotonic()
        if seen != self._ledger_seen:
            self._ledger_seen, self._ledger_changed_at = seen, now
        return now - self._ledger_changed_at < OTHERS_IDLE_S

    def _finished(self, job: asyncio.Task[None], running: set[asyncio.Task[None]]) -> None:
        running.discard(job)
        self._wake.set()
        if not job.cancelled() and job.exception() is not None:
            self._failures.append(job.exception())

    def _reserve(self, state: TaskState, startable: int) -> Reservation | None:
        """Reserve the task's grant (`batch.allocation`), or None when it should not start
        now."""
        settings = self.settings
        limits = state.task.limits
        usd = _least(settings.per_task_usd, limits.max_budget_usd)
        tokens = _least(settings.per_task_tokens, limits.max_total_tokens)
        if usd is not None:  # a task's own budget covers all its attempts
            usd = max(0.0, usd - state.spent.usd)
        if tokens is not None:
            tokens = max(0, tokens - state.spent.tokens)
        shared = self.shared_ledger and self.costs.expected() is None
        if shared and self.ledger.stats().open_reservations:
            return None  # a first task is allowed what others leave, once they leave it
        grant = plan_grant(
            GrantRequest(
                left=self.ledger.available(),
                limit=Amount(tokens, usd),
                floor=self._floor(state),
                expected=self.costs.expected(),
                running=self.gate.running + self._learning,
                startable=max(1, startable),
                fixed=settings.fixed_allocation,
            )
        )
        if grant is None:
            return None
        try:
            return self.ledger.reserve(settings.batch_id, state.task.id, grant)
        except AllocationRefused:  # another batch on a shared ledger took it first
            return None

    def _learn(self, state: TaskState) -> None:
        """Add a finished task to what the batch knows of tasks' costs: its cost, and what its
        grant had to hold (from its sessions' usage rows, call by call). Only a capped batch
        sizes grants from it."""
        if self.settings.global_usd is None and self.settings.global_tokens is None:
            return
        calls: list[Amount] = []
        store = SessionStore(self.settings.store_path, check_integrity=False)
        try:
            for attempt in range(1, state.attempt + 1):
                session_id = session_id_for(self.settings.batch_id, state.task.id, attempt)
                calls += [
                    Amount(row.usage.total_tokens, row.cost_usd or 0.0)
                    for row in store.usage_rows(session_id)
                ]
        finally:
            store.close()
        cost = Amount(state.spent.tokens, state.spent.usd)
        self.costs.record(cost, needed_for(calls, self._floor(state)))

    def _floor(self, state: TaskState) -> Amount:
        floor = self._floors.get(state.task.id)
        if floor is None:
            floor = self._floors[state.task.id] = opening_floor(state.task, self.settings)
        return floor

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
            workspace = await asyncio.to_thread(self.workspaces.prepare, task, state.attempt)
            job = self._job(state, session_id, workspace, reservation)
            started = TaskStarted(
                settings.batch_id,
                task_id=task.id,
                session_id=session_id,
                attempt=state.attempt,
                resumed=state.resumed or state.infra_retries > 0 or state.rate_limit_requeues > 0,
                granted_usd=reservation.granted.usd,
                granted_tokens=reservation.granted.tokens,
                counts=self.counts(),
            )
            self._in_flight[session_id] = (reservation, before)
            outcome = await run_reporting_start(
                self.executor, job, lambda: self._running(state, started)
            )
        except WorkspaceError as error:
            outcome = _failed_outright(task.id, session_id, "setup_failed", error.message)
        except Exception as error:  # one task's trouble never ends the batch
            outcome = replace(
                _failed_outright(task.id, session_id, FinishReason.INTERNAL_ERROR.value, ""),
                status="infra_error",
                error=f"task {task.id} could not run: {type(error).__name__}: {error}",
            )
        finally:
            state.running_since = None  # before any wait: its worker is free from now on
            learning = await self._settle(state, session_id, reservation, before, outcome)
        state.duration_s += outcome.duration_s
        state.ran_s += outcome.duration_s
        for note in outcome.ignored_settings:
            self._emit(SettingIgnored(settings.batch_id, task.id, note))
        try:
            if outcome.finish_reason in BUDGET_VALUES and not (
                state.spent.usd or state.spent.tokens
            ):
                self._unpaid(state, reservation)
                return
            result = self._settled(state, outcome, pending)
            if result is not None:
                await self._record(state, result)
            if state.result is not None and state.result.status in ("succeeded", "failed"):
                await asyncio.to_thread(self._learn, state)
        finally:
            if learning:
                self._learning -= 1
                self._wake.set()

    async def _settle(
        self,
        state: TaskState,
        session_id: str,
        reservation: Reservation,
        before: Spending,
        outcome: TaskOutcome | None,
    ) -> bool:
        """Close the attempt's reservation at what it spent: the worker's report, checked
        against the store (`cross_check`); a difference is said, never settled silently.
        True when the attempt ended its task, whose cost is still to be learned (`_learning`)."""
        self._in_flight.pop(session_id, None)
        learning = outcome is not None and outcome.finished
        try:
            after = await asyncio.to_thread(self._spending, session_id)
            stored = Spending(
                max(0.0, after.usd - before.usd), max(0, after.tokens - before.tokens)
            )
            used, mismatch = cross_check(state.task.id, session_id, stored, outcome)
            self.ledger.settle(reservation, Amount(used.tokens, used.usd))
            state.spent = Spending(state.spent.usd + used.usd, state.spent.tokens + used.tokens)
        finally:
            self._learning += learning  # until then, it counts as running for the plan
            self.gate.running -= 1
            self._wake.set()
        if mismatch is not None:
            state.spend_mismatch = mismatch
            self._emit(SpendMismatch(self.settings.batch_id, state.task.id, session_id, mismatch))
        return learning

    def _job(
        self, state: TaskState, session_id: str, workspace: Path, reservation: Reservation | None
    ) -> TaskJob:
        """The job of one attempt of `state`'s task; with `reservation` None, a job that only
        grades the attempt's finished session (`TaskJob.grade_only`)."""
        settings = self.settings
        granted = None if reservation is None else reservation.granted
        return TaskJob(
            batch_id=settings.batch_id,
            task=state.task,
            workspace_dir=str(workspace),
            store_path=str(settings.store_path),
            session_id=session_id,
            model=settings.model,
            base_url=settings.base_url,
            provider=settings.provider,
            mode=settings.mode,
            verify=state.task.verify or settings.verify,
            granted_tokens=None if granted is None else granted.tokens,
            granted_usd=None if granted is None else granted.usd,
            attempt=state.attempt,
            resume=True,
            config=settings.config,
            parent_session_id=settings.batch_id,
            trace=settings.trace,
            grade_only=reservation is None,
            ledger=None if reservation is None else self.ledger.for_workers(),
            reservation=reservation,
            rate_limiter=self._rate_limiter,
            approved_content=self._approved(state.task),
        )

    def _approved(self, task: BatchTask) -> dict[str, str] | None:
        """The approvals the copy of `task`'s workspace is judged by (None: not pinned)."""
        if is_git_url(task.workspace):
            return None
        return self._approvals.get(workspace_key(Path(task.workspace).expanduser()))

    async def _grade_only(self, state: TaskState) -> None:
        """Grade a task whose agent finished in an earlier run (`TaskState.ungraded`); when
        grading cannot run, its row is kept ungraded, to be graded by the next run."""
        assert state.ungraded is not None
        settings = self.settings
        session_id = session_id_for(settings.batch_id, state.task.id, state.attempt)
        workspace = self.workspaces.attempt_folder(state.task.id, state.attempt)
        try:
            outcome = await self.executor.run(self._job(state, session_id, workspace, None))
        except Exception as error:  # one task's trouble never ends the batch
            outcome = _failed_outright(state.task.id, session_id, "internal_error", str(error))
            outcome = _as_infra(outcome, "grading could not run")
        if outcome.finished:
            earlier = state.ungraded  # what the run that ended the session knew of it
            outcome = replace(
                outcome,
                verify_passed=earlier.verify_passed,
                receipt=earlier.receipt,
                files_changed=tuple(earlier.files_changed or ()),
            )
            state.duration_s += outcome.duration_s
            result = self._settled(state, outcome, deque())
            if result is not None:
                await self._record(state, result)
            return
        state.result = replace(state.ungraded, error=f"not graded: {outcome.error}")
        append_result(settings.out, state.result)

    def _running(self, state: TaskState, started: TaskStarted) -> None:
        """The executor says the attempt started on a worker (said once per attempt)."""
        if state.running_since is not None:
            return
        state.running_since = time.monotonic()
        self._emit(replace(started, counts=self.counts(), pace=self.pace()))

    def _settled(
        self, state: TaskState, outcome: TaskOutcome, pending: deque[TaskState]
    ) -> TaskResult | None:
        """The task's result when the attempt ended it; None when it went back in the queue."""
        settings = self.settings
        task_id = state.task.id
        now = time.monotonic()
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
                        pace=self.pace(),
                        concurrency=self.gate.limit,
                        pause_s=round(max(0.0, self.gate.paused_until - now), 2),
                    )
                )
                return None
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
                        pace=self.pace(),
                        error=outcome.error,
                        retry=state.infra_retries,
                    )
                )
                return None
        else:
            self.gate.succeeded()
        return TaskResult(
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
            workspace=str(self.workspaces.attempt_folder(task_id, state.attempt)),
            task=_short(state.task.task),
            grade=_grade_dict(outcome.grade),
            files_changed=list(outcome.files_changed),
            spend_mismatch=state.spend_mismatch,
        )

    async def _record(self, state: TaskState, result: TaskResult) -> None:
        """The task ended: its workspace removed unless `--keep` keeps it (before its row is
        written, so the row never names a folder that is gone), then its row and event."""
        if not keeps_workspace(result, self.settings.keep):
            removed = await asyncio.to_thread(
                self.workspaces.remove_task, state.task.id, state.attempt
            )
            if removed:
                result = replace(result, workspace=None)
        state.result = result
        self._finished_in_run += 1
        self._ran.append(state.ran_s)
        append_result(self.settings.out, result)
        self._emit(
            TaskFinished(
                self.settings.batch_id,
                task_id=result.id,
                status=result.status,
                finish_reason=result.finish_reason,
                cost_usd=result.cost_usd,
                tokens=result.tokens,
                session_id=result.session_id,
                spend=self._spend(),
                counts=self.counts(),
                pace=self.pace(),
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

    def _not_run(self, state: TaskState, why: str | None = None) -> TaskResult:
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
            error=why or self._unfunded(state),
            task=_short(state.task.task),
            spend_mismatch=state.spend_mismatch,
        )

    def _unpaid(self, state: TaskState, reservation: Reservation) -> None:
        """An attempt whose grant could not pay for its first model call: the task is not run
        (a later run of the batch with more budget runs it, in a fresh attempt)."""
        state.result = self._not_run(
            state,
            f"not run: budget exhausted — its grant ({reservation.granted}) could not pay for "
            "its first model call; run the batch again with more budget to run it",
        )
        append_result(self.settings.out, state.result)
        self._emit(
            TaskFinished(
                self.settings.batch_id,
                task_id=state.task.id,
                status="not_run",
                finish_reason=BUDGET_EXHAUSTED,
                cost_usd=0.0,
                tokens=0,
                session_id=None,
                spend=self._spend(),
                counts=self.counts(),
            )
        )

    def _unfunded(self, state: TaskState) -> str:
        """Why a task was never started: what the cap had left, and what it needed."""
        left = self.ledger.available()
        floor = self._floor(state)
        expected = self.costs.expected()
        why = "not run: budget exhausted — the global budget could not cover its allocation"
        if left.usd is not None and floor.usd is not None:
            if expected is not None and (expected.usd or 0.0) > floor.usd:
                why += (
                    f" (${max(0.0, left.usd):.4f} left, a task is expected to need about "
                    f"${expected.usd or 0.0:.4f}: {self.costs.explain()})"
                )
            else:
                why += f" (${max(0.0, left.usd):.4f} left, its first call needs about "
                why += f"${floor.usd:.4f})"
        elif left.tokens is not None:
            need = max(floor.tokens or 0, (expected.tokens or 0) if expected else 0)
            why += f" ({max(0, left.tokens):,} tokens left, it needs about {need:,})"
        return why + "; run the batch again with more budget to run it"

    def _spend(self) -> Spend:
        stats = self.ledger.stats()
        return Spend(
            spent_usd=stats.spent.usd,
            spent_tokens=stats.spent.tokens,
            reserved_usd=stats.reserved.usd,
            cap_usd=stats.total.usd,
            cap_tokens=stats.total.tokens,
            in_flight_usd=None if stats.total.usd is None else stats.in_flight.usd,
            in_flight_tokens=stats.in_flight.tokens,
        )

    async def _watch_spend(self) -> None:
        """While attempts run: report their spend so far (as the store holds it) to the
        ledger, unless their workers report it, and tell the progress when the spend moved."""
        last: Spend | None = None
        while True:
            await asyncio.sleep(IN_FLIGHT_POLL_S)
            if not self._in_flight:
                continue
            await asyncio.to_thread(self._report_in_flight, list(self._in_flight.items()))
            spend = self._spend()
            if spend != last:
                last = spend
                self._emit(SpendUpdated(self.settings.batch_id, spend, self.counts(), self.pace()))

    def _report_in_flight(self, running: list[tuple[str, tuple[Reservation, Spending]]]) -> None:
        if self.ledger.for_workers() is not None:
            # the workers report each call themselves; the store holds the same calls, and
            # the ledger adds up what separate runs report, so they would count twice
            return
        store = SessionStore(self.settings.store_path, check_integrity=False)
        try:
            for session_id, (reservation, before) in running:
                now = session_spending(store, session_id)
                used = Amount(max(0, now.tokens - before.tokens), max(0.0, now.usd - before.usd))
                if used.tokens or used.usd:
                    self.ledger.report(reservation, used)
        finally:
            store.close()

    def _emit(self, event: BatchEvent) -> None:
        self.on_event(event)

    def counts(self) -> TaskCounts:
        """Finished tasks by status, and the attempts in flight (running on a worker, or
        queued: their workspace being prepared, or waiting for a worker)."""
        counts = {"succeeded": 0, "failed": 0, "infra_error": 0, "not_run": 0}
        running = 0
        for state in self.states:
            if state.result is not None:
                counts[state.result.status] += 1
            running += state.running_since is not None
        queued = max(0, self.gate.running - running)
        return TaskCounts(total=len(self.states), **counts, running=running, queued=queued)

    def pace(self) -> Pace:
        """Elapsed time, the ETA and the throughput of this run. The ETA spreads the work
        left over the concurrency: the mean time of the tasks this run finished for each task
        not started yet, less what the running ones have already had."""
        now = time.monotonic()
        elapsed = now - self._started_at
        per_min = self._finished_in_run * 60 / elapsed if elapsed > 0 else None
        if not self._ran:
            return Pace(round(elapsed, 3), None, None if per_min is None else round(per_min, 3))
        mean = statistics.fmean(self._ran)
        running = [s.running_since for s in self.states if s.running_since is not None]
        in_flight = self.gate.running
        waiting = sum(1 for s in self.states if s.result is None) - in_flight
        waiting = 0 if self.budget_exhausted else max(0, waiting)
        work = sum(max(0.0, mean - (now - since)) for since in running)
        work += (max(0, in_flight - len(running)) + waiting) * mean
        slots = max(1, min(self.gate.limit, in_flight + waiting))
        return Pace(
            round(elapsed, 3),
            round(work / slots, 3),
            None if per_min is None else round(per_min, 3),
        )


class WorkspaceLayoutError(ConfigurationError):
    """A batch of the legacy workspace layout whose task ids share folders there."""


async def run_reporting_start(
    executor: Executor, job: TaskJob, on_running: Callable[[], None]
) -> TaskOutcome:
    """`executor.run(job)`, with `on_running` called when the attempt starts on a worker: by
    the executor when its `run` takes an `on_running` keyword (a Ray task waits for a CPU
    first), else at once."""
    run: Any = executor.run
    try:
        reports = "on_running" in inspect.signature(run).parameters
    except (TypeError, ValueError):
        reports = False
    if reports:
        outcome: TaskOutcome = await run(job, on_running=on_running)
        return outcome
    on_running()
    return await executor.run(job)


def _least(*values: Any) -> Any:
    given = [v for v in values if v is not None]
    return min(given) if given else None


BUDGET_VALUES = frozenset(reason.value for reason in BUDGET_REASONS)

SPEND_TOLERANCE_USD = 1e-9
"""Difference in USD below which a worker's report and the store agree (float sums drift)."""


def cross_check(
    task_id: str, session_id: str, stored: Spending, outcome: TaskOutcome | None
) -> tuple[Spending, str | None]:
    """What an attempt spent: the worker's report when it made one, checked against what the
    session store holds for the attempt (with rows shipped back from a worker's own store, or
    written to a shared one). A difference is returned as a message; the larger of the two is
    what counts."""
    if outcome is None or not outcome.spend_reported:
        return stored, None
    reported = Spending(outcome.cost_usd, outcome.tokens)
    usd_differs = abs(reported.usd - stored.usd) > SPEND_TOLERANCE_USD * max(1.0, stored.usd)
    if not usd_differs and reported.tokens == stored.tokens:
        return stored, None
    message = (
        f"task {task_id}: the worker reported ${reported.usd:.6f} and {reported.tokens:,} "
        f"tokens for session {session_id}, the session store holds ${stored.usd:.6f} and "
        f"{stored.tokens:,} tokens; the ledger counted the larger"
    )
    larger = Spending(max(reported.usd, stored.usd), max(reported.tokens, stored.tokens))
    return larger, message


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
    "IN_FLIGHT_POLL_S",
    "BatchSettings",
    "BatchSummary",
    "LedgerClient",
    "ProviderGate",
    "Scheduler",
    "TaskState",
    "WorkspaceLayoutError",
    "cross_check",
    "describe_duration",
    "describe_spend",
    "keeps_workspace",
    "open_ledger",
    "opening_floor",
    "resume_state",
    "run_reporting_start",
    "workspaces_of",
]
