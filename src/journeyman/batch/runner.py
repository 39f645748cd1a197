"""A whole batch from start to report: its identity in `--out`, its record in the session
store, the scheduler, then results, reports and preds (the CLI and `journeyman eval` call it).

`--out/batch.json` names the batch; running again on the same `--out` resumes it. The batch's
record in the store (a session that runs no model; every task session points to it as its
parent) is claimed for the length of the run, so two processes never run one batch at once.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from journeyman.batch.evaluation import USD_PLACES, summarize_rows, was_unsandboxed
from journeyman.batch.events import BatchEventHandler
from journeyman.batch.executor import Executor
from journeyman.batch.ledgers import DEFAULT_LEDGER_NAME, LedgerClient, RedisLedger, parse_ledger
from journeyman.batch.report import ReportInput, write_reports
from journeyman.batch.results import write_preds, write_results
from journeyman.batch.scheduler import (
    BatchSettings,
    BatchSummary,
    Scheduler,
    batch_spending,
    open_ledger,
    tasks_count,
)
from journeyman.batch.task_file import BatchTask
from journeyman.batch.workspaces import LAYOUT_VERSION, WORKSPACES
from journeyman.core.errors import ConfigurationError
from journeyman.economics.ledger import Amount
from journeyman.session.lock import SessionBusyError
from journeyman.session.store import SessionNotFoundError, SessionRecord, SessionStore

BATCH_FILE = "batch.json"


@dataclass(frozen=True)
class BatchIdentity:
    batch_id: str
    created_at: float
    resumed: bool
    """An earlier run of this batch wrote `--out`."""
    workspace_layout: int = LAYOUT_VERSION
    """How its `workspaces/` folder is laid out (1: started before the current layout)."""


class BatchBusyError(ConfigurationError):
    """Another process is running this batch."""


class TasksChangedError(ConfigurationError):
    """`--out` holds a batch of other tasks than the ones given now."""


def tasks_fingerprint(tasks: list[BatchTask]) -> str:
    """A digest of the tasks as loaded (blank lines, comments and key order do not count)."""
    digest = hashlib.sha256()
    for task in tasks:
        canonical = json.dumps(task.model_dump(mode="json", exclude_defaults=True), sort_keys=True)
        digest.update(canonical.encode() + b"\n")
    return digest.hexdigest()


def batch_identity(
    out: Path, tasks_file: str, *, must_exist: bool = False, fingerprint: str | None = None
) -> BatchIdentity:
    """The batch of `out`: the one recorded there, or a new one (recorded now).

    With `fingerprint` (`tasks_fingerprint` of the tasks given now), a batch recorded for other
    tasks is refused (`TasksChangedError`) rather than resumed with the wrong ones."""
    path = out / BATCH_FILE
    if path.is_file():
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            layout = int(data.get("workspace_layout") or _legacy_or_current(out))
            identity = BatchIdentity(str(data["batch_id"]), float(data["created_at"]), True, layout)
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise ConfigurationError(
                f"{path} is damaged ({error}); remove it to start a new batch in {out}"
            ) from None
        if fingerprint is not None:
            _check_fingerprint(out, data, identity.batch_id, tasks_file, fingerprint)
        if "workspace_layout" not in data:  # said once, so the answer never changes
            _write_record(path, {**data, "workspace_layout": identity.workspace_layout})
        return identity
    if must_exist:
        raise ConfigurationError(
            f"nothing to resume: {out} holds no batch ({BATCH_FILE} is missing); "
            "run without --resume to start one"
        )
    identity = BatchIdentity(
        f"batch-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}", time.time(), False
    )
    out.mkdir(parents=True, exist_ok=True)
    record = {
        "batch_id": identity.batch_id,
        "created_at": identity.created_at,
        "tasks_file": tasks_file,
        "tasks_fingerprint": fingerprint,
        "workspace_layout": LAYOUT_VERSION,
    }
    _write_record(path, record)
    return identity


def _write_record(path: Path, record: dict[str, Any]) -> None:
    """Write `batch.json` whole (a kill leaves the old one or the new one)."""
    partial = path.with_name(BATCH_FILE + ".partial")
    partial.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    partial.replace(path)


def _legacy_or_current(out: Path) -> int:
    """The layout of a batch recorded before layouts were: the legacy one when it made any
    workspace, else the current one (nothing to carry over)."""
    try:
        made = any(not entry.name.startswith(".") for entry in (out / WORKSPACES).iterdir())
    except OSError:
        made = False
    return 1 if made else LAYOUT_VERSION


def check_same_tasks(out: Path, tasks: list[BatchTask], tasks_file: str) -> None:
    """Raise `TasksChangedError` when `out` holds a batch recorded for other tasks."""
    path = out / BATCH_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return  # no batch there (or a damaged record, which `batch_identity` reports)
    if isinstance(data, dict):
        batch_id = str(data.get("batch_id") or "")
        _check_fingerprint(out, data, batch_id, tasks_file, tasks_fingerprint(tasks))


def _check_fingerprint(
    out: Path, data: dict[str, Any], batch_id: str, tasks_file: str, fingerprint: str
) -> None:
    recorded = data.get("tasks_fingerprint")
    if recorded is not None and recorded != fingerprint:  # older records have none
        raise TasksChangedError(
            f"{out} holds batch {batch_id}, started from other tasks "
            f"({data.get('tasks_file') or 'another tasks file'}) than those in {tasks_file}; "
            f"resuming it would mix the two. Give another --out for these tasks, or delete "
            f"{out} to start over there (its results are lost)"
        )


def claim_batch_record(
    store: SessionStore, settings: BatchSettings, tasks: list[BatchTask], tasks_file: str
) -> None:
    """Create the batch's record in the store, or claim the existing one."""
    try:
        store.load_session(settings.batch_id)
    except SessionNotFoundError:
        record = SessionRecord(
            id=settings.batch_id,
            task=f"batch of {tasks_count(len(tasks))} from {tasks_file}",
            workspace=str(settings.out.resolve()),
            settings={
                "kind": "batch",
                "provider": settings.provider,
                "model": settings.model,
                "base_url": settings.base_url,
                "tasks_file": tasks_file,
                "out": str(settings.out.resolve()),
                "mode": settings.mode,
            },
            system_prompt="",
        )
        try:
            store.create_session(record)
        except SessionBusyError:
            raise _busy(settings) from None
        return
    try:
        store.clear_outcome(settings.batch_id)
    except SessionBusyError:
        raise _busy(settings) from None


