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
    ProgressEvent,
    SettingIgnored,
    Spend,
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
    from journeyman.batch.scheduler import BatchSettings
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
    resume: ResumeBatchOpt = False,
    retry_failed: RetryFailedOpt = False,
    max_retries: MaxRetriesOpt = 2,
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
    session_dir: SessionDirOpt = None,
    output_format: OutputOpt = OutputFormat.TEXT,
    otel: OtelOpt = False,
) -> None:
    """Run the agent on every task of TASKS, each in its own copy of its workspace, under one
    global budget, with results and reports in --out.

    Every task is a session of its own (see `journeyman sessions list`; `show`, `resume`,
    `fork` and `diff` work on it), under a batch record that is their parent. Provider
    settings and API keys are those of `journeyman run`; a task's own limits are kept when
    lower than its allocation; all share one rate limit per provider key (--rpm, --tpm).
    Killed (even kill -9), the batch loses no finished task and charges nothing twice on a rerun.

    Exit status: 0 only when every task succeeded; 1 when any failed, hit an infrastructure
    error or did not run (budget exhausted); 2 bad input (tasks file, options); 130
    interrupted. The last line says how many of each.
    """
    _refuse_unusable_usd(global_budget_usd, per_task_budget_usd)
    loaded, container_problem = _load_tasks(tasks)
    settings_config = _task_config(
        price_per_mtok, no_verify, max_iterations, max_duration, sandbox, tool_format
    ) | _rate_limits(rpm, tpm)
    root = usable_session_folder(session_dir)
    _check_provider(
        provider,
        model,
        base_url,
        tool_format,
        settings_config,
        priced_needed=global_budget_usd is not None
        or per_task_budget_usd is not None
        or any(t.limits.max_budget_usd is not None for t in loaded),
    )
    trace = _tracing_wanted(otel)
    out_dir, chosen, identity = _open_batch(
        tasks, loaded, out, resume, executor, max_parallel, ray_address, cpus_per_task
    )
    from journeyman.batch.scheduler import BatchSettings

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
        container_problem=container_problem,
    )
    _run_and_report(loaded, settings, chosen, tasks, identity.resumed, output_format)


def _refuse_unusable_usd(
    global_budget_usd: float | None, per_task_budget_usd: float | None
) -> None:
    """Exit 2 for a USD cap that is not a positive, finite amount (nan and inf too)."""
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


def _load_tasks(tasks: Path) -> tuple[list[BatchTask], str | None]:
    """The tasks of TASKS (a tasks file or an eval suite's folder), and why those that name a
    container image cannot run here (`_container_engine`); exit 2 saying what is wrong."""
    from journeyman.batch.tasks import load_tasks

    try:
        loaded = load_tasks(tasks)
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

    try:
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
    raise typer.Exit(EXIT_OK if summary.all_succeeded else EXIT_FAILED)


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
        if isinstance(event, SettingIgnored):
            self._warn(event)
        if self.fmt is OutputFormat.STREAM_JSON:
            data = self._redact.tree(batch_event_to_dict(event))
            sys.stdout.write(printable_json(json.dumps(data, default=str)) + "\n")
            sys.stdout.flush()
            return
        if self.fmt is not OutputFormat.TEXT or isinstance(event, SettingIgnored):
            return
        text = self._describe(event)
        if self.live:
            self._update_bar(event, text)
        elif text:
            sys.stderr.write(printable(self._redact(text)) + "\n")
            sys.stderr.flush()

    def _warn(self, event: SettingIgnored) -> None:
        """A workspace setting the trust rules left out, said once on stderr whatever the
        output format (tasks in one repository meet the same file again and again)."""
        if event.message in self._warned:
            return
        self._warned.add(event.message)
        line = f"journeyman: warning: {event.message}"
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
            f"[{counts.done}/{counts.total} done, {counts.running} running, "
            f"{self._troubles(counts)}" + self._spend(event) + "]"
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
    def _spend(event: BatchEvent) -> str:
        spend = getattr(event, "spend", None)
        if not isinstance(spend, Spend) or spend.spent_usd is None:
            return ""
        cap = spend.cap_usd
        return f", ${spend.spent_usd:.4f}" + (f" of ${cap:.2f}" if cap is not None else "")

    def _update_bar(self, event: ProgressEvent, text: str) -> None:
        if self._bar is None:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            self._bar = Progress(
                TextColumn("batch"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.description}"),
                console=Console(stderr=True),
            )
            self._bar.start()
            self._task = self._bar.add_task("", total=event.counts.total)
        counts = event.counts
        description = f"{counts.running} running, {self._troubles(counts)}{self._spend(event)}"
        self._bar.update(self._task, completed=counts.done, description=description)
        if isinstance(event, TaskFinished | BudgetExhausted | TaskRequeued) and text:
            self._bar.console.print(printable(self._redact(text)), markup=False, highlight=False)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


def make_progress(fmt: OutputFormat) -> Progress:
    return Progress(fmt, live=fmt is OutputFormat.TEXT and sys.stderr.isatty())
