"""`ChatApp`: the conversation screen. The agent runs as a task in the app's own event loop;
its events update the transcript and the status bar, its questions open the dialogs."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.suggester import SuggestFromList
from textual.widget import Widget
from textual.widgets import Input

from journeyman.core import events as ev
from journeyman.core.display import printable, printable_name
from journeyman.core.lifecycle import AgentState
from journeyman.core.messages import Role
from journeyman.core.result import FinishReason, RunResult
from journeyman.economics.budget import ExtensionRequest
from journeyman.economics.phases import PhaseTracker
from journeyman.loop.check_runner import CHECK_CALL_PREFIX
from journeyman.policy.permissions import ApprovalAnswer, ApprovalRequest, PermissionsConfig
from journeyman.tui import commands
from journeyman.tui.conversation import (
    AgentFactory,
    AgentHooks,
    Conversation,
    StoredTranscript,
)
from journeyman.tui.dialogs import EXTENSION_TIMEOUT_S, ApprovalDialog, BudgetDialog
from journeyman.tui.slash import SlashHandler
from journeyman.tui.widgets import (
    RESULT_CHARS_SHOWN,
    AssistantText,
    Note,
    StatusBar,
    ToolCard,
    Transcript,
    UserMessage,
    styled_diff,
)

if TYPE_CHECKING:
    from journeyman.integrations.mcp import McpServerStatus

T = TypeVar("T")
QUIT_WINDOW_S = 2.0
"""A second Ctrl-C within this many seconds quits."""
MAX_ITEMS = 200
"""Transcript widgets kept mounted; older ones are dropped from the screen (not the store)."""


def shown_path(path: Path) -> str:
    """`path` as a person reads it: under the home folder, from `~`."""
    with contextlib.suppress(RuntimeError, ValueError):  # no home folder, or not under it
        return str(Path("~") / path.relative_to(Path.home()))
    return str(path)


class ChatApp(App[None]):
    TITLE = "journeyman"
    CSS = """
    #transcript { height: 1fr; padding: 0 1; }
    #bottom { dock: bottom; height: auto; }
    """
    BINDINGS = [  # noqa: RUF012
        Binding("ctrl+c", "interrupt", "cancel turn / quit", priority=True),
        Binding("ctrl+d", "end_of_input", "quit", priority=True),
    ]

    def __init__(
        self,
        factory: AgentFactory,
        *,
        session_id: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        max_items: int = MAX_ITEMS,
        extension_timeout_s: float = EXTENSION_TIMEOUT_S,
    ) -> None:
        super().__init__()
        self.clock = clock
        self.extension_timeout_s = extension_timeout_s
        hooks = AgentHooks(self.on_agent_event, self.ask_extension, self.ask_permission)
        self.agent = factory(hooks)
        self.conversation = Conversation(self.agent, session_id)
        self.transcript = Transcript(max_items)
        self.status = StatusBar()
        self.slash = SlashHandler(self)
        self.turn: asyncio.Task[RunResult | None] | None = None
        self.turn_cancelled = False
        """The last turn was cancelled (Ctrl-C or quitting), not failed."""
        self.question: asyncio.Task[None] | None = None
        """A slash command waiting on the user's answer in a dialog (/extend)."""
        self._question_name = ""
        self.phases = PhaseTracker(self.agent.config.exploration_saturation)
        self._streaming: AssistantText | None = None
        self._cards: dict[str, ToolCard] = {}
        self._model_call_ids: set[str] = set()
        """The ids of the calls the model asked for (a model could name one like the check)."""
        self._last_interrupt: float | None = None
        self._servers: asyncio.Task[None] | None = None
        self._servers_stop = asyncio.Event()
        self.results: list[RunResult] = []
        """Every finished turn's result (for tests and the ending notes)."""
        self.compaction_asked = False
        """/compact was typed and no compaction has happened since."""
        self.mcp_statuses: list[McpServerStatus] | None = None
        """The MCP servers' status from when they started (None until they have)."""
        self.servers_started = False
        self.servers_error: str | None = None
        """Why the language and MCP servers could not start (the app goes on without them)."""

    # --- layout ---------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield self.transcript
        with Vertical(id="bottom"):  # the prompt sits on the status bar, however tall it is
            yield Input(
                placeholder="Ask journeyman, or /help (Ctrl-C cancels a turn, Ctrl-D quits)",
                suggester=SuggestFromList(commands.COMPLETIONS, case_sensitive=False),
                id="prompt",
            )
            yield self.status

    def on_mount(self) -> None:
        self.status.facts.session_id = self.conversation.session_id or ""
        self.welcome()
        if self.conversation.session_id:
            self.show_history()
        self.show_settings()
        self.query_one("#prompt", Input).focus()

    def on_unmount(self) -> None:
        self.agent.close()  # the app has exited: its agent runs nothing more

    def welcome(self) -> None:
        """The first line: where the agent works, with which model, mode, sandbox and
        permissions."""
        agent = self.agent
        permissions = (agent.config.permissions or PermissionsConfig()).mode.value
        self.note(
            Text(
                f"journeyman in {printable(shown_path(agent.workspace))}\n"
                f"model {printable(agent.provider.name)}:{printable(agent.provider.model)}"
                f" · mode {agent.config.mode.value} · permissions {permissions}"
                f" · sandbox {printable(agent.sandbox.description)}",
                style="bold",
            )
        )

    def show_settings(self) -> None:
        """The agent's model and mode in the status bar (at the start, after /model, /mode)."""
        facts = self.status.facts
        facts.model = f"{self.agent.provider.name}:{self.agent.provider.model}"
        facts.mode = self.agent.config.mode.value
        self.refresh_usage()

    def open_session(self, session_id: str) -> None:
        """Talk to the stored session `session_id` from now on (/resume): its history shown."""
        self.conversation.session_id = session_id
        self.conversation.fork = None
        self.status.facts.session_id = session_id
        self.transcript.remove_children()
        self.show_history()
        self.refresh_usage()

    def note(self, text: str | Text) -> None:
        self.transcript.add(Note(text))

    def show_history(self) -> None:
        """The session being resumed: what it has spent (status bar, /cost, /budget), then its
        stored conversation."""
        self.note(f"session {self.conversation.session_id}")
        try:
            self.conversation.load_usage()
            stored = self.conversation.transcript()
        except Exception as error:  # shown, never a traceback; a message may still go on
            self.note(Text(f"error: {printable(str(error))}", style="bold red"))
            return
        status = self.agent.economics.check()
        self.status.facts.budget_fraction = status.fraction
        self.status.facts.budget_level = status.level.value
        self._replay(stored)

    def _replay(self, stored: StoredTranscript) -> None:
        """The user's messages, the model's text and a card per tool call with its outcome."""
        workspace = str(self.agent.workspace)
        shown: list[Widget] = []
        cards: dict[str, ToolCard] = {}
        for message in stored.messages:
            if message.role is Role.USER and not message.content.startswith("[journeyman]"):
                shown.append(UserMessage(message.content))
            elif message.role is Role.ASSISTANT:
                if message.content.strip():
                    shown.append(AssistantText(message.content))
                for call in message.tool_calls:
                    cards[call.id] = ToolCard(call, workspace)
                    shown.append(cards[call.id])
            elif message.role is Role.TOOL and message.tool_result is not None:
                result = message.tool_result
                card = cards.pop(result.call_id, None)
                if card is not None:
                    diff = stored.diffs.get(result.call_id)
                    if diff is not None:  # the workspace has moved on since the edit
                        card.preview = styled_diff(diff)
                    card.finished(result, stored.durations.get(result.call_id, 0.0))
        for widget in shown[-self.transcript.max_items :]:
            self.transcript.add(widget)

    def refresh_usage(self) -> None:
        facts, economics = self.status.facts, self.agent.economics
        facts.tokens_in = economics.usage.total_input_tokens
        facts.tokens_out = economics.usage.output_tokens
        facts.cache_read = economics.usage.cache_read_tokens
        facts.cost_usd = economics.cost_usd
        facts.phase = self.phases.phase.value
        facts.state = self.agent.lifecycle.state.value
        if self.agent.lifecycle.state is AgentState.ERROR and self.turn_cancelled:
            facts.state = "cancelled"  # the kernel ends a cancelled run in ERROR
        self.status.refresh_facts()

    # --- input ----------------------------------------------------------------------------

    @property
    def busy(self) -> bool:
        return self.turn is not None and not self.turn.done()

    async def on_input_submitted(self, event: Input.Submitted) -> None:
        line = event.value
        event.input.value = ""
        if not line.strip():
            return
        parsed = commands.parse(line)
        if parsed is not None:
            await self.run_command(*parsed)
            return
        if self.busy:
            self.note("the agent is still working; wait for it, or Ctrl-C to cancel the turn")
            return
        self.send(line)

    async def run_command(self, name: str, args: list[str]) -> None:
        """Run a slash command. One that asks the user runs beside this handler: the dialog's
        keys, and its answer, reach it only through the app's message queue, which an awaiting
        handler would hold until the answer came (it never could)."""
        command = commands.BY_NAME.get(name)
        if command is None or not command.asks:
            await self.slash.run(name, args)
            return
        if self.asking:
            self.note("answer the open question first (Ctrl-C cancels it)")
            return
        self._question_name = name
        self.question = asyncio.create_task(self._ask_command(name, args))

    @property
    def asking(self) -> bool:
        return self.question is not None and not self.question.done()

    async def _ask_command(self, name: str, args: list[str]) -> None:
        try:
            await self.slash.run(name, args)
        except Exception as error:  # shown, never a traceback; the app stays usable
            self.note(Text(f"/{name}: error: {printable(str(error))}", style="bold red"))
        finally:
            self.refresh_usage()

    def send(self, text: str) -> None:
        """Start a turn of the conversation on `text`."""
        self.transcript.add(UserMessage(text))
        self.turn_cancelled = False
        self._model_call_ids.clear()  # only this turn's calls can be confused with its check
        self.turn = asyncio.create_task(self._turn(text))

    async def _turn(self, text: str) -> RunResult | None:
        compaction_due = self.compaction_asked  # asked before this turn: it is this turn's
        try:
            await self._start_servers()
            result = await self.conversation.send(text)
        except Exception as error:  # shown, never a traceback; the session stays usable
            self.note(Text(f"error: {printable(str(error))}", style="bold red"))
            return None
        except asyncio.CancelledError:
            self.turn_cancelled = True
            raise
        finally:
            self._streaming = None
            for card in self._cards.values():
                card.cancelled("cancelled before it finished (it may have done part of its work)")
            self._cards.clear()
            self.refresh_usage()
        self.results.append(result)
        if result.finish_reason is FinishReason.CANCELLED:
            self.turn_cancelled = True
            self.refresh_usage()
        self.status.facts.session_id = result.session_id
        self._report(result)
        if compaction_due and self.compaction_asked:
            self.compaction_asked = False
            self.note("nothing was compacted: the history is too short to shrink")
        return result

    def _report(self, result: RunResult) -> None:
        cost = "" if result.cost_usd is None else f", ${result.cost_usd:.4f}"
        outcome = "done" if result.success else "stopped"
        line = (
            f"{outcome}: {result.finish_reason.value} after {result.iterations} turn(s), "
            f"{result.tool_calls_made} tool call(s){cost}"
        )
        if result.error:
            line += f" — {printable(result.error)}"
        self.note(Text(line, style="bold" if result.success else "bold yellow"))
        if result.final_text and result.final_text not in self._shown_texts():
            self.transcript.add(AssistantText(result.final_text))

    def _shown_texts(self) -> set[str]:
        return {w.text for w in self.transcript.query(AssistantText)}

    # --- keys -----------------------------------------------------------------------------

    async def action_interrupt(self) -> None:
        """Ctrl-C: cancel the running turn; a second Ctrl-C within 2 s quits."""
        now = self.clock()
        if self._last_interrupt is not None and now - self._last_interrupt <= QUIT_WINDOW_S:
            await self.quit_safely()
            return
        self._last_interrupt = now
        if self.busy:
            await self.cancel_turn()
            self.note(
                "cancelled; the session is saved — send a message to go on (Ctrl-C again quits)"
            )
        elif self.asking:
            await self.cancel_question()
            self.note(f"/{self._question_name} cancelled: nothing changed (Ctrl-C again quits)")
        else:
            self.note("press Ctrl-C again within 2 s, or Ctrl-D, to quit")

    async def action_end_of_input(self) -> None:
        """Ctrl-D on an empty prompt quits; elsewhere it deletes as usual."""
        prompt = self.query_one("#prompt", Input)
        if prompt.value:
            prompt.action_delete_right()
            return
        await self.quit_safely()

    async def cancel_turn(self) -> None:
        """Stop the running turn; the kernel records the cancellation and every finished step."""
        if self.turn is None or self.turn.done():
            return
        self.agent.cancel()
        self.turn.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.turn

    async def cancel_question(self) -> None:
        """Close the open /extend dialog unanswered: nothing it asked about happens."""
        if self.question is None or self.question.done():
            return
        self.question.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.question

    async def quit_safely(self) -> None:
        """Quit; a turn in progress is cancelled first so the store holds everything."""
        await self.cancel_question()
        await self.cancel_turn()
        await self._stop_servers()
        self.exit()

    # --- language and MCP servers: started with the first message, kept for the app's life --

    async def _start_servers(self) -> None:
        if self._servers is not None or not (self.agent.lsp or self.agent.mcp):
            return
        ready = asyncio.Event()
        self._servers_stop = asyncio.Event()

        async def keep_servers() -> None:
            # one task enters and leaves `connected()` (the servers' task groups need that)
            try:
                async with self.agent.connected() as statuses:
                    self.mcp_statuses, self.servers_started = statuses, True
                    for status in statuses:
                        if status.error:
                            self.note(
                                f"MCP server {printable(status.name)} did not start: "
                                f"{printable(status.error)}"
                            )
                    ready.set()
                    await self._servers_stop.wait()
            except Exception as error:  # the runs go on without the servers' tools
                self.servers_error = printable(str(error))
                self.agent.forget_servers()  # or each run would try them again
                self.note(f"language/MCP servers could not start: {self.servers_error}")
            finally:
                ready.set()

        self._servers = asyncio.create_task(keep_servers())
        await ready.wait()

    async def _stop_servers(self) -> None:
        if self._servers is None:
            return
        self._servers_stop.set()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._servers, timeout=10)

    # --- the agent's questions ------------------------------------------------------------

    async def ask_permission(self, request: ApprovalRequest) -> ApprovalAnswer:
        dialog = ApprovalDialog(request)
        answer = await self._ask(dialog, ApprovalAnswer.DENY)
        self.note(f"{printable_name(request.tool_name)}: {answer.value}")
        return answer

    async def ask_extension(self, request: ExtensionRequest) -> bool:
        status = self.agent.economics.check()  # the level that made the budget gate ask
        self.status.facts.budget_fraction = status.fraction
        self.status.facts.budget_level = status.level.value
        dialog = BudgetDialog(request, self.clock, self.extension_timeout_s)
        return await self._ask(dialog, False)

    async def _ask(self, dialog: ApprovalDialog | BudgetDialog, default: T) -> T:
        answered: asyncio.Future[T] = asyncio.get_running_loop().create_future()

        def settle(answer: object) -> None:
            if not answered.done():
                answered.set_result(default if answer is None else answer)  # type: ignore[arg-type]

        self.push_screen(dialog, settle)
        self.refresh_usage()
        try:
            return await answered
        finally:
            if self.screen is dialog:  # the turn was cancelled with the dialog open
                dialog.dismiss(None)

    # --- events ---------------------------------------------------------------------------

    def on_agent_event(self, event: ev.Event) -> None:
        if isinstance(event, ev.TextDelta):
            if self._streaming is None:
                self._streaming = AssistantText()
                self.transcript.add(self._streaming)
            self._streaming.append(event.text)
            return
        if isinstance(event, ev.ModelResponseReceived):
            if self._streaming is not None:
                self._streaming.replace(event.text)
            elif event.text.strip():
                self.transcript.add(AssistantText(event.text))
            self._streaming = None
            self._model_call_ids.update(call.id for call in event.tool_calls)
        elif isinstance(event, ev.ToolCallStarted):
            call = event.call
            is_check = call.id.startswith(CHECK_CALL_PREFIX) and call.id not in self._model_call_ids
            card = ToolCard(call, str(self.agent.workspace), is_check=is_check)
            self._cards[event.call.id] = card
            self.transcript.add(card)
        elif isinstance(event, ev.ToolResultReceived):
            self._tool_finished(event)
        elif isinstance(event, ev.RunStarted):
            self.status.facts.session_id = event.session_id
        elif isinstance(event, ev.BudgetUpdated):
            self.status.facts.budget_fraction = event.fraction
            self.status.facts.budget_level = event.level
        elif isinstance(event, ev.ExtensionDecided):
            verdict = "granted" if event.granted else "denied"
            why = f" ({printable(event.reason)})" if event.reason else ""
            self.note(f"budget extension {verdict}{why}")
        elif isinstance(event, ev.NudgeInjected):
            self.note(f"[{event.kind}] {printable(event.message)[:200]}")
        elif isinstance(event, ev.ErrorOccurred):
            self.note(Text(f"{event.category}: {printable(event.message)}", style="red"))
        elif isinstance(event, ev.ContextCompacted):
            self.compaction_asked = False
            before, after = event.tokens_before, event.tokens_after
            self.note(f"context compacted: {before:,} -> {after:,} tokens")
        self.refresh_usage()

    def _tool_finished(self, event: ev.ToolResultReceived) -> None:
        result = event.result
        card = self._cards.pop(result.call_id, None)
        if card is not None:
            card.finished(result, event.duration_s)
            path = card.call.arguments.get("path")
            tool = self.agent.registry.get(card.call.name)
            self.phases.record(
                card.call.name,
                None if tool is None else tool.kind,
                is_error=result.is_error,
                path=path if isinstance(path, str) else None,
            )
        else:  # a result without a card (a refused call): one line
            self.note(f"{printable(result.name)}: {printable(result.content[:RESULT_CHARS_SHOWN])}")
