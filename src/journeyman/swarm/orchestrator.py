"""`Swarm`: a goal split by one planning turn into subtasks, worked on in parallel by agents in
their own git worktrees, checked, merged back in order, and checked again as a whole.

    >>> swarm = Swarm("openai:gpt-4.1-mini", workspace="repo", workers=3, verify="pytest -q")
    >>> result = swarm.run_sync("add a --json flag to every command")

How a run goes:
1. The workspace must be a git repository with a commit and no uncommitted changes to tracked
   files (`worktrees.open_repo`; anything else is a `ConfigurationError`).
2. The planning turn (`planner`) is a session of its own, the swarm's root record: every
   worker's session has it as `parent_session_id`, and its outcome becomes the swarm's.
3. Workers start (at most `workers` at once), each an `Agent` in a worktree on its own branch
   off HEAD, with the shared context engine's system prompt (shared prefix, what other
   workers got wrong, its goal), a budget reserved from the one `BudgetLedger` over the
   root's limits. A worker's turns, tokens and local doom loop are its loop's own limits
   (capped by `WorkerBudgetConfig`), so it ends as any run ends at them. The swarm counts
   only repeats across workers: a call repeated with the same result, back to back, by
   several workers is a global doom loop (`SharedEconomicsState`); it is refused, told to
   every worker, stops a worker that makes it again, and no further work is started.
4. The quality gate runs the verify command in the worker's worktree. A failure is recorded in
   `SharedContextState` (every later worker's prompt shows it) and the subtask is tried once
   more, with that context.
5. Passing branches are merged into the workspace's branch in plan order. A conflict is
   aborted and reported with its files; the subtask is tried once more on top of what was
   merged so far, and reported failed if it conflicts again.
6. The final check runs the verify command on the merged result. The swarm succeeds only
   when every subtask was merged and that check passed.
With a `shared_state` store (`journeyman swarm` uses a SQLite file in the session folder
unless `--shared-state` names another), what the workers learn outlives the swarm: the
failures and references of earlier swarms on the same project (the same first commit) are
loaded at the start, the state is synced with the store before each attempt and saved after
each check, so swarms in several processes or on several machines learn from each other.
Call counts (global doom loops) are never read from the store: only this swarm's own
workers' repeats count, so no other swarm (or whoever can write the store) can stop this one.
Worktrees are removed at the end, and the branches of merged work deleted; the branch of a
failed subtask is kept and named in its outcome. Files git ignores that a merged worker made
are carried into the workspace or refused by name (`ignored`); what a killed swarm left is
removed when the next one starts (`leftovers`).
`max_duration_s` of the agent config is a time limit for the whole swarm: every run (the
planner's, each worker's) gets what is left of it, and no attempt starts once it has passed;
the checks and merges of finished work still run, each within `verify_timeout_s`.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from journeyman.core.errors import AgentError, ConfigurationError
from journeyman.core.pins import approvals_of, judged_by
from journeyman.core.result import FinishReason, RunResult
from journeyman.economics.choices import BudgetMode
from journeyman.economics.ledger import (
    AllocationRefused,
    Amount,
    BudgetLedger,
    LedgerPolicy,
    Reservation,
)
from journeyman.loop.agent import Agent
from journeyman.loop.config import AgentConfig, ModeName
from journeyman.loop.fixed_check import fix_check_now
from journeyman.loop.launch import Surface, build_agent, open_provider
from journeyman.policy.permissions import Approver
from journeyman.providers.base import Provider
from journeyman.session.store import SessionStore, default_session_root
from journeyman.swarm.ignored import IgnoredOutputs, carry_ignored
from journeyman.swarm.leftovers import clean_leftovers
from journeyman.swarm.merge import CheckOutcome, SwarmCheck, merge_branch, run_check
from journeyman.swarm.planner import (
    MAX_SUBTASKS,
    RETRY_NOTE,
    PlanError,
    Subtask,
    parse_plan,
    planner_system_prompt,
)
from journeyman.swarm.progress import (
    SwarmEvent,
    SwarmEventHandler,
    SwarmStage,
    SwarmUpdate,
    WorkerEvent,
    WorkerState,
    WorkerUpdate,
)
from journeyman.swarm.shared import (
    GlobalDoomLoop,
    PersistenceAdapter,
    SharedContextEngine,
    SharedContextState,
    SharedEconomicsState,
    WorkerBudgetConfig,
    WorkerTask,
    attach_worker,
    load_shared_state,
    save_shared_state,
    worker_limits,
)
from journeyman.swarm.shared.checkpoint import HEARTBEAT_S
from journeyman.swarm.shared.stores import describe_store
from journeyman.swarm.worktrees import Repo, Worktree, WorktreePool, open_repo

if TYPE_CHECKING:
    from journeyman.integrations.otel.tracing import AgentTracing

PLANNER_ID = "planner"
"""The `worker_id` of the planning turn's events."""


