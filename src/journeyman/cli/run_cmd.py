"""`journeyman run`, `resume` and `fork`: build the provider and the `Agent`, run, report and
exit with the outcome's code."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from journeyman.cli.exits import (
    EXIT_CANCELLED,
    EXIT_CLOSED_STDOUT,
    EXIT_CONFIG,
    EXIT_FAILED,
    EXIT_OK,
    ClosedStdoutGuard,
    fail,
)
from journeyman.cli.lsp_cmd import LspOpt
from journeyman.cli.options import (
    AllowNetworkOpt,
    AllowTestEditsOpt,
    AutoExtendOpt,
    BaseUrlOpt,
    BudgetModeOpt,
    EditToolOpt,
    MaxBudgetOpt,
    MaxDurationOpt,
    MaxIterationsOpt,
    MaxTokensOpt,
    McpOpt,
    ModelOpt,
    ModeOpt,
    NoVerifyOpt,
    OtelOpt,
    OutputFormat,
    OutputOpt,
    PassEnvOpt,
    PermissionModeOpt,
    PricePerMtokOpt,
    ProjectHooksOpt,
    ProviderOpt,
    QuietOpt,
    SandboxOpt,
    SessionDirOpt,
    StreamOpt,
    SubagentsOpt,
    ToolFormatOpt,
    ToolTimeoutOpt,
    VerifyOpt,
    VerifyRoundsOpt,
    VerifyTimeoutOpt,
    WorkspaceOpt,
    YesOpt,
    given_limits,
    stream_choice,
    streamed_text,
    tool_flags,
)
from journeyman.cli.run_options import (
    AtStepOpt,
    ContinueOpt,
    ForceOpt,
    ForkSessionArg,
    ForkTaskOpt,
    ForkWorkspaceOpt,
    InPlaceOpt,
    IntoOpt,
    TaskArg,
)
from journeyman.cli.signals import run_cancellable
from journeyman.core.display import printable
from journeyman.core.errors import ConfigurationError

# Only what the command signatures need is imported here: `run --help` must not load the run
# settings, the session store or the agent; each command imports those when it runs.
if TYPE_CHECKING:
    from journeyman.cli.render import Renderer
    from journeyman.core.result import RunResult
    from journeyman.integrations.otel.tracing import AgentTracing
    from journeyman.loop.agent import Agent
    from journeyman.loop.launch import LaunchRequest, ProviderChoice, Surface
    from journeyman.policy.permissions import PermissionMode
    from journeyman.policy.settings import IgnoredSetting
    from journeyman.session.fork import ForkPlan
    from journeyman.session.store import SessionRecord


def _launch(
    request: LaunchRequest,
    surface: SurfaceFlags,
    action: Callable[[Agent], Coroutine[Any, Any, RunResult]],
) -> NoReturn:
    """Settle the settings, build the agent, run `action`, print the result and exit
    accordingly. The settings the trust rules left out are warned about on stderr, listed in
    the JSON output (a `setting_ignored` line each in stream-json) and kept with the session."""
    # the agent, the providers and rich load only when a run starts (start-up stays light)
    from journeyman.cli.render import Renderer
    from journeyman.cli.sessions_cmd import session_root_problem
    from journeyman.loop.launch import launch, settle
    from journeyman.session.store import default_session_root

    if not request.workspace.is_dir():
        fail(EXIT_CONFIG, f"workspace {request.workspace} is not a directory")
    try:
        settled = settle(request)
    except ConfigurationError as error:
        fail(EXIT_CONFIG, error.message)
    problem = session_root_problem(settled.config.session_dir or default_session_root())
    if problem:
        fail(EXIT_CONFIG, problem)
    tracing = _tracing(surface.otel)
    renderer = Renderer(surface.output_format, live_status=not surface.quiet)
    output = ClosedStdoutGuard(renderer)
    _report_ignored(settled.ignored, renderer)
    terminal = _terminal_surface(output, surface.auto_extend, surface.output_format, tracing)
    try:
        agent = launch(settled, terminal)
    except ConfigurationError as error:  # e.g. a sandbox asked for by name cannot start
        fail(EXIT_CONFIG, error.message)
    renderer.tool_mode = getattr(agent.provider.providers[0], "tool_mode_description", None)
    output.on_close = agent.cancel  # nobody reads the output any more: stop, like on SIGPIPE
    renderer.sandbox = agent.sandbox.description
    result = _run_to_end(agent, action, renderer, tracing)
    output.call(renderer.final, result)
    if output.closed:
        raise typer.Exit(EXIT_CLOSED_STDOUT)
    _exit_with(result, renderer.errors_shown)


def _terminal_surface(
    output: ClosedStdoutGuard,
    auto_extend: int,
    output_format: OutputFormat,
    tracing: AgentTracing | None,
) -> Surface:
    """Events to the renderer, questions on the terminal when one is there, notices on stderr."""
    from journeyman.cli.approver import TerminalLines, TerminalPermissionApprover, choose_approver
    from journeyman.loop.launch import Surface

    interactive = output_format is OutputFormat.TEXT and sys.stdin.isatty()
    lines = TerminalLines(sys.stdin)
    return Surface(
        on_event=output,
        approver=choose_approver(auto_extend, interactive, lines),
        permission_approver=TerminalPermissionApprover(lines) if interactive else None,
        notice=say,
        tracing=tracing,
    )


def say(text: str) -> None:
    """One `journeyman: note: ...` or `journeyman: warning: ...` line on stderr."""
    typer.echo(f"journeyman: {printable(text)}", err=True)


def _run_to_end(
    agent: Agent,
    action: Callable[[Agent], Coroutine[Any, Any, RunResult]],
    renderer: Renderer,
    tracing: AgentTracing | None,
) -> RunResult:
    """Run `action` with the agent's servers up; the agent is disposed of on the way out."""
    from journeyman.session.store import StoreFullError

    async def work() -> RunResult:
        async with agent.connected() as statuses:
            if statuses:
                from journeyman.cli.mcp_cmd import warn_unstarted

                warn_unstarted(statuses)
            return await action(agent)

    try:
        try:
            return run_cancellable(work())
        finally:
            renderer.close()  # the live line is gone before any message about the ending
    except KeyboardInterrupt:
        fail(EXIT_CANCELLED, "cancelled")
    except ConfigurationError as error:
        fail(EXIT_CONFIG, error.message)
    except StoreFullError as error:
        fail(EXIT_FAILED, error.message)
    finally:
        agent.close()
        if tracing is not None:
            tracing.close()  # sends the last spans