def batch_record_problem(record: SessionRecord) -> str | None:
    """Why `resume` or `fork` must not take `record` (a batch's own record, which runs no
    model), or None."""
    if record.settings.get("kind") != "batch":
        return None
    tasks_file = record.settings.get("tasks_file") or "TASKS"
    out = record.settings.get("out") or "OUT"
    return (
        f"session {record.id} is a batch, not a run; continue it with: journeyman batch "
        f"{tasks_file} --out {out} --resume (its tasks are sessions of their own)"
    )


class CapBelowSpentError(ConfigurationError):
    """A resumed batch was given a global cap below what it already spent."""


def check_cap_above_spent(settings: BatchSettings, spent: Amount) -> None:
    """Refuse to resume a batch under a global cap its earlier runs already went past: the
    report would show spend over the cap, and no task could start anyway."""
    problems = []
    if settings.global_usd is not None and (spent.usd or 0.0) > settings.global_usd:
        problems.append(
            f"${spent.usd or 0.0:.4f}, more than --global-budget-usd {settings.global_usd:g}"
        )
    if settings.global_tokens is not None and (spent.tokens or 0) > settings.global_tokens:
        problems.append(
            f"{spent.tokens or 0:,} tokens, more than --global-budget-tokens "
            f"{settings.global_tokens:,}"
        )
    if problems:
        raise CapBelowSpentError(
            f"batch {settings.batch_id} in {settings.out} already spent "
            + " and ".join(problems)
            + "; to continue it, give a global budget above what it spent (the cap covers all "
            "its runs together), or use another --out to start a new batch"
        )


def _busy(settings: BatchSettings) -> BatchBusyError:
    return BatchBusyError(
        f"batch {settings.batch_id} in {settings.out} is running in another process; wait for "
        "it to end (or stop it) before running it again"
    )


