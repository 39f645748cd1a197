"""The MCP server's tools: start a run, continue a session, read its status and diff, undo.

Every tool answers with a JSON object (structured content, and the same as text) or, when the
call cannot be served, an MCP tool error whose text says what was wrong and what to do; the
server goes on serving either way. Nothing from a traceback reaches the client.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import Field, ValidationError

from journeyman.core.errors import ConfigurationError
from journeyman.core.package import package_version
from journeyman.core.result import RunResult
from journeyman.core.text import clip
from journeyman.loop.agent import Agent
from journeyman.loop.choices import ModeName
from journeyman.loop.config_file import session_root
from journeyman.loop.launch import Launch, Surface, launch
from journeyman.loop.run_options import RunOptions
from journeyman.policy.choices import PermissionMode
from journeyman.protocols.mcp_server.approval import ElicitingApprover, client_can_elicit
from journeyman.protocols.mcp_server.policy import (
    ClientLimits,
    RunSettings,
    ServerPolicy,
    check_inside_roots,
    inside_roots,
    resolve_workspace,
    run_settings,
)
from journeyman.protocols.mcp_server.runs import ActiveRun, RunRegistry
from journeyman.session.store import (
    SessionRecord,
    SessionStore,
    new_session_id,
)
from journeyman.session.undo import FileChangeTracker, UndoResult
from journeyman.session.workspace_lock import WorkspaceLock
from journeyman.tools.choices import SandboxKind

if TYPE_CHECKING:
    from journeyman.integrations.otel.tracing import AgentTracing

INSTRUCTIONS = (
    "journeyman is a coding agent. start_run gives it a task in a workspace and, by default, "
    "waits until it is done (send a progress token to follow it step by step); with "
    "wait=false it returns at once and get_status tells how it goes. send_message continues a "
    "session with a follow-up, get_diff shows its file changes, undo reverts them. Limits, "
    "permissions and the sandbox are the server's; a request may only tighten them."
)
NO_ASKING_NOTE = (
    "calls that need approval were refused: nobody could be asked (the client did not declare "
    "elicitation or its connection cannot carry a question from the server, e.g. the stateless "
    "2026-07-28 protocol; or the run was started with wait=false). To allow them, start the "
    "server with --yes, or use a client with elicitation over the initialize handshake and "
    "wait=true."
)
MAX_WAIT_S = 3600.0
"""Longest a single get_status call waits for a run to finish."""

T = TypeVar("T")

# argument types shared by the tools (the descriptions are what a client's model reads)
SessionArg = Annotated[
    str,
    Field(
        description="Session id from start_run or list_sessions, or a unique beginning or end "
        "of it (the suffix after the last dash)."
    ),
]
WaitArg = Annotated[
    bool,
    Field(
        description="true (default): answer when the run is over, with progress notifications "
        "meanwhile if you sent a progress token; false: answer at once with the session id, "
        "then use get_status. A run goes on if you stop waiting; cancel_run stops it."
    ),
]
ModeArg = Annotated[
    ModeName | None,
    Field(
        description="react (default): tool calls until done; plan-solve: a plan first; phased: "
        "discover, plan, act, verify; ask: answer a question with read-only tools."
    ),
]
IterationsArg = Annotated[
    int | None,
    Field(ge=1, description="Model turns this run may take (lowered to the server's limit)."),
]
BudgetArg = Annotated[
    float | None,
    Field(ge=0, description="US dollars the session may cost (lowered to the server's limit)."),
]
TokensArg = Annotated[
    int | None,
    Field(ge=1, description="Tokens the session may use (lowered to the server's limit)."),
]
DurationArg = Annotated[
    float | None,
    Field(gt=0, description="Seconds the run may last (lowered to the server's limit)."),
]
PermissionArg = Annotated[
    PermissionMode | None,
    Field(description="A permission mode at least as strict as the server's (plan: read only)."),
]
SandboxArg = Annotated[
    SandboxKind | None,
    Field(description="A sandbox at least as strong as the server's; never a weaker one."),
]

logger = logging.getLogger(__name__)


class JourneymanTools:
    """The state behind the tools: the server's policy and its runs."""

    def __init__(
        self,
        policy: ServerPolicy,
        provider_factory: Callable[[], Any],
        tracing: AgentTracing | None = None,
    ) -> None:
        self.policy = policy
        self.provider_factory = provider_factory
        """Builds the provider of a run (from the server's own settings, never the client's)."""
        self.registry = RunRegistry()
        self.tracing = tracing
        """OpenTelemetry tracing of the runs (`--otel` or an OTLP endpoint at server start)."""

    @cached_property
    def session_root(self) -> Path:
        """Where the runs' sessions are stored, as for `journeyman run` (a workspace's config
        cannot choose it)."""
        given = self.policy.flags.get("session_dir")
        return session_root(Path(given) if given else None)

    def open_store(self) -> SessionStore:
        return SessionStore(_configured(lambda: self.session_root))

    # --- building and starting runs ------------------------------------------------------

    def _agent(
        self, settings: RunSettings, run_ref: list[ActiveRun], approver: ElicitingApprover | None
    ) -> Agent:
        policy = self.policy
        options = RunOptions(
            base_url=policy.base_url,
            tool_format=policy.tool_format,
            mcp=False,
            ignored_settings=tuple(item.to_dict() for item in settings.ignored),
        )
        settled = Launch(
            settings.workspace,
            settings.config,
            options,
            policy.provider,
            policy.model,
            policy.assume_yes,
            policy.lsp,
            tuple(settings.ignored),
        )
        surface = Surface(
            on_event=lambda event: run_ref[0].on_event(event) if run_ref else None,
            # None: nobody to ask, so calls that need asking are refused
            permission_approver=approver,
            tracing=self.tracing,
        )
        return launch(settled, surface, provider=self.provider_factory())

    def _launch(
        self,
        session_id: str,
        task: str,
        settings: RunSettings,
        action: Callable[[Agent], Awaitable[RunResult]],
        approver: ElicitingApprover | None = None,
    ) -> ActiveRun:
        busy = self.registry.busy_workspace(settings.workspace)
        if busy is not None:
            raise ToolError(
                f"workspace {settings.workspace} already has a run going (session "
                f"{busy.session_id}); wait for it with get_status, or stop it with cancel_run"
            )
        holder: list[ActiveRun] = []
        try:
            agent = self._agent(settings, holder, approver)
        except (ConfigurationError, NotADirectoryError) as error:
            raise ToolError(_message(error)) from None
        run = ActiveRun(session_id, settings.workspace, task, agent)
        run.notes = [*settings.clamped, *(item.message for item in settings.ignored)]
        run.cannot_ask = approver is None and not self.policy.assume_yes
        holder.append(run)
        self.registry.start(run, action(agent))
        return run

    async def start_run(
        self,
        ctx: Context,
        task: str,
        workspace: str | None,
        limits: ClientLimits,
        wait: bool,
    ) -> dict[str, Any]:
        if not task.strip():
            raise ToolError("task is empty; say what the agent should do")
        path = _configured(lambda: resolve_workspace(self.policy, workspace))
        settings = _configured(lambda: run_settings(self.policy, path, limits))
        session_id = new_session_id()
        approver = self._approver(ctx, settings, wait)
        run = self._launch(
            session_id,
            task,
            settings,
            lambda agent: agent.run(task, session_id=session_id),
            approver,
        )
        return await self._answer(ctx, run, wait, approver)

    async def send_message(
        self, ctx: Context, session: str, message: str, limits: ClientLimits, wait: bool
    ) -> dict[str, Any]:
        if not message.strip():
            raise ToolError("message is empty; say what the agent should do next")
        record = self._record(session)
        active = self.registry.get(record.id)
        if active is not None and not active.done:
            raise ToolError(
                f"session {record.id} is still working; wait for it with get_status "
                "(wait_s) or stop it with cancel_run before sending another message"
            )
        path = _configured(lambda: check_inside_roots(self.policy, record.workspace, record.id))
        stored_mode = (record.settings.get("config") or {}).get("mode")
        settings = _configured(
            lambda: run_settings(self.policy, path, limits, stored_mode=stored_mode)
        )
        # the server's limits (tightened by the request) replace whatever the session had
        approver = self._approver(ctx, settings, wait)
        run = self._launch(
            record.id,
            message,
            settings,
            lambda agent: agent.send(record.id, message, override_limits=True),
            approver,
        )
        return await self._answer(ctx, run, wait, approver)

    def _approver(
        self, ctx: Context, settings: RunSettings, wait: bool
    ) -> ElicitingApprover | None:
        """Who answers approval questions: the client's user through elicitation, while the
        tool call waits for the run and the client can elicit; else nobody (refused)."""
        if self.policy.assume_yes or not wait or not client_can_elicit(ctx):
            return None
        return ElicitingApprover(ctx, str(settings.workspace), self.policy.approval_timeout_s)

    async def _answer(
        self, ctx: Context, run: ActiveRun, wait: bool, approver: ElicitingApprover | None = None
    ) -> dict[str, Any]:
        if wait:
            started = f"session {run.session_id} started in {run.workspace}"
            try:
                await run.wait(ctx.report_progress, None, preface=started)
            finally:  # the client stopped waiting: later questions have nobody to go to
                if approver is not None:
                    approver.close()
            if run.error is not None:
                raise ToolError(f"session {run.session_id} could not run: {run.error}")
        return self._status(run.session_id)

    # --- reading sessions ----------------------------------------------------------------

    def _record(self, session: str) -> SessionRecord:
        """The stored session named by id or prefix, checked to be inside the server's roots."""
        if not session.strip():
            raise ToolError("session_id is empty; pass the id start_run answered with")
        active = self.registry.get(session)
        store = self.open_store()
        try:
            try:
                # a partial id names, and is ambiguous among, the sessions of this server only
                found = store.resolve_id(session, inside=inside_roots(self.policy))
                record = store.load_session(found)
            except ConfigurationError as error:
                if active is not None:  # started, but its first step is not stored yet
                    raise ToolError(
                        f"session {session} is starting; ask again in a moment"
                    ) from None
                raise ToolError(
                    f"{error.message}; list_sessions shows the sessions of this server"
                ) from None
        finally:
            store.close()
        _configured(lambda: check_inside_roots(self.policy, record.workspace, record.id))
        return record

    def _resolve(self, session: str) -> str:
        """The full session id: a run of this server, or a stored session."""
        if self.registry.get(session) is not None:
            return session
        return self._record(session).id

    def _status(self, session_id: str) -> dict[str, Any]:
        run = self.registry.get(session_id)
        if run is not None and not run.done:
            return {
                "session_id": session_id,
                "status": "running",
                "workspace": str(run.workspace),
                "task": run.task,
                "progress": run.progress.to_dict(),
                "notes": run.notes,
            }
        if run is not None and run.result is not None:
            return _result_status(run.result, run)
        if run is not None and run.error is not None:
            return {
                "session_id": session_id,
                "status": "failed",
                "workspace": str(run.workspace),
                "error": run.error,
                "notes": run.notes,
            }
        return self._stored_status(session_id, run)

    def _stored_status(self, session_id: str, run: ActiveRun | None) -> dict[str, Any]:
        record = self._record(session_id)
        store = self.open_store()
        try:
            summary = store.summary(record.id)
            usage = store.usage_summary(record.id)
            pending = [c.path for c in store.file_changes(record.id, pending_only=True)]
        finally:
            store.close()
        tokens = {"input": 0, "output": 0, "cache_read": 0, "cache_write": 0}
        cost: float | None = 0.0
        for row in usage:
            tokens["input"] += row.usage.input_tokens
            tokens["output"] += row.usage.output_tokens
            tokens["cache_read"] += row.usage.cache_read_tokens
            tokens["cache_write"] += row.usage.cache_write_tokens
            cost = None if cost is None or row.cost_usd is None else cost + row.cost_usd
        status = "finished" if summary.finish_reason else "stopped"
        if run is not None and run.job is not None and run.job.cancelled():
            status = "cancelled"
        return {
            "session_id": record.id,
            "status": status,
            "workspace": record.workspace,
            "task": record.task,
            "finish_reason": summary.finish_reason,
            "success": summary.finish_reason in ("completed", "answered"),
            "summary": summary.final_text,
            "error": summary.error,
            "iterations": summary.steps,
            "tokens": {**tokens, "total": sum(tokens.values())},
            "cost_usd": cost,
            "files_changed": sorted(set(pending)),
        }

    async def get_status(self, ctx: Context, session: str, wait_s: float) -> dict[str, Any]:
        session_id = self._resolve(session)
        run = self.registry.get(session_id)
        if run is not None and not run.done and wait_s > 0:
            await run.wait(ctx.report_progress, min(wait_s, MAX_WAIT_S))
        return self._status(session_id)

    def list_sessions(self, limit: int) -> dict[str, Any]:
        store = self.open_store()
        try:
            summaries = store.list_sessions()
        finally:
            store.close()
        ours = inside_roots(self.policy)
        inside = [s for s in summaries if ours(s.record.workspace)]
        stored = {s.record.id for s in summaries}
        rows: list[dict[str, Any]] = [
            {  # started a moment ago: its first step is not stored yet
                "session_id": run.session_id,
                "status": "running",
                "workspace": str(run.workspace),
                "task": _first_line(run.task),
                "finish_reason": None,
            }
            for run in self.registry.runs.values()
            if run.session_id not in stored and not run.done
        ]
        for summary in reversed(inside[-limit:] if limit else inside):
            run = self.registry.get(summary.record.id)
            running = run is not None and not run.done
            ended = "finished" if summary.finish_reason else "stopped"
            rows.append(
                {
                    "session_id": summary.record.id,
                    "status": "running" if running else ended,
                    "workspace": summary.record.workspace,
                    "task": _first_line(summary.record.task),
                    "finish_reason": summary.finish_reason,
                }
            )
        return {"sessions": rows}

    def get_diff(self, session: str) -> str:
        record = self._record(session)
        store = self.open_store()
        try:
            text = FileChangeTracker(store, record.id, Path(record.workspace)).diff()
        finally:
            store.close()
        return text or f"(no pending file changes in session {record.id})"

    def undo(self, session: str, what: str, path: str | None) -> dict[str, Any]:
        record = self._record(session)
        run = self.registry.get(record.id)
        if run is not None and not run.done:
            raise ToolError(
                f"session {record.id} is still working; undo once it is over (get_status) "
                "or after cancel_run"
            )
        if what == "file" and not path:
            raise ToolError("what='file' needs path: the file to restore (relative path)")
        if what != "file" and path:
            raise ToolError("path goes with what='file' only; leave it out for the other kinds")
        store = self.open_store()
        lock: WorkspaceLock | None = None
        try:
            # another process running in that workspace would have its edits reverted under it
            lock = WorkspaceLock(Path(record.workspace), purpose="undo", session_id=record.id)
            lock.acquire()
            tracker = FileChangeTracker(store, record.id, Path(record.workspace))
            if what == "last_turn":
                result = tracker.undo_turn()
            elif what == "file":
                assert path is not None
                result = tracker.undo_file(path)
            else:
                result = tracker.undo_last()
        except ConfigurationError as error:
            raise ToolError(error.message) from None
        finally:
            store.close()
            if lock is not None:
                lock.release()
        return _undo_answer(record.id, result)

    def cancel(self, session: str) -> dict[str, Any]:
        session_id = self._resolve(session)
        run = self.registry.get(session_id)
        if run is None or run.done:
            raise ToolError(f"session {session_id} has no run going in this server")
        run.agent.cancel()
        return {
            "session_id": session_id,
            "status": "cancelling",
            "note": "the run stops before its next model turn; get_status shows when it ended",
        }