def _exit_with(result: RunResult, shown: set[str]) -> NoReturn:
    """Exit with the outcome's code and a line saying why; an error the output already
    showed on this terminal (`shown`, both streams on it) is not said twice."""
    from journeyman.core.result import FinishReason

    if result.success:
        raise typer.Exit(EXIT_OK)
    code = {
        FinishReason.CONFIGURATION_ERROR: EXIT_CONFIG,
        FinishReason.CANCELLED: EXIT_CANCELLED,
    }.get(result.finish_reason, EXIT_FAILED)
    why = result.error or "the run did not succeed"
    if result.error in shown and sys.stdout.isatty() and sys.stderr.isatty():
        why = "the reason is shown above"
    fail(code, f"{result.finish_reason.value}: {why}")


def _tracing(explicit: bool) -> AgentTracing | None:
    """OpenTelemetry tracing of the run: with --otel or an OTLP endpoint in the environment."""
    from journeyman.integrations.otel.command_line import tracing_for_run

    try:
        return tracing_for_run(
            explicit,
            note=lambda text: typer.echo(f"journeyman: note: {text}", err=True),
            warn=lambda text: typer.echo(f"journeyman: warning: {text}", err=True),
        )
    except ConfigurationError as error:
        fail(EXIT_CONFIG, error.message)


def _report_ignored(ignored: Sequence[IgnoredSetting], renderer: Renderer) -> None:
    for item in ignored:
        typer.echo(f"journeyman: warning: {item.message}", err=True)
    records = [item.to_dict() for item in ignored]
    renderer.ignored_settings = records
    if renderer.fmt is OutputFormat.STREAM_JSON:
        for record in records:
            line = json.dumps({"type": "setting_ignored", **record}, default=str)
            sys.stdout.write(line + "\n")
        sys.stdout.flush()


