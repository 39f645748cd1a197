"""One task attempt as a worker runs it: `TaskJob` in, `TaskOutcome` out, `run_job` between.

Both records are plain picklable values (no API keys: a worker reads them from its own
environment), so a job runs the same in a thread, a subprocess or a Ray worker. `run_job`
starts the task's session, or resumes it when the store holds it unfinished, with the
batch's allocation as the loop's hard limits (never more than the task's own: each call is
priced before it is sent, so the attempt never spends past its grant), and reports what the
attempt spent as the store counts it. Its model calls go through the batch's shared rate
limiter (`TaskJob.rate_limiter`): a 429 pauses the calls of every task on that provider key
until its Retry-After has passed, then the call is sent again, so a 429 costs the attempt a
wait, not its place. Only a call that gives up on the limit (its deadline, or too many 429s)
ends the attempt `rate_limited`, for the batch to requeue it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from journeyman.batch.tasks import BatchTask
from journeyman.core import events as ev
from journeyman.core.errors import AgentError, ConfigurationError, ErrorCategory
from journeyman.core.messages import Usage
from journeyman.core.pins import judged_by
from journeyman.core.result import FinishCategory, FinishReason, RunResult
from journeyman.economics.ledger import Amount, Reservation

if TYPE_CHECKING:
    from journeyman.integrations.otel.tracing import AgentTracing
    from journeyman.loop.agent import Agent
    from journeyman.loop.config import AgentConfig
    from journeyman.loop.launch import Launch
    from journeyman.providers.base import Provider
    from journeyman.providers.rate_limit import LimiterBackend
    from journeyman.providers.resilient import RetryPolicy
    from journeyman.session.store import SessionStore
    from journeyman.session.transfer import SessionRows

Status = Literal["succeeded", "failed", "infra_error", "rate_limited"]

INFRA_REASONS = frozenset(
    {FinishReason.PROVIDER_UNAVAILABLE, FinishReason.INTERNAL_ERROR, FinishReason.CANCELLED}
)
"""Finish reasons that say the infrastructure failed, not the agent: another attempt may pass.
A batch task is only ever cancelled by its batch being interrupted (Ctrl-C, SIGTERM), so a
cancelled session continues when the batch does."""


BUDGET_REASONS = frozenset({FinishReason.MAX_BUDGET_USD, FinishReason.MAX_TOKENS})
"""Finish reasons that say the attempt's grant ran out; with nothing spent, its first model
call could not be paid for: the task was not run."""


def session_id_for(batch_id: str, task_id: str, attempt: int) -> str:
    """The session of a task's attempt: the same on every resume of the batch."""
    digest = hashlib.sha256(f"{batch_id}\x00{task_id}\x00{attempt}".encode()).hexdigest()[:10]
    return f"{batch_id}-t{digest}-a{attempt}"


@dataclass(frozen=True)
class TaskJob:
    """Everything a worker needs to run one attempt of one task."""

    batch_id: str
    task: BatchTask
    workspace_dir: str
    """The task's own copy of its workspace (prepared by the batch, never the original)."""
    store_path: str
    """The session store's folder (the batch's sessions live there)."""
    session_id: str
    model: str | None
    base_url: str | None
    provider: str | None
    mode: str
    verify: str | None
    """The check command (the task's own, else the batch's); None detects one."""
    granted_tokens: int | None
    """Tokens this attempt may spend (the batch's reservation); None: not limited."""
    granted_usd: float | None
    """US dollars this attempt may spend (the batch's reservation); None: not limited."""
    attempt: int
    resume: bool
    """Resume `session_id` when the store holds it unfinished (else it is started)."""
    config: dict[str, Any] = field(default_factory=dict)
    """Further `AgentConfig` fields the user set for the batch (JSON values)."""
    parent_session_id: str | None = None
    """The batch's own record in the store."""
    trace: bool = False
    """Send OpenTelemetry traces of the attempt (`--otel`, or an OTLP endpoint in the batch's
    environment); the worker exports as its own OTEL_* variables say."""
    grade_only: bool = False
    """Only grade the session, which ended in an earlier run of the batch (killed while it was
    grading): the agent is not run again, whatever the store says."""
    ledger: Any = None
    """Where the attempt reports its spend after each model call (a `batch.ledgers`
    client that travels: a Ray actor's proxy, a Redis ledger), with `reservation`; None: the
    batch reads it from the store."""
    reservation: Reservation | None = None
    """The batch's reservation for this attempt."""
    rate_limiter: LimiterBackend | None = None
    """How the attempt's model calls reach the batch's shared rate limiter (picklable: an
    address, or a Ray actor's handle); None: no shared limiter, a 429 ends the attempt."""
    approved_content: dict[str, str] | None = None
    """What the user approved (`journeyman trust`) in the folder the task's workspace was
    copied from, when it is pinned: the copy is judged by it, on whichever machine it runs
    (rules, skills, hooks, MCP servers changed since are not used); None: not pinned."""