def _undo_answer(session_id: str, result: UndoResult) -> dict[str, Any]:
    verbs = {"created": "deleted", "deleted": "restored", "modified": "reverted"}
    undone = [
        {"path": c.path, "action": verbs.get(c.kind, c.kind), "step": c.step, "tool": c.tool}
        for c in result.undone
    ]
    conflicts = [
        {
            "path": conflict.change.path,
            "reason": "changed on disk after the agent wrote it; left as it is",
            "changes_since": conflict.diff,
        }
        for conflict in result.conflicts
    ]
    if conflicts and not undone:
        names = ", ".join(c["path"] for c in conflicts)
        raise ToolError(
            f"nothing undone in session {session_id}: {names} changed on disk after the agent "
            "wrote it, so undoing would lose those edits; revert them by hand first"
        )
    return {
        "session_id": session_id,
        "nothing_to_undo": result.nothing_to_undo,
        "undone": undone,
        "not_undone": conflicts,
    }


def _result_status(result: RunResult, run: ActiveRun) -> dict[str, Any]:
    usage = result.usage
    answer: dict[str, Any] = {
        "session_id": result.session_id,
        "status": "finished",
        "workspace": str(run.workspace),
        "task": run.task,
        "finish_reason": result.finish_reason.value,
        "success": result.success,
        "summary": result.final_text,
        "error": result.error,
        "iterations": result.iterations,
        "tool_calls": result.tool_calls_made,
        "tokens": {
            "input": usage.input_tokens,
            "output": usage.output_tokens,
            "cache_read": usage.cache_read_tokens,
            "cache_write": usage.cache_write_tokens,
            "total": usage.total_tokens,
        },
        "cost_usd": result.cost_usd,
        "duration_s": round(result.duration_s, 3),
        "files_changed": list(result.files_changed),
        "refused_calls": [call.to_dict() for call in result.refused_calls],
        "verification": None
        if result.verification is None
        else {k: v for k, v in result.verification.to_dict().items() if k != "output_tail"},
    }
    notes = list(run.notes)
    if run.cannot_ask and result.refused_calls:
        notes.append(NO_ASKING_NOTE)
    if notes:
        answer["notes"] = notes
    return answer


