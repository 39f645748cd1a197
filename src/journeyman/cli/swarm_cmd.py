"""`journeyman swarm`: one goal, a planning turn, several workers in git worktrees, merged
back and checked (`swarm.orchestrator.Swarm`)."""

from __future__ import annotations

import asyncio
import json
import sys
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
from journeyman.cli.options import (
    AllowNetworkOpt,
    BaseUrlOpt,
    BudgetModeOpt,
    EditToolOpt,
    MaxBudgetOpt,
    MaxDurationOpt,
    MaxIterationsOpt,
    MaxTokensOpt,
    ModelOpt,
    ModeOpt,
    OtelOpt,
    OutputFormat,
    OutputOpt,
    PassEnvOpt,
    PermissionModeOpt,
    PricePerMtokOpt,
    ProjectHooksOpt,
    ProviderOpt,
    SandboxOpt,
    SessionDirOpt,
    ToolFormatOpt,
    ToolTimeoutOpt,
    VerifyTimeoutOpt,
    WorkspaceOpt,
    given_limits,
    tool_flags,
)
from journeyman.core.display import printable, printable_json
from journeyman.core.errors import ConfigurationError
from journeyman.loop.config import ModeName
from journeyman.session.redact import Redactor

if TYPE_CHECKING:
    from journeyman.integrations.otel.tracing import AgentTracing
    from journeyman.loop.config import AgentConfig
    from journeyman.loop.launch import ProviderChoice
    from journeyman.policy.choices import PermissionMode
    from journeyman.swarm.orchestrator import SwarmResult
    from journeyman.swarm.progress import SwarmEvent
    from journeyman.swarm.shared.persistence import PersistenceAdapter

WorkersOpt = Annotated[
    int,
    typer.Option("--workers", min=1, max=32, help="Workers running at the same time (default 3)."),
]
SwarmVerifyOpt = Annotated[
    str | None,
    typer.Option(
        "--verify",
        metavar="CMD",
        help="Shell command that checks the work, exit code 0 passing: the quality gate of "
        "each worker (run in its worktree) and the final check of the merged result. Default: "
        "the test command detected in the workspace; without one, --verify is required.",
    ),
]
SwarmYesOpt = Annotated[
    bool,
    typer.Option(
        "--yes/--ask",
        "-y",
        help="Workers may edit and run commands in their worktrees without asking (deny rules "
        "and the plan permission mode still refuse). Workers cannot ask you: with --ask, calls "
        "that need approval are refused.",
    ),
]

SharedStateOpt = Annotated[
    str | None,
    typer.Option(
        "--shared-state",
        metavar="STORE",
        help="Where the workers' shared state (failures, references, call counts) is kept, so "
        "it outlives the swarm and swarms in several processes or machines learn from each "
        "other: sqlite:PATH, json:DIR, redis://HOST:PORT/DB, or none. Default: the SQLite "
        "file swarm-shared-state.db in the session folder. State is kept per project (its "
        "first commit): a new swarm starts with the failures earlier ones recorded.",
    ),
]


