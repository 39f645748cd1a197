"""`journeyman batch`: run the agent over every task of a JSONL file under one global budget.

A thin wrapper: options in, `journeyman.batch.runner.run_batch` out, progress on the way.
"""

from __future__ import annotations

import asyncio
import json
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import typer

from journeyman.batch.events import (
    BatchEvent,
    BatchStarted,
    BudgetExhausted,
    Pace,
    ProgressEvent,
    SettingIgnored,
    Spend,
    SpendMismatch,
    SpendUpdated,
    TaskCounts,
    TaskFinished,
    TaskRequeued,
    TaskStarted,
    batch_event_to_dict,
)
from journeyman.cli.batch_options import (
    BatchOutOpt,
    CpusPerTaskOpt,
    ExecutorOpt,
    GlobalBudgetTokensOpt,
    GlobalBudgetUsdOpt,
    HideOpt,
    KeepChoice,
    KeepOpt,
    LedgerOpt,
    MaxParallelOpt,
    MaxRetriesOpt,
    PerTaskBudgetTokensOpt,
    PerTaskBudgetUsdOpt,
    RayAddressOpt,
    ResumeBatchOpt,
    RetryFailedOpt,
    RpmOpt,
    TasksArg,
    TpmOpt,
)
from journeyman.cli.exits import EXIT_CANCELLED, EXIT_CONFIG, EXIT_FAILED, EXIT_OK, fail
from journeyman.cli.options import (
    BaseUrlOpt,
    MaxDurationOpt,
    MaxIterationsOpt,
    ModelOpt,
    ModeOpt,
    NoVerifyOpt,
    OtelOpt,
    OutputFormat,
    OutputOpt,
    PricePerMtokOpt,
    ProviderOpt,
    SandboxOpt,
    SessionDirOpt,
    ToolFormatOpt,
    VerifyOpt,
    parse_duration,
    parse_price,
)
from journeyman.cli.sessions_cmd import usable_session_folder
from journeyman.core.display import printable, printable_json
from journeyman.core.errors import ConfigurationError
from journeyman.loop.choices import ModeName
from journeyman.session.redact import Redactor

if TYPE_CHECKING:
    from journeyman.batch.executor import Executor
    from journeyman.batch.runner import BatchIdentity
    from journeyman.batch.scheduler import BatchSettings, BatchSummary
    from journeyman.batch.tasks import BatchTask


