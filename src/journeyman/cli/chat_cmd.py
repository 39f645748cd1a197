"""`journeyman chat` (and `journeyman` alone on a terminal): the interactive app. Textual and
the agent load only when the app starts."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from journeyman.cli.exits import EXIT_CONFIG, fail
from journeyman.cli.lsp_cmd import LspOpt
from journeyman.cli.options import (
    AllowTestEditsOpt,
    BaseUrlOpt,
    BudgetModeOpt,
    EditToolOpt,
    MaxBudgetOpt,
    MaxIterationsOpt,
    MaxTokensOpt,
    McpOpt,
    ModelOpt,
    ModeOpt,
    NoVerifyOpt,
    OtelOpt,
    PermissionModeOpt,
    ProviderOpt,
    SandboxOpt,
    SessionDirOpt,
    VerifyOpt,
    WorkspaceOpt,
    YesOpt,
    given_limits,
)
from journeyman.cli.sessions_cmd import open_store, resolve_session, usable_session_folder
from journeyman.core.errors import ConfigurationError

if TYPE_CHECKING:
    from journeyman.integrations.otel.tracing import AgentTracing
    from journeyman.loop.agent import Agent
    from journeyman.loop.launch import Launch
    from journeyman.tui.conversation import AgentHooks


def chat(
    workspace: WorkspaceOpt = None,
    resume: Annotated[
        str | None,
        typer.Option("--resume", metavar="SESSION", help="Reopen this session (id or prefix)."),
    ] = None,
    last: Annotated[
        bool, typer.Option("--last", help="Reopen the most recent session of the workspace.")
    ] = False,
    provider: ProviderOpt = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    mode: ModeOpt = None,
    session_dir: SessionDirOpt = None,
    permission_mode: PermissionModeOpt = None,
    yes: YesOpt = None,
    lsp: LspOpt = True,
    mcp: McpOpt = None,
    otel: OtelOpt = False,
    max_iterations: MaxIterationsOpt = None,
    max_budget_usd: MaxBudgetOpt = None,
    max_total_tokens: MaxTokensOpt = None,
    budget_mode: BudgetModeOpt = None,
    verify: VerifyOpt = None,
    no_verify: NoVerifyOpt = False,
    allow_test_edits: AllowTestEditsOpt = False,
    sandbox: SandboxOpt = None,
    edit_tool: EditToolOpt = None,
) -> None:
    """Talk to the agent in an interactive terminal app: send a task, follow up, approve edits
    and commands, undo; /help lists the commands. Limits, the check and the sandbox work as
    for `run`; a reopened session keeps its own unless given here."""
    from journeyman.loop.launch import LaunchRequest, ProviderChoice, settle

    if resume and last:
        fail(EXIT_CONFIG, "give --resume SESSION or --last, not both")
    flags = {
        **given_limits(max_iterations, max_budget_usd, max_total_tokens, None, budget_mode, None),
        "verify_command": verify,
        # --verify turns the check on again in a reopened session stored with --no-verify
        "verify": False if no_verify else (True if verify else None),
        "allow_test_edits": True if allow_test_edits else None,
        "sandbox": sandbox,
        "edit_tool": edit_tool,
        "mode": mode,
        "permission_mode": permission_mode,
    }
    root = (workspace or Path(".")).resolve()
    record = None
    session_dir = usable_session_folder(session_dir)  # a resumed session stays where it was
    if resume or last:
        store = open_store(session_dir)
        try:
            record = resolve_session(store, resume, last, workspace)
        finally:
            store.close()
        root = Path(record.workspace)
    if not root.is_dir():
        fail(EXIT_CONFIG, f"workspace {root} is not a directory")
    request = LaunchRequest(
        root,
        ProviderChoice(provider, model, base_url),
        flags=flags,
        session_dir=session_dir,
        stream=True,
        assume_yes=bool(yes),
        lsp=lsp,
        mcp=mcp,
        record=record,
    )
    try:
        settled = settle(request)
    except ConfigurationError as error:
        fail(EXIT_CONFIG, error.message)
    open_app(settled, session_id=record.id if record else None, otel=otel)


def open_app(settled: Launch, *, session_id: str | None = None, otel: bool = False) -> None:
    """Open the app on `settled`'s workspace (and session); exit 2 before it opens when there
    is no terminal, no usable provider or tracing asked for but not installed."""
    from journeyman.loop.launch import Surface, launch, open_provider
    from journeyman.tui.app import ChatApp

    problem = terminal_problem()
    if problem:
        fail(EXIT_CONFIG, problem)
    try:
        provider = open_provider(
            settled.provider,
            settled.model,
            base_url=settled.options.base_url,
            tool_format=settled.options.tool_format,
        )
    except ConfigurationError as error:
        fail(EXIT_CONFIG, error.message)
    # nothing may be written to the terminal while the app owns it: notes and warnings are
    # held and printed once the app has exited
    held: list[str] = [f"journeyman: warning: {item.message}" for item in settled.ignored]
    tracing = _tracing(otel, held)

    def build(hooks: AgentHooks) -> Agent:
        surface = Surface(
            on_event=hooks.on_event,
            approver=hooks.extension_approver,
            permission_approver=hooks.permission_approver,
            notice=lambda text: held.append(f"journeyman: {text}"),
            tracing=tracing,
        )
        return launch(settled, surface, provider=provider)

    try:
        try:
            app = ChatApp(build, session_id=session_id)
        except ConfigurationError as error:
            fail(EXIT_CONFIG, error.message)
        app.run()
    finally:
        if tracing is not None:
            tracing.close()  # sends the last spans
        for line in held:
            typer.echo(line, err=True)
    session = app.conversation.session_id
    if session:  # the terminal is the user's again: where to find the conversation
        typer.echo(
            f"session {session} saved: `journeyman chat --last` reopens the workspace's latest "
            f"session, `journeyman chat --resume {session}` this one"
        )


def terminal_problem() -> str | None:
    """Why the app cannot open here (it draws on a terminal and reads keys from one), or None."""
    missing = [
        name
        for name, stream in (("stdin", sys.stdin), ("stdout", sys.stdout))
        if stream is None or not stream.isatty()
    ]
    if not missing:
        return None
    return (
        f"chat needs a terminal, but {' and '.join(missing)} "
        f"{'is' if len(missing) == 1 else 'are'} not one; "
        "use `journeyman run TASK` for scripts and pipes"
    )


def _tracing(explicit: bool, held: list[str]) -> AgentTracing | None:
    """The app's tracing (`--otel` or an OTLP endpoint); its lines go to `held`. `--otel`
    without the extra exits 2 before the app opens."""
    from journeyman.integrations.otel.command_line import tracing_for_run

    try:
        return tracing_for_run(
            explicit,
            note=lambda text: held.append(f"journeyman: note: {text}"),
            warn=lambda text: held.append(f"journeyman: warning: {text}"),
        )
    except ConfigurationError as error:
        fail(EXIT_CONFIG, error.message)
