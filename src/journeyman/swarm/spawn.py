"""The `spawn_agent` tool: a child agent with its own task, tools, mode and limits, whose budget
comes from its parent's pool, and whose session is a sidechain of its parent's.

`enable_subagents(agent, config)` registers the tool on an `Agent`. A child is built by
`make_child` (default: an `Agent` like its parent, with read-only tools unless the call opts in
to writing) and gets the tool itself while it is above the depth cap.

Budget: the root opens a `BudgetLedger` over its own token and USD limits. Before a child
starts, the parent's own spending so far is charged to the ledger and the child's allocation
is reserved (fair share of what remains, at most `max_child_share` of it, never the parent's
reserve); the child runs with that allocation as its limits, and a child that spawns children
of its own opens a ledger over it. When the child ends, what it and its descendants spent is
settled (the rest returns to the pool) and taken off the parent's own limits, so the root's
limit caps the spending of the whole tree.

A child's session id is derived from its parent's session, the turn and the call, so a parent
resumed after a crash finds the children of an interrupted turn again: one that finished is
not re-run (its stored report is returned), one that was cut off mid-run is resumed.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import Field

from journeyman.core.messages import ToolResult, Usage
from journeyman.core.result import FinishReason, RunResult
from journeyman.core.text import clip_noted
from journeyman.economics.ledger import (
    AllocationRefused,
    Amount,
    BudgetLedger,
    LedgerPolicy,
    Reservation,
)
from journeyman.loop.agent import Agent
from journeyman.loop.config import AgentConfig, ModeName
from journeyman.loop.launch import Surface, build_agent
from journeyman.loop.port import pending_diff
from journeyman.policy.hooks import HookEvent, HookPayload
from journeyman.session.store import SessionNotFoundError, SessionStore
from journeyman.swarm.config import SubagentConfig
from journeyman.tools.base import ToolArgs, ToolKind, fail, ok
from journeyman.tools.context import ToolContext
from journeyman.tools.registry import ToolRegistry

log = logging.getLogger(__name__)

TOOL_NAME = "spawn_agent"
READ_ONLY_KINDS = (ToolKind.READ, ToolKind.FINISH)
"""What a child that does not opt in to writing may use."""
CHILD_TIMEOUT_GRACE_S = 30.0
"""Seconds past a child's duration limit before its call is stopped outright (a child ends
itself at its limit; this only catches one that does not)."""
MAX_DIFF_CHARS = 20_000
"""Longest diff of a writer child returned to its parent; the rest is cut."""


class SpawnAgentArgs(ToolArgs):
    task: str = Field(min_length=1)
    """What the subagent must do and report back; it sees nothing of your conversation, so say
    everything it needs."""
    write: bool = False
    """Let the subagent edit files and run commands (default: read and search only). Writing
    subagents run one at a time and their diff comes back with their report."""
    mode: ModeName = ModeName.REACT
    """How the subagent works: react, plan-solve, phased, or ask (answer a question)."""
    max_iterations: int | None = Field(default=None, ge=1)
    """Turns the subagent may take (default: the configured child limit)."""
    max_total_tokens: int | None = Field(default=None, ge=1)
    """Most tokens to give the subagent; the pool may give it less."""
    max_budget_usd: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    """Most US dollars to give the subagent; the pool may give it less."""


@dataclass(frozen=True)
class ChildSpec:
    """Everything needed to build one child agent."""

    parent: Agent
    task: str
    config: AgentConfig
    """The child's settings: its mode and the limits its allocation allows."""
    tools: ToolRegistry
    """The parent's tools the child may use (the spawn tool is added separately)."""
    write: bool
    depth: int
    """1 for a child of the root."""


ChildFactory = Callable[[ChildSpec], Agent]