async def run_batch(
    tasks: list[BatchTask],
    settings: BatchSettings,
    executor: Executor,
    *,
    tasks_file: str,
    ledger: LedgerClient | None = None,
    on_event: BatchEventHandler | None = None,
) -> BatchSummary:
    """Run (or resume) the batch and write its results, reports and preds in `settings.out`."""
    store = SessionStore(settings.store_path)
    try:
        check_cap_above_spent(settings, batch_spending(store, settings.batch_id))
        claim_batch_record(store, settings, tasks, tasks_file)
        if ledger is None:
            ledger = batch_ledger(settings, executor)
        scheduler = Scheduler(tasks, settings, executor, ledger=ledger, on_event=on_event)
        try:
            summary = await scheduler.run()
        finally:
            await executor.close()
        finish_files(settings, summary, graded=any(t.grading is not None for t in tasks))
        store.record_outcome(
            settings.batch_id,
            "completed" if summary.all_succeeded else "batch_incomplete",
            summary.line(),
            None if summary.all_succeeded else summary.line(),
        )
        return summary
    finally:
        store.close()


def batch_ledger(settings: BatchSettings, executor: Executor) -> LedgerClient:
    """The ledger `--ledger` names (`batch.ledgers`): a Redis one, a named Ray actor (with the
    Ray executor only), or none: the batch's own — in this process, or in a Ray actor on the
    cluster with the Ray executor, so that its workers report to it."""
    spec = parse_ledger(settings.ledger)
    if spec.redis_url is not None:
        return RedisLedger(spec.redis_url, spec.name or DEFAULT_LEDGER_NAME)
    hosted = getattr(executor, "ledger", None)  # the Ray executor keeps it on the cluster
    if callable(hosted):
        ray_ledger: LedgerClient = hosted(spec.name)
        return ray_ledger
    if spec.name is not None:
        raise ConfigurationError(
            f"--ledger {spec.name} names a ledger in a Ray actor, which needs --executor ray; "
            "to share a budget between batches without Ray, give a Redis url "
            "(--ledger redis://host:port/0)"
        )
    return open_ledger(settings)


def finish_files(settings: BatchSettings, summary: BatchSummary, *, graded: bool = False) -> None:
    """results.jsonl, the reports (with the eval's figures when the tasks are graded), preds."""
    write_results(settings.out, summary.results)
    evaluation = None
    if graded:
        unsandboxed = settings.config.get("sandbox") == "local" or was_unsandboxed(settings.out)
        evaluation = replace(summarize_rows(summary.results), unsandboxed=unsandboxed)
    info = ReportInput(
        batch_id=summary.batch_id,
        model=settings.model,
        spent=summary.spent,
        cap=summary.cap,
        budget_exhausted=summary.budget_exhausted,
        started_tasks=summary.started_tasks,
        evaluation=evaluation,
        wall_s=summary.wall_s,
        finished_in_run=summary.finished_in_run,
        workspaces=summary.workspaces,
        keep=summary.keep,
    )
    write_reports(settings.out, summary.results, info)
    write_preds(settings.out, summary.results, settings.model)


def summary_json(summary: BatchSummary, settings: BatchSettings) -> dict[str, Any]:
    return {
        "batch_id": summary.batch_id,
        "success": summary.all_succeeded,
        "tasks": len(summary.results),
        "succeeded": summary.count("succeeded"),
        "failed": summary.count("failed"),
        "infra_error": summary.count("infra_error"),
        "not_run": summary.count("not_run"),
        "budget_exhausted": summary.budget_exhausted,
        "spent_usd": _usd(summary.spent.usd),
        "spent_tokens": summary.spent.tokens,
        "cap_usd": _usd(summary.cap.usd),
        "cap_tokens": summary.cap.tokens,
        "overspend_usd": _usd(summary.overspend.usd),
        "wall_s": round(summary.wall_s, 3),
        "finished_in_run": summary.finished_in_run,
        "tasks_per_min": _rounded(summary.tasks_per_min),
        "keep": summary.keep,
        "workspaces": str(summary.workspaces or settings.out / WORKSPACES),
        "workspaces_kept": len(summary.kept_workspaces),
        "out": str(settings.out),
        "results": str(settings.out / "results.jsonl"),
        "summary": summary.line(),
    }


def _usd(value: float | None) -> float | None:
    """A dollar figure as written: rounded, so that sums leave no float noise."""
    return None if value is None else round(value, USD_PLACES)


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


__all__ = [
    "BATCH_FILE",
    "BatchBusyError",
    "BatchIdentity",
    "CapBelowSpentError",
    "TasksChangedError",
    "batch_identity",
    "batch_ledger",
    "batch_record_problem",
    "check_cap_above_spent",
    "check_same_tasks",
    "claim_batch_record",
    "finish_files",
    "run_batch",
    "summary_json",
    "tasks_fingerprint",
]
