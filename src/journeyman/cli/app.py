"""`journeyman` / `jm`: run, resume and fork the agent; inspect, undo and diff its sessions."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, NoReturn

import typer

from journeyman.cli.lsp_cmd import LspOpt, attach_lsp, closing, lsp_command
from journeyman.cli.render import OutputFormat, Renderer, usage_table
from journeyman.cli.sessions_cmd import (
    open_store,
    resolve_session,
    session_root_problem,
    sessions_app,
)
from journeyman.cli.signals import handle_termination_as_interrupt
from journeyman.cli.terminal import printable
from journeyman.core.errors import ConfigurationError
from journeyman.economics.budget import BudgetMode
from journeyman.loop.config import AgentConfig, ModeName
from journeyman.policy.permissions import PermissionMode, PermissionsConfig
from journeyman.tools.sandbox import SandboxKind

if TYPE_CHECKING:
    from journeyman.core.result import RunResult
    from journeyman.loop.agent import Agent
    from journeyman.policy.settings import IgnoredSetting
    from journeyman.session.store import SessionRecord
    from journeyman.session.undo import UndoResult

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_CONFIG = 2
EXIT_CANCELLED = 130
EXIT_CLOSED_STDOUT = 141
"""Whoever read the output closed it (`| head -1`): the code a shell gives a SIGPIPE'd command."""

MCP_CONFIG = Path(".journeyman") / "mcp.json"
"""`integrations.mcp.CONFIG_FILE`, repeated so that the MCP SDK loads only when it is used."""