@dataclass(frozen=True)
class TaskOutcome:
    """How one attempt ended."""

    task_id: str
    session_id: str
    status: Status
    finish_reason: str
    cost_usd: float
    """What this attempt spent (the store's usage rows of the session, this attempt only). From
    a Ray worker: the worker's own count, in its own store (cross-check it with
    `session.transfer.rows_spending(rows)`)."""
    tokens: int
    """Tokens this attempt spent."""
    duration_s: float
    iterations: int
    verify_passed: bool | None
    error: str | None
    grade: Any = None
    """`journeyman.batch.grading.GradeResult` when the task has a grading spec."""
    retry_after_s: float | None = None
    """With `rate_limited`: how long the provider asked to wait, when it said."""
    files_changed: tuple[str, ...] = ()
    receipt: dict[str, Any] | None = None
    """The run's check evidence (`CheckEvidence.to_dict`, its output tail left out)."""
    ignored_settings: tuple[str, ...] = ()
    """Warnings for the settings of the task's workspace config the trust rules left out."""
    rows: SessionRows | None = None
    """The session's rows as the worker's own store holds them at the attempt's end (Ray
    executor: merged into the batch's store before the outcome reaches the scheduler); None
    when the attempt ran against the batch's store itself, or never started its session."""
    spend_reported: bool = False
    """`cost_usd` and `tokens` are what the worker counted for the attempt (else they are
    unknown, e.g. the worker died, and the batch goes by the store alone)."""

    @property
    def finished(self) -> bool:
        """The attempt ended for a reason another attempt would not change by itself."""
        return self.status in ("succeeded", "failed")


def status_for(reason: FinishReason, *, rate_limited: bool = False) -> Status:
    if rate_limited:
        return "rate_limited"
    if reason.category is FinishCategory.SUCCESS:
        return "succeeded"
    if reason in INFRA_REASONS:
        return "infra_error"
    return "failed"


def run_job(job: TaskJob) -> TaskOutcome:
    """Run one attempt to its end (synchronous; safe in any thread or process)."""
    started = time.monotonic()
    from journeyman.session.lock import SessionBusyError

    try:
        with judged_by(job.approved_content):
            return asyncio.run(_run(job, started))
    except SessionBusyError as error:  # e.g. a worker of a killed batch not yet gone
        return _ended(job, "infra_error", FinishReason.INTERNAL_ERROR, error.message, started)
    except ConfigurationError as error:
        return _ended(job, "failed", FinishReason.CONFIGURATION_ERROR, error.message, started)
    except AgentError as error:
        return _ended(job, "infra_error", FinishReason.INTERNAL_ERROR, error.message, started)
    except Exception as error:  # a worker must report, whatever happened
        message = f"{type(error).__name__}: {error}"
        return _ended(job, "infra_error", FinishReason.INTERNAL_ERROR, message, started)


def _ended(
    job: TaskJob, status: Status, reason: FinishReason, error: str, started: float
) -> TaskOutcome:
    return TaskOutcome(
        task_id=job.task.id,
        session_id=job.session_id,
        status=status,
        finish_reason=reason.value,
        cost_usd=0.0,
        tokens=0,
        duration_s=time.monotonic() - started,
        iterations=0,
        verify_passed=None,
        error=error,
    )