def run(
    task: TaskArg,
    workspace: WorkspaceOpt = None,
    provider: ProviderOpt = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    tool_format: ToolFormatOpt = None,
    max_iterations: MaxIterationsOpt = None,
    max_budget_usd: MaxBudgetOpt = None,
    price_per_mtok: PricePerMtokOpt = None,
    max_total_tokens: MaxTokensOpt = None,
    max_duration: MaxDurationOpt = None,
    budget_mode: BudgetModeOpt = None,
    auto_extend: AutoExtendOpt = 0,
    tool_timeout: ToolTimeoutOpt = None,
    output_format: OutputOpt = OutputFormat.TEXT,
    session_dir: SessionDirOpt = None,
    stream: StreamOpt = None,
    quiet: QuietOpt = False,
    permission_mode: PermissionModeOpt = None,
    yes: YesOpt = None,
    mode: ModeOpt = None,
    verify: VerifyOpt = None,
    no_verify: NoVerifyOpt = False,
    allow_test_edits: AllowTestEditsOpt = False,
    verify_timeout: VerifyTimeoutOpt = None,
    max_verify_rounds: VerifyRoundsOpt = None,
    sandbox: SandboxOpt = None,
    edit_tool: EditToolOpt = None,
    allow_network: AllowNetworkOpt = False,
    pass_env: PassEnvOpt = None,
    lsp: LspOpt = True,
    mcp: McpOpt = None,
    project_hooks: ProjectHooksOpt = False,
    subagents: SubagentsOpt = False,
    otel: OtelOpt = False,
    continue_session: ContinueOpt = None,
) -> None:
    """Run the agent on TASK until it finishes or a limit stops it.

    Settings come from the user config, then journeyman.toml (or .journeyman/config.toml) in
    the workspace, then JOURNEYMAN_* environment variables, then these flags. The workspace's
    file may only tighten (lower limits, stricter modes, more deny/ask rules, a stronger
    sandbox); a key that would loosen is ignored with a warning naming it.

    Exit status: 0 only when the task is done, with a receipt: the model finished, no edit or
    command it needed was refused, and the check fixed before the first turn (--verify, or
    the test command detected then) ran at least one test and passed on the final tree, with
    the tests as they were at the start; 1 the run did not succeed (finish reason refused,
    verification_failed, unverified: no check found, a limit, ...), 2 configuration error,
    130 cancelled, 141 the reader of the output went away (`| head`). Questions: --mode ask
    or --no-verify.
    """
    from journeyman.loop.launch import ProviderChoice

    limits = given_limits(
        max_iterations,
        max_budget_usd,
        max_total_tokens,
        max_duration,
        budget_mode,
        tool_timeout,
        price_per_mtok,
    )
    chosen = ProviderChoice(provider, model, base_url, tool_format)
    surface = SurfaceFlags(output_format, auto_extend, otel, quiet)
    given = GivenFlags(
        chosen, limits, permission_mode, workspace, session_dir, stream, yes, mcp, surface
    )
    if continue_session is not None:
        _continue(continue_session, task, given)
    flags = {
        "mode": mode,
        **_check_flags(verify, no_verify, allow_test_edits, verify_timeout, max_verify_rounds),
        **tool_flags(sandbox, edit_tool, allow_network, pass_env),
    }
    request = _new_run(given, flags, lsp=lsp, project_hooks=project_hooks)
    _launch(request, surface, lambda agent: _with_subagents(agent, subagents).run(task))


def _check_flags(
    verify: str | None,
    no_verify: bool,
    allow_test_edits: bool,
    verify_timeout: float | None,
    max_verify_rounds: int | None,
) -> dict[str, Any]:
    """The config fields of the flags that shape the check (None where not given)."""
    return {
        "verify_command": verify,
        "verify": False if no_verify else None,
        "allow_test_edits": True if allow_test_edits else None,
        "verify_timeout_s": verify_timeout,
        "max_verify_rounds": max_verify_rounds,
    }


def _new_run(
    given: GivenFlags, flags: dict[str, Any], *, lsp: bool, project_hooks: bool
) -> LaunchRequest:
    """What `run` launches without --continue: a new session with the flags given (`flags`:
    those of a new run alone, laid after the shared limits and permission mode)."""
    from journeyman.loop.launch import LaunchRequest

    streams, by_default = stream_choice(
        given.stream, given.surface.output_format, quiet=given.surface.quiet
    )
    return LaunchRequest(
        given.workspace or Path("."),
        given.chosen,
        flags={**given.limits, "permission_mode": given.permission_mode, **flags},
        session_dir=given.session_dir,
        assume_yes=bool(given.yes),
        lsp=lsp,
        mcp=given.mcp,
        project_hooks=project_hooks,
        stream=streams,
        stream_by_default=by_default,
    )


@dataclass(frozen=True)
class SurfaceFlags:
    """The flags that shape how a run meets its user: what it prints, the budget extensions it
    grants without asking, and whether it is traced."""

    output_format: OutputFormat
    auto_extend: int
    otel: bool
    quiet: bool = False
    """--quiet: nothing redrawn in place (no live status line, no streamed text by default)."""