def batch(
    tasks: TasksArg,
    out: BatchOutOpt = None,
    executor: ExecutorOpt = "local",
    ray_address: RayAddressOpt = None,
    cpus_per_task: CpusPerTaskOpt = None,
    max_parallel: MaxParallelOpt = 4,
    global_budget_usd: GlobalBudgetUsdOpt = None,
    global_budget_tokens: GlobalBudgetTokensOpt = None,
    per_task_budget_usd: PerTaskBudgetUsdOpt = None,
    per_task_budget_tokens: PerTaskBudgetTokensOpt = None,
    ledger: LedgerOpt = None,
    resume: ResumeBatchOpt = False,
    retry_failed: RetryFailedOpt = False,
    max_retries: MaxRetriesOpt = 2,
    keep: KeepOpt = KeepChoice.FAILED,
    rpm: RpmOpt = None,
    tpm: TpmOpt = None,
    provider: ProviderOpt = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    tool_format: ToolFormatOpt = None,
    price_per_mtok: PricePerMtokOpt = None,
    mode: ModeOpt = None,
    verify: VerifyOpt = None,
    no_verify: NoVerifyOpt = False,
    max_iterations: MaxIterationsOpt = None,
    max_duration: MaxDurationOpt = None,
    sandbox: SandboxOpt = None,
    hide: HideOpt = None,
    session_dir: SessionDirOpt = None,
    output_format: OutputOpt = OutputFormat.TEXT,
    otel: OtelOpt = False,
) -> None:
    """Run the agent on every task of TASKS, each in its own copy of its workspace, under one
    global budget, with results and reports in --out.

    Every task is a session of its own (`journeyman sessions show|resume|fork|diff`) under a
    batch record. Provider settings and API keys are those of `journeyman run`; a task's own
    limits are kept when lower than its allocation; all share one rate limit per provider key.
    Killed (even kill -9), the batch loses no finished task and charges nothing twice on a rerun.

    Copies live in --out/workspaces/<task>/attempt-<N> (--keep: which stay). Progress shows
    tasks done, running and queued, the spend, the elapsed time, an ETA and tasks/min.

    Exit: 0 only when every task succeeded; 1 when any failed, hit an infrastructure error or
    did not run (budget exhausted); 2 bad input; 130 interrupted (the last line counts each).
    """
    _refuse_unusable_budget(global_budget_usd, per_task_budget_usd, ledger, global_budget_tokens)
    loaded, container_problem = _load_tasks(tasks)
    settings_config = _task_config(
        price_per_mtok, no_verify, max_iterations, max_duration, sandbox, tool_format
    ) | _rate_limits(rpm, tpm)
    root = usable_session_folder(session_dir)
    priced = _usd_limited(global_budget_usd, per_task_budget_usd, loaded)
    _check_provider(provider, model, base_url, tool_format, settings_config, priced_needed=priced)
    trace = _tracing_wanted(otel)
    out_dir, chosen, identity = _open_batch(
        tasks, loaded, out, resume, executor, max_parallel, ray_address, cpus_per_task
    )
    from journeyman.batch.scheduler import BatchSettings

    settings_config["sandbox_hidden"] = _hidden_paths(loaded, out_dir, tasks, hide)
    settings = BatchSettings(
        batch_id=identity.batch_id,
        out=out_dir,
        store_path=root,
        **_agent_fields(provider, model, base_url, mode, verify, settings_config, trace),
        global_usd=global_budget_usd,
        global_tokens=global_budget_tokens,
        per_task_usd=per_task_budget_usd,
        per_task_tokens=per_task_budget_tokens,
        retry_failed=retry_failed,
        max_infra_retries=max_retries,
        keep=keep.value,
        workspace_layout=identity.workspace_layout,
        ledger=ledger,
        container_problem=container_problem,
    )
    _run_and_report(loaded, settings, chosen, tasks, identity.resumed, output_format)


def _hidden_paths(
    loaded: list[BatchTask], out_dir: Path, tasks: Path, hide: list[Path] | None
) -> list[str]:
    """What the tasks' commands never see: the other tasks' workspaces (--out), the tasks
    file, graded tasks' hidden tests, and what --hide names (`batch.isolation`)."""
    from journeyman.batch.isolation import batch_hidden_paths

    return batch_hidden_paths(loaded, out_dir, [tasks, *(hide or [])])


def _usd_limited(
    global_budget_usd: float | None, per_task_budget_usd: float | None, tasks: list[BatchTask]
) -> bool:
    """Whether anything is limited in USD (the model's price is then needed)."""
    return (
        global_budget_usd is not None
        or per_task_budget_usd is not None
        or any(t.limits.max_budget_usd is not None for t in tasks)
    )


def _refuse_unusable_budget(
    global_budget_usd: float | None,
    per_task_budget_usd: float | None,
    ledger: str | None = None,
    global_budget_tokens: int | None = None,
) -> None:
    """Exit 2 for a USD cap that is not a positive, finite amount (nan and inf too), or a
    --ledger that cannot be used (`_check_ledger`)."""
    _check_ledger(ledger, global_budget_usd, global_budget_tokens)
    for flag, usd in (
        ("--global-budget-usd", global_budget_usd),
        ("--per-task-budget-usd", per_task_budget_usd),
    ):
        if usd is not None and not 0 < usd < math.inf:  # nan and inf too
            fail(
                EXIT_CONFIG,
                f"{flag} must be more than 0 and finite, not {usd:g}: give a positive amount "
                "of USD, or leave it out for no cost limit",
            )