async def _run(job: TaskJob, started: float) -> TaskOutcome:
    from journeyman.loop.launch import Surface, build_agent
    from journeyman.session.store import SessionStore

    store = SessionStore(Path(job.store_path))
    try:
        before = session_spending(store, job.session_id)
        counted = counted_spending(store, job.session_id)
        existing = _unfinished(store, job.session_id) if job.resume else None
    finally:
        store.close()
    if job.grade_only and existing is not False:
        why = f"task {job.task.id}: its session {job.session_id} has not ended; nothing to grade"
        return _ended(job, "infra_error", FinishReason.INTERNAL_ERROR, why, started)
    settled = settle_job(job, counted)
    config = settled.config
    provider = _provider(job)
    tracing = _tracing(job)
    agent = build_agent(
        provider,
        Path(job.workspace_dir),
        config,
        Surface(tracing=tracing),
        assume_yes=True,
        retry_policy=batch_retry_policy(config, job.rate_limiter),
    )
    agent.remember_setting("batch", {"batch_id": job.batch_id, "task_id": job.task.id})
    fault = ProviderFault()
    agent.add_listener(fault)
    result: RunResult | None = None  # None: it already ended, nothing to run again
    if job.ledger is not None and job.reservation is not None:
        agent.add_listener(CallSpendReporter(job.ledger, job.reservation, job.task.id))
    try:
        if existing is True:
            result = await agent.resume(job.session_id, override_limits=True)
        elif existing is None:
            result = await agent.run(
                job.task.task, session_id=job.session_id, parent_session_id=job.parent_session_id
            )
    finally:
        agent.close()
        await _close(provider)  # its HTTP client belongs to this event loop, which ends here
        if tracing is not None:
            tracing.close()  # sends the attempt's last spans before the worker moves on
    if result is None:
        return await _ended_before(job, agent, started)
    store = SessionStore(Path(job.store_path))
    try:
        after = session_spending(store, job.session_id)
    finally:
        store.close()
    grade = None
    if job.task.grading is not None:
        grade = await _grade(job, agent)
    rate_limited = fault.rate_limited(result)
    return TaskOutcome(
        task_id=job.task.id,
        session_id=job.session_id,
        status=status_for(result.finish_reason, rate_limited=rate_limited),
        finish_reason=result.finish_reason.value,
        cost_usd=max(0.0, after.usd - before.usd),
        tokens=max(0, after.tokens - before.tokens),
        duration_s=time.monotonic() - started,
        iterations=result.iterations,
        verify_passed=_verify_passed(result),
        receipt=_receipt(result),
        error=result.error,
        grade=grade,
        retry_after_s=fault.retry_after if rate_limited else None,
        files_changed=tuple(result.files_changed),
        ignored_settings=tuple(item.message for item in settled.ignored),
        spend_reported=True,
    )


@dataclass
class ProviderFault:
    """Hears a run's events and keeps the last provider error it reported: the one that ended
    the run, when a provider fault did."""

    details: dict[str, Any] = field(default_factory=dict)

    def __call__(self, event: ev.Event) -> None:
        if isinstance(event, ev.ErrorOccurred) and event.category == ErrorCategory.PROVIDER:
            self.details = event.details

    def rate_limited(self, result: RunResult) -> bool:
        """Whether `result` ended at a 429 its call gave up on (`batch_retry_policy`)."""
        unavailable = result.finish_reason is FinishReason.PROVIDER_UNAVAILABLE
        return unavailable and bool(self.details.get("rate_limited"))

    @property
    def retry_after(self) -> float | None:
        """How long the provider asked to wait, when it said."""
        value = self.details.get("retry_after")
        return float(value) if isinstance(value, int | float) else None


@dataclass
class CallSpendReporter:
    """Hears a run's events and reports the attempt's spend so far to the batch's ledger after
    each model call, so the cap counts it even if the worker dies before the batch reads its
    rows. A ledger that cannot be reached is said once and the run goes on: the batch still
    settles from the store."""

    ledger: Any
    reservation: Reservation
    task_id: str
    usd: float = 0.0
    tokens: int = 0
    failed: bool = False
    run: str = field(default_factory=lambda: uuid.uuid4().hex)
    """This process's run of the attempt: a run that died and the one that took over from
    scratch report apart, and the ledger adds them up."""

    def __call__(self, event: ev.Event) -> None:
        if not isinstance(event, ev.ModelResponseReceived | ev.SummaryCallMade):
            return
        self.usd += event.cost_usd or 0.0
        self.tokens += event.usage.total_tokens
        try:
            self.ledger.report(self.reservation, Amount(self.tokens, self.usd), self.run)
        except Exception as error:  # the batch settles from the store: never stop the task
            if not self.failed:
                self.failed = True
                print(
                    f"journeyman: warning: task {self.task_id}: cannot report spend to the "
                    f"batch's ledger ({type(error).__name__}: {error})",
                    file=sys.stderr,
                    flush=True,
                )