class SwarmRenderer:
    """Swarm progress: a line per worker state change (text), every event as a JSON line with
    its worker id (stream-json), or nothing until the result (json)."""

    def __init__(self, fmt: OutputFormat) -> None:
        self.fmt = fmt
        self._redact = Redactor()

    def write_event(self, event: Any) -> None:
        """`__call__` for `ClosedStdoutGuard`, which passes events untyped."""
        self(event)

    def __call__(self, event: SwarmEvent) -> None:
        from journeyman.swarm.progress import WorkerEvent, describe, swarm_event_to_dict

        if self.fmt is OutputFormat.STREAM_JSON:
            line = json.dumps(swarm_event_to_dict(event), ensure_ascii=False, default=str)
            self._write(printable_json(self._redact(line)))
        elif self.fmt is OutputFormat.TEXT and not isinstance(event, WorkerEvent):
            self._write(printable(self._redact(describe(event))))

    def final(self, result: SwarmResult) -> None:
        data = result.to_dict()
        if self.fmt is OutputFormat.TEXT:
            self._write(self._text_summary(result))
            return
        if self.fmt is OutputFormat.STREAM_JSON:  # like every line of the stream
            data = {"type": data.pop("type"), "worker_id": None, **data}
        line = json.dumps(data, ensure_ascii=False, default=str)
        self._write(printable_json(self._redact(line)))

    def _text_summary(self, result: SwarmResult) -> str:
        lines = ["", f"swarm {result.session_id}: {result.summary()}"]
        for worker in result.workers:
            row = f"  {worker.worker_id} {worker.state.value:<7} {worker.title}"
            if worker.attempts > 1:
                row += f" ({worker.attempts} attempts)"
            if worker.error:
                row += f" — {worker.error}"
            lines.append(row)
            lines.extend(
                f"    not carried (ignored by git): {path} — {why}"
                for path, why in worker.ignored.refused.items()
            )
        for branch in result.kept_branches:
            lines.append(f"  kept branch {branch} (inspect: git log -p {branch})")
        if result.final_check is not None and not result.final_check.passed:
            tail = result.final_check.output.strip().splitlines()[-10:]
            lines.append("  final check output (end):")
            lines.extend(f"    {line}" for line in tail)
        cost = "unknown" if result.cost_usd is None else f"${result.cost_usd:.4f}"
        lines.append(f"  {result.tokens:,} tokens, {cost}, {result.duration_s:.1f}s")
        return printable(self._redact("\n".join(lines)))

    @staticmethod
    def _write(text: str) -> None:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()


CleanOpt = Annotated[
    bool,
    typer.Option(
        "--clean",
        help="Remove what swarms that did not finish (killed, crashed) left in the workspace's "
        "repository — worktrees, temporary folders, worker branches — and the branches finished "
        "swarms kept for failed subtasks, then exit; each deleted branch is printed with its "
        "last commit. A swarm that is running is never touched. (Every swarm also removes dead "
        "swarms' leftovers when it starts, keeping branches that hold unmerged commits.)",
    ),
]


def swarm(
    goal: Annotated[
        str | None, typer.Argument(help="What the swarm should achieve, in plain words.")
    ] = None,
    workspace: WorkspaceOpt = None,
    workers: WorkersOpt = 3,
    verify: SwarmVerifyOpt = None,
    verify_timeout: VerifyTimeoutOpt = None,
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
    tool_timeout: ToolTimeoutOpt = None,
    mode: ModeOpt = None,
    output_format: OutputOpt = OutputFormat.TEXT,
    session_dir: SessionDirOpt = None,
    permission_mode: PermissionModeOpt = None,
    yes: SwarmYesOpt = False,
    sandbox: SandboxOpt = None,
    edit_tool: EditToolOpt = None,
    allow_network: AllowNetworkOpt = False,
    pass_env: PassEnvOpt = None,
    project_hooks: ProjectHooksOpt = False,
    otel: OtelOpt = False,
    shared_state: SharedStateOpt = None,
    clean: CleanOpt = False,
) -> None:
    """Split GOAL into subtasks with one planning turn, work on them in parallel, and merge the
    results.

    The workspace must be a git repository with at least one commit and no uncommitted
    changes to tracked files (a folder that is not a repository is refused: run `git init`,
    `git add -A` and `git commit` first; untracked files are left alone and workers do not see
    them). Each worker is an agent in its own git worktree, on its own branch off HEAD, with
    what the other workers got wrong in its system prompt. Its work passes the quality gate
    (--verify in its worktree; a failure is shared with the swarm and the subtask tried once
    more), then the passing branches are merged into the current branch in plan order. A
    merge conflict is reported with its files and the subtask tried once more on top of the
    merged result; never overwritten. A final check runs --verify on the merged result.
    Branches of failed subtasks are kept (named in the output); worktrees are removed.

    Shared state: what the workers learn (failures, references) is kept per project in a
    store (--shared-state), so later and concurrent swarms start from it.

    Limits: --max-budget-usd and --max-total-tokens cap the whole swarm (each worker gets an
    allocation from them); --max-duration is a time limit for the whole swarm too: the
    planner and each worker get what is left of it, and no worker starts once it has passed
    (the checks and merges of finished work still run, each within --verify-timeout);
    --max-iterations caps each worker (at most 50). A worker that makes the same call 3 times
    in a row is stopped; a call repeated more than 10 times across workers stops them all
    and no more work is started.

    Exit status: 0 when every subtask merged and the final check passed; 1 otherwise; 2 bad
    input (not a repository, uncommitted changes, no check command, bad options); 130 cancelled.
    """
    goal = _goal_unless_clean(goal, clean, workspace)
    limits = given_limits(
        max_iterations,
        max_budget_usd,
        max_total_tokens,
        max_duration,
        budget_mode,
        tool_timeout,
        price_per_mtok,
    )
    _refuse_unworkable(max_budget_usd, mode)
    tools = tool_flags(sandbox, edit_tool, allow_network, pass_env)
    root, config = _settle(
        workspace, limits, mode, permission_mode, tools, verify_timeout, session_dir, project_hooks
    )
    from journeyman.loop.launch import ProviderChoice

    chosen = ProviderChoice(provider, model, base_url, tool_format)
    _launch(goal, root, config, chosen, workers, verify, shared_state, output_format, yes, otel)