def default_child(spec: ChildSpec) -> Agent:
    """A child like its parent: same provider, workspace, hooks and permission approver.

    Not shared: the parent's event handler (a child's events are stored in its own session;
    the parent's output shows the spawn call and its report) and the budget-extension
    approver (a child that could extend its own limits would spend past its allocation)."""
    parent = spec.parent
    child = build_agent(
        parent.provider,
        parent.workspace,
        spec.config,
        Surface(permission_approver=parent.permission_approver),
        tools=[t for name in spec.tools.names if (t := spec.tools.get(name)) is not None],
        assume_yes=parent.assume_yes,
        rules=parent.rules,
    )
    child.hooks = parent.hooks
    return child


@dataclass
class SubagentRuntime:
    """The subagent bookkeeping of one agent: its pool, its depth and what its descendants
    spent."""

    agent: Agent
    config: SubagentConfig
    depth: int
    make_child: ChildFactory
    descendants_spent: Amount = field(default_factory=lambda: Amount(0, 0.0))
    _charged: Amount = field(default_factory=lambda: Amount(0, 0.0))
    _per_turn: Counter[tuple[str, int]] = field(default_factory=Counter)
    _arriving: Counter[tuple[str, int]] = field(default_factory=Counter)
    _same_task: Counter[tuple[str, int, str]] = field(default_factory=Counter)
    _parallel: asyncio.Semaphore | None = None
    _ledger: BudgetLedger | None = None
    _writer: asyncio.Lock | None = None

    def charge_own_spending(self) -> None:
        """Charge the agent's own spending since the last charge to its ledger."""
        economics = self.agent.economics
        tokens = economics.total_tokens  # every billed token: the tree's cap is a hard one
        usd = economics.cost_usd or 0.0
        delta = Amount(
            max(0, tokens - (self._charged.tokens or 0)),
            max(0.0, usd - (self._charged.usd or 0.0)),
        )
        self._charged = Amount(
            max(tokens, self._charged.tokens or 0), max(usd, self._charged.usd or 0.0)
        )
        self.ledger.charge(delta)

    def record_child_spending(self, spent: Amount) -> None:
        """A child's (and its descendants') spending: it counts for this agent's ancestors and
        comes off this agent's own limits, so the tree never spends more than the root's cap."""
        self.descendants_spent = Amount(
            (self.descendants_spent.tokens or 0) + (spent.tokens or 0),
            (self.descendants_spent.usd or 0.0) + (spent.usd or 0.0),
        )
        economics = self.agent.economics
        limits = economics.limits
        economics.limits = replace(
            limits,
            max_total_tokens=None
            if limits.max_total_tokens is None
            else max(1, limits.max_total_tokens - (spent.tokens or 0)),
            max_usd=None
            if limits.max_usd is None
            else max(0.0, limits.max_usd - (spent.usd or 0.0)),
        )

    @property
    def ledger(self) -> BudgetLedger:
        """The pool over the agent's limits as they stand at its first spawn (a resumed
        session's limits are restored by then, already reduced by earlier children)."""
        if self._ledger is None:
            limits = self.agent.economics.limits
            self._ledger = BudgetLedger(
                Amount(limits.max_total_tokens, limits.max_usd),
                LedgerPolicy(
                    reserve_share=self.config.reserve_share,
                    max_share=self.config.max_child_share,
                    min_tokens=self.config.min_child_tokens,
                    min_usd=self.config.min_child_usd,
                ),
            )
        return self._ledger

    @property
    def parallel(self) -> asyncio.Semaphore:
        if self._parallel is None:
            self._parallel = asyncio.Semaphore(self.config.max_parallel)
        return self._parallel

    @property
    def writer(self) -> asyncio.Lock:
        if self._writer is None:
            self._writer = asyncio.Lock()
        return self._writer


def enable_subagents(
    agent: Agent,
    config: SubagentConfig | None = None,
    *,
    make_child: ChildFactory = default_child,
    depth: int = 0,
) -> SpawnAgentTool | None:
    """Register the spawn tool on `agent` (the root when `depth` is 0); returns it, or None
    when `agent` is at the depth cap and may not spawn. `config` defaults to the agent's own
    (``[subagents]`` of its config files)."""
    config = config or agent.config.subagents
    if depth >= config.max_depth:
        return None
    runtime = SubagentRuntime(agent, config, depth, make_child)
    spawn = SpawnAgentTool(runtime)
    agent.registry.register(spawn)
    agent.attach_subagents(runtime)
    if depth == 0:
        # the root's limits cap the whole tree: its own calls are priced against them too
        agent.enforce_hard_token_limit()
        # remembered with the session, so a resume can enable them again
        agent.remember_setting("subagents", config.model_dump(mode="json"))
    return spawn