app = typer.Typer(
    name="journeyman",
    help=(
        "An autonomous coding agent: give it a task and a workspace, it reads, edits and runs "
        "tests until the task is done — within limits, with every step saved.\n\n"
        "Provider auto-detection: ANTHROPIC_API_KEY, then OPENAI_API_KEY (+ OPENAI_BASE_URL)."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(sessions_app, name="sessions")
mcp_app = typer.Typer(
    help="MCP servers declared in your mcp.json and the workspace's .journeyman/mcp.json.",
    no_args_is_help=True,
)
app.add_typer(mcp_app, name="mcp")
app.command("lsp")(lsp_command)


def _version(value: bool) -> None:
    if value:
        from journeyman import __version__

        typer.echo(f"journeyman {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """journeyman command line."""


# --- options shared by run, resume and fork ---------------------------------------------------

WorkspaceOpt = Annotated[
    Path | None, typer.Option("--workspace", "-w", help="Repository to work in.")
]
ProviderOpt = Annotated[
    str | None,
    typer.Option(help="anthropic or openai; auto-detected from the environment if omitted."),
]
ModelOpt = Annotated[str | None, typer.Option(help="Model name (provider default if omitted).")]
BaseUrlOpt = Annotated[
    str | None,
    typer.Option(help="Base URL of an OpenAI-compatible server (Ollama, vLLM, llama.cpp...)."),
]
ToolFormatOpt = Annotated[
    str | None,
    typer.Option(help="native (default), or text for models without tool calling."),
]
MaxIterationsOpt = Annotated[
    int | None, typer.Option(min=1, help="Stop after N model turns (default 50).")
]
MaxBudgetOpt = Annotated[
    float | None, typer.Option(min=0.0, help="Stop once the session has cost this many USD.")
]
MaxTokensOpt = Annotated[
    int | None,
    typer.Option(
        min=1,
        help="Token budget (input + output tokens consumed; not the model's output limit).",
    ),
]
MaxDurationOpt = Annotated[
    str | None, typer.Option(help="Wall-clock limit, e.g. 600, 90s, 10m or 1h.")
]
BudgetModeOpt = Annotated[
    BudgetMode | None,
    typer.Option(
        help="strict (default): nudge at 70 %, fewer tools at 90 %, text only at 95 %, stop at "
        "100 %; advisory: nudges only, never a stop; soft: tracking only. Under advisory and "
        "soft the token, USD, iteration and duration limits do not end the run (the mistake "
        "and no-progress limits still do).",
    ),
]
AutoExtendOpt = Annotated[
    int,
    typer.Option(
        min=0,
        help="Grant up to N budget extensions without asking (default: ask on a terminal, "
        "deny otherwise).",
    ),
]
ToolTimeoutOpt = Annotated[
    float | None, typer.Option(min=0.1, help="Seconds one tool call may run (default 60).")
]
OutputOpt = Annotated[
    OutputFormat,
    typer.Option(
        "--output-format",
        "-o",
        help="text: progress + summary; json: the final result; stream-json: one event per line.",
    ),
]
SessionDirOpt = Annotated[
    Path | None,
    typer.Option(help="Session root (default: the per-user data dir or JOURNEYMAN_SESSION_DIR)."),
]
StreamOpt = Annotated[bool, typer.Option(help="Stream the model's text as it is written.")]
ModeOpt = Annotated[
    ModeName | None,
    typer.Option(
        help="react (default): tool calls until done; plan-solve: write a plan first, then "
        "react; phased: discover (context pack) -> plan -> act -> verify, done only when the "
        "model says so and the verification command passed after its last change (each phase "
        "step counts as a turn against --max-iterations); ask: a question, answered with "
        "read-only tools (nothing can change; a prose answer succeeds; no check runs).",
    ),
]
VerifyOpt = Annotated[
    str | None,
    typer.Option(
        "--verify",
        metavar="CMD",
        help="Shell command that checks the work (every mode): when the model says it is "
        "done, journeyman runs it after the last change; exit code 0 passes, anything else "
        "goes back to the model, and after --max-verify-rounds failures the run ends as "
        "verification_failed. Default: the first test command detected in the workspace whose "
        "program is installed (make test, pytest, npm test, ...). Runs in the run_command "
        "sandbox without asking (deny rules still hold).",
    ),
]
NoVerifyOpt = Annotated[
    bool,
    typer.Option(
        "--no-verify",
        help="Accept the model's word that it is done: no check runs (for questions and tasks "
        "without tests; see also --mode ask). Edit or command calls that were refused still "
        "end the run as refused. The phased mode still checks each change (its workflow).",
    ),
]
VerifyTimeoutOpt = Annotated[
    float | None,
    typer.Option(
        "--verify-timeout",
        metavar="SECONDS",
        min=0.1,
        help="Seconds the check may run (default 600); separate from --tool-timeout.",
    ),
]
VerifyRoundsOpt = Annotated[
    int | None,
    typer.Option(
        "--max-verify-rounds",
        min=1,
        help="Failed checks after which the run ends as verification_failed (default 3).",
    ),
]
SandboxOpt = Annotated[
    SandboxKind | None,
    typer.Option(
        help="Where commands run: auto (default: bubblewrap when it works, else local), local "
        "(no isolation, resource limits only), bubblewrap (workspace writable except .git; "
        "home folder hidden except toolchains such as ~/.local/bin, ~/.pyenv, ~/.cargo/bin; "
        "password hashes, SSH host keys and service data hidden; rest read-only; private /tmp; "
        "no network), docker. One named here that cannot start is an error.",
    ),
]
AllowNetworkOpt = Annotated[
    bool,
    typer.Option(
        "--allow-network",
        help="Let commands use the network inside the bubblewrap or docker sandbox.",
    ),
]
PermissionModeOpt = Annotated[
    PermissionMode | None,
    typer.Option(
        help="plan: read only; default: ask before edits and commands; accept_edits: ask before "
        "commands; trusted: never ask (deny rules still apply); bypass: no ask rules either.",
    ),
]
McpOpt = Annotated[
    bool | None,
    typer.Option(
        "--mcp/--no-mcp",
        help="MCP servers lend the agent their tools as <server>_<tool>. Without this flag, the "
        "servers of your own mcp.json (beside your config.toml) start; --mcp also starts those "
        f"of the workspace's {MCP_CONFIG} (not by default: that file names programs to run, and "
        "a cloned repository should not choose them); --no-mcp starts none. Resume and fork "
        "keep the session's choice.",
    ),
]
ProjectHooksOpt = Annotated[
    bool,
    typer.Option(
        "--project-hooks",
        help="Run the hooks declared in the workspace's journeyman.toml (or "
        ".journeyman/config.toml). Ignored without this flag: they are shell commands chosen by "
        "the repository. Your user config's hooks always run.",
    ),
]
YesOpt = Annotated[
    bool | None,
    typer.Option(
        "--yes/--ask",
        "-y",
        help="--yes approves every call that would need asking (deny rules and plan mode still "
        "refuse); without it, a run that cannot ask (no terminal) refuses such calls. Resume and "
        "fork keep the session's choice unless given.",
    ),
]


def _limits(
    max_iterations: int | None,
    max_budget_usd: float | None,
    max_total_tokens: int | None,
    max_duration: str | None,
    budget_mode: BudgetMode | None,
    tool_timeout: float | None,
) -> dict[str, Any]:
    """The config fields the user set on the command line (unset ones are left out)."""
    try:
        duration_s = parse_duration(max_duration) if max_duration else None
    except ValueError as error:
        fail(EXIT_CONFIG, str(error))
    given = {
        "max_iterations": max_iterations,
        "max_budget_usd": max_budget_usd or None,
        "max_total_tokens": max_total_tokens,
        "max_duration_s": duration_s,
        "budget_mode": budget_mode,
        "tool_timeout_s": tool_timeout,
    }
    return {k: v for k, v in given.items() if v is not None}


def _launch(
    *,
    workspace: Path,
    provider_settings: dict[str, Any],
    config: AgentConfig,
    output_format: OutputFormat,
    auto_extend: int,
    action: Callable[[Agent], Coroutine[Any, Any, RunResult]],
    assume_yes: bool = False,
    lsp: bool = True,
    mcp: bool | None = None,
    ignored: Sequence[IgnoredSetting] = (),
) -> NoReturn:
    """Build the provider and agent, run `action`, print the result and exit accordingly.

    `ignored` are the settings the trust rules left out: warned about on stderr, listed in the
    JSON output (a `setting_ignored` line each in stream-json) and kept with the session.
    """
    from journeyman.cli.approver import TerminalLines, TerminalPermissionApprover, choose_approver
    from journeyman.core.result import FinishReason
    from journeyman.loop.agent import Agent
    from journeyman.loop.config_file import user_mcp_file
    from journeyman.providers.factory import create_provider
    from journeyman.session.store import default_session_root

    if not workspace.is_dir():
        fail(EXIT_CONFIG, f"workspace {workspace} is not a directory")
    problem = session_root_problem(config.session_dir or default_session_root())
    if problem:
        fail(EXIT_CONFIG, problem)
    tool_format = provider_settings.get("tool_format") or "native"
    if tool_format not in ("native", "text"):
        fail(EXIT_CONFIG, f"--tool-format must be native or text, not {tool_format!r}")
    fmt: Literal["native", "text"] = "text" if tool_format == "text" else "native"
    try:
        provider = create_provider(
            provider_settings.get("provider"),
            provider_settings.get("model"),
            provider_settings.get("base_url"),
            tool_format=fmt,
        )
    except ConfigurationError as error:
        fail(EXIT_CONFIG, error.message)
    renderer = Renderer(output_format)
    output = ClosedStdoutGuard(renderer)
    _report_ignored(ignored, renderer)
    interactive = output_format is OutputFormat.TEXT and sys.stdin.isatty()
    lines = TerminalLines(sys.stdin)
    if config.permissions is None:  # a session stored before permissions existed
        config = config.model_copy(update={"permissions": PermissionsConfig()})
    try:
        agent = Agent(
            provider,
            workspace=workspace,
            config=config,
            on_event=output,
            approver=choose_approver(auto_extend, interactive, lines),
            settings={
                "base_url": provider_settings.get("base_url"),
                "tool_format": fmt,
                "assume_yes": assume_yes,
                "mcp": mcp,
                **({"ignored_settings": [i.to_dict() for i in ignored]} if ignored else {}),
            },
            permission_approver=TerminalPermissionApprover(lines) if interactive else None,
            assume_yes=assume_yes,
        )
    except ConfigurationError as error:  # e.g. a sandbox asked for by name cannot start
        fail(EXIT_CONFIG, error.message)
    output.on_close = agent.cancel  # nobody reads the output any more: stop, like on SIGPIPE
    renderer.sandbox = agent.sandbox.description
    lsp_manager = attach_lsp(agent, enabled=lsp)
    if mcp is None and (workspace / MCP_CONFIG).is_file():
        typer.echo(
            f"journeyman: note: {workspace / MCP_CONFIG} declares MCP servers; "
            "pass --mcp to start them",
            err=True,
        )
    work: Coroutine[Any, Any, RunResult]
    if mcp or (mcp is None and user_mcp_file().is_file()):
        from journeyman.cli.mcp_cmd import serving_mcp  # the MCP SDK loads only when used

        work = serving_mcp(agent, lambda: action(agent), include_workspace=bool(mcp))
    else:
        work = action(agent)
    handle_termination_as_interrupt()
    try:
        result = asyncio.run(closing(lsp_manager, work))
    except KeyboardInterrupt:
        fail(EXIT_CANCELLED, "cancelled")
    except ConfigurationError as error:
        fail(EXIT_CONFIG, error.message)
    output.call(renderer.final, result)
    if output.closed:
        raise typer.Exit(EXIT_CLOSED_STDOUT)
    if result.success:
        raise typer.Exit(EXIT_OK)
    code = {
        FinishReason.CONFIGURATION_ERROR: EXIT_CONFIG,
        FinishReason.CANCELLED: EXIT_CANCELLED,
    }.get(result.finish_reason, EXIT_FAILED)
    fail(code, f"{result.finish_reason.value}: {result.error or 'the run did not succeed'}")


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


# --- run, resume, fork ------------------------------------------------------------------------


@app.command()
def run(
    task: Annotated[str, typer.Argument(help="What the agent should do, in plain words.")],
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
    stream: StreamOpt = False,
    permission_mode: PermissionModeOpt = None,
    yes: YesOpt = None,
    mode: ModeOpt = None,
    verify: VerifyOpt = None,
    no_verify: NoVerifyOpt = False,
    verify_timeout: VerifyTimeoutOpt = None,
    max_verify_rounds: VerifyRoundsOpt = None,
    sandbox: SandboxOpt = None,
    allow_network: AllowNetworkOpt = False,
    lsp: LspOpt = True,
    mcp: McpOpt = None,
    project_hooks: ProjectHooksOpt = False,
) -> None:
    """Run the agent on TASK until it finishes or a limit stops it.

    Settings come from the user config, then journeyman.toml (or .journeyman/config.toml) in
    the workspace, then JOURNEYMAN_* environment variables, then these flags. The workspace's
    file may only tighten (lower limits, stricter modes, more deny/ask rules, a stronger
    sandbox); a key that would loosen is ignored with a warning naming it.

    Exit status: 0 only when the task is done: the model finished, no edit or command it
    needed was refused, and the check (--verify, or the detected test command) passed after
    the last change; 1 the run did not succeed (finish reason refused, verification_failed, a
    limit, ...), 2 configuration error, 130 cancelled, 141 the reader of the output went away
    (`| head`). Questions: --mode ask or --no-verify.
    """
    from journeyman.loop.config_file import load_config

    limits = _limits(
        max_iterations, max_budget_usd, max_total_tokens, max_duration, budget_mode, tool_timeout
    )
    root = workspace or Path(".")
    try:
        loaded = load_config(root, project_hooks=project_hooks)
        config = loaded.build(
            **limits,
            session_dir=session_dir,
            stream=True if stream or output_format is OutputFormat.STREAM_JSON else None,
            permission_mode=permission_mode,
            mode=mode,
            verify_command=verify,
            verify=False if no_verify else None,
            verify_timeout_s=verify_timeout,
            max_verify_rounds=max_verify_rounds,
            sandbox=sandbox,
            allow_network=True if allow_network else None,
        )
    except ConfigurationError as error:
        fail(EXIT_CONFIG, error.message)
    _launch(
        ignored=loaded.ignored,
        assume_yes=bool(yes),
        workspace=root,
        provider_settings={
            "provider": provider,
            "model": model,
            "base_url": base_url,
            "tool_format": tool_format,
        },
        config=config,
        output_format=output_format,
        auto_extend=auto_extend,
        action=lambda agent: agent.run(task),
        lsp=lsp,
        mcp=mcp,
    )


def _restorable(record: SessionRecord) -> tuple[dict[str, Any], list[IgnoredSetting]]:
    """The settings of a stored session that resume and fork may bring back.

    A session this user ran keeps what the user chose then. One imported from a file keeps only
    what the trust rules accept from data (`trusted_from_data`): no hooks, permissions,
    approvals, sandbox, MCP choice or provider endpoint, even if it was stored before imports
    were filtered.
    """
    from journeyman.policy.settings import trusted_from_data

    if not record.settings.get("imported_from"):
        return record.settings, []
    return trusted_from_data(record.settings, f"session {record.id} (imported)")


def _remembered(
    settings: dict[str, Any], overrides: dict[str, Any], session_dir: Path | None, stream: bool
) -> tuple[dict[str, Any], AgentConfig]:
    """Provider settings and config of a stored session, with the flags given now on top."""
    provider_settings = {
        key: overrides.get(key) or settings.get(key)
        for key in ("provider", "model", "base_url", "tool_format")
    }
    stored = dict(settings.get("config", {}))
    stored.update(overrides.get("limits", {}))
    if overrides.get("permission_mode") is not None:
        stored["permissions"] = {
            **(stored.get("permissions") or {}),
            "mode": overrides["permission_mode"],
        }
    stored["session_dir"] = session_dir
    stored["stream"] = stream
    try:
        return provider_settings, AgentConfig(**stored)
    except ValueError as error:
        fail(EXIT_CONFIG, f"the stored settings of this session are not usable: {error}")


@app.command()
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
    stream: StreamOpt = False,
    permission_mode: PermissionModeOpt = None,
    yes: YesOpt = None,
    mcp: McpOpt = None,
) -> None:
    """Continue a session from its last completed step, with the model-visible history, budget
    counters and settings it had. Flags given here override the remembered settings; API keys
    come from the environment again."""
    from journeyman.core.result import FinishReason

    store = open_store(session_dir)
    try:
        record = resolve_session(store, session, last, workspace)
        summary = store.summary(record.id)
    finally:
        store.close()
    if summary.finish_reason in (FinishReason.COMPLETED.value, FinishReason.ANSWERED.value):
        fail(
            EXIT_CONFIG,
            f"session {record.id} already finished ({summary.finish_reason}); "
            "fork it to give it a new task",
        )
    limits = _limits(
        max_iterations, max_budget_usd, max_total_tokens, max_duration, budget_mode, tool_timeout
    )
    overrides = {
        "provider": provider,
        "model": model,
        "base_url": base_url,
        "tool_format": tool_format,
        "limits": limits,
        "permission_mode": permission_mode,
    }
    settings, ignored = _restorable(record)
    provider_settings, config = _remembered(
        settings, overrides, session_dir, stream or output_format is OutputFormat.STREAM_JSON
    )
    _launch(
        workspace=workspace or Path(record.workspace),
        provider_settings=provider_settings,
        config=config,
        output_format=output_format,
        auto_extend=auto_extend,
        action=lambda agent: agent.resume(record.id, override_limits=bool(limits)),
        assume_yes=settings.get("assume_yes", False) if yes is None else yes,
        mcp=settings.get("mcp") if mcp is None else mcp,
        ignored=ignored,
    )


CONTINUE_FORK = "Continue the task from where this conversation left off."


@app.command()
def fork(
    session: Annotated[str, typer.Argument(help="Session id (or a unique prefix) to fork.")],
    at_step: Annotated[int, typer.Option("--at-step", min=0, help="Keep the first K steps.")],
    task: Annotated[
        str | None, typer.Option(help="A new instruction to continue with (default: go on).")
    ] = None,
    into: Annotated[
        Path | None,
        typer.Option(help="Folder for the fork's copy of the workspace (default: a sibling)."),
    ] = None,
    in_place: Annotated[
        bool,
        typer.Option(
            help="Roll the original workspace back instead of copying it; refused, naming the "
            "files, when one was edited after the agent's change (like undo)."
        ),
    ] = False,
    force: Annotated[
        bool,
        typer.Option(help="With --in-place: roll back files edited since the agent's change too."),
    ] = False,
    provider: ProviderOpt = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    max_iterations: MaxIterationsOpt = None,
    max_budget_usd: MaxBudgetOpt = None,
    max_total_tokens: MaxTokensOpt = None,
    auto_extend: AutoExtendOpt = 0,
    output_format: OutputOpt = OutputFormat.TEXT,
    session_dir: SessionDirOpt = None,
    permission_mode: PermissionModeOpt = None,
    yes: YesOpt = None,
    mcp: McpOpt = None,
) -> None:
    """Start a new session from the first K steps of SESSION, with the files as they were at
    step K (in a fresh copy of the workspace unless --in-place), then continue."""
    from journeyman.session.fork import prepare_fork

    store = open_store(session_dir)
    try:
        record = resolve_session(store, session, False, None)
        plan = prepare_fork(store, record.id, at_step, into=into, in_place=in_place, force=force)
    except ConfigurationError as error:
        fail(EXIT_CONFIG, error.message)
    finally:
        store.close()
    limits = _limits(max_iterations, max_budget_usd, max_total_tokens, None, None, None)
    overrides = {
        "provider": provider,
        "model": model,
        "base_url": base_url,
        "limits": limits,
        "permission_mode": permission_mode,
    }
    settings, ignored = _restorable(record)
    provider_settings, config = _remembered(
        settings, overrides, session_dir, output_format is OutputFormat.STREAM_JSON
    )
    if output_format is OutputFormat.TEXT:
        typer.echo(
            f"forking {record.id} at step {at_step} into {plan.workspace} "
            f"({plan.reverted_files} later file change(s) rolled back)"
        )
    _launch(
        workspace=plan.workspace,
        provider_settings=provider_settings,
        config=config,
        output_format=output_format,
        auto_extend=auto_extend,
        action=lambda agent: agent.run(
            task or CONTINUE_FORK,
            history=plan.history,
            parent_session_id=record.id,
            forked_at_step=at_step,
        ),
        assume_yes=settings.get("assume_yes", False) if yes is None else yes,
        mcp=settings.get("mcp") if mcp is None else mcp,
        ignored=ignored,
    )


# --- undo and diff ----------------------------------------------------------------------------


@app.command()
def undo(
    turn: Annotated[
        bool, typer.Option("--turn", help="Undo every change of the last step.")
    ] = False,
    file: Annotated[
        str | None, typer.Option("--file", help="Undo the last change to this file.")
    ] = None,
    all_changes: Annotated[
        bool, typer.Option("--all", help="Undo every pending change of the session.")
    ] = False,
    force: Annotated[
        bool, typer.Option(help="Undo even files that were modified since the agent wrote them.")
    ] = False,
    session: Annotated[
        str | None, typer.Option(help="Session id (default: the latest of this workspace).")
    ] = None,
    workspace: WorkspaceOpt = None,
    session_dir: SessionDirOpt = None,
) -> None:
    """Undo the agent's most recent file change (or a step's, a file's, or all of them)."""
    from journeyman.session.undo import FileChangeTracker

    if sum([turn, file is not None, all_changes]) > 1:
        fail(EXIT_CONFIG, "choose at most one of --turn, --file and --all")
    store = open_store(session_dir)
    try:
        record = resolve_session(store, session, session is None, workspace)
        tracker = FileChangeTracker(store, record.id, Path(record.workspace))
        if turn:
            result = tracker.undo_turn(force=force)
        elif file is not None:
            result = tracker.undo_file(file, force=force)
        elif all_changes:
            result = tracker.undo_all(force=force)
        else:
            result = tracker.undo_last(force=force)
    except ConfigurationError as error:
        fail(EXIT_CONFIG, error.message)
    finally:
        store.close()
    _report_undo(result)


def _report_undo(result: UndoResult) -> None:
    if result.nothing_to_undo:
        typer.echo("nothing to undo")
        return
    for change in result.undone:
        action = {"created": "deleted", "deleted": "restored", "modified": "reverted"}[change.kind]
        typer.echo(f"{action} {change.path} (step {change.step}, {change.tool})")
    if result.conflicts:
        conflict = result.conflicts[0]
        sys.stderr.write(
            f"journeyman: {conflict.change.path} changed on disk after the agent wrote it; "
            "not undone (use --force to undo anyway). Changes since the agent's write:\n"
        )
        sys.stderr.write(conflict.diff)
        raise typer.Exit(EXIT_FAILED)


@app.command()
def diff(
    session: Annotated[
        str | None, typer.Option(help="Session id (default: the latest of this workspace).")
    ] = None,
    workspace: WorkspaceOpt = None,
    session_dir: SessionDirOpt = None,
) -> None:
    """Unified diff of the session's file changes that have not been undone."""
    from journeyman.session.undo import FileChangeTracker

    store = open_store(session_dir)
    try:
        record = resolve_session(store, session, session is None, workspace)
        text = FileChangeTracker(store, record.id, Path(record.workspace)).diff()
    except ConfigurationError as error:
        fail(EXIT_CONFIG, error.message)
    finally:
        store.close()
    if not text:  # said on stderr: the diff itself (stdout) stays empty for scripts
        sys.stderr.write(f"journeyman: no pending changes in session {record.id}\n")
    # a patch piped to a file or `git apply` stays byte for byte; on a terminal, file contents
    # written by the agent must not be able to drive it
    sys.stdout.write(printable(text) if sys.stdout.isatty() else text)


# --- usage and integrations -------------------------------------------------------------------


@app.command()
def usage(
    session: Annotated[
        str | None, typer.Option(help="Only this session id (default: every session).")
    ] = None,
    session_dir: SessionDirOpt = None,
) -> None:
    """Tokens and cost per provider and model, from the usage log."""
    from journeyman.economics.usage_log import DATABASE_FILE, UsageLog
    from journeyman.session.store import default_session_root

    path = (session_dir or default_session_root()) / DATABASE_FILE
    if not path.exists():
        fail(EXIT_FAILED, f"no usage recorded yet ({path} does not exist)")
    log = UsageLog(path)
    try:
        rows = log.summary(session)
    finally:
        log.close()
    if not rows:
        fail(EXIT_FAILED, f"no usage recorded for session {session}" if session else "no usage")
    usage_table(rows)


@mcp_app.command("list")
def mcp_list_cmd(
    workspace: WorkspaceOpt = None,
    mcp: Annotated[
        bool,
        typer.Option(
            "--mcp",
            help=f"Also start the servers of the workspace's {MCP_CONFIG}; without it only "
            "your own mcp.json's servers start (a repository does not choose programs to run).",
        ),
    ] = False,
) -> None:
    """Start the MCP servers, show their status and tools, and stop them."""
    from journeyman.cli.mcp_cmd import mcp_list  # the MCP SDK loads only for this command

    raise typer.Exit(mcp_list(workspace or Path("."), include_workspace=mcp))


@app.command()
def rules(workspace: WorkspaceOpt = None) -> None:
    """Show the rules files the agent reads into its system prompt: which exist, which were
    loaded, and their priority (the highest is listed first and wins a conflict)."""
    from journeyman.context.rules import RulesLoader, describe_sources

    root = (workspace or Path(".")).resolve()
    if not root.is_dir():
        fail(EXIT_CONFIG, f"workspace {root} is not a directory")
    loader = RulesLoader(root)
    for line in describe_sources(loader.sources):
        typer.echo(line)
    loaded = loader.loaded
    typer.echo(
        f"{len(loaded)} file(s) loaded, {len(loader.text):,} characters in the system prompt"
        if loaded
        else "no rules loaded: add .journeyman/rules.md or AGENTS.md to the workspace"
    )


def parse_duration(text: str) -> float:
    """Seconds from `600`, `90s`, `10m` or `1h`."""
    units = {"s": 1.0, "m": 60.0, "h": 3600.0}
    value = text.strip().lower()
    factor = units.get(value[-1:])
    number = value[:-1] if factor else value
    try:
        seconds = float(number) * (factor or 1.0)
    except ValueError:
        raise ValueError(
            f"--max-duration: cannot read {text!r}; use e.g. 600, 90s, 10m, 1h"
        ) from None
    if seconds <= 0:
        raise ValueError("--max-duration must be positive")
    return seconds


def fail(code: int, message: str) -> NoReturn:
    """Print a one-line reason (plus any detail lines) on stderr and exit with `code`."""
    from journeyman.session.redact import Redactor

    first, *rest = printable(Redactor()(message)).splitlines() or [""]
    sys.stderr.write(f"journeyman: {first}\n")
    for line in rest:
        sys.stderr.write(f"{line}\n")
    raise typer.Exit(code)


class ClosedStdoutGuard:
    """Passes events to the renderer until stdout is closed by its reader; then sends stdout to
    /dev/null (so nothing more fails or prints a traceback) and calls `on_close` once."""

    def __init__(self, renderer: Renderer) -> None:
        self.renderer = renderer
        self.closed = False
        self.on_close: Callable[[], None] | None = None

    def __call__(self, event: Any) -> None:
        self.call(self.renderer, event)

    def call(self, write: Callable[..., None], *args: Any) -> None:
        if self.closed:
            return
        try:
            write(*args)
        except BrokenPipeError:
            self.closed = True
            silence_stdout()
            if self.on_close is not None:
                self.on_close()


def silence_stdout() -> None:
    """Point stdout at /dev/null, so that later writes and the flush at exit do not fail."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    finally:
        os.close(devnull)


def main() -> None:
    try:
        app()
    except BrokenPipeError:  # `journeyman sessions export ... | head -1`
        silence_stdout()
        sys.exit(EXIT_CLOSED_STDOUT)