def _first_line(text: str, limit: int = 120) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return clip(line, limit)


def _message(error: BaseException) -> str:
    return getattr(error, "message", None) or str(error)


def _configured(build: Callable[[], T]) -> T:
    """`build()`, with a configuration problem turned into a tool error the client can read."""
    try:
        return build()
    except ConfigurationError as error:
        raise ToolError(error.message) from None
    except ValidationError as error:
        raise ToolError(f"invalid request: {plain_validation_error(error)}") from None


def plain_validation_error(error: ValidationError) -> str:
    """Each problem as `argument: what is wrong (what was given)` on one line, without the
    validation library's layout, error codes and links."""
    problems = []
    for item in error.errors():
        where = ".".join(str(part) for part in item["loc"]) or "arguments"
        given = repr(item.get("input"))
        given = clip(given, 60)
        expected = (item.get("ctx") or {}).get("expected")
        if item["type"] == "enum" and expected:
            problems.append(f"{where}: {given} is not one of {expected}")
        elif item["type"] == "missing":
            problems.append(f"{where}: required")
        else:
            message = str(item["msg"])
            problems.append(f"{where}: {message[:1].lower()}{message[1:]} (got {given})")
    return "; ".join(problems)


class _PlainErrorServer(MCPServer):
    """The SDK's server, with arguments that fail validation reported in one plain line."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as error:
            cause = error.__cause__
            if isinstance(cause, ValidationError):
                plain = f"{name}: invalid arguments: {plain_validation_error(cause)}"
                raise ToolError(plain) from cause
            raise


@contextmanager
def _tool_errors(tool: str) -> Iterator[None]:
    """Any failure of a tool as a one-line tool error (never a traceback), logged on stderr."""
    try:
        yield
    except ToolError:
        raise
    except Exception as error:
        logger.warning("%s failed: %s: %s", tool, type(error).__name__, _message(error))
        raise ToolError(f"{tool} failed: {type(error).__name__}: {_message(error)}") from None


def _only_known(ctx: Context, known: set[str]) -> None:
    """Refuse arguments a tool does not take (the SDK would drop them silently, and a request
    such as `{"sandbox_off": true}` deserves a clear no)."""
    params = ctx.request_context.params or {}
    given = params.get("arguments") or {}
    unknown = sorted(set(given) - known) if isinstance(given, dict) else []
    if unknown:
        raise ToolError(
            f"unknown argument(s) {', '.join(unknown)}; this tool takes {', '.join(sorted(known))}"
        )


def build_server(
    policy: ServerPolicy,
    provider_factory: Callable[[], Any],
    tracing: AgentTracing | None = None,
) -> tuple[MCPServer, JourneymanTools]:
    """The MCP server with journeyman's tools for `policy` (the user's choices), and the state
    behind them (its runs, cancelled when the server stops)."""
    tools = JourneymanTools(policy, provider_factory, tracing)
    server: MCPServer = _PlainErrorServer(
        "journeyman", version=package_version(), instructions=INSTRUCTIONS, log_level="WARNING"
    )
    _add_run_tools(server, tools)
    _add_session_tools(server, tools)
    return server, tools


def _add_run_tools(server: MCPServer, tools: JourneymanTools) -> None:
    """The tools that start the agent: on a new task, or on a session's follow-up."""

    @server.tool(
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True),
    )
    async def start_run(
        task: Annotated[str, Field(description="What the agent should do, in plain words.")],
        ctx: Context,
        workspace: Annotated[
            str | None,
            Field(
                description="Folder to work in: absolute, or relative to the server's first "
                "folder (default: that folder). Must be inside the folders the server allows."
            ),
        ] = None,
        mode: ModeArg = None,
        max_iterations: IterationsArg = None,
        max_budget_usd: BudgetArg = None,
        max_total_tokens: TokensArg = None,
        max_duration_s: DurationArg = None,
        permission_mode: PermissionArg = None,
        sandbox: SandboxArg = None,
        wait: WaitArg = True,
    ) -> dict[str, Any]:
        """Start the coding agent on a task: it edits and tests until done, within limits."""
        with _tool_errors("start_run"):
            _only_known(ctx, set(start_run.__annotations__) - {"ctx", "return"})
            limits = ClientLimits(
                mode=mode,
                max_iterations=max_iterations,
                max_budget_usd=max_budget_usd,
                max_total_tokens=max_total_tokens,
                max_duration_s=max_duration_s,
                permission_mode=permission_mode,
                sandbox=sandbox,
            )
            return await tools.start_run(ctx, task, workspace, limits, wait)

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True))
    async def send_message(
        session_id: SessionArg,
        message: Annotated[str, Field(description="The follow-up, e.g. 'now add a test'.")],
        ctx: Context,
        max_iterations: IterationsArg = None,
        max_budget_usd: BudgetArg = None,
        max_total_tokens: TokensArg = None,
        max_duration_s: DurationArg = None,
        wait: WaitArg = True,
    ) -> dict[str, Any]:
        """Continue a session with a follow-up; its history, spending and undo journal go on."""
        with _tool_errors("send_message"):
            _only_known(ctx, set(send_message.__annotations__) - {"ctx", "return"})
            limits = ClientLimits(
                max_iterations=max_iterations,
                max_budget_usd=max_budget_usd,
                max_total_tokens=max_total_tokens,
                max_duration_s=max_duration_s,
            )
            return await tools.send_message(ctx, session_id, message, limits, wait)