def _goal_unless_clean(goal: str | None, clean: bool, workspace: Path | None) -> str:
    """The GOAL; `--clean` cleans up and exits instead; neither is bad input."""
    if clean:
        _clean(workspace, goal)
    if goal is None or not goal.strip():
        fail(EXIT_CONFIG, "give the swarm a GOAL (or --clean to remove what dead swarms left)")
    return goal


def _clean(workspace: Path | None, goal: str | None) -> NoReturn:
    """`--clean`: remove every leftover of swarms not running, say what went, exit 0."""
    if goal is not None:
        fail(EXIT_CONFIG, "--clean takes no GOAL: it cleans up and exits")
    from journeyman.swarm.leftovers import clean_leftovers
    from journeyman.swarm.worktrees import open_repo

    try:
        cleanup = clean_leftovers(open_repo((workspace or Path(".")).resolve()), everything=True)
    except ConfigurationError as error:
        fail(EXIT_CONFIG, error.message)
    if cleanup.empty():
        typer.echo("nothing to clean: no swarm leftovers in this repository")
        raise typer.Exit(EXIT_OK)
    for path in cleanup.worktrees:
        typer.echo(f"removed worktree {printable(path)}")
    for path in cleanup.folders:
        typer.echo(f"removed folder {printable(path)}")
    for name, sha in cleanup.branches.items():
        typer.echo(
            f"deleted branch {printable(name)} (was {sha}; `git branch NAME {sha}` brings it back)"
        )
    raise typer.Exit(EXIT_OK)


def _refuse_unworkable(max_budget_usd: float | None, mode: ModeName | None) -> None:
    """Exit 2 for the flags no swarm can work with: no money to spend, or a mode that changes
    nothing."""
    if max_budget_usd is not None and max_budget_usd <= 0:
        fail(
            EXIT_CONFIG,
            f"--max-budget-usd must be more than 0, not {max_budget_usd:g}: the planning turn "
            "and every worker spend from it, so nothing could run; give a positive amount, or "
            "leave it out for no cost limit",
        )
    if mode is ModeName.ASK:
        fail(
            EXIT_CONFIG,
            "--mode ask answers questions and changes nothing; a swarm's workers "
            "change files: use react (default), plan-solve or phased",
        )


def _settle(
    workspace: Path | None,
    limits: dict[str, Any],
    mode: ModeName | None,
    permission_mode: PermissionMode | None,
    tools: dict[str, Any],
    verify_timeout: float | None,
    session_dir: Path | None,
    project_hooks: bool,
) -> tuple[Path, AgentConfig]:
    """The swarm's workspace, resolved (exit 2 unless it is a folder), and the workers'
    settings with the flags on top; those the trust rules left out are warned about."""
    root = (workspace or Path(".")).resolve()
    if not root.is_dir():
        fail(EXIT_CONFIG, f"workspace {root} is not a directory")
    from journeyman.loop.launch import LaunchRequest, settle

    flags = {
        **limits,
        "mode": mode,
        "permission_mode": permission_mode,
        **tools,
        "verify_timeout_s": verify_timeout,
    }
    request = LaunchRequest(root, flags=flags, session_dir=session_dir, project_hooks=project_hooks)
    try:
        settled = settle(request)
    except ConfigurationError as error:
        fail(EXIT_CONFIG, error.message)
    for item in settled.ignored:
        typer.echo(f"journeyman: warning: {item.message}", err=True)
    return root, settled.config