class SwarmConfig(BaseModel):
    """How a swarm runs."""

    model_config = ConfigDict(extra="forbid")

    workers: int = Field(default=3, ge=1, le=32)
    """Workers running at the same time."""
    verify_command: str | None = None
    """The check run in each worktree (the quality gate) and on the merged result; None uses
    the workspace's detected test command, and a workspace without one is refused."""
    verify_timeout_s: float = Field(default=600.0, gt=0)
    """Seconds one check may run."""
    max_subtasks: int = Field(default=MAX_SUBTASKS, ge=1)
    """Most subtasks the plan may have."""
    gate_retries: int = Field(default=1, ge=0)
    """Extra attempts of a subtask whose worker failed the quality gate."""
    conflict_retries: int = Field(default=1, ge=0)
    """Extra attempts of a subtask whose branch conflicted, on top of the merged result."""
    worker_budget: WorkerBudgetConfig = Field(default_factory=WorkerBudgetConfig)
    """Caps on each worker's own limits: turns, tokens and its loop detector's threshold."""
    global_doom_threshold: int = Field(default=10, ge=1)
    """Repeats of one call (back to back, same arguments and result) across this swarm's
    workers beyond which it is a global doom loop."""
    shared_state_scope: str | None = Field(
        default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,80}$"
    )
    """Name the shared state is kept under in its store; None: the repository's first commit,
    so every clone of one project shares it and other projects do not."""


@dataclass
class WorkerOutcome:
    """How one subtask ended."""

    worker_id: str
    title: str
    task: str
    files: tuple[str, ...]
    state: WorkerState
    """merged, failed or skipped."""
    attempts: int = 0
    session_ids: list[str] = field(default_factory=list)
    branch: str | None = None
    """The branch kept for a subtask that failed (inspect it with `git log BRANCH`)."""
    changed_files: list[str] = field(default_factory=list)
    error: str | None = None
    ignored: IgnoredOutputs = field(default_factory=IgnoredOutputs)
    """The files git ignores that the merged worker made: carried into the workspace or
    refused, by name."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "worker_id": self.worker_id,
            "title": self.title,
            "task": self.task,
            "files": list(self.files),
            "state": self.state.value,
            "attempts": self.attempts,
            "session_ids": self.session_ids,
            "branch": self.branch,
            "changed_files": self.changed_files,
            "error": self.error,
            "ignored_carried": self.ignored.carried,
            "ignored_refused": self.ignored.refused,
        }


@dataclass
class SwarmResult:
    """What a swarm run did."""

    goal: str
    session_id: str
    """The root record (the planning session); every worker's session is its child."""
    success: bool
    workers: list[WorkerOutcome]
    verify_command: str | None
    final_check: CheckOutcome | None
    error: str | None
    tokens: int
    cost_usd: float | None
    """None when some call could not be priced."""
    duration_s: float
    global_doom_loops: list[str] = field(default_factory=list)

    @property
    def kept_branches(self) -> list[str]:
        return [w.branch for w in self.workers if w.branch]

    def summary(self) -> str:
        merged = sum(1 for w in self.workers if w.state is WorkerState.MERGED)
        text = f"{merged} of {len(self.workers)} subtasks merged"
        refused = sum(len(w.ignored.refused) for w in self.workers)
        if refused:
            text += f" ({refused} ignored file(s) a worker made were not carried, listed below)"
        if self.final_check is not None:
            text += f"; final check {self.final_check.summary()}"
        if self.error:
            text += f"; {self.error}"
        return text

    def to_dict(self) -> dict[str, Any]:
        final = self.final_check
        return {
            "type": "swarm_result",
            "goal": self.goal,
            "session_id": self.session_id,
            "success": self.success,
            "summary": self.summary(),
            "verify_command": self.verify_command,
            "final_check": None
            if final is None
            else {"passed": final.passed, "exit_code": final.exit_code, "output": final.output},
            "error": self.error,
            "tokens": self.tokens,
            "cost_usd": self.cost_usd,
            "duration_s": round(self.duration_s, 3),
            "kept_branches": self.kept_branches,
            "global_doom_loops": self.global_doom_loops,
            "workers": [w.to_dict() for w in self.workers],
        }