@dataclass(frozen=True)
class GivenFlags:
    """The flags `run` (new or --continue) and `resume` share; on a stored session they are
    laid over its settings."""

    chosen: ProviderChoice
    limits: dict[str, Any]
    permission_mode: PermissionMode | None
    workspace: Path | None
    session_dir: Path | None
    stream: bool | None
    yes: bool | None
    mcp: bool | None
    surface: SurfaceFlags


def resume(
    session: Annotated[str | None, typer.Argument(help="Session id (or a unique prefix).")] = None,
    last: Annotated[
        bool, typer.Option("--last", help="The most recent session of the current workspace.")
    ] = False,
    workspace: WorkspaceOpt = None,
    provider: ProviderOpt = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    tool_format: ToolFormatOpt = None,
    max_iterations: MaxIterationsOpt = None,
    max_budget_usd: MaxBudgetOpt = None,
    max_total_tokens: MaxTokensOpt = None,
    max_duration: MaxDurationOpt = None,
    budget_mode: BudgetModeOpt = None,
    auto_extend: AutoExtendOpt = 0,
    tool_timeout: ToolTimeoutOpt = None,
    output_format: OutputOpt = OutputFormat.TEXT,
    session_dir: SessionDirOpt = None,
    stream: StreamOpt = None,
    quiet: QuietOpt = False,
    permission_mode: PermissionModeOpt = None,
    yes: YesOpt = None,
    mcp: McpOpt = None,
    otel: OtelOpt = False,
) -> None:
    """Continue a session from its last completed step, with the model-visible history, budget
    counters and settings it had. Flags given here override the remembered settings; API keys
    come from the environment again."""
    from journeyman.cli.sessions_cmd import open_store, resolve_session, session_folder
    from journeyman.core.result import FinishReason
    from journeyman.loop.launch import ProviderChoice

    session_dir = session_folder(session_dir)  # the resumed run goes on in the same store
    store = open_store(session_dir)
    try:
        record = resolve_session(store, session, last, workspace)
        summary = store.summary(record.id)
    finally:
        store.close()
    _refuse_batch_record(record)
    if summary.finish_reason in (FinishReason.COMPLETED.value, FinishReason.ANSWERED.value):
        fail(
            EXIT_CONFIG,
            f"session {record.id} already finished ({summary.finish_reason}); "
            "fork it to give it a new task",
        )
    limits = given_limits(
        max_iterations, max_budget_usd, max_total_tokens, max_duration, budget_mode, tool_timeout
    )
    chosen = ProviderChoice(provider, model, base_url, tool_format)
    surface = SurfaceFlags(output_format, auto_extend, otel, quiet)
    given = GivenFlags(
        chosen, limits, permission_mode, workspace, session_dir, stream, yes, mcp, surface
    )
    _reopen(
        record,
        given,
        lambda agent: _restore_subagents(agent, record.settings).resume(
            record.id, override_limits=bool(limits)
        ),
    )


def _reopen(
    record: SessionRecord,
    given: GivenFlags,
    action: Callable[[Agent], Coroutine[Any, Any, RunResult]],
) -> NoReturn:
    """Launch `action` on an agent built from a stored session's settings (`resume`,
    `run --continue`), with the flags given now on top."""
    from journeyman.cli.sessions_cmd import workspace_of_import
    from journeyman.loop.launch import LaunchRequest

    workspace = workspace_of_import(record, given.workspace, given.session_dir)
    request = LaunchRequest(
        workspace or Path(record.workspace),
        given.chosen,
        flags={**given.limits, "permission_mode": given.permission_mode},
        session_dir=given.session_dir,
        stream=bool(
            streamed_text(given.stream, given.surface.output_format, quiet=given.surface.quiet)
        ),
        assume_yes=given.yes,
        mcp=given.mcp,
        record=record,
    )
    _launch(request, given.surface, action)


def _continue(session: str, message: str, given: GivenFlags) -> NoReturn:
    """`journeyman run --continue ID "follow-up"`: the session goes on with a new message."""
    from journeyman.cli.sessions_cmd import open_store, resolve_session, session_folder

    if not message.strip():
        fail(EXIT_CONFIG, "the follow-up message is empty; say what the agent should do next")
    session_dir = session_folder(given.session_dir)  # the session goes on in the same store
    store = open_store(session_dir)
    try:
        record = resolve_session(store, session, False, None)
    finally:
        store.close()
    _reopen(
        record,
        replace(given, session_dir=session_dir),
        lambda agent: _restore_subagents(agent, record.settings).send(
            record.id, message, override_limits=bool(given.limits)
        ),
    )