def _launch(
    goal: str,
    root: Path,
    config: AgentConfig,
    chosen: ProviderChoice,
    workers: int,
    verify: str | None,
    shared_state: str | None,
    output_format: OutputFormat,
    assume_yes: bool,
    otel: bool,
) -> NoReturn:
    """Run the swarm, traced when asked, and exit with its outcome's code (saying why when it
    is not 0)."""
    from journeyman.cli.run_cmd import _tracing

    tracing = _tracing(otel)
    try:
        code, message = _run(
            goal,
            root,
            config_values={"agent_config": config},
            shared_state=shared_state,
            chosen=chosen,
            swarm_settings={
                "workers": workers,
                "verify_command": verify,
                "verify_timeout_s": config.verify_timeout_s,
            },
            output_format=output_format,
            assume_yes=assume_yes,
            tracing=tracing,
        )
    finally:
        if tracing is not None:
            tracing.close()  # sends the last spans
    if code == EXIT_CLOSED_STDOUT:  # `| head`: nothing to say to anyone
        raise typer.Exit(code)
    if code != EXIT_OK:
        fail(code, message)
    raise typer.Exit(EXIT_OK)


def _open_store(spec: str | None, session_dir: Path | None) -> PersistenceAdapter | None:
    """The shared state's store `--shared-state` names (a SQLite file in the session folder
    by default); exits 2 saying why when it cannot be used."""
    from journeyman.session.store import default_session_root
    from journeyman.swarm.shared.stores import default_store_spec, open_shared_state

    if spec is None:
        spec = default_store_spec(session_dir or default_session_root())
    try:
        return open_shared_state(spec)
    except ConfigurationError as error:
        fail(EXIT_CONFIG, error.message)


def _run(
    goal: str,
    root: Path,
    *,
    config_values: dict[str, Any],
    shared_state: str | None,
    chosen: ProviderChoice,
    swarm_settings: dict[str, Any],
    output_format: OutputFormat,
    assume_yes: bool,
    tracing: AgentTracing | None = None,
) -> tuple[int, str]:
    """Run the swarm; the exit code and the one-line reason of a failure."""
    # the agent, the providers and git work load only when a swarm starts
    from journeyman.cli.signals import handle_termination_as_interrupt
    from journeyman.loop.launch import open_provider, tool_format
    from journeyman.swarm.orchestrator import Swarm, SwarmConfig

    if not goal.strip():
        return EXIT_CONFIG, "the goal is empty; say what the swarm should achieve"
    try:
        provider = open_provider(
            chosen.provider,
            chosen.model,
            base_url=chosen.base_url,
            tool_format=tool_format(chosen.tool_format),
        )
    except ConfigurationError as error:
        return EXIT_CONFIG, error.message
    renderer = SwarmRenderer(output_format)
    output = ClosedStdoutGuard(renderer.write_event)
    runner = Swarm(
        provider,
        workspace=root,
        config=SwarmConfig(**swarm_settings),
        on_event=output,
        assume_yes=assume_yes,
        **config_values,
    )
    output.on_close = runner.cancel  # nobody reads the progress any more: stop the workers
    if tracing is not None:
        runner.tracing = tracing  # the planner and every worker: a trace each
    from journeyman.session.workspace_lock import WorkspaceLock

    lock = WorkspaceLock(root, purpose="swarm")  # its merges land there; held until exit
    try:
        lock.acquire()
        runner.prepare()
    except ConfigurationError as error:
        return EXIT_CONFIG, error.message
    # opened once the workspace passed its checks: a refused swarm stores nothing
    runner.shared_state = _open_store(shared_state, config_values["agent_config"].session_dir)
    handle_termination_as_interrupt()
    try:
        result = asyncio.run(runner.run(goal))
    except KeyboardInterrupt:
        return EXIT_CANCELLED, "cancelled"
    except ConfigurationError as error:
        return EXIT_CONFIG, error.message
    finally:
        from journeyman.swarm.shared.stores import close_shared_state

        close_shared_state(runner.shared_state)
    output.call(renderer.final, result)
    if output.closed:
        return EXIT_CLOSED_STDOUT, "the reader of the output went away"
    if result.success:
        return EXIT_OK, ""
    return EXIT_FAILED, f"the swarm did not succeed: {result.summary()}"
