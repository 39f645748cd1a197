"""What each slash command does in the app (the table of commands is `commands.py`)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from rich.text import Text

from journeyman.core.display import printable
from journeyman.core.errors import AgentError
from journeyman.loop.config import ModeName
from journeyman.policy.permissions import PermissionMode, PermissionsConfig
from journeyman.session.undo import UndoResult
from journeyman.tui import commands
from journeyman.tui.widgets import RESULT_CHARS_SHOWN, styled_diff

if TYPE_CHECKING:
    from journeyman.economics.budget import ExtensionRequest
    from journeyman.integrations.lsp import LspManager
    from journeyman.integrations.mcp import McpManager, McpServerStatus
    from journeyman.loop.agent import Agent
    from journeyman.tui.conversation import Conversation
    from journeyman.tui.widgets import StatusBar

MODES = {"react": ModeName.REACT, "phased": ModeName.PHASED, "plan": ModeName.PLAN_SOLVE}
CHANGES_STATE = frozenset({"undo", "resume", "fork", "mode", "plan", "model", "extend"})
"""Commands refused while a turn runs (they change what the turn works with)."""


def in_app_words(message: str) -> str:
    """A fork error of the session layer, which names the command line's `--at-step`, worded
    for the app, where the step is /fork's argument."""
    return re.sub(r"--at-step (\d+)", r"/fork \1", message).replace("--at-step", "the step")


class SlashPort(Protocol):
    """What the slash commands use of the app, and no more."""

    agent: Agent
    conversation: Conversation
    status: StatusBar
    compaction_asked: bool
    mcp_statuses: list[McpServerStatus] | None
    servers_started: bool
    servers_error: str | None

    @property
    def busy(self) -> bool:
        """A turn is running."""
        ...

    def note(self, text: str | Text) -> None:
        """Show `text` in the transcript."""

    def open_session(self, session_id: str) -> None:
        """Talk to the stored session `session_id` from now on, its history shown."""

    def show_settings(self) -> None:
        """Show the agent's model and mode (they changed) in the status bar."""

    async def ask_extension(self, request: ExtensionRequest) -> bool:
        """Ask the user whether to grant `request`."""
        ...

    async def quit_safely(self) -> None:
        """End the running turn and the servers, then leave the app."""