def with_subagents(agent: Agent, enabled: bool, config: SubagentConfig | None = None) -> Agent:
    """`agent`, with subagents enabled when `enabled` (for call sites that take a flag)."""
    if enabled:
        enable_subagents(agent, config)
    return agent


def restore_subagents(agent: Agent, settings: Mapping[str, Any]) -> Agent:
    """Enable subagents on `agent` when the stored session `settings` say its run had them
    (for resume and fork); returns `agent`."""
    stored = settings.get("subagents")
    if isinstance(stored, dict):
        enable_subagents(agent, SubagentConfig.model_validate(stored))
    return agent


class SpawnAgentTool:
    """Starts a subagent on a task and returns its report."""

    name = TOOL_NAME
    description = (
        "Hand a self-contained task to a subagent and get its final report back. Several calls "
        "in one turn run concurrently, so split independent work (e.g. 'find every caller of "
        "X', 'summarise module Y'). Subagents read and search only unless write=true. Their "
        "budget comes out of yours."
    )
    args_model = SpawnAgentArgs
    read_only = False
    parallel_safe = True
    kind = ToolKind.OTHER
    permission_arg = "task"

    def __init__(self, runtime: SubagentRuntime) -> None:
        self.runtime = runtime
        self.timeout_s = runtime.config.child_timeout_s + CHILD_TIMEOUT_GRACE_S
        """The child's run is this call, so the usual tool timeout would cut it short; the
        child's own duration limit ends it first, with a report."""

    async def execute(self, args: SpawnAgentArgs, ctx: ToolContext) -> ToolResult:
        runtime = self.runtime
        turn = (ctx.run_session_id, ctx.iteration)
        runtime._per_turn[turn] += 1
        if runtime._per_turn[turn] > runtime.config.max_children_per_turn:
            return fail(
                TOOL_NAME,
                f"{TOOL_NAME}: not started — one turn may start at most "
                f"{runtime.config.max_children_per_turn} subagents; wait for these reports, "
                "then spawn the rest in a later turn",
                error="children_per_turn",
            )
        child_id = self._child_id(ctx, args)
        store = SessionStore(runtime.agent.session_root)
        try:
            stored = _stored_outcome(store, child_id)
            if stored is not None:  # finished before the parent was interrupted: not re-run
                return _report(stored, store, runtime.agent, args.write, reused=True)
            runtime._arriving[turn] += 1
            await asyncio.sleep(0)  # let this turn's other spawn calls arrive: they share
            try:
                sharers = runtime._arriving[turn]
                runtime.charge_own_spending()
                floor = runtime.agent.opening_call_floor(args.task, self._child_tools(args))
                reservation = runtime.ledger.reserve(
                    child_id,
                    sharers=sharers,
                    request=Amount(args.max_total_tokens, args.max_budget_usd),
                    floor=Amount(floor.tokens, floor.usd),
                )
            except AllocationRefused as refused:
                why = refused.message
                if refused.below_floor:
                    why = (
                        f"the pool cannot fund another child: {refused.details['short']}, a "
                        f"call needs about {refused.details['needed']}; finish with what you "
                        "have, or do the work yourself"
                    )
                return fail(
                    TOOL_NAME, f"{TOOL_NAME}: not started — {why}", error="allocation_refused"
                )
            finally:
                runtime._arriving[turn] -= 1
            return await self._run_child(args, ctx, child_id, reservation, store)
        finally:
            store.close()

    async def _run_child(
        self,
        args: SpawnAgentArgs,
        ctx: ToolContext,
        child_id: str,
        reservation: Reservation,
        store: SessionStore,
    ) -> ToolResult:
        runtime = self.runtime
        parent = runtime.agent
        granted = reservation.granted
        payload = HookPayload(
            session_id=child_id,
            cwd=str(parent.workspace),
            prompt=args.task,
            parent_session_id=ctx.run_session_id,
            extra={
                "depth": runtime.depth + 1,
                "write": args.write,
                "mode": args.mode.value,
                "allocated_tokens": granted.tokens,
                "allocated_usd": granted.usd,
            },
        )
        child: Agent | None = None
        try:
            start = await parent.hooks.run(HookEvent.SUBAGENT_START, payload)
            if start.denied:
                return fail(
                    TOOL_NAME,
                    f"{TOOL_NAME}: not started — a SubagentStart hook refused it: "
                    f"{'; '.join(start.reasons)}",
                    error="hook",
                )
            child = self._build_child(args, granted)
            child.parent_call_id = ctx.call_id or None
            parent_id = ctx.run_session_id
            async with runtime.parallel:
                if args.write:
                    async with runtime.writer:
                        result = await self._drive(child, args.task, child_id, parent_id, store)
                else:
                    result = await self._drive(child, args.task, child_id, parent_id, store)
            spent = _tree_spending(child)  # settled in `finally` too, when cut off
            await parent.hooks.run(
                HookEvent.SUBAGENT_STOP,
                replace(
                    payload,
                    message=result.final_text,
                    is_error=not result.success,
                    extra={
                        **payload.extra,
                        "finish_reason": result.finish_reason.value,
                        "spent_tokens": spent.tokens,
                        "spent_usd": spent.usd,
                    },
                ),
            )
            return _report(result, store, parent, args.write, reused=False)
        finally:
            spent = Amount(0, 0.0) if child is None else _tree_spending(child)
            if child is not None:
                child.close()  # its run is over; a later spawn builds a new child
            runtime.ledger.settle(reservation, spent)
            runtime.record_child_spending(spent)

    async def _drive(
        self, child: Agent, task: str, child_id: str, parent_id: str, store: SessionStore
    ) -> RunResult:
        if _exists(store, child_id):  # cut off mid-run when the parent died: pick it up
            return await child.resume(child_id)
        return await child.run(task, session_id=child_id, parent_session_id=parent_id or None)

    def _build_child(self, args: SpawnAgentArgs, granted: Amount) -> Agent:
        runtime = self.runtime
        parent = runtime.agent
        limits = parent.economics.limits
        config = parent.config.model_copy(
            update={
                "mode": args.mode,
                "max_iterations": args.max_iterations or runtime.config.child_max_iterations,
                "max_total_tokens": granted.tokens
                if granted.tokens is not None
                else limits.max_total_tokens,
                "max_budget_usd": granted.usd if granted.usd is not None else limits.max_usd,
                "hard_token_limit": True,  # an allocation from the pool: never passed
                # a child that may not write changes nothing a check could judge; the parent's
                # own check judges the whole tree at its end
                "verify": parent.config.verify and args.write,
                "session_dir": parent.session_root,
                "max_duration_s": min(
                    runtime.config.child_timeout_s,
                    parent.config.max_duration_s or runtime.config.child_timeout_s,
                ),
            }
        )
        tools = self._parent_tools(args)
        depth = runtime.depth + 1
        child = runtime.make_child(ChildSpec(parent, args.task, config, tools, args.write, depth))
        enable_subagents(child, runtime.config, make_child=runtime.make_child, depth=depth)
        return child

    def _parent_tools(self, args: SpawnAgentArgs) -> ToolRegistry:
        """The parent's tools the child may use (the spawn tool is the child's own)."""
        registry = self.runtime.agent.registry
        tools = registry if args.write else registry.restricted_to(READ_ONLY_KINDS)
        return ToolRegistry(
            t for name in tools.names if name != TOOL_NAME and (t := tools.get(name)) is not None
        )

    def _child_tools(self, args: SpawnAgentArgs) -> ToolRegistry:
        """The tools the child will be offered: the parent's it may use, and the spawn tool
        while it is above the depth cap (a question is offered only reading ones)."""
        tools = self._parent_tools(args)
        if self.runtime.depth + 1 < self.runtime.config.max_depth:
            tools = ToolRegistry([*(t for n in tools.names if (t := tools.get(n))), self])
        if args.mode is ModeName.ASK:
            tools = tools.restricted_to(READ_ONLY_KINDS)
        return tools

    def _child_id(self, ctx: ToolContext, args: SpawnAgentArgs) -> str:
        """Stable across a resume: the parent, its turn, and the call (task and options, and
        which occurrence of that same call in the turn)."""
        call = f"{args.task}\x00{args.write}\x00{args.mode.value}"
        key = (ctx.run_session_id, ctx.iteration, call)
        self.runtime._same_task[key] += 1
        digest = hashlib.sha256(
            f"{ctx.run_session_id}\x00{ctx.iteration}\x00{call}\x00{self.runtime._same_task[key]}".encode()
        ).hexdigest()[:8]
        return f"{ctx.run_session_id}-sub{ctx.iteration}-{digest}"