class _Attempt:
    """One worker run on one subtask; `tree` holds its committed work."""

    def __init__(self, subtask: Subtask, number: int, name: str, tree: Worktree) -> None:
        self.subtask = subtask
        self.number = number
        self.name = name
        """The worker id of this attempt (`w2`, then `w2-2`): the shared state tells each
        attempt what the earlier ones got wrong."""
        self.tree = tree
        self.shared_id = name
        """The id its failures and calls are recorded under in the shared state (qualified
        by the swarm's id, so workers of different swarms in one store never share one)."""
        self.session_id = ""
        self.result: RunResult | None = None
        self.error: str | None = None


class Swarm:
    """Runs one goal with several workers; see the module docstring."""

    def __init__(
        self,
        provider: Provider | str,
        *,
        workspace: str | Path = ".",
        workers: int | None = None,
        verify: str | None = None,
        config: SwarmConfig | None = None,
        agent_config: AgentConfig | None = None,
        on_event: SwarmEventHandler | None = None,
        assume_yes: bool = True,
        permission_approver: Approver | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        shared_state: PersistenceAdapter | None = None,
    ) -> None:
        config = config or SwarmConfig()
        shortcuts = {"workers": workers, "verify_command": verify}
        self.config = config.model_copy(update={k: v for k, v in shortcuts.items() if v})
        """`workers` and `verify` are shortcuts for the fields of `config` they name."""
        self.agent_config = agent_config or AgentConfig()
        self.provider = (
            open_provider(provider, None, base_url=base_url, api_key=api_key, discover_local=False)
            if isinstance(provider, str)
            else provider
        )
        self.workspace = Path(workspace).resolve()
        self.on_event = on_event
        self.assume_yes = assume_yes
        """Workers approve every call that would need asking (their worktree is theirs);
        deny rules and the plan permission mode still refuse."""
        self.permission_approver = permission_approver
        self.session_root = self.agent_config.session_dir or default_session_root()
        self.shared = SharedContextState()
        self.economics = SharedEconomicsState(self.config.global_doom_threshold)
        self.engine = SharedContextEngine(self.shared, self.economics)
        self.shared_state = shared_state
        """Where the shared state is loaded from and saved to (None: kept in memory only)."""
        self._scope = ""
        self._node = ""
        self._store_failed = False
        self._agents: list[Agent] = []
        self.tracing: AgentTracing | None = None
        """Traces every agent the swarm builds (the planner's, each worker attempt's)."""
        self._doom_reported: set[str] = set()
        self._cancelled = False
        self._verify = ""
        self._check: SwarmCheck | None = None
        self._approvals: dict[str, str] | None = None
        """What the user approved in the repository (`journeyman trust`), when pinned."""
        self._deadline: float | None = None
        """When the swarm's time limit (`max_duration_s`) runs out (monotonic clock)."""

    # -- events ----------------------------------------------------------------------------

    def _emit(self, event: SwarmEvent) -> None:
        if self.on_event is not None:
            self.on_event(event)

    def _update(
        self, subtask: Subtask, state: WorkerState, attempt: int = 1, **fields: Any
    ) -> None:
        self._emit(WorkerUpdate(subtask.worker_id, state, subtask.title, attempt, **fields))

    def cancel(self) -> None:
        """Stop every running worker before its next turn; start no more."""
        self._cancelled = True
        for agent in self._agents:
            agent.cancel()

    # -- the run -----------------------------------------------------------------------------

    def run_sync(self, goal: str) -> SwarmResult:
        return asyncio.run(self.run(goal))

    def prepare(self) -> tuple[Repo, str]:
        """The repository and the check command; raises `ConfigurationError` saying what to do
        when the workspace cannot host a swarm or no check command is known (`run` calls it
        first; call it yourself to find out before starting)."""
        repo = open_repo(self.workspace)
        # a worker's worktree is a copy of the repository: judged by its approvals, if pinned
        self._approvals = approvals_of(repo.root)
        fixed = fix_check_now(repo.root, self.config.verify_command)
        if fixed.command is None:
            raise ConfigurationError(
                "the swarm needs a check command for its quality gate and its final check, and "
                f"none was detected in {repo.root}; give one with --verify CMD"
            )
        self._check = SwarmCheck(
            fixed,
            self.config.verify_timeout_s,
            self.agent_config.sandbox,
            self.agent_config.allow_network,
            self.agent_config.allow_test_edits,
        )
        return repo, fixed.command

    def _fixed_check(self) -> SwarmCheck:
        if self._check is None:
            raise ConfigurationError("the swarm's check is fixed by prepare(), which run() calls")
        return self._check

    async def run(self, goal: str) -> SwarmResult:
        """Plan, work, gate, merge and check `goal`. Raises `ConfigurationError` before any
        model call when the workspace cannot host a swarm or no check command is known."""
        started = time.monotonic()
        if self.agent_config.max_duration_s is not None:
            self._deadline = started + self.agent_config.max_duration_s
        repo, verify = self.prepare()
        self._verify = verify
        self.engine.goal = goal
        run_id = uuid.uuid4().hex[:8]
        root_id = f"swarm-{run_id}"
        limits = self.agent_config
        self.ledger = BudgetLedger(
            Amount(limits.max_total_tokens, limits.max_budget_usd),
            LedgerPolicy(reserve_share=0.0, min_tokens=1),
        )
        files = (await repo.arun("ls-files")).output.splitlines()
        await self._clean_up_after_dead_swarms(repo)
        await self._load_shared(repo, root_id)
        self._emit(SwarmUpdate(SwarmStage.PLANNING, goal))
        try:
            subtasks = await self._plan(goal, files, repo.root, root_id)
        except PlanError as error:
            await self._store("save", finished=True)
            return self._finish(goal, root_id, [], verify, None, error.message, started)
        outcomes = {
            s.worker_id: WorkerOutcome(s.worker_id, s.title, s.task, s.files, WorkerState.FAILED)
            for s in subtasks
        }
        for subtask in subtasks:
            self._update(subtask, WorkerState.PLANNED, files=subtask.files)
        pool = WorktreePool(repo, run_id)
        self.economics.on_global_doom_loop(self._global_doom_loop)
        heartbeat = asyncio.create_task(self._heartbeat())
        try:
            head = repo.out("rev-parse", "HEAD")
            parallel = asyncio.Semaphore(self.config.workers)
            waiting = list(subtasks)

            async def first_round(subtask: Subtask) -> _Attempt | None:
                async with parallel:
                    waiting.remove(subtask)
                    return await self._until_gate(
                        subtask,
                        head,
                        pool,
                        root_id,
                        verify,
                        outcomes[subtask.worker_id],
                        sharers=len(waiting) + 1,
                    )

            passed = await asyncio.gather(*(first_round(s) for s in subtasks))
            for subtask, attempt in zip(subtasks, passed, strict=True):
                if attempt is not None:
                    await self._merge(
                        subtask, attempt, repo, pool, root_id, verify, outcomes[subtask.worker_id]
                    )
            final = await run_check(self._fixed_check(), repo.root)
            self._emit(SwarmUpdate(SwarmStage.FINAL_VERIFY, final.summary(), passed=final.passed))
        finally:
            heartbeat.cancel()
            await self._store("save", finished=True)
            for tree in pool.worktrees:
                keep = any(o.branch == tree.branch for o in outcomes.values())
                await pool.remove(tree, keep_branch=keep)
            await pool.close()
        workers = [outcomes[s.worker_id] for s in subtasks]
        unmerged = [w.worker_id for w in workers if w.state is not WorkerState.MERGED]
        problem = None
        if unmerged:
            problem = f"not merged: {', '.join(unmerged)}"
        elif not final.passed:
            problem = "the merged result fails the check"
        return self._finish(goal, root_id, workers, verify, final, problem, started)

    def _finish(
        self,
        goal: str,
        root_id: str,
        workers: list[WorkerOutcome],
        verify: str | None,
        final: CheckOutcome | None,
        error: str | None,
        started: float,
    ) -> SwarmResult:
        for agent in self._agents:
            agent.close()  # the planner's and every worker's: their runs are over
        costs = [agent.economics.cost_usd for agent in self._agents]
        result = SwarmResult(
            goal=goal,
            session_id=root_id,
            success=error is None and final is not None and final.passed,
            workers=workers,
            verify_command=verify,
            final_check=final,
            error=error,
            tokens=sum(agent.economics.incremental_tokens for agent in self._agents),
            cost_usd=None if any(c is None for c in costs) else sum(c or 0.0 for c in costs),
            duration_s=time.monotonic() - started,
            global_doom_loops=[loop.describe() for loop in self.economics.global_doom_loops()],
        )
        self._record_outcome(result)
        self._emit(SwarmUpdate(SwarmStage.FINISHED, result.summary(), passed=result.success))
        return result

    def _record_outcome(self, result: SwarmResult) -> None:
        """The swarm's outcome replaces the planning turn's on the root record."""
        store = SessionStore(self.session_root)
        try:
            reason = FinishReason.COMPLETED if result.success else FinishReason.VERIFICATION_FAILED
            if not result.workers:
                reason = FinishReason.INTERNAL_ERROR
            store.record_outcome(
                result.session_id,
                reason.value,
                result.summary(),
                None if result.success else result.error,
            )
        except Exception:  # the root record may not exist (the planning call never ran)
            pass
        finally:
            store.close()

    # -- the shared state's store ------------------------------------------------------------

    async def _clean_up_after_dead_swarms(self, repo: Repo) -> None:
        cleanup = await asyncio.to_thread(clean_leftovers, repo)
        if not cleanup.empty():
            self._emit(SwarmUpdate(SwarmStage.LEFTOVERS, cleanup.describe()))

    async def _heartbeat(self) -> None:
        """Save this swarm's view every `HEARTBEAT_S` while it runs: a reader that counts calls
        only from live swarms (`LIVE_WITHIN_S`) stops counting a dead one within a minute."""
        while True:
            await asyncio.sleep(HEARTBEAT_S)
            await self._store("save")

    async def _load_shared(self, repo: Repo, root_id: str) -> None:
        """Fold what earlier and running swarms of this project saved into the shared state."""
        self._node = root_id
        if self.shared_state is None:
            return
        scope = self.config.shared_state_scope
        if scope is None:
            roots = (await repo.arun("rev-list", "--max-parents=0", "HEAD")).output.split()
            scope = f"repo-{sorted(roots)[0][:16]}" if roots else "repo"
        self._scope = scope
        before = self.shared.failure_count
        if await self._store("load"):
            where = describe_store(self.shared_state)
            loaded = self.shared.failure_count - before
            self._emit(
                SwarmUpdate(
                    SwarmStage.SHARED_STATE,
                    f"{loaded} failure{'s' if loaded != 1 else ''} recorded by earlier "
                    f"swarms of this project loaded from {where}",
                )
            )

    async def _store(self, action: str, *, finished: bool = False) -> bool:
        """Load, sync or save the shared state (in a thread: the store may be remote); whether
        it worked. A failing store is reported once and the swarm goes on without it."""
        store = self.shared_state
        if store is None or self._store_failed or not self._scope:
            return False
        scope, node, context, economics = self._scope, self._node, self.shared, self.economics

        def act() -> None:
            # other swarms' call counts are not read: a global doom loop is this swarm's own
            # workers' repeats, so another swarm's view (or a crafted one) cannot force one here
            if action == "load":
                load_shared_state(store, scope, context, skip_node=node)
            elif action == "sync":
                load_shared_state(store, scope, context, skip_node=node)
                save_shared_state(store, scope, node, context, economics)
            else:
                save_shared_state(store, scope, node, context, economics, finished=finished)

        try:
            await asyncio.to_thread(act)
        except AgentError as error:  # PersistenceError, CorruptRecordError, bad keys
            self._store_failed = True
            self._emit(
                SwarmUpdate(
                    SwarmStage.SHARED_STATE,
                    f"the store failed, the swarm goes on without it: {error.message}",
                    passed=False,
                )
            )
            return False
        return True

    # -- planning ----------------------------------------------------------------------------

    async def _plan(self, goal: str, files: list[str], root: Path, root_id: str) -> list[Subtask]:
        system = planner_system_prompt(files, max_subtasks=self.config.max_subtasks)
        reply = await self._planning_call(goal, system, root, root_id, None)
        try:
            return parse_plan(reply, max_subtasks=self.config.max_subtasks)
        except PlanError as error:
            self._emit(SwarmUpdate(SwarmStage.PLAN_RETRY, error.message))
            retry = f"{goal}\n\n{RETRY_NOTE.format(problem=error.message)}"
        reply = await self._planning_call(retry, system, root, f"{root_id}-plan2", root_id)
        try:
            return parse_plan(reply, max_subtasks=self.config.max_subtasks)
        except PlanError as error:
            raise PlanError(
                f"the plan could not be read, twice: {error.message}. Try a stronger model, or "
                "a goal stated more precisely",
                error.reply,
            ) from None

    async def _planning_call(
        self, task: str, system: str, root: Path, session_id: str, parent_id: str | None
    ) -> str:
        left = self.ledger.available()  # the swarm's cap, less what planning spent already
        config = self.agent_config.model_copy(
            update={
                "mode": ModeName.ASK,
                "system_prompt": system,
                "verify": False,
                "max_iterations": 1,
                "session_dir": self.session_root,
                "max_duration_s": self._run_duration(),
                "max_total_tokens": left.tokens,
                "max_budget_usd": left.usd,
                "hard_token_limit": True,  # the planner spends from the swarm's pool too
            }
        )
        surface = Surface(
            on_event=lambda event: self._emit(WorkerEvent(PLANNER_ID, 1, event)),
            tracing=self.tracing,
        )
        agent = build_agent(
            self.provider, root, config, surface, assume_yes=self.assume_yes, tools=[]
        )
        self._agents.append(agent)
        result = await agent.run(task, session_id=session_id, parent_session_id=parent_id)
        self.ledger.charge(Amount(agent.economics.total_tokens, agent.economics.cost_usd or 0.0))
        if not result.success and not result.final_text.strip():
            raise PlanError(
                f"the planning turn ended {result.finish_reason.value}: "
                f"{result.error or 'no plan was written'}"
            )
        return result.final_text

    # -- workers -----------------------------------------------------------------------------

    def _global_doom_loop(self, loop: GlobalDoomLoop) -> None:
        self._emit(SwarmUpdate(SwarmStage.GLOBAL_DOOM_LOOP, loop.describe()))

    def _time_left(self) -> float | None:
        """Seconds left of the swarm's time limit (None: no limit)."""
        if self._deadline is None:
            return None
        return self._deadline - time.monotonic()

    def _blocked(self, subtask: Subtask) -> str | None:
        """Why no further attempt of `subtask` may start, or None."""
        if self._cancelled:
            return "the swarm was cancelled"
        left = self._time_left()
        if left is not None and left <= 0 and self.agent_config.budget_mode is BudgetMode.STRICT:
            return (
                f"not started: the swarm's time limit ({self.agent_config.max_duration_s:g}s, "
                "--max-duration) ran out"
            )
        loops = self.economics.global_doom_loops()
        if loops:
            return f"not started: a global doom loop stops new work ({loops[0].describe()})"
        return None

    async def _until_gate(
        self,
        subtask: Subtask,
        base: str,
        pool: WorktreePool,
        root_id: str,
        verify: str,
        outcome: WorkerOutcome,
        *,
        sharers: int,
        note: str = "",
        first_attempt: int = 1,
    ) -> _Attempt | None:
        """Attempts of `subtask` from `base` until one passes the gate (returned) or the
        retries run out (None; `outcome` says why)."""
        last = first_attempt + self.config.gate_retries
        for number in range(first_attempt, last + 1):
            blocked = self._blocked(subtask)
            if blocked is not None:
                outcome.state = WorkerState.SKIPPED if outcome.attempts == 0 else WorkerState.FAILED
                outcome.error = blocked
                self._update(subtask, outcome.state, number, detail=blocked)
                return None
            attempt = await self._attempt(
                subtask, number, base, pool, root_id, outcome, sharers, note
            )
            sharers = 1
            if attempt.error is not None:  # the worker itself did not finish: not retried
                self.shared.record_failure(attempt.shared_id, subtask.task, attempt.error)
                await self._store("save")
                self._failed(subtask, attempt, outcome, attempt.error)
                return None
            gate = await run_check(self._fixed_check(), attempt.tree.path)
            if gate.passed:
                await self._store("save")  # the calls and failures of its run
                self._update(subtask, WorkerState.GATE_PASSED, number, detail=gate.summary())
                return attempt
            self.shared.record_failure(
                attempt.shared_id,
                subtask.task,
                f"the check `{verify}` failed after this change ({gate.summary()}):\n"
                f"{gate.output[-1500:]}",
            )
            await self._store("save")
            self._update(subtask, WorkerState.GATE_FAILED, number, detail=gate.summary())
            if number == last:
                self._failed(subtask, attempt, outcome, f"failed the check: {gate.summary()}")
                return None
            await pool.remove(attempt.tree, keep_branch=False)
        return None

    def _failed(
        self, subtask: Subtask, attempt: _Attempt, outcome: WorkerOutcome, why: str
    ) -> None:
        outcome.state = WorkerState.FAILED
        outcome.error = why
        outcome.branch = attempt.tree.branch
        self._update(
            subtask,
            WorkerState.FAILED,
            attempt.number,
            detail=f"{why}; its work is kept on branch {attempt.tree.branch}",
            branch=attempt.tree.branch,
        )

    async def _attempt(
        self,
        subtask: Subtask,
        number: int,
        base: str,
        pool: WorktreePool,
        root_id: str,
        outcome: WorkerOutcome,
        sharers: int,
        note: str,
    ) -> _Attempt:
        name = subtask.worker_id if number == 1 else f"{subtask.worker_id}-{number}"
        tree = await pool.create(name, base)
        attempt = _Attempt(subtask, number, name, tree)
        attempt.shared_id = f"{root_id}/{name}"
        attempt.session_id = f"{root_id}-{name}"
        outcome.attempts = number
        outcome.session_ids.append(attempt.session_id)
        self._update(
            subtask,
            WorkerState.STARTED,
            number,
            branch=tree.branch,
            session_id=attempt.session_id,
        )
        try:
            reservation = self.ledger.reserve(attempt.session_id, sharers=sharers)
        except AllocationRefused as refused:
            attempt.error = f"no budget left for this worker: {refused.message}"
            return attempt
        await self._store("sync")  # what other swarms learned meanwhile, into this prompt
        agent = self._worker_agent(attempt, reservation)
        attach_worker(agent, attempt.shared_id, self.economics, self.shared, task=subtask.worker_id)
        try:
            task = subtask.task if not note else f"{subtask.task}\n\n{note}"
            result = await agent.run(task, session_id=attempt.session_id, parent_session_id=root_id)
        finally:
            # every billed token: the worker's allocation is a hard limit on them
            spent = Amount(agent.economics.total_tokens, agent.economics.cost_usd or 0.0)
            self.ledger.settle(reservation, spent)
        attempt.result = result
        if not result.success:
            attempt.error = _why_stopped(result)
        taken = await pool.commit(tree, f"swarm {subtask.worker_id}: {subtask.title}")
        if taken.refused is not None and attempt.error is None:
            attempt.error = taken.refused
        elif taken.switched_from is not None:
            self._update(
                subtask,
                WorkerState.STARTED,
                number,
                detail=f"the worker moved to {taken.switched_from}; its commits there are "
                f"taken onto {tree.branch}",
                branch=tree.branch,
            )
        outcome.changed_files = await pool.changed_files(tree)
        return attempt

    def _run_duration(self) -> float | None:
        """The time limit of a run starting now: what is left of the swarm's."""
        left = self._time_left()
        return None if left is None else max(left, 0.001)

    def _worker_agent(self, attempt: _Attempt, reservation: Reservation) -> Agent:
        subtask, number = attempt.subtask, attempt.number
        prompt = self.engine.build_worker_system_prompt(
            WorkerTask(
                description=subtask.task,
                worker_id=attempt.name,
                shared_id=attempt.shared_id,
                task_id=subtask.worker_id,
                files=subtask.files,
                verify=self._verify,
                attempt=number,
            )
        )
        granted = reservation.granted
        config = self.agent_config.model_copy(
            update={
                "mode": ModeName.REACT
                if self.agent_config.mode is ModeName.ASK
                else self.agent_config.mode,
                "system_prompt": prompt,
                "system_prompt_shared_chars": len(self.engine.shared_prefix()),
                "verify": False,  # the quality gate is the check
                # a worktree is gone after the run: snapshots for undo there would only fill
                # the cache (the merge commits are what a user takes back)
                "journal_commands": False,
                **worker_limits(self.agent_config, self.config.worker_budget, granted.tokens),
                "max_budget_usd": granted.usd,
                "session_dir": self.session_root,
                "max_duration_s": self._run_duration(),
            }
        )
        surface = Surface(
            on_event=lambda event: self._emit(WorkerEvent(subtask.worker_id, number, event)),
            permission_approver=self.permission_approver,
            tracing=self.tracing,
        )
        with judged_by(self._approvals):
            agent = build_agent(
                self.provider, attempt.tree.path, config, surface, assume_yes=self.assume_yes
            )
        self._agents.append(agent)
        if self._cancelled:
            agent.cancel()
        return agent

    # -- merging -----------------------------------------------------------------------------

    async def _merge(
        self,
        subtask: Subtask,
        attempt: _Attempt,
        repo: Repo,
        pool: WorktreePool,
        root_id: str,
        verify: str,
        outcome: WorkerOutcome,
    ) -> None:
        retries = self.config.conflict_retries
        while True:
            merged = await merge_branch(
                repo, attempt.tree.branch, f"swarm: merge {subtask.worker_id} ({subtask.title})"
            )
            if merged.merged:
                outcome.state = WorkerState.MERGED
                outcome.branch = None
                outcome.error = None
                outcome.ignored = await asyncio.to_thread(
                    carry_ignored, attempt.tree.path, repo.root
                )
                self._update(
                    subtask,
                    WorkerState.MERGED,
                    attempt.number,
                    branch=attempt.tree.branch,
                    detail=outcome.ignored.describe(),
                )
                return
            conflict = (
                f"conflict in {', '.join(merged.conflicts)}"
                if merged.conflicts
                else f"merge failed: {merged.detail}"
            )
            self._update(
                subtask,
                WorkerState.CONFLICT,
                attempt.number,
                files=tuple(merged.conflicts),
                detail=conflict,
                branch=attempt.tree.branch,
            )
            self.shared.record_failure(
                attempt.shared_id,
                subtask.task,
                f"its branch could not be merged with the work merged before it: {conflict}",
            )
            await self._store("save")
            if retries <= 0:
                self._failed(subtask, attempt, outcome, conflict)
                return
            retries -= 1
            await pool.remove(attempt.tree, keep_branch=False)
            note = (
                "An earlier attempt at this subtask conflicted with work other engineers merged "
                f"first ({conflict}). You start from the code with their work in it: make "
                "your change fit it, and keep their changes."
            )
            head = await asyncio.to_thread(repo.out, "rev-parse", "HEAD")
            retried = await self._until_gate(
                subtask,
                head,
                pool,
                root_id,
                verify,
                outcome,
                sharers=1,
                note=note,
                first_attempt=attempt.number + 1,
            )
            if retried is None:
                return
            attempt = retried


def _why_stopped(result: RunResult) -> str:
    return f"the worker stopped ({result.finish_reason.value}): {result.error or 'no reason given'}"


__all__ = ["Swarm", "SwarmConfig", "SwarmResult", "WorkerOutcome"]
