"""`journeyman batch`: run the agent over every task of a JSONL file under one global budget.

A thin wrapper: options in, `journeyman.batch.runner.run_batch` out, progress on the way.
"""

from __future__ import annotations

import asyncio
import json
import math
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from journeyman.batch.events import (
    BatchEvent,
    BatchStarted,
    BudgetExhausted,
    Spend,
    TaskCounts,
    TaskFinished,
    TaskRequeued,
    TaskStarted,
    batch_event_to_dict,
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
from journeyman.session.redact import Redactor

ExecutorOpt = Annotated[
    str,
    typer.Option(
        "--executor",
        help="local (default): worker processes on this machine; ray: Ray tasks on the "
        "cluster of --ray-address (needs Ray: install the ray extra of journeyman).",
    ),
]


def batch(
    tasks: Annotated[
        Path,
        typer.Argument(
            help='A JSONL file, one task a line: {"id", "task", "workspace"} plus optional '
            '"base_commit" (workspace is then a git repository), "verify", "setup" and '
            '"limits" ({max_iterations, max_budget_usd, max_total_tokens, max_duration_s}). '
            "Or an eval suite's folder.",
            show_default=False,
        ),
    ],
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="Folder for results.jsonl, report.md, report.html, preds.json and each task's "
            "workspace (default: <TASKS name>.batch in the current folder). Running again on "
            "the same folder resumes the batch.",
        ),
    ] = None,
    executor: ExecutorOpt = "local",
    ray_address: Annotated[
        str | None,
        typer.Option(
            help="Address (host:port) of the Ray cluster for --executor ray. Without it: the "
            "cluster in RAY_ADDRESS, else a private Ray instance started on this machine for "
            "the batch and stopped when it ends. See docs/distributed.md."
        ),
    ] = None,
    cpus_per_task: Annotated[
        float | None,
        typer.Option(
            "--cpus-per-task",
            help="With --executor ray: the CPUs each task asks the cluster for (more than 0; "
            "default 1; e.g. 2 for tasks whose tests run in parallel, 0.5 to pack two on a CPU). "
            "Refused with the local executor.",
            show_default=False,
        ),
    ] = None,
    max_parallel: Annotated[
        int, typer.Option(min=1, help="Tasks running at the same time (default 4).")
    ] = 4,
    global_budget_usd: Annotated[
        float | None,
        typer.Option(
            min=0.0,
            help="Cap on the whole batch's spending in USD. Each task's allocation is reserved "
            "before it starts; when what is left cannot cover one, no new task starts, running "
            "ones finish within theirs, and the batch ends 'budget exhausted' (exit 1).",
        ),
    ] = None,
    global_budget_tokens: Annotated[
        int | None,
        typer.Option(min=1, help="Cap on the whole batch's tokens (input + output)."),
    ] = None,
    per_task_budget_usd: Annotated[
        float | None,
        typer.Option(
            min=0.0,
            help="Each task's allocation in USD (all its attempts together). Without it, a task "
            "gets a fair share of what is left of the global cap among the tasks still to start.",
        ),
    ] = None,
    per_task_budget_tokens: Annotated[
        int | None, typer.Option(min=1, help="Each task's allocation in tokens.")
    ] = None,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume",
            help="Continue the batch in --out (an error if there is none): finished tasks are "
            "kept, interrupted ones continue from their last saved step. Re-running the same "
            "command does the same.",
        ),
    ] = False,
    retry_failed: Annotated[
        bool,
        typer.Option(
            "--retry-failed",
            help="Give tasks that failed (the agent did not succeed) a fresh attempt in a fresh "
            "copy. Infrastructure errors are always retried; agent failures only with this.",
        ),
    ] = False,
    max_retries: Annotated[
        int,
        typer.Option(
            min=0,
            help="Retries of a task whose attempt ended with an infrastructure error (provider "
            "unavailable, worker died), from its last saved step (default 2).",
        ),
    ] = 2,
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
    lower than its allocation. A 429 from the provider lowers the batch's concurrency and
    puts the task back in the queue. Interrupted (even kill -9), the batch loses no finished
    task and charges nothing twice when run again.

    Exit status: 0 only when every task succeeded; 1 when any failed, hit an infrastructure
    error or did not run (budget exhausted); 2 bad input (tasks file, options); 130
    interrupted. The last line says how many of each.
    """
    from journeyman.batch.tasks import load_tasks

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
    try:
        loaded = load_tasks(tasks)
    except ConfigurationError as error:
        fail(EXIT_CONFIG, error.message)
    settings_config = _task_config(
        price_per_mtok, no_verify, max_iterations, max_duration, sandbox, tool_format
    )
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
    out_dir = out or Path(f"{tasks.stem}.batch")
    if out_dir.exists() and not out_dir.is_dir():
        fail(EXIT_CONFIG, f"--out {out_dir} is a file; give a folder")
    from journeyman.batch.executor import make_executor
    from journeyman.batch.runner import (
        batch_identity,
        run_batch,
        summary_json,
        tasks_fingerprint,
    )
    from journeyman.batch.scheduler import BatchSettings

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
    settings = BatchSettings(
        batch_id=identity.batch_id,
        out=out_dir,
        store_path=root,
        model=model,
        provider=provider,
        base_url=base_url,
        mode=(mode.value if mode is not None else "react"),
        verify=verify,
        global_usd=global_budget_usd,
        global_tokens=global_budget_tokens,
        per_task_usd=per_task_budget_usd,
        per_task_tokens=per_task_budget_tokens,
        retry_failed=retry_failed,
        max_infra_retries=max_retries,
        config=settings_config,
        trace=trace,
    )
    progress = make_progress(output_format)
    if identity.resumed and output_format is OutputFormat.TEXT:
        typer.echo(f"resuming batch {identity.batch_id} in {out_dir}", err=True)
    from journeyman.cli.signals import handle_termination_as_interrupt

    handle_termination_as_interrupt()
    try:
        summary = asyncio.run(
            run_batch(loaded, settings, chosen, tasks_file=str(tasks), on_event=progress)
        )
    except KeyboardInterrupt:
        progress.close()
        fail(
            EXIT_CANCELLED,
            f"batch {identity.batch_id} interrupted; run the same command again (or add "
            "--resume) to continue it",
        )
    except ConfigurationError as error:
        progress.close()
        fail(EXIT_CONFIG, error.message)
    except Exception as error:  # never a traceback: say what stopped it and how to go on
        progress.close()
        fail(
            EXIT_FAILED,
            f"batch {identity.batch_id} stopped: {type(error).__name__}: {error}; finished "
            "tasks are kept — run the same command again to continue",
        )
    progress.close()
    if output_format is OutputFormat.JSON:
        sys.stdout.write(printable_json(json.dumps(summary_json(summary, settings))) + "\n")
    elif output_format is OutputFormat.TEXT:
        typer.echo(printable(summary.line()))
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
    from journeyman.providers.factory import create_provider
    from journeyman.providers.pricing import cost_usd

    try:
        made = create_provider(
            provider, model, base_url, tool_format=config.get("tool_format", "auto")
        )
    except ConfigurationError as error:
        fail(EXIT_CONFIG, error.message)
    unpriced = cost_usd(made.name, made.model, Usage(1, 1)) is None
    if priced_needed and "price_per_mtok" not in config and unpriced:
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

    def __call__(self, event: BatchEvent) -> None:
        if self.fmt is OutputFormat.STREAM_JSON:
            data = self._redact.tree(batch_event_to_dict(event))
            sys.stdout.write(printable_json(json.dumps(data, default=str)) + "\n")
            sys.stdout.flush()
            return
        if self.fmt is not OutputFormat.TEXT:
            return
        text = self._describe(event)
        if self.live:
            self._update_bar(event, text)
        elif text:
            sys.stderr.write(printable(self._redact(text)) + "\n")
            sys.stderr.flush()

    @staticmethod
    def _troubles(counts: TaskCounts) -> str:
        """ "2 failed", plus the infrastructure errors apart (they are not the agent's)."""
        text = f"{counts.failed} failed"
        infra = counts.infra_error
        if infra:
            text += f", {infra} infrastructure error" + ("s" if infra != 1 else "")
        return text

    def _describe(self, event: BatchEvent) -> str:
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

    def _update_bar(self, event: BatchEvent, text: str) -> None:
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