def _check_ledger(
    ledger: str | None, global_budget_usd: float | None, global_budget_tokens: int | None
) -> None:
    """Exit 2 for a --ledger that cannot be used: a malformed one, or one without a cap to
    share."""
    if ledger is None:
        return
    from journeyman.batch.ledgers import parse_ledger

    try:
        parse_ledger(ledger)
    except ConfigurationError as error:
        fail(EXIT_CONFIG, error.message)
    if global_budget_usd is None and global_budget_tokens is None:
        fail(
            EXIT_CONFIG,
            f"--ledger {ledger} shares a global budget, and none is given: add "
            "--global-budget-usd or --global-budget-tokens (the same for every batch that "
            "names this ledger)",
        )


def _load_tasks(tasks: Path) -> tuple[list[BatchTask], str | None]:
    """The tasks of TASKS (a tasks file or an eval suite's folder), and why those that name a
    container image cannot run here (`_container_engine`); exit 2 saying what is wrong."""
    from journeyman.batch.tasks import load_tasks

    try:
        loaded = load_tasks(
            tasks, note=lambda text: typer.echo(printable(f"journeyman: {text}"), err=True)
        )
    except ConfigurationError as error:
        fail(EXIT_CONFIG, error.message)
    return loaded, _container_engine(loaded)


def _open_batch(
    tasks: Path,
    loaded: list[BatchTask],
    out: Path | None,
    resume: bool,
    executor: str,
    max_parallel: int,
    ray_address: str | None,
    cpus_per_task: float | None,
) -> tuple[Path, Executor, BatchIdentity]:
    """The batch's folder, its executor and its identity (the one recorded in the folder, or a
    new one recorded now); exit 2 saying why when one cannot be had."""
    out_dir = out or Path(f"{tasks.stem}.batch")
    if out_dir.exists() and not out_dir.is_dir():
        fail(EXIT_CONFIG, f"--out {out_dir} is a file; give a folder")
    from journeyman.batch.executor import make_executor
    from journeyman.batch.runner import batch_identity, tasks_fingerprint
    from journeyman.batch.workspaces import check_out_folder

    try:
        check_out_folder(out_dir, loaded)
        chosen = make_executor(
            executor,
            max_parallel=max_parallel,
            ray_address=ray_address,
            cpus_per_task=cpus_per_task,
        )
        identity = batch_identity(
            out_dir, str(tasks), must_exist=resume, fingerprint=tasks_fingerprint(loaded)
        )
    except ConfigurationError as error:
        fail(EXIT_CONFIG, error.message)
    except OSError as error:
        fail(EXIT_CONFIG, f"cannot use --out {out_dir}: {error.strerror or error}")
    return out_dir, chosen, identity


def _agent_fields(
    provider: str | None,
    model: str | None,
    base_url: str | None,
    mode: ModeName | None,
    verify: str | None,
    config: dict[str, Any],
    trace: bool,
) -> dict[str, Any]:
    """The `BatchSettings` fields that say which agent every task gets: its provider, mode,
    check, further settings (`_task_config`) and whether its attempts are traced."""
    return {
        "model": model,
        "provider": provider,
        "base_url": base_url,
        "mode": mode.value if mode is not None else "react",
        "verify": verify,
        "config": config,
        "trace": trace,
    }