def batch_retry_policy(config: AgentConfig, backend: LimiterBackend | None = None) -> RetryPolicy:
    """The agent's retries, with its calls through the batch's shared rate limiter at the
    requests and tokens per minute of `config`: a 429 pauses the calls and is waited out.
    Without a limiter (`backend` None) a 429 ends the attempt at once, for the caller to
    schedule it again."""
    from journeyman.providers.rate_limit import RateLimiter, RateLimits
    from journeyman.providers.resilient import RetryPolicy

    if backend is None:
        return RetryPolicy(call_timeout_s=config.model_call_timeout_s, retry_rate_limits=False)
    limits = RateLimits(config.requests_per_minute, config.tokens_per_minute)
    return RetryPolicy(
        call_timeout_s=config.model_call_timeout_s, rate_limiter=RateLimiter(backend, limits)
    )


def _tracing(job: TaskJob) -> AgentTracing | None:
    """The attempt's tracing when the batch asked for it: one trace per attempt. A worker
    without the otel extra (e.g. on a Ray node) runs the task untraced and says so."""
    if not job.trace:
        return None
    from journeyman.integrations.otel.command_line import tracing_for_run

    def say(kind: str) -> Callable[[str], None]:
        def line(text: str) -> None:
            print(f"journeyman: {kind}: task {job.task.id}: {text}", file=sys.stderr, flush=True)

        return line

    try:
        return tracing_for_run(True, note=say("note"), warn=say("warning"))
    except ConfigurationError as error:
        say("warning")(f"{error.message}; the task runs without traces")
        return None


@dataclass(frozen=True)
class Spending:
    usd: float
    tokens: int


def session_spending(store: SessionStore, session_id: str) -> Spending:
    """What the store's usage rows say a session spent (0 when it has none)."""
    usd = 0.0
    tokens = 0
    for row in store.usage_rows(session_id):
        usd += row.cost_usd or 0.0
        tokens += row.usage.total_tokens
    return Spending(usd, tokens)


def counted_spending(store: SessionStore, session_id: str) -> Spending:
    """What the loop counts as spent when it resumes `session_id`: the economics of its last
    stored step (a call made after it, in a step that never completed, is not counted again);
    0 when it has none."""
    from journeyman.loop.checkpoint import load_checkpoint

    _, stored = store.checkpoint(session_id)
    if not stored:
        return Spending(0.0, 0)
    economics = load_checkpoint(stored, session_id=session_id).economics
    usage = Usage.from_dict(economics["usage"])
    return Spending(economics["cost_usd"] or 0.0, usage.total_tokens)


def _unfinished(store: SessionStore, session_id: str) -> bool | None:
    """None: no such session; True: stored and not ended (or ended by the infrastructure, so
    it continues); False: it ended for good."""
    from journeyman.session.store import SessionNotFoundError

    try:
        summary = store.summary(session_id)
    except SessionNotFoundError:
        return None
    if summary.finish_reason is None:
        return True
    try:
        reason = FinishReason(summary.finish_reason)
    except ValueError:
        return True
    return reason in INFRA_REASONS