class SlashHandler:
    def __init__(self, app: SlashPort) -> None:
        self.app = app
        self.plan_previous: PermissionMode | None = None

    async def run(self, name: str, args: list[str]) -> None:
        command = commands.BY_NAME.get(name)
        if command is None:
            self.app.note(commands.unknown(name))
            return
        if name in CHANGES_STATE and self.app.busy:
            self.app.note(f"/{name} waits for the running turn: let it finish, or Ctrl-C it")
            return
        try:
            await getattr(self, f"do_{name}")(args)
        except (ValueError, AgentError) as error:
            message = error.message if isinstance(error, AgentError) else str(error)
            self.app.note(Text(f"/{name}: {printable(message)}", style="red"))

    # --- the commands ---------------------------------------------------------------------

    async def do_help(self, _args: list[str]) -> None:
        self.app.note(commands.help_text())

    async def do_quit(self, _args: list[str]) -> None:
        await self.app.quit_safely()

    async def do_undo(self, args: list[str]) -> None:
        what = args[0] if args else ""
        if what not in ("", "turn", "file") or (what == "file" and len(args) != 2):
            raise ValueError("usage: /undo [turn|file PATH]")
        result = self.app.conversation.undo(what, args[1] if what == "file" else "")
        self.app.note(describe_undo(result))

    async def do_diff(self, _args: list[str]) -> None:
        diff = self.app.conversation.diff()
        if not diff.strip():
            self.app.note("no pending changes in this session")
            return
        shown = diff[:RESULT_CHARS_SHOWN]
        text = styled_diff(printable(shown))
        if len(diff) > len(shown):
            text.append(f"... {len(diff) - len(shown):,} more characters: journeyman diff")
        self.app.note(text)

    async def do_budget(self, _args: list[str]) -> None:
        economics = self.app.agent.economics
        limits = economics.limits
        facts = self.app.status.facts
        parts = [
            f"budget {facts.budget_fraction:.0%} used, level {facts.budget_level.upper()}, "
            f"mode {economics.mode.value}",
            f"tokens {economics.total_tokens:,} of {limits.max_total_tokens or 'no limit'}",
            f"cost ${economics.cost_usd or 0:.4f} of "
            + (f"${limits.max_usd:.2f}" if limits.max_usd else "no limit"),
            f"turns {economics.iterations} of {limits.max_iterations or 'no limit'}",
            f"extensions granted {economics.extensions_granted} of "
            f"{economics.tuning.max_extensions}",
        ]
        self.app.note("\n".join(parts))

    async def do_cost(self, _args: list[str]) -> None:
        economics = self.app.agent.economics
        usage = economics.usage
        cost = "not priced" if economics.cost_usd is None else f"${economics.cost_usd:.4f}"
        self.app.note(
            f"{economics.calls} model call(s): {usage.total_input_tokens:,} tokens in "
            f"({usage.cache_read_tokens:,} read from cache), {usage.output_tokens:,} out; {cost}"
        )

    async def do_extend(self, _args: list[str]) -> None:
        economics = self.app.agent.economics
        config = self.app.agent.config
        add_tokens = int((config.max_total_tokens or 0) * config.extension_share)
        add_usd = (config.max_budget_usd or 0.0) * config.extension_share
        if not add_tokens and not add_usd:
            raise ValueError("no token or cost limit is set: there is nothing to extend")
        request = economics.request_extension(
            additional_tokens=add_tokens, additional_usd=add_usd, reason="you asked for more"
        )
        if not request.can_request:
            raise ValueError(request.refusal or "no extension can be granted now")
        if await self.app.ask_extension(request):
            self.app.agent.extend_budget(add_tokens, add_usd)
            self.app.note("budget extension granted")
        else:
            self.app.note("budget extension denied")

    async def do_mode(self, args: list[str]) -> None:
        if len(args) != 1 or args[0] not in MODES:
            raise ValueError("usage: /mode react|phased|plan")
        agent = self.app.agent
        if MODES[args[0]] is ModeName.PHASED and not await has_check_command(agent):
            raise ValueError(
                "the phased mode needs a check command, and none is configured (verify_command "
                "in your own config.toml) or detected from the project's files; "
                f"the mode stays {agent.config.mode.value}"
            )
        agent.switch_mode(MODES[args[0]])
        self.app.show_settings()
        self.app.note(f"mode {agent.config.mode.value} from the next message on")

    async def do_plan(self, args: list[str]) -> None:
        agent = self.app.agent
        current = (agent.config.permissions or PermissionsConfig()).mode
        if args and args[0] == "off":
            if current is not PermissionMode.PLAN:
                raise ValueError("plan mode is not on")
            # a session resumed in plan mode has no mode from before it: the default then
            mode, self.plan_previous = self.plan_previous or PermissionMode.DEFAULT, None
            note = f"plan approved: edits and commands are allowed again ({mode.value})"
        else:
            if current is PermissionMode.PLAN:
                raise ValueError("plan mode is already on; /plan off approves the plan")
            self.plan_previous, mode = current, PermissionMode.PLAN
            note = "plan mode: read-only until you approve the plan with /plan off"
        agent.set_permission_mode(mode)
        self.app.note(note)

    async def do_sessions(self, _args: list[str]) -> None:
        summaries = self.app.conversation.sessions()
        if not summaries:
            self.app.note("no stored sessions for this workspace")
            return
        lines = [
            f"{s.record.id}  {s.steps:>3} steps  {s.finish_reason or 'unfinished':<14} "
            f"{printable(s.record.task.splitlines()[0] if s.record.task else '')[:50]}"
            for s in summaries[:20]
        ]
        self.app.note("\n".join(lines))

    async def do_resume(self, args: list[str]) -> None:
        if len(args) != 1:
            raise ValueError("usage: /resume ID (see /sessions)")
        self.app.open_session(self.app.conversation.resolve(args[0]))

    async def do_fork(self, args: list[str]) -> None:
        if len(args) != 1 or not args[0].isdigit():
            raise ValueError("usage: /fork STEP (a step number of this session)")
        try:
            fork = self.app.conversation.prepare_fork(int(args[0]))
        except AgentError as error:
            raise ValueError(in_app_words(error.message)) from None
        self.app.note(
            f"forked {fork.parent_id} at step {fork.step}: files rolled back; your next "
            "message starts the new session"
        )

    async def do_rules(self, _args: list[str]) -> None:
        sources = self.app.agent.rules.sources
        lines = [f"{s.status.value:<9} {printable(s.display or str(s.path))}" for s in sources]
        self.app.note("\n".join(lines) or "no rules files")

    async def do_mcp(self, _args: list[str]) -> None:
        if self.app.servers_error:
            raise ValueError(f"the servers could not start: {self.app.servers_error}")
        self.app.note(describe_mcp(self.app.agent.mcp, self.app.mcp_statuses))

    async def do_lsp(self, _args: list[str]) -> None:
        if self.app.servers_error:
            raise ValueError(f"the servers could not start: {self.app.servers_error}")
        self.app.note(describe_lsp(self.app.agent.lsp, started=self.app.servers_started))

    async def do_model(self, args: list[str]) -> None:
        if len(args) != 1:
            raise ValueError("usage: /model NAME (this provider's model) or /model PROVIDER:MODEL")
        from journeyman.core.errors import ConfigurationError
        from journeyman.loop.launch import open_provider
        from journeyman.providers.factory import DEFAULT_MODELS, parse_spec

        agent = self.app.agent
        current = agent.provider
        wanted = args[0]
        prefix, _colon, rest = wanted.partition(":")
        # "anthropic:claude-..." names a provider; "qwen2.5:7b" is a model with a colon
        names_provider = bool(rest) and (prefix.lower() in DEFAULT_MODELS or prefix.isalpha())
        spec, model = (wanted, None) if names_provider else (current.name, wanted)
        same_provider = parse_spec(spec)[0] == current.name
        try:
            provider = open_provider(
                spec,
                model,
                base_url=agent.options.base_url if same_provider else None,
                tool_format=agent.options.tool_format,
                discover_local=False,
            )
        except ConfigurationError as error:
            hint = ""
            if names_provider and prefix.lower() not in DEFAULT_MODELS:
                hint = f" (for a model whose name has a colon: /model {current.name}:{wanted})"
            raise ValueError(
                f"{error.message}{hint}; the model stays {current.name}:{current.model}"
            ) from None
        agent.switch_model(provider)
        self.app.show_settings()
        self.app.note(f"model {provider.name}:{provider.model} from the next message on")

    async def do_compact(self, _args: list[str]) -> None:
        agent = self.app.agent
        if agent.config.compaction is None:
            raise ValueError("compaction is off in this configuration ([compaction] settings)")
        if self.app.conversation.session_id is None:
            raise ValueError("nothing to compact yet: send a message first")
        agent.request_compaction()
        self.app.compaction_asked = True
        when = "the next message" if self.app.busy else "your next message"
        self.app.note(f"the context will be compacted at the start of {when}")