def _run_and_report(
    loaded: list[BatchTask],
    settings: BatchSettings,
    chosen: Executor,
    tasks: Path,
    resumed: bool,
    output_format: OutputFormat,
) -> NoReturn:
    """Run the batch with its progress shown, print its summary and exit: 0 when every task
    succeeded, 1 otherwise; interrupted, say how to continue it."""
    from journeyman.batch.runner import run_batch, summary_json
    from journeyman.cli.signals import handle_termination_as_interrupt

    progress = make_progress(output_format)
    if resumed and output_format is OutputFormat.TEXT:
        typer.echo(f"resuming batch {settings.batch_id} in {settings.out}", err=True)
    handle_termination_as_interrupt()
    try:
        summary = asyncio.run(
            run_batch(loaded, settings, chosen, tasks_file=str(tasks), on_event=progress)
        )
    except KeyboardInterrupt:
        progress.close()
        fail(
            EXIT_CANCELLED,
            f"batch {settings.batch_id} interrupted; run the same command again (or add "
            "--resume) to continue it",
        )
    except ConfigurationError as error:
        progress.close()
        fail(EXIT_CONFIG, error.message)
    except Exception as error:  # never a traceback: say what stopped it and how to go on
        progress.close()
        fail(
            EXIT_FAILED,
            f"batch {settings.batch_id} stopped: {type(error).__name__}: {error}; finished "
            "tasks are kept — run the same command again to continue",
        )
    progress.close()
    if output_format is OutputFormat.JSON:
        sys.stdout.write(printable_json(json.dumps(summary_json(summary, settings))) + "\n")
    elif output_format is OutputFormat.TEXT:
        typer.echo(printable(summary.line()))
        out_dir = settings.out
        typer.echo(f"results: {out_dir / 'results.jsonl'}; report: {out_dir / 'report.html'}")
        typer.echo(_kept_line(summary))
    raise typer.Exit(EXIT_OK if summary.all_succeeded else EXIT_FAILED)


def _kept_line(summary: BatchSummary) -> str:
    """Where the workspaces `--keep` kept are."""
    from journeyman.batch.scheduler import tasks_count

    kept = len(summary.kept_workspaces)
    where = f" in {summary.workspaces}" if summary.workspaces is not None and kept else ""
    return f"workspaces kept: {tasks_count(kept)}{where} (--keep {summary.keep})"


def _tracing_wanted(explicit: bool) -> bool:
    """Whether the tasks' agents are traced (each worker exports its own trace per attempt)."""
    from journeyman.integrations.otel.command_line import tracing_wanted

    try:
        return tracing_wanted(
            explicit, note=lambda text: typer.echo(f"journeyman: note: {text}", err=True)
        )
    except ConfigurationError as error:
        fail(EXIT_CONFIG, error.message)


def _container_engine(loaded: list[BatchTask]) -> str | None:
    """Why the tasks that name a container image cannot run (None: none does, or an engine
    answers). All of them: exit 2; some: said now, and they end "not run"."""
    from journeyman.batch.containers import engine_problem, needing_engine

    needing = needing_engine(loaded)
    problem = engine_problem() if needing else None
    if problem is None:
        return None
    if len(needing) == len(loaded):
        fail(
            EXIT_CONFIG,
            f"every task names a container image, and no container engine answers here "
            f"({problem}); start Docker (or set DOCKER_HOST), or drop `image` from the tasks",
        )
    shown = ", ".join(t.id for t in needing[:5]) + (" ..." if len(needing) > 5 else "")
    typer.echo(
        f"journeyman: warning: {len(needing)} of {len(loaded)} tasks name a container image "
        f"({shown}) and no container engine answers ({problem}): they will not run "
        '("not run: needs a container engine"); the others run',
        err=True,
    )
    return problem


def _rate_limits(rpm: int | None, tpm: int | None) -> dict[str, Any]:
    """The config fields of --rpm and --tpm (every task's calls share the limits)."""
    limits: dict[str, Any] = {}
    if rpm is not None:
        limits["requests_per_minute"] = rpm
    if tpm is not None:
        limits["tokens_per_minute"] = tpm
    return limits