def settle_job(job: TaskJob, counted: Spending) -> Launch:
    """The attempt's settings: the user's config, the batch's flags, and hard limits no larger
    than the grant or the task's own, on top of what the loop has `counted` for the session
    so far. Hard: each call is priced before it is sent (its prompt's bound and its reply at
    `max_output_tokens`, the reply shortened to fit), so the attempt never spends past them."""
    from journeyman.loop.launch import LaunchRequest, settle

    limits = job.task.limits
    flags: dict[str, Any] = dict(job.config)
    flags.pop("tool_format", None)  # the provider's setting (`_provider`), not the agent's
    flags["mode"] = job.mode
    flags["verify_command"] = job.verify
    flags["session_dir"] = Path(job.store_path)
    flags["max_iterations"] = _least(limits.max_iterations, flags.get("max_iterations"))
    flags["max_duration_s"] = _least(limits.max_duration_s, flags.get("max_duration_s"))
    usd = _least(limits.max_budget_usd, job.granted_usd, flags.get("max_budget_usd"))
    tokens = _least(limits.max_total_tokens, job.granted_tokens, flags.get("max_total_tokens"))
    flags["max_budget_usd"] = None if usd is None else counted.usd + usd
    flags["max_total_tokens"] = None if tokens is None else counted.tokens + int(tokens)
    flags["hard_token_limit"] = True  # every billed token counts against the grant
    if limits.offline:
        flags["allow_network"] = False
    if job.task.image is not None:  # its commands and its check in a container of that image
        flags["sandbox"] = "docker"
        flags["sandbox_image"] = job.task.image
    return settle(LaunchRequest(Path(job.workspace_dir), flags=flags))


def _least(*values: Any) -> Any:
    given = [v for v in values if v is not None]
    return min(given) if given else None


def _provider(job: TaskJob) -> Provider:
    from journeyman.loop.launch import open_provider

    return open_provider(
        job.provider,
        job.model,
        base_url=job.base_url,
        tool_format=job.config.get("tool_format", "auto"),
        discover_local=False,
    )


async def _close(provider: Provider) -> None:
    """Close `provider`'s client, when it has one to close."""
    close = getattr(provider, "aclose", None)
    if close is not None:
        with contextlib.suppress(Exception):
            await close()


def _receipt(result: RunResult) -> dict[str, Any] | None:
    check = result.verification
    if check is None:
        return None
    return {k: v for k, v in check.to_dict().items() if k != "output_tail"}


def _verify_passed(result: RunResult) -> bool | None:
    check = result.verification
    if check is None:
        return None
    return bool(check.passed and check.after_last_change)


def _stored_outcome(job: TaskJob, started: float) -> TaskOutcome:
    """The outcome of a session that already ended (a resumed batch found it finished)."""
    from journeyman.session.store import SessionStore

    store = SessionStore(Path(job.store_path))
    try:
        summary = store.summary(job.session_id)
    finally:
        store.close()
    reason = FinishReason(summary.finish_reason or FinishReason.INTERNAL_ERROR.value)
    return TaskOutcome(
        task_id=job.task.id,
        session_id=job.session_id,
        status=status_for(reason),
        finish_reason=reason.value,
        cost_usd=0.0,
        tokens=0,
        duration_s=time.monotonic() - started,
        iterations=summary.steps,
        verify_passed=None,
        error=summary.error,
    )


async def _ended_before(job: TaskJob, agent: Agent, started: float) -> TaskOutcome:
    """The outcome of a session that ended in an earlier run, graded when the task is (its
    grading was cut off by a kill: a finished graded task is kept only with its grade)."""
    outcome = _stored_outcome(job, started)
    if job.task.grading is None:
        return outcome
    # grading happens in a fresh copy beside the workspace, so a kill mid-grading left nothing
    # in the agent's own copy: grade it again as it is
    grade = await _grade(job, agent)
    return replace(outcome, grade=grade, duration_s=time.monotonic() - started)


async def _grade(job: TaskJob, agent: Agent) -> Any:
    """The eval's grade of the agent's changes, applied to a fresh copy of the task with test
    infrastructure left out, the hidden tests run through the agent's own check runner in a
    sandbox of its kind (`batch.pristine`)."""
    from journeyman.batch.pristine import grade_pristine

    return await grade_pristine(job.task, agent.workspace, agent.registry)


__all__ = [
    "BUDGET_REASONS",
    "INFRA_REASONS",
    "CallSpendReporter",
    "ProviderFault",
    "Spending",
    "Status",
    "TaskJob",
    "TaskOutcome",
    "batch_retry_policy",
    "counted_spending",
    "run_job",
    "session_id_for",
    "session_spending",
    "settle_job",
    "status_for",
]