def _add_session_tools(server: MCPServer, tools: JourneymanTools) -> None:
    """The tools that follow, list, undo and stop sessions."""

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def get_status(
        session_id: SessionArg,
        ctx: Context,
        wait_s: Annotated[
            float,
            Field(
                ge=0,
                description="Seconds to wait for a running session to finish (with progress "
                "notifications); 0 answers at once.",
            ),
        ] = 0,
    ) -> dict[str, Any]:
        """A session's progress while it runs, then its result: finish reason, summary, cost."""
        with _tool_errors("get_status"):
            _only_known(ctx, {"session_id", "wait_s"})
            return await tools.get_status(ctx, session_id, wait_s)

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def list_sessions(
        ctx: Context,
        limit: Annotated[int, Field(ge=0, description="Newest sessions to list (0: all).")] = 20,
    ) -> dict[str, Any]:
        """Sessions stored for the folders this server works in, newest first."""
        with _tool_errors("list_sessions"):
            _only_known(ctx, {"limit"})
            return tools.list_sessions(limit)

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def get_diff(session_id: SessionArg, ctx: Context) -> str:
        """Unified diff of a session's file changes that have not been undone."""
        with _tool_errors("get_diff"):
            _only_known(ctx, {"session_id"})
            return tools.get_diff(session_id)

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True))
    async def undo(
        session_id: SessionArg,
        ctx: Context,
        what: Annotated[
            Literal["last_turn", "last_change", "file"],
            Field(
                description="last_turn (default): every change of the session's last step; "
                "last_change: its most recent change; file: the last change to `path`."
            ),
        ] = "last_turn",
        path: Annotated[
            str | None, Field(description="With what='file': the file, relative to the workspace.")
        ] = None,
    ) -> dict[str, Any]:
        """Undo a session's file changes (files edited since by someone else are left alone)."""
        with _tool_errors("undo"):
            _only_known(ctx, {"session_id", "what", "path"})
            return tools.undo(session_id, what, path)

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
    async def cancel_run(session_id: SessionArg, ctx: Context) -> dict[str, Any]:
        """Stop a session's run before its next model turn."""
        with _tool_errors("cancel_run"):
            _only_known(ctx, {"session_id"})
            return tools.cancel(session_id)
