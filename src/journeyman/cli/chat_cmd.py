"""`journeyman chat` (and `journeyman` alone on a terminal): the interactive app. Textual and
the agent load only when the app starts."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from journeyman.cli.exits import EXIT_CONFIG, fail
from journeyman.cli.lsp_cmd import LspOpt
from journeyman.cli.options import (
    AllowTestEditsOpt,
    BaseUrlOpt,
    BudgetModeOpt,
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
from journeyman.loop.config import AgentConfig
from journeyman.loop.config_file import load_config
from journeyman.loop.run_options import RunOptions
from journeyman.policy.permissions import PermissionsConfig

if TYPE_CHECKING:
    from journeyman.integrations.otel.tracing import AgentTracing
    from journeyman.loop.agent import Agent
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
) -> None:
    """Talk to the agent in an interactive terminal app: send a task, follow up, approve edits
    and commands, undo; /help lists the commands. Limits, the check and the sandbox work as
    for `run`; a reopened session keeps its own unless given here."""
    if resume and last:
        fail(EXIT_CONFIG, "give --resume SESSION or --last, not both")
    flags = {
        **given_limits(max_iterations, max_budget_usd, max_total_tokens, None, budget_mode, None),
        "verify_command": verify,
        # --verify turns the check on again in a reopened session stored with --no-verify
        "verify": False if no_verify else (True if verify else None),
        "allow_test_edits": True if allow_test_edits else None,
        "sandbox": sandbox,
    }
    flags = {key: value for key, value in flags.items() if value is not None}
    root = (workspace or Path(".")).resolve()
    session_id = None
    settings: dict[str, Any] = {}
    session_dir = usable_session_folder(session_dir)  # a resumed session stays where it was
    if resume or last:
        from journeyman.loop.config_file import restorable_settings

        store = open_store(session_dir)
        try:
            record = resolve_session(store, resume, last, workspace)
        finally:
            store.close()
        session_id, root = record.id, Path(record.workspace)
        settings, _ignored = restorable_settings(record)
    if not root.is_dir():
        fail(EXIT_CONFIG, f"workspace {root} is not a directory")
    try:
        loaded = load_config(root)
        config = loaded.build(
            session_dir=session_dir,
            stream=True,
            permission_mode=permission_mode,
            mode=mode,
            **flags,
        )
        if settings.get("config"):  # a resumed session keeps its settings, flags on top
            stored = {**settings["config"], **flags, "session_dir": session_dir, "stream": True}
            if mode is not None:
                stored["mode"] = mode
            if permission_mode is not None:
                stored["permissions"] = {
                    **(stored.get("permissions") or {}),
                    "mode": permission_mode,
                }
            config = AgentConfig(**stored)
    except (ConfigurationError, ValueError) as error:
        fail(EXIT_CONFIG, getattr(error, "message", str(error)))
    if config.permissions is None:
        config = config.model_copy(update={"permissions": PermissionsConfig()})
    if mcp is None and settings:  # a resumed session keeps its --mcp choice, as resume does
        mcp = RunOptions.from_settings(settings).mcp
    options = RunOptions(base_url=base_url or settings.get("base_url"), mcp=mcp)
    spec = {
        "provider": provider or settings.get("provider"),
        "model": model or settings.get("model"),
    }
    open_app(
        root,
        config,
        options,
        spec,
        session_id=session_id,
        assume_yes=bool(yes),
        lsp=lsp,
        mcp=mcp,
        otel=otel,
    )


def open_app(
    workspace: Path,
    config: AgentConfig,
    options: RunOptions,
    spec: dict[str, Any],
    *,
    session_id: str | None = None,
    assume_yes: bool = False,
    lsp: bool = True,
    mcp: bool | None = None,
    otel: bool = False,
) -> None:
    from journeyman.loop.agent import Agent
    from journeyman.loop.servers import lsp_for_run, mcp_for_run
    from journeyman.providers.factory import create_provider
    from journeyman.tui.app import ChatApp

    problem = terminal_problem()
    if problem:
        fail(EXIT_CONFIG, problem)
    try:
        provider = create_provider(
            spec["provider"],
            spec["model"],
            options.base_url,
            tool_format=options.tool_format,
            discover_local=True,
        )
    except ConfigurationError as error:
        fail(EXIT_CONFIG, error.message)

    lsp_servers = lsp_for_run(workspace, enabled=lsp)
    mcp_servers = mcp_for_run(workspace, mcp)

    # nothing may be written to the terminal while the app owns it: tracing's notes and
    # warnings are held and printed once the app has exited
    held: list[str] = []
    tracing = _tracing(otel, held)

    def build(hooks: AgentHooks) -> Agent:
        agent = Agent(
            provider,
            workspace=workspace,
            config=config,
            on_event=hooks.on_event,
            approver=hooks.extension_approver,
            options=options,
            permission_approver=hooks.permission_approver,
            assume_yes=assume_yes,
            lsp=lsp_servers,
            mcp=mcp_servers,
        )
        if tracing is not None:
            tracing.attach(agent)
        return agent

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