def _tree_spending(child: Agent) -> Amount:
    """What `child` and its own subagents spent: every token billed, as its hard limit counts
    them."""
    own = Amount(child.economics.total_tokens, child.economics.cost_usd or 0.0)
    runtime: SubagentRuntime | None = getattr(child, "subagents", None)
    if runtime is None:
        return own
    below = runtime.descendants_spent
    return Amount((own.tokens or 0) + (below.tokens or 0), (own.usd or 0.0) + (below.usd or 0.0))


def _exists(store: SessionStore, session_id: str) -> bool:
    try:
        store.load_session(session_id)
    except SessionNotFoundError:
        return False
    return True


def _stored_outcome(store: SessionStore, session_id: str) -> RunResult | None:
    """The stored result of a child that already finished, or None."""
    if not _exists(store, session_id):
        return None
    summary = store.summary(session_id)
    if summary.finish_reason is None:
        return None
    return RunResult(
        final_text=summary.final_text,
        finish_reason=FinishReason(summary.finish_reason),
        iterations=summary.steps,
        tool_calls_made=0,
        usage=Usage(),
        cost_usd=None,
        duration_s=0.0,
        session_id=session_id,
        parent_session_id=summary.record.parent_id,
        error=summary.error,
    )


def _report(
    result: RunResult, store: SessionStore, parent: Agent, write: bool, *, reused: bool
) -> ToolResult:
    """The child's final report as the parent's tool result (a writer's diff appended)."""
    status = "finished" if result.success else f"ended: {result.finish_reason.value}"
    head = f"subagent {result.session_id} {status}"
    if reused:
        head += " (before an interruption; its stored report)"
    elif result.cost_usd is not None:
        tokens = result.usage.total_tokens
        head += f" after {result.iterations} turns, {tokens:,} tokens, ${result.cost_usd:.4f}"
    body = result.final_text.strip() or "(no report)"
    if result.error:
        body += f"\n\nWhy it stopped: {result.error}"
    text = f"{head}\n\n{body}"
    if write:
        diff = pending_diff(store, result.session_id, parent.workspace)
        diff = clip_noted(diff, MAX_DIFF_CHARS, "{cut:,} of its {total:,} characters not shown")
        text += f"\n\nIts changes:\n{diff}" if diff.strip() else "\n\nIt changed no files."
    metadata = {
        "child_session_id": result.session_id,
        "finish_reason": result.finish_reason.value,
        "cost_usd": result.cost_usd,
        "tokens": result.usage.total_tokens,
    }
    if result.success:
        return ok(TOOL_NAME, text, **metadata)
    return fail(TOOL_NAME, text, error="subagent_failed", **metadata)


__all__ = [
    "ChildFactory",
    "ChildSpec",
    "SpawnAgentArgs",
    "SpawnAgentTool",
    "SubagentRuntime",
    "default_child",
    "enable_subagents",
    "restore_subagents",
    "with_subagents",
]