def _task_config(
    price_per_mtok: str | None,
    no_verify: bool,
    max_iterations: int | None,
    max_duration: str | None,
    sandbox: Any,
    tool_format: str | None,
) -> dict[str, Any]:
    config: dict[str, Any] = {}
    try:
        if price_per_mtok:
            config["price_per_mtok"] = parse_price(price_per_mtok)
        if max_duration:
            config["max_duration_s"] = parse_duration(max_duration)
    except ValueError as error:
        fail(EXIT_CONFIG, str(error))
    if no_verify:
        config["verify"] = False
    if max_iterations is not None:
        config["max_iterations"] = max_iterations
    if sandbox is not None:
        config["sandbox"] = sandbox.value
    if tool_format is not None:
        from journeyman.providers.tool_modes import parse_tool_mode

        try:
            config["tool_format"] = parse_tool_mode(tool_format)
        except ValueError as error:
            fail(EXIT_CONFIG, f"--tool-format: {error}")
    return config


def _check_provider(
    provider: str | None,
    model: str | None,
    base_url: str | None,
    tool_format: str | None,
    config: dict[str, Any],
    *,
    priced_needed: bool,
) -> None:
    """Refuse now what every task would fail on: no usable provider, or a USD budget for a
    model whose price is unknown."""
    from journeyman.core.messages import Usage
    from journeyman.loop.launch import open_provider
    from journeyman.providers.pricing import model_pricer

    try:
        made = open_provider(
            provider,
            model,
            base_url=base_url,
            tool_format=config.get("tool_format", "auto"),
            notice=lambda text: typer.echo(printable(f"journeyman: {text}"), err=True),
            discover_local=False,
        )
    except ConfigurationError as error:
        fail(EXIT_CONFIG, error.message)
    price = model_pricer(config.get("price_per_mtok"), made.name, made.model)
    if priced_needed and price(Usage(1, 1)) is None:
        fail(
            EXIT_CONFIG,
            f"a USD budget needs the price of {made.name}:{made.model}, which the price "
            "list does not know; give it with --price-per-mtok IN,OUT",
        )


