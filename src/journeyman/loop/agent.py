"""`Agent`: the library entry point that wires provider, tools, config and kernel together."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shlex
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from journeyman.context.rules import RulesLoader, render_rules_section
from journeyman.context.skills import SkillsLoader, render_skills_section
from journeyman.core.errors import AgentClosedError, ConfigurationError
from journeyman.core.events import Event, EventHandler
from journeyman.core.lifecycle import AgentState, LifecycleMachine
from journeyman.core.messages import Message
from journeyman.core.result import RunResult
from journeyman.economics.approval import ExtensionApprover, deny_extensions
from journeyman.economics.budget import BudgetLimits, ExecutionEconomics
from journeyman.loop import prompts
from journeyman.loop.call_budget import (
    CallFloor,
    PromptBound,
    opening_call_floor,
)
from journeyman.loop.checkpoint import load_checkpoint
from journeyman.loop.config import AgentConfig, ModeName
from journeyman.loop.kernel import Kernel
from journeyman.loop.modes import Mode
from journeyman.loop.modes.react import ReactMode
from journeyman.loop.recorder import follow_up_messages, store_follow_up
from journeyman.loop.run_options import RunOptions
from journeyman.loop.state import LoopState
from journeyman.policy.hooks import HookEvent, HookPayload, HookRunner
from journeyman.policy.permissions import (
    ApprovalAnswer,
    ApprovalRequest,
    Approver,
    PermissionGate,
    PermissionMode,
    PermissionPolicy,
    PermissionsConfig,
)
from journeyman.providers.base import Provider
from journeyman.providers.factory import create_provider
from journeyman.providers.pricing import model_pricer
from journeyman.providers.rate_limit import RateLimits, process_limiter
from journeyman.providers.resilient import ResilientProvider, RetryPolicy
from journeyman.session.store import SessionStore, default_session_root, new_session_id
from journeyman.session.workspace_lock import WorkspaceLock
from journeyman.tools.base import Tool, ToolKind
from journeyman.tools.builtin import default_tools, minimal_tools
from journeyman.tools.choices import minimal_tool_set
from journeyman.tools.notes import NoteTool
from journeyman.tools.registry import ToolRegistry
from journeyman.tools.sandbox import Sandbox, open_sandbox
from journeyman.tools.skill import SkillTool

if TYPE_CHECKING:  # the MCP SDK loads only when a run starts MCP servers
    from journeyman.integrations.lsp import LspManager
    from journeyman.integrations.mcp import McpManager, McpServerConfig, McpServerStatus

log = logging.getLogger(__name__)

OWN_SETTINGS = frozenset({"provider", "model", "config", "assume_yes"})
"""The settings the agent writes itself (with the run options'): `remember_setting` refuses them."""

ASK_TOOL_KINDS = (ToolKind.READ, ToolKind.FINISH)
"""The only tools a question (`--mode ask`) is given: nothing it runs can change anything."""


class Agent:
    """Runs tasks in one workspace with one provider (plus optional fallbacks).

    >>> agent = Agent("anthropic:claude-sonnet-4-5", workspace="path/to/repo")
    >>> result = agent.run_sync("make the failing test pass")

    `provider` is a provider object, a list of them (the first, then fallbacks), or a
    "provider:model" spec (`create_provider`; `base_url` and `api_key` go with a spec).

    `lsp` gives the model the `lsp_*` tools and diagnostics after each edit: True uses the
    language servers of the user's lsp.toml and the workspace's .journeyman/lsp.toml (servers
    that are not installed are skipped), or pass your own `LspManager`. `mcp` lends the model
    the tools of MCP servers: a `{name: McpServerConfig}` mapping or an `McpManager`. Servers
    run while the agent is `connected()`; `run` and `resume` connect for their own duration
    when you have not (wrap several runs in `async with agent.connected():` to keep them up).
    Leaving `connected()` shuts down a manager you passed, too: give True or a mapping to run
    the servers again in a later connection.
    """

    def __init__(
        self,
        provider: Provider | Sequence[Provider] | str,
        *,
        workspace: str | Path = ".",
        base_url: str | None = None,
        api_key: str | None = None,
        tools: Iterable[Tool] | None = None,
        config: AgentConfig | None = None,
        on_event: EventHandler | None = None,
        retry_policy: RetryPolicy | None = None,
        approver: ExtensionApprover = deny_extensions,
        options: RunOptions | None = None,
        permission_approver: Approver | None = None,
        assume_yes: bool = False,
        rules: RulesLoader | None = None,
        skills: SkillsLoader | None = None,
        lsp: LspManager | bool | None = None,
        mcp: Mapping[str, McpServerConfig] | McpManager | None = None,
    ) -> None:
        self.config = config or AgentConfig()
        self.options = options or RunOptions()
        """How the run is started besides `config`, kept with the session for `resume`."""
        if not isinstance(provider, str) and (base_url is not None or api_key is not None):
            raise ConfigurationError("base_url and api_key go with a provider spec string")
        if base_url is not None:
            self.options = self.options.model_copy(update={"base_url": base_url})
        self.provider = self._resilient(provider, api_key, retry_policy)
        self.workspace = Path(workspace).resolve()
        if not self.workspace.is_dir():
            raise NotADirectoryError(f"workspace {self.workspace} is not a directory")
        self.session_root = self.config.session_dir or default_session_root()
        self.sandbox = sandbox_for(self.config, self.workspace)
        """Where run_command runs (custom `tools` bring their own: RunCommandTool(sandbox=))."""
        self.skills = skills or SkillsLoader(self.workspace, _user_skills_folder())
        """Skills named in the system prompt and read with the skill tool (built-in tools only)."""
        self.minimal_tools = minimal_tool_set(
            self.config.tool_set, self.provider.name, self.provider.model
        )
        """Offer only the minimal tool set (`config.tool_set`, resolved for the model): no
        search, language-server, MCP or skill tools."""
        self.registry = self._tool_registry(tools)
        self.on_event = on_event
        """The handler given at construction; `add_listener` adds others beside it."""
        self._listeners: list[EventHandler] = []
        self.approver = approver
        self.economics = economics_for(self.config)
        """Budget accounting shared by every run of this agent (one session's worth)."""
        self._prompt_bounds: dict[str, PromptBound] = {}
        """What each model has billed for the prompts it was sent, kept across this agent's
        runs so a follow-up's first call is bounded by that, not by the whole history's size."""
        self.settings = self._settings_to_remember(assume_yes)
        """What a session remembers for `resume` (never API keys)."""
        self.permission_approver = permission_approver
        """Asks the user about calls that need approval; None refuses them (unless yes)."""
        self.assume_yes = assume_yes
        """Approve every call that would need asking (deny rules and plan mode still hold)."""
        self.hooks = HookRunner.from_config(self.config.hooks, cwd=self.workspace)
        """Add Python hooks with `agent.hooks.add(HookEvent.PRE_TOOL_USE, callback)`."""
        self.rules = rules or RulesLoader(self.workspace)
        """Instruction files put into the system prompt of new sessions."""
        self.parent_call_id: str | None = None
        """For a subagent: the id of the parent's spawn_agent call its runs answer."""
        self.lifecycle = LifecycleMachine()
        """The agent's state (idle, initializing, running, paused, completing, error, disposed);
        observe it with `agent.lifecycle.on_transition(listener)`."""
        self.lsp = lsp
        """Language servers (True: the configured ones), started while connected."""
        self.mcp = mcp
        """MCP servers whose tools the model gets, started while connected."""
        self.session_id: str | None = None
        """The session this agent last ran, continued or loaded: the one whose stored settings
        a mode or model switch updates."""
        self.subagents: Any = None
        """The subagent runtime, once `swarm.spawn.enable_subagents` let this agent spawn."""
        self._connected_registry: ToolRegistry | None = None
        self._cancel = asyncio.Event()
        self._compaction_requested = False
        self._granted_between_runs: list[tuple[int, float]] = []
        """Extensions granted with `extend_budget` that no stored step holds yet."""

    def _resilient(
        self,
        provider: Provider | Sequence[Provider] | str,
        api_key: str | None,
        retry_policy: RetryPolicy | None,
    ) -> ResilientProvider:
        """`provider` (a spec string is built here) behind retries and fallbacks."""
        if isinstance(provider, str):
            provider = create_provider(
                provider,
                base_url=self.options.base_url,
                api_key=api_key,
                tool_format=self.options.tool_format,
            )
        if isinstance(provider, ResilientProvider):
            return provider
        chain = [provider] if isinstance(provider, Provider) else list(provider)
        return ResilientProvider(chain, retry_policy or self._retry_policy())

    def _retry_policy(self) -> RetryPolicy:
        """The default retries; with calls through this process's shared rate limiter when
        the config sets requests or tokens per minute."""
        config = self.config
        limiter = None
        if config.requests_per_minute is not None or config.tokens_per_minute is not None:
            limits = RateLimits(config.requests_per_minute, config.tokens_per_minute)
            limiter = process_limiter(limits)
        return RetryPolicy(call_timeout_s=config.model_call_timeout_s, rate_limiter=limiter)

    def _settings_to_remember(self, assume_yes: bool) -> dict[str, Any]:
        return {
            "provider": self.provider.name,
            "model": self.provider.model,
            "config": self.config.model_dump(mode="json", exclude={"session_dir"}),
            "assume_yes": assume_yes,
            **self.options.to_settings(),
        }

    def _tool_registry(self, tools: Iterable[Tool] | None) -> ToolRegistry:
        """The given tools, or the built-in ones on this agent's sandbox (only the minimal set
        of them for `minimal_tools`); the phased mode's note tool is added when it is
        missing."""
        if tools is None:
            tools = default_tools(
                self.sandbox,
                journal_commands=self.config.journal_commands,
                edit_tool=self.config.edit_tool,
                provider=self.provider.name,
            )
            builtin = True
        else:
            builtin = False
        if builtin and self.minimal_tools:
            tools = minimal_tools(list(tools))
        registry = ToolRegistry(tools)
        if self.config.mode is ModeName.PHASED and registry.get(NoteTool.name) is None:
            registry.register(NoteTool())  # the phased mode keeps notes in its memory
        if builtin and self.skills.skills and not self.minimal_tools:
            registry.register(SkillTool(self.skills.skills))
        return registry

    @asynccontextmanager
    async def connected(self) -> AsyncIterator[list[McpServerStatus]]:
        """Start the MCP servers and offer their tools and the LSP tools to the runs inside;
        shut the servers down on the way out. Yields the MCP servers' status (a server that
        did not start is left out with its error; the runs go on without its tools)."""
        if self._connected_registry is not None:
            raise RuntimeError("this Agent is already connected")
        tools = [tool for name in self.registry.names if (tool := self.registry.get(name))]
        statuses: list[McpServerStatus] = []
        async with AsyncExitStack() as stack:
            lsp = None if self.minimal_tools else self._lsp_manager()
            if lsp is not None:
                from journeyman.integrations.lsp import with_lsp

                stack.push_async_callback(lsp.aclose)
                tools = with_lsp(tools, lsp)
            mcp = None if self.minimal_tools else self._mcp_manager()
            if mcp is not None:
                stack.push_async_callback(mcp.aclose)
                statuses = await mcp.start(confine=servers_confined_in(self.sandbox))
                tools += mcp.tools(avoid=[tool.name for tool in tools])
            self._connected_registry = ToolRegistry(tools)
            try:
                yield statuses
            finally:
                self._connected_registry = None

    def _run_registry(self) -> ToolRegistry:
        """The tools of a run: the connected ones (LSP-wrapped, MCP) when connected, plus any
        tool registered on `self.registry` after connecting (e.g. the spawn_agent tool)."""
        connected = self._connected_registry
        if connected is None:
            return self.registry
        later = [
            tool
            for name in self.registry.names
            if connected.get(name) is None and (tool := self.registry.get(name)) is not None
        ]
        return ToolRegistry([*(t for n in connected.names if (t := connected.get(n))), *later])

    def _lsp_manager(self) -> LspManager | None:
        if self.lsp is None or self.lsp is False:
            return None
        from journeyman.integrations.lsp import LspManager, load_lsp_config

        if self.lsp is True:
            from journeyman.loop.config_file import user_config_file

            user_file = user_config_file().parent / "lsp.toml"
            config = load_lsp_config(self.workspace, user_file=user_file).config
            manager = LspManager(self.workspace, config)
        else:
            manager = self.lsp
        return manager if manager.usable() else None

    def _mcp_manager(self) -> McpManager | None:
        if self.mcp is None:
            return None
        from journeyman.integrations.mcp import McpManager

        if isinstance(self.mcp, McpManager):
            return self.mcp
        return McpManager(self.workspace, dict(self.mcp))

    def opening_call_floor(self, task: str, tools: ToolRegistry | None = None) -> CallFloor:
        """The least the first call of a new run of `task` will cost (offered `tools` instead
        of this agent's own): what a budget granted to such a run must at least hold."""
        registry = self.registry if tools is None else tools
        if self.config.mode is ModeName.ASK:
            registry = registry.restricted_to(ASK_TOOL_KINDS)
        system = prompts.system_prompt(
            self.workspace,
            registry.names,
            self.config.system_prompt,
            render_rules_section(self.rules),
            render_skills_section(self.skills),
        )
        price = model_pricer(self.config.price_per_mtok, self.provider.name, self.provider.model)
        return opening_call_floor(system, registry.specs(), task, price)

    def close(self) -> None:
        """Dispose of the agent: it refuses to run any further task."""
        if self.lifecycle.state is not AgentState.DISPOSED:
            self.lifecycle.dispose()

    def cancel(self) -> None:
        """Ask the running task to stop before its next turn."""
        self._cancel.set()

    def extend_budget(self, additional_tokens: int = 0, additional_usd: float = 0.0) -> None:
        """Grant a budget extension between runs (the app's /extend): the limits grow now, and
        again on top of the stored limits that `send`, `resume` or `load_session` restore,
        until a step stored after the grant holds it."""
        self.economics.record_extension(additional_tokens, additional_usd)
        self._granted_between_runs.append((additional_tokens, additional_usd))

    # --- what a session runs with: changed only here, and stored with the session ---------

    def switch_mode(self, mode: ModeName) -> None:
        """Run the next message in `mode` (the app's /mode)."""
        if mode is ModeName.PHASED and self.registry.get(NoteTool.name) is None:
            self.registry.register(NoteTool())  # the phased mode keeps notes in its memory
        self._reconfigure(mode=mode)

    def set_permission_mode(self, mode: PermissionMode) -> None:
        """Ask, allow edits or plan (read-only) from the next call on (the app's /plan)."""
        permissions = self.config.permissions or PermissionsConfig()
        self._reconfigure(permissions=permissions.model_copy(update={"mode": mode}))

    def enforce_hard_token_limit(self) -> None:
        """Price every model call against the limits before it is made (a subagent tree's root,
        whose limits cap the whole tree)."""
        self._reconfigure(hard_token_limit=True)

    def switch_model(self, provider: Provider) -> None:
        """Send the next message to `provider` (the app's /model), with the same retries."""
        self.provider = ResilientProvider([provider], self.provider.policy)
        self._remember({"provider": provider.name, "model": provider.model})

    def remember_setting(self, key: str, value: Any) -> None:
        """Keep `value` with the session's settings under `key` (what a resume needs to bring
        back that the config does not hold: the subagent limits, a batch task's origin)."""
        if key in OWN_SETTINGS or key in self.options.to_settings():
            raise ValueError(f"the agent keeps {key!r} itself")
        self._remember({key: value})

    def add_listener(self, listener: EventHandler) -> Callable[[], None]:
        """Have `listener` hear every event of the runs, before the handlers added earlier and
        the agent's own `on_event`; returns the function that removes it again."""
        self._listeners.insert(0, listener)

        def remove() -> None:
            with contextlib.suppress(ValueError):
                self._listeners.remove(listener)

        return remove

    def attach_subagents(self, runtime: Any) -> None:
        """Keep the runtime of the subagents this agent may spawn (`swarm.spawn`)."""
        self.subagents = runtime

    def forget_servers(self) -> None:
        """Give up the language and MCP servers (they could not start: each run would try
        them again)."""
        self.lsp = self.mcp = None

    def _reconfigure(self, **changes: Any) -> None:
        self.config = self.config.model_copy(update=changes)
        self._remember({"config": self.config.model_dump(mode="json", exclude={"session_dir"})})

    def _remember(self, changes: dict[str, Any]) -> None:
        """Update `settings` and, when a session is under way, its stored settings, so a
        resume comes back with what the session last ran with."""
        self.settings.update(changes)
        if self.session_id is None:
            return
        store = SessionStore(self.session_root)
        try:
            store.update_settings(self.session_id, changes)
        finally:
            store.close()

    def _emit(self, event: Event) -> None:
        for listener in [*self._listeners, self.on_event]:
            if listener is None:
                continue
            try:
                listener(event)
            except Exception:  # one listener's failure must not keep the event from the others
                log.exception("an event listener failed on a %s event", event.type)

    def _apply_granted(self) -> None:
        for tokens, usd in self._granted_between_runs:
            self.economics.record_extension(tokens, usd)

    def request_compaction(self) -> None:
        """Compact the history at the start of the next run, send or resume, whatever its size
        (once; nothing changes when compaction is off or the history is too short to shrink)."""
        self._compaction_requested = True

    async def run(
        self,
        task: str,
        *,
        session_id: str | None = None,
        parent_session_id: str | None = None,
        history: Sequence[Message] = (),
        forked_at_step: int | None = None,
    ) -> RunResult:
        """Start a new session on `task` (after `history`, when continuing a fork).

        Raises `WorkspaceBusyError` when another process is running in the workspace, and
        `ConfigurationError` (storing nothing) for a setting that rules out any run."""
        self._granted_between_runs.clear()  # the live economics hold them: the steps store them
        session_id = session_id or new_session_id()
        self.session_id = session_id
        async with self._kernel(session_id) as kernel:
            result = await kernel.run(
                task,
                session_id=session_id,
                parent_session_id=parent_session_id,
                history=history,
                forked_at_step=forked_at_step,
            )
        self.session_id = result.session_id if result.store_path is not None else None
        return result

    async def resume(self, session_id: str, *, override_limits: bool = False) -> RunResult:
        """Continue a stored session from its last completed step.

        With `override_limits`, this agent's configured limits replace the stored ones.
        """
        return await self._continue(session_id, override_limits=override_limits)

    async def send(
        self, session_id: str, message: str, *, override_limits: bool = False
    ) -> RunResult:
        """Continue a session, finished or not, with a new user message ("now add a test").

        The model sees the session's whole history, then `message`; token, cost and time
        budgets go on from what the session spent, its undo journal keeps growing, and the
        iteration limit counts the turns spent on this message.
        """
        if not message.strip():
            raise ConfigurationError("a follow-up message needs some text")
        return await self._continue(session_id, override_limits=override_limits, follow_up=message)

    def load_session(self, session_id: str, *, override_limits: bool = False) -> None:
        """Take on what a stored session has spent (tokens, cost, model calls, the last
        message's turns, budget extensions) before continuing it, so `economics` reports the
        session's totals at once; `send` and `resume` load the same figures again.

        With `override_limits`, this agent's configured limits replace the stored ones.
        """
        self.session_id = session_id
        store = SessionStore(self.session_root)
        try:
            _, stored = store.checkpoint(session_id)
        finally:
            store.close()
        spent = economics_for(self.config).snapshot()  # nothing, when no step was stored
        if stored:
            spent = load_checkpoint(stored, session_id=session_id).economics
        self.economics.restore(spent)
        if override_limits:
            self.economics.limits = economics_for(self.config).limits
        self._apply_granted()

    async def _continue(
        self, session_id: str, *, override_limits: bool, follow_up: str | None = None
    ) -> RunResult:
        restored_at = 0
        self.session_id = session_id

        def restored(state: LoopState) -> None:
            nonlocal restored_at
            restored_at = state.iterations  # the step the stored limits come from
            if override_limits:
                self.economics.limits = economics_for(self.config).limits
            self._apply_granted()
            if follow_up is not None:
                added = follow_up_messages(state.messages, follow_up)
                # stored now, before any model call: a cancelled follow-up is not lost
                store_follow_up(
                    kernel.store, state.session_id, state.iterations + 1, added, follow_up
                )
                state.messages = [*state.messages, *added]
                # what this run works on (its start event, the phased mode's goal)
                state.task = f"{state.task}\n\nThen: {follow_up}"
                self.economics.iterations = 0

        async with self._kernel(session_id) as kernel:
            kernel.on_restore = restored
            result = await kernel.resume(session_id, follow_up=follow_up is not None)
            if self._granted_between_runs and kernel.store.checkpoint(session_id)[0] > restored_at:
                self._granted_between_runs.clear()  # a newer stored step holds them now
            return result

    def run_sync(self, task: str, **kwargs: Any) -> RunResult:
        """`run` for code that is not async."""
        return asyncio.run(self.run(task, **kwargs))

    def _workspace_lock(self, session_id: str) -> WorkspaceLock | None:
        """The lock a run of `session_id` holds on the workspace; None for a question (`ask`
        mode runs no tool that can change anything)."""
        if self.config.mode is ModeName.ASK:
            return None
        return WorkspaceLock(self.workspace, purpose="run", session_id=session_id)

    @asynccontextmanager
    async def _kernel(self, session_id: str) -> AsyncIterator[Kernel]:
        if self.lifecycle.state is AgentState.DISPOSED:
            raise AgentClosedError("this Agent was closed; create a new Agent to run more tasks")
        lock = self._workspace_lock(session_id)
        if lock is not None:
            lock.acquire()  # before the store opens: a refused run stores nothing
        try:
            async with self._locked_kernel() as kernel:
                yield kernel
        finally:
            if lock is not None:
                lock.release()

    @asynccontextmanager
    async def _locked_kernel(self) -> AsyncIterator[Kernel]:
        if self._connected_registry is None and (self.lsp or self.mcp):
            async with self.connected(), self._locked_kernel() as kernel:
                yield kernel
            return
        self._cancel.clear()
        registry = self._run_registry()
        store = SessionStore(self.session_root)
        try:
            kernel = Kernel(
                permissions=self._permission_gate(store, registry),
                hooks=self.hooks,
                rules=render_rules_section(self.rules),
                skills=render_skills_section(self.skills),
                economics=self.economics,
                approver=self.approver,
                provider=self.provider,
                registry=(
                    registry.restricted_to(ASK_TOOL_KINDS)
                    if self.config.mode is ModeName.ASK
                    else registry
                ),
                mode=mode_for(self.config),
                workspace=self.workspace,
                config=self.config,
                store=store,
                settings=self.settings,
                on_event=self._emit,
                cancel_event=self._cancel,
                lifecycle=self.lifecycle,
                parent_call=self.parent_call_id,
            )
            model = f"{self.provider.name}:{self.provider.model}"
            kernel.model.prompt_bound = self._prompt_bounds.setdefault(model, PromptBound())
            if self._compaction_requested:
                self._compaction_requested = False
                kernel.window.request_compaction()
            yield kernel
        finally:
            store.close()
            await self.sandbox.close()  # what commands left running in the background

    def _permission_gate(
        self, store: SessionStore, registry: ToolRegistry
    ) -> PermissionGate | None:
        if self.config.permissions is None:
            return None
        return PermissionGate(
            PermissionPolicy.from_config(self.config.permissions, self.workspace, tools=registry),
            approver=self._notifying(self.permission_approver),
            memory=StoredPermissions(store),
            project=self.workspace,
            yes=self.assume_yes,
        )

    def _notifying(self, approver: Approver | None) -> Approver | None:
        """`approver`, preceded by the Notification hooks (e.g. to ping a user who stepped away)."""
        if approver is None:
            return None
        asker = approver

        async def notify_then_ask(request: ApprovalRequest) -> ApprovalAnswer:
            async with self.lifecycle.paused():  # the run waits for the user's answer
                return await notify_and_ask(request)

        async def notify_and_ask(request: ApprovalRequest) -> ApprovalAnswer:
            if self.hooks.has(HookEvent.NOTIFICATION):
                await self.hooks.run(
                    HookEvent.NOTIFICATION,
                    HookPayload(
                        cwd=str(self.workspace),
                        tool_name=request.tool_name,
                        tool_args=request.args,
                        message=f"journeyman needs your approval: {request.reason}",
                    ),
                )
            return await asker(request)

        return notify_then_ask


class StoredPermissions:
    """ "Always" answers kept in the session store, so they last across runs of a project."""

    def __init__(self, store: SessionStore) -> None:
        self.store = store

    def remembered(self, project: str, tool_name: str) -> list[str]:
        return [
            rule
            for tool, rule, decision in self.store.remembered_permissions(project)
            if tool == tool_name and decision == "allow"
        ]

    def remember(self, project: str, tool_name: str, rule: str) -> None:
        self.store.remember_permission(project, tool_name, rule, "allow")


def mode_for(config: AgentConfig) -> Mode:
    """The mode of `config` (the other modes' modules are not even imported)."""
    if config.mode is ModeName.PLAN_SOLVE:
        from journeyman.loop.modes.plan_solve import PlanSolveMode

        return PlanSolveMode()
    if config.mode is ModeName.PHASED:
        from journeyman.loop.modes.phased import PhasedMode

        return PhasedMode(config.phased, verify_command=config.verify_command)
    return ReactMode()


def economics_for(config: AgentConfig) -> ExecutionEconomics:
    return ExecutionEconomics(
        limits=BudgetLimits(
            max_total_tokens=config.max_total_tokens,
            max_usd=config.max_budget_usd,
            max_iterations=config.max_iterations,
            max_duration_s=config.max_duration_s,
        ),
        mode=config.budget_mode,
    )


def run(
    task: str,
    provider: Provider | Sequence[Provider],
    *,
    workspace: str | Path = ".",
    config: AgentConfig | None = None,
    on_event: EventHandler | None = None,
) -> RunResult:
    """Run one task synchronously: `journeyman.run("fix the tests", provider, workspace=".")`."""
    return Agent(provider, workspace=workspace, config=config, on_event=on_event).run_sync(task)


def sandbox_for(config: AgentConfig, workspace: Path) -> Sandbox:
    """The sandbox commands of a run with `config` in `workspace` run in (network, passed
    variables, the host's private folders and the paths the user hides as the config says)."""
    private = private_folders(config.session_dir or default_session_root())
    return open_sandbox(
        config.sandbox,
        workspace,
        allow_network=config.allow_network,
        pass_env=tuple(config.pass_env),
        hidden=(*private, *config.sandbox_hidden),
        image=config.sandbox_image,
    )


def servers_confined_in(sandbox: Sandbox) -> Callable[[list[str], Path], list[str]] | None:
    """How an MCP server whose config asks for the sandbox is started inside `sandbox`: under
    bubblewrap like a command, seeing what commands see (None: `sandbox` is not bubblewrap)."""
    from journeyman.tools.sandbox.bubblewrap import BubblewrapSandbox

    if not isinstance(sandbox, BubblewrapSandbox):
        return None
    return lambda argv, cwd: sandbox.argv("exec " + shlex.join(argv), cwd)


def _user_skills_folder() -> Path:
    from journeyman.loop.config_file import user_skills_folder

    return user_skills_folder()


def private_folders(session_root: Path) -> tuple[Path, ...]:
    """The host's folders commands never see: the session store, the user's config and the
    cache of command snapshots (each holds earlier sessions' text, settings or files)."""
    from journeyman.loop.config_file import user_config_file
    from journeyman.tools.snapshot import shadow_repository

    cache = shadow_repository(Path("/")).parent.parent
    return (session_root, user_config_file().parent, cache)