async def has_check_command(agent: Agent) -> bool:
    """Whether the agent has a check command: configured, or detected in its workspace."""
    if (agent.config.verify_command or "").strip():
        return True
    import asyncio

    from journeyman.context.profile import detect_profile, runnable_test_command

    profile = await asyncio.to_thread(detect_profile, agent.workspace)
    return runnable_test_command(profile) is not None


def describe_mcp(
    mcp: McpManager | Mapping[str, Any] | None, statuses: list[McpServerStatus] | None
) -> str:
    """The MCP servers as they stand now: running with their tools, or why not."""
    if not mcp:
        return (
            "no MCP servers: none declared (mcp.json; `journeyman mcp list`), or --no-mcp "
            "(the workspace's own servers need --mcp)"
        )
    from journeyman.integrations.mcp import McpManager as Manager

    live = mcp.status() if isinstance(mcp, Manager) and statuses is not None else statuses
    if live is None:
        names = [s.name for s in mcp.status()] if isinstance(mcp, Manager) else list(mcp)
        listed = ", ".join(printable(name) for name in names)
        return f"MCP servers {listed or '(none)'}: they start with your next message"
    if not live:
        return "no MCP servers are configured"
    lines = []
    for status in live:
        tools = len(status.tools)
        line = f"{printable(status.name)}: {status.state.value}"
        if status.state.value == "running":
            line += f", {tools} tool{'s' if tools != 1 else ''}"
            if status.tools:
                line += f" ({printable(', '.join(t.name for t in status.tools[:8]))}"
                line += ", ...)" if tools > 8 else ")"
        if status.error:
            line += f" — {printable(status.error)}"
        lines.append(line)
    return "MCP servers:\n" + "\n".join(lines)


def describe_lsp(lsp: LspManager | bool | None, *, started: bool) -> str:
    """The language servers as they stand now: running (with their pid), or why not."""
    if not lsp:
        return (
            "language servers: off (--no-lsp, JOURNEYMAN_LSP=0, or none installed); "
            "`journeyman lsp` explains"
        )
    from journeyman.integrations.lsp import LspManager as Manager

    if not isinstance(lsp, Manager):
        when = "they run for this app" if started else "they start with your next message"
        return f"language servers: on ({when}); `journeyman lsp` lists them"
    lines = []
    for status in lsp.status():
        if not status.installed or status.shadowed_by:
            continue
        line = f"{printable(status.name)} ({status.language}): {status.state}"
        if status.pid is not None:
            line += f", pid {status.pid}"
        elif status.state == "not started":
            line += f" (starts when the agent touches a {'/'.join(status.extensions)} file)"
        if status.last_error:
            line += f" — {printable(status.last_error)}"
        lines.append(line)
    if not lines:
        return "language servers: none installed for this workspace; `journeyman lsp` explains"
    return "language servers:\n" + "\n".join(lines)


def describe_undo(result: UndoResult) -> str:
    if result.nothing_to_undo:
        return "nothing to undo"
    lines = []
    for change in result.undone:
        action = {"created": "deleted", "deleted": "restored", "modified": "reverted"}[change.kind]
        lines.append(f"{action} {printable(change.path)} (step {change.step}, {change.tool})")
    for conflict in result.conflicts:
        lines.append(
            f"{printable(conflict.change.path)} changed on disk after the agent wrote it; "
            "not undone (`journeyman undo --force` undoes it anyway)"
        )
    return "\n".join(lines)