class Progress:
    """Shows the batch's state changes: JSON lines, plain lines, or a live bar on a terminal."""

    def __init__(self, fmt: OutputFormat, live: bool) -> None:
        self.fmt = fmt
        self.live = live
        self._bar: Any = None
        self._task: Any = None
        self._redact = Redactor()
        self._warned: set[str] = set()

    def __call__(self, event: BatchEvent) -> None:
        if isinstance(event, SettingIgnored | SpendMismatch):
            self._warn(event)
        if self.fmt is OutputFormat.STREAM_JSON:
            data = self._redact.tree(batch_event_to_dict(event))
            sys.stdout.write(printable_json(json.dumps(data, default=str)) + "\n")
            sys.stdout.flush()
            return
        if self.fmt is not OutputFormat.TEXT or isinstance(event, SettingIgnored | SpendMismatch):
            return
        if isinstance(event, SpendUpdated) and not self.live:
            return  # a line a second would bury the state changes; the bar shows it
        text = self._describe(event)
        if self.live:
            self._update_bar(event, text)
        elif text:
            sys.stderr.write(printable(self._redact(text)) + "\n")
            sys.stderr.flush()

    def _warn(self, event: SettingIgnored | SpendMismatch) -> None:
        """A workspace setting the trust rules left out, said once on stderr whatever the
        output format (tasks in one repository meet the same file again and again)."""
        if event.message in self._warned:
            return
        self._warned.add(event.message)
        kind = "error" if isinstance(event, SpendMismatch) else "warning"
        line = f"journeyman: {kind}: {event.message}"
        if self._bar is not None:
            self._bar.console.print(printable(self._redact(line)), markup=False, highlight=False)
        else:
            sys.stderr.write(printable(self._redact(line)) + "\n")
            sys.stderr.flush()

    @staticmethod
    def _troubles(counts: TaskCounts) -> str:
        """ "2 failed", plus the infrastructure errors apart (they are not the agent's)."""
        text = f"{counts.failed} failed"
        infra = counts.infra_error
        if infra:
            text += f", {infra} infrastructure error" + ("s" if infra != 1 else "")
        return text

    def _describe(self, event: ProgressEvent) -> str:
        from journeyman.batch.scheduler import tasks_count

        counts = event.counts
        state = (
            f"[{counts.done}/{counts.total} done, {self._in_flight(counts)}, "
            f"{self._troubles(counts)}" + self._spend(event) + self._pace(event.pace) + "]"
        )
        if isinstance(event, BatchStarted):
            note = f", {event.finished_before} finished before" if event.finished_before else ""
            return f"{state} batch {event.batch_id}: {tasks_count(event.to_run)} to run{note}"
        if isinstance(event, TaskStarted):
            how = " (resumed)" if event.resumed else ""
            return f"{state} {event.task_id} started{how}"
        if isinstance(event, TaskFinished):
            cost = f" ${event.cost_usd:.4f}"
            return f"{state} {event.task_id} {event.status} ({event.finish_reason}){cost}"
        if isinstance(event, TaskRequeued):
            if event.rate_limited:
                return (
                    f"{state} {event.task_id} rate-limited: requeued, concurrency now "
                    f"{event.concurrency}, pause {event.pause_s} s"
                )
            return f"{state} {event.task_id} infrastructure error, retrying: {event.error}"
        if isinstance(event, BudgetExhausted):
            return f"{state} budget exhausted: {tasks_count(event.not_started)} will not start"
        return ""

    @staticmethod
    def _in_flight(counts: TaskCounts) -> str:
        """ "2 running", plus the queued ones when there are."""
        text = f"{counts.running} running"
        return text + (f", {counts.queued} queued" if counts.queued else "")

    @staticmethod
    def _pace(pace: Pace, *, elapsed: bool = True) -> str:
        """ ", 1m05s elapsed, ETA 2m10s, 3.1 tasks/min" (what is known of it)."""
        from journeyman.batch.scheduler import describe_duration

        parts = []
        if elapsed and pace.elapsed_s is not None:
            parts.append(f"{describe_duration(pace.elapsed_s)} elapsed")
        if pace.eta_s is not None:
            parts.append(f"ETA {describe_duration(pace.eta_s)}")
        if pace.tasks_per_min:
            parts.append(f"{pace.tasks_per_min:.1f} tasks/min")
        return "".join(", " + part for part in parts)

    @staticmethod
    def _spend(event: BatchEvent) -> str:
        spend = getattr(event, "spend", None)
        if not isinstance(spend, Spend) or spend.spent_usd is None:
            return ""
        cap = spend.cap_usd
        text = f", ${spend.spent_usd + (spend.in_flight_usd or 0.0):.4f}"
        text += f" of ${cap:.2f}" if cap is not None else ""
        if spend.in_flight_usd:
            text += f" (${spend.in_flight_usd:.4f} in flight)"
        return text

    def _update_bar(self, event: ProgressEvent, text: str) -> None:
        if self._bar is None:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            self._bar = Progress(
                TextColumn("batch"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("{task.description}"),
                console=Console(stderr=True),
            )
            self._bar.start()
            self._task = self._bar.add_task("", total=event.counts.total)
        counts = event.counts
        description = (
            f"{self._in_flight(counts)}, {self._troubles(counts)}{self._spend(event)}"
            + self._pace(event.pace, elapsed=False)  # the bar's own clock shows the elapsed time
        )
        self._bar.update(self._task, completed=counts.done, description=description)
        if isinstance(event, TaskFinished | BudgetExhausted | TaskRequeued) and text:
            self._bar.console.print(printable(self._redact(text)), markup=False, highlight=False)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


def make_progress(fmt: OutputFormat) -> Progress:
    return Progress(fmt, live=fmt is OutputFormat.TEXT and sys.stderr.isatty())