CONTINUE_FORK = "Continue the task from where this conversation left off."


def fork(
    session: ForkSessionArg,
    at_step: AtStepOpt,
    task: ForkTaskOpt = None,
    into: IntoOpt = None,
    in_place: InPlaceOpt = False,
    force: ForceOpt = False,
    workspace: ForkWorkspaceOpt = None,
    provider: ProviderOpt = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    max_iterations: MaxIterationsOpt = None,
    max_budget_usd: MaxBudgetOpt = None,
    max_total_tokens: MaxTokensOpt = None,
    auto_extend: AutoExtendOpt = 0,
    output_format: OutputOpt = OutputFormat.TEXT,
    session_dir: SessionDirOpt = None,
    stream: StreamOpt = None,
    quiet: QuietOpt = False,
    permission_mode: PermissionModeOpt = None,
    yes: YesOpt = None,
    mcp: McpOpt = None,
    otel: OtelOpt = False,
) -> None:
    """Start a new session from the first K steps of SESSION, with the files as they were at
    step K (in a fresh copy of the workspace unless --in-place), then continue."""
    from journeyman.cli.sessions_cmd import session_folder
    from journeyman.loop.launch import LaunchRequest, ProviderChoice

    session_dir = session_folder(session_dir)  # the fork is stored beside its parent
    record, plan = _prepare_fork(
        session_dir,
        session,
        at_step,
        into=into,
        in_place=in_place,
        force=force,
        workspace=workspace,
    )
    limits = given_limits(max_iterations, max_budget_usd, max_total_tokens, None, None, None)
    request = LaunchRequest(
        plan.workspace,
        ProviderChoice(provider, model, base_url),
        flags={**limits, "permission_mode": permission_mode},
        session_dir=session_dir,
        stream=bool(streamed_text(stream, output_format, quiet=quiet)),
        assume_yes=yes,
        mcp=mcp,
        record=record,
    )
    if output_format is OutputFormat.TEXT:
        typer.echo(
            f"forking {record.id} at step {at_step} into {plan.workspace} "
            f"({plan.reverted_files} later file change(s) rolled back)"
        )
    _launch(
        request,
        SurfaceFlags(output_format, auto_extend, otel, quiet),
        lambda agent: _restore_subagents(agent, record.settings).run(
            task or CONTINUE_FORK,
            history=plan.history,
            parent_session_id=record.id,
            forked_at_step=at_step,
        ),
    )


def _prepare_fork(
    session_dir: Path,
    session: str,
    at_step: int,
    *,
    into: Path | None,
    in_place: bool,
    force: bool,
    workspace: Path | None,
) -> tuple[SessionRecord, ForkPlan]:
    """The session to fork and the fork's workspace, ready at step `at_step` (copied, or rolled
    back in place under the workspace's lock, held until this process exits); exit 2 saying
    why when it cannot be."""
    from journeyman.cli.sessions_cmd import open_store, resolve_session, workspace_of_import
    from journeyman.session.fork import prepare_fork
    from journeyman.session.workspace_lock import WorkspaceLock

    store = open_store(session_dir)
    try:
        record = resolve_session(store, session, False, None)
        _refuse_batch_record(record)
        source = workspace_of_import(record, workspace, session_dir)
        if in_place:  # the rollback and the run after it: held until this process exits
            WorkspaceLock(Path(record.workspace), purpose="fork --in-place").acquire()
        plan = prepare_fork(
            store,
            record.id,
            at_step,
            into=into,
            in_place=in_place,
            force=force,
            source=source if record.settings.get("imported_from") else None,
        )
    except ConfigurationError as error:
        fail(EXIT_CONFIG, error.message)
    finally:
        store.close()
    return record, plan


def _refuse_batch_record(record: SessionRecord) -> None:
    from journeyman.batch.runner import batch_record_problem

    problem = batch_record_problem(record)
    if problem:
        fail(EXIT_CONFIG, problem)


def _with_subagents(agent: Agent, enabled: bool) -> Agent:
    if not enabled:
        return agent
    from journeyman.swarm.spawn import with_subagents  # the swarm layer loads only when used

    return with_subagents(agent, enabled, agent.config.subagents)


def _restore_subagents(agent: Agent, settings: dict[str, Any]) -> Agent:
    if not isinstance(settings.get("subagents"), dict):  # as `restore_subagents` decides
        return agent
    from journeyman.swarm.spawn import restore_subagents  # the swarm layer loads only when used

    return restore_subagents(agent, settings)
