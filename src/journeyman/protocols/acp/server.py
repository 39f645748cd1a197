"""journeyman as an Agent Client Protocol agent: the editor (the client) opens sessions on a
folder, sends prompts and answers permission questions; journeyman runs each prompt as a turn
of one stored session and streams what happens as session updates.

- `session/new`: the workspace is the client's cwd; settings come from the user's config, the
  workspace's file (which may only tighten, as on the command line) and the flags `journeyman
  acp` was started with. The journeyman session id is the ACP session id.
- `session/prompt`: the first prompt starts the session (`Agent.run`), later ones continue it
  (`Agent.send`); the reply is streamed, tool calls are shown with their diffs or commands,
  the phased mode's workflow is shown as the plan.
- Calls that need approval are asked through `session/request_permission`: the client's
  answer is the approval (allow once, allow always, reject).
- `session/cancel` stops the running turn at once; the prompt ends with `cancelled` and the
  session takes further prompts.
- `session/load` reopens a stored session (after the editor or journeyman restarted): its
  conversation is replayed to the client, and the next prompt continues it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import acp
from acp import schema

from journeyman.core import events as ev
from journeyman.core.display import printable_name
from journeyman.core.errors import AgentError, ConfigurationError
from journeyman.core.messages import ToolCall
from journeyman.core.result import RunResult
from journeyman.core.tool_kind import ToolKind
from journeyman.loop.agent import Agent
from journeyman.loop.config import ModeName
from journeyman.policy.permissions import ApprovalAnswer, ApprovalRequest
from journeyman.protocols.acp import updates
from journeyman.session.store import (
    SessionNotFoundError,
    SessionRecord,
    SessionStore,
    new_session_id,
)

log = logging.getLogger(__name__)

PERMISSION_TIMEOUT_S = 600.0
"""No answer to a permission question within this many seconds refuses the call."""
MAX_FILE_SHOWN = 1_000_000
"""Bytes of a file read to show a whole-file write as a diff; bigger files show no old text."""

ALLOW_ONCE = "allow_once"
ALLOW_ALWAYS = "allow_always"
REJECT_ONCE = "reject_once"

AgentBuilder = Callable[[Path, "SessionHooks", SessionRecord | None], "BuiltAgent"]
"""Builds the journeyman agent of a session: (workspace, the session's hooks, the stored
session being loaded, else None). Raises `ConfigurationError` when it cannot."""


@dataclass(frozen=True)
class SessionHooks:
    """What a session lends its agent: the event sink and the permission asker."""

    on_event: Callable[[ev.Event], None]
    permission_approver: Callable[[ApprovalRequest], Any]


@dataclass(frozen=True)
class BuiltAgent:
    agent: Agent
    notes: tuple[str, ...] = ()
    """Warnings for the user (settings the trust rules ignored), shown at the first prompt."""


@dataclass
class AcpSession:
    """One ACP session: a journeyman agent on a workspace and the session it talks to."""

    id: str
    workspace: Path
    client: acp.Client
    started: bool = False
    """Whether the journeyman session exists in the store (after a first prompt or a load):
    the next prompt continues it."""
    agent: Agent | None = None
    notes: list[str] = field(default_factory=list)
    running: asyncio.Task[RunResult] | None = None
    outbox: asyncio.Queue[Any] = field(default_factory=asyncio.Queue)
    open_calls: dict[str, ToolCall] = field(default_factory=dict)
    hidden_calls: set[str] = field(default_factory=set)
    """Calls not shown as tool calls (`finish`: its summary is the agent's last message)."""
    streamed: bool = False
    """Text of the current model reply was streamed (so its full text is not sent again)."""
    sent_text: list[str] = field(default_factory=list)
    seen_changes: set[int] = field(default_factory=set)
    """File changes already shown (or made before the current prompt): a call shows only the
    changes journaled while it ran."""
    model_call_ids: set[str] = field(default_factory=set)
    """Ids of the calls the model asked for in the current prompt (the rest are the
    harness's)."""
    pump: asyncio.Task[None] | None = None
    loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.get_running_loop)
    """The loop the session serves on (events from another thread are handed to it)."""

    # --- the agent's events -> session updates --------------------------------------------

    def on_event(self, event: ev.Event) -> None:
        """Called by the run for each event (synchronously, on the event loop)."""
        match event:
            case ev.TextDelta():
                if event.text:
                    self.streamed = True
                    self._say(event.text)
            case ev.ModelResponseReceived():
                self.model_call_ids.update(call.id for call in event.tool_calls)
                if not self.streamed and event.text.strip():
                    self._say(event.text)
                self.streamed = False
            case ev.ToolCallStarted():
                self._call_started(event.call)
            case ev.ToolResultReceived():
                self._call_finished(event.result)
            case ev.PhaseChanged():
                if event.to_phase != "fail":
                    self.send(updates.plan_update(updates.plan_entries(event.to_phase)))

    def _say(self, text: str) -> None:
        self.sent_text.append(text)
        self.send(updates.agent_text(text))

    def _kind(self, call: ToolCall) -> ToolKind | None:
        return None if self.agent is None else self.agent.registry.kind_of(call)

    def _call_started(self, call: ToolCall) -> None:
        kind = self._kind(call)
        if kind is ToolKind.FINISH:
            self.hidden_calls.add(call.id)
            return
        self.open_calls[call.id] = call
        self.send(
            schema.ToolCallStart(
                session_update="tool_call",
                tool_call_id=call.id,
                title=updates.title_of(call),
                kind=updates.acp_kind(kind),
                status="pending",
                content=updates.proposed_content(
                    self.workspace, call, kind, self._current_text(call)
                ),
                locations=updates.locations_of(self.workspace, call),
                raw_input=call.arguments,
            )
        )

    def _call_finished(self, result: Any) -> None:
        if result.call_id in self.hidden_calls or result.call_id not in self.open_calls:
            return
        call = self.open_calls.pop(result.call_id)
        changes = self._new_changes()
        check = updates.is_check(call.id, self.model_call_ids)
        self.send(
            schema.ToolCallProgress(
                session_update="tool_call_update",
                tool_call_id=call.id,
                status=updates.result_status(result, check=check),
                content=updates.result_content(self.workspace, result, changes, check=check),
                locations=updates.locations_of(self.workspace, call, [c.path for c in changes]),
            )
        )

    def _new_changes(self) -> list[Any]:
        """The file changes journaled since the last call finished (the undo journal is
        written before each change, so they are this call's)."""
        changes = self._stored_changes()
        changes = [c for c in changes if c.id not in self.seen_changes]
        self.seen_changes.update(c.id for c in changes)
        return changes

    def begin_prompt(self) -> None:
        """Before a prompt runs: what earlier turns changed (one cancelled mid-call, or the
        turns of a session reopened with session/load) is not shown again as a diff."""
        self.sent_text = []
        self.model_call_ids.clear()
        if self.started:
            self.seen_changes.update(c.id for c in self._stored_changes())

    def _stored_changes(self) -> list[Any]:
        if self.agent is None:
            return []
        store = SessionStore(self.agent.session_root)
        try:
            return list(store.file_changes(self.id))
        except Exception:  # the diff is a nicety; the run goes on without it
            log.warning("could not read the file changes of session %s", self.id, exc_info=True)
            return []
        finally:
            store.close()

    def _current_text(self, call: ToolCall) -> str | None:
        """The file a whole-file write replaces, for its diff (None: new, big or unreadable)."""
        path = call.arguments.get("path")
        if not isinstance(path, str) or not isinstance(call.arguments.get("content"), str):
            return None
        target = (self.workspace / path).resolve()
        try:
            target.relative_to(self.workspace)
            if not target.is_file() or target.stat().st_size > MAX_FILE_SHOWN:
                return None
            return target.read_text(encoding="utf-8")
        except (OSError, ValueError):
            return None

    # --- sending, in order ----------------------------------------------------------------

    def send(self, update: Any) -> None:
        try:
            on_loop = asyncio.get_running_loop() is self.loop
        except RuntimeError:
            on_loop = False
        if not on_loop:  # an event emitted from a worker thread
            self.loop.call_soon_threadsafe(self.send, update)
            return
        if self.pump is None or self.pump.done():
            self.pump = self.loop.create_task(self._pump())
        self.outbox.put_nowait(update)

    async def _pump(self) -> None:
        while True:
            update = await self.outbox.get()
            try:
                await self.client.session_update(session_id=self.id, update=update)
            except Exception:  # the client went away: the run still ends and is stored
                log.warning("could not send a session update to the client", exc_info=True)
            finally:
                self.outbox.task_done()

    async def flush(self) -> None:
        """Wait until every update queued so far has been sent."""
        await self.outbox.join()

    async def close(self) -> None:
        """Stop the running prompt and the update pump; the agent is disposed of."""
        if self.running is not None and not self.running.done():
            self.running.cancel()
            await asyncio.wait({self.running})
        if self.pump is not None:
            self.pump.cancel()
            await asyncio.gather(self.pump, return_exceptions=True)
        if self.agent is not None:
            self.agent.close()

    # --- permission questions -------------------------------------------------------------

    async def ask_permission(self, request: ApprovalRequest) -> ApprovalAnswer:
        """Ask the client about a call that needs approval; its answer is the approval."""
        call = self._call_for(request)
        await self.flush()  # the client knows the tool call before it is asked about it
        kind = self._kind(call)
        tool_call = schema.ToolCallUpdate(
            tool_call_id=call.id,
            title=updates.title_of(call),
            kind=updates.acp_kind(kind),
            status="pending",
            content=updates.question_content(self.workspace, call, kind, self._current_text(call)),
            locations=updates.locations_of(self.workspace, call),
            raw_input=dict(request.args),
        )
        options = [schema.PermissionOption(option_id=ALLOW_ONCE, name="Allow", kind="allow_once")]
        if request.remember_as:
            rules = printable_name(", ".join(request.remember_as))
            options.append(
                schema.PermissionOption(
                    option_id=ALLOW_ALWAYS, name=f"Always allow ({rules})", kind="allow_always"
                )
            )
        options.append(
            schema.PermissionOption(option_id=REJECT_ONCE, name="Reject", kind="reject_once")
        )
        try:
            response = await asyncio.wait_for(
                self.client.request_permission(
                    session_id=self.id, tool_call=tool_call, options=options
                ),
                PERMISSION_TIMEOUT_S,
            )
        except TimeoutError:
            log.warning("no answer to the permission question about %s: refused", call.name)
            return ApprovalAnswer.DENY
        except (acp.RequestError, ConnectionError) as error:
            log.warning("the permission question about %s failed (%s): refused", call.name, error)
            return ApprovalAnswer.DENY
        answer = _answer(response, bool(request.remember_as))
        if answer is not ApprovalAnswer.DENY and call.id in self.open_calls:
            self.send(
                schema.ToolCallProgress(
                    session_update="tool_call_update", tool_call_id=call.id, status="in_progress"
                )
            )
        return answer

    def _call_for(self, request: ApprovalRequest) -> ToolCall:
        """The running call the question is about (the latest with this tool and these
        arguments); a stand-in when none matches (a hook or a tool asking by itself)."""
        for call in reversed(list(self.open_calls.values())):
            if call.name == request.tool_name and call.arguments == dict(request.args):
                return call
        # random: the first characters of a session id are only its date, shared by many calls
        stand_in = f"approval-{uuid.uuid4().hex[:12]}"
        return ToolCall(stand_in, request.tool_name, dict(request.args))


def _answer(response: schema.RequestPermissionResponse, always_offered: bool) -> ApprovalAnswer:
    outcome = response.outcome
    if not isinstance(outcome, schema.AllowedOutcome):  # the client cancelled the question
        return ApprovalAnswer.DENY
    if outcome.option_id == ALLOW_ONCE:
        return ApprovalAnswer.ALLOW
    if outcome.option_id == ALLOW_ALWAYS and always_offered:
        return ApprovalAnswer.ALWAYS
    return ApprovalAnswer.DENY


class JourneymanAcpAgent:
    """The ACP agent side (`acp.Agent`): sessions by id, each with its own journeyman agent."""

    def __init__(self, build: AgentBuilder, session_root: Path, version: str) -> None:
        self.build = build
        self.session_root = session_root
        self.version = version
        self.client: acp.Client | None = None
        self.sessions: dict[str, AcpSession] = {}

    def on_connect(self, conn: acp.Client) -> None:
        self.client = conn

    def _client(self) -> acp.Client:
        if self.client is None:
            raise acp.RequestError.internal_error({"details": "no client connection"})
        return self.client

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: schema.ClientCapabilities | None = None,
        client_info: schema.Implementation | None = None,
        **kwargs: Any,
    ) -> schema.InitializeResponse:
        return schema.InitializeResponse(
            protocol_version=min(protocol_version, acp.PROTOCOL_VERSION),
            agent_capabilities=schema.AgentCapabilities(
                load_session=True,
                prompt_capabilities=schema.PromptCapabilities(embedded_context=True),
            ),
            agent_info=schema.Implementation(
                name="journeyman", title="journeyman", version=self.version
            ),
        )

    async def authenticate(self, method_id: str, **kwargs: Any) -> None:
        return None  # provider keys come from the environment; nothing to sign in to

    async def new_session(
        self, cwd: str, mcp_servers: list[Any] | None = None, **kwargs: Any
    ) -> schema.NewSessionResponse:
        workspace = _workspace(cwd)
        session = AcpSession(new_session_id(), workspace, self._client())
        self._attach(session, None)
        self.sessions[session.id] = session
        return schema.NewSessionResponse(session_id=session.id)

    async def load_session(
        self, cwd: str, session_id: str, mcp_servers: list[Any] | None = None, **kwargs: Any
    ) -> schema.LoadSessionResponse:
        workspace = _workspace(cwd)
        store = SessionStore(self.session_root)
        try:
            record = store.load_session(store.resolve_id(session_id))
            messages = store.messages(record.id)
        except SessionNotFoundError as error:
            raise acp.RequestError.invalid_params(
                {"sessionId": session_id, "details": error.message}
            ) from None
        finally:
            store.close()
        if Path(record.workspace).resolve() != workspace:
            raise acp.RequestError.invalid_params(
                {
                    "sessionId": session_id,
                    "details": f"session {record.id} works in {record.workspace}, not in "
                    f"{workspace}; open that folder to continue it",
                }
            )
        previous = self.sessions.pop(record.id, None)
        if previous is not None:
            await previous.close()
        session = AcpSession(record.id, workspace, self._client(), started=True)
        self._attach(session, record)
        self.sessions[session.id] = session
        assert session.agent is not None
        for update in updates.replay(workspace, messages, session.agent.registry.kind_of):
            session.send(update)
        await session.flush()
        return schema.LoadSessionResponse()

    def _attach(self, session: AcpSession, stored: SessionRecord | None) -> None:
        hooks = SessionHooks(session.on_event, session.ask_permission)
        try:
            built = self.build(session.workspace, hooks, stored)
        except ConfigurationError as error:
            raise acp.RequestError.invalid_params({"details": error.message}) from None
        session.agent = built.agent
        session.notes.extend(built.notes)

    async def prompt(
        self, session_id: str, prompt: list[Any], **kwargs: Any
    ) -> schema.PromptResponse:
        session = self._session(session_id)
        if session.running is not None and not session.running.done():
            raise acp.RequestError.invalid_request(
                {
                    "details": f"session {session_id} is still working on the last prompt; "
                    "cancel it or wait for it to end"
                }
            )
        text = prompt_text(prompt)
        if not text.strip():
            raise acp.RequestError.invalid_params({"details": "the prompt has no text"})
        for note in session.notes:
            session.send(updates.agent_text(f"[journeyman] {note}\n\n"))
        session.notes.clear()
        session.begin_prompt()
        agent = session.agent
        assert agent is not None
        if session.started:
            work = agent.send(session.id, text)
        else:
            work = agent.run(text, session_id=session.id)
        session.running = asyncio.get_running_loop().create_task(work)
        await asyncio.wait({session.running})
        session.open_calls.clear()
        with contextlib.suppress(AgentError):  # an unreadable store: the run's error says so
            session.started = session.started or _stored(agent.session_root, session.id)
        if session.running.cancelled():
            await session.flush()
            return schema.PromptResponse(stop_reason="cancelled")
        try:
            result = session.running.result()
        except AgentError as error:  # e.g. the store is full, or the session vanished
            await session.flush()
            raise acp.RequestError.internal_error({"details": error.message}) from None
        final = result.final_text.strip()
        if final and final not in "".join(session.sent_text):
            session.send(updates.agent_text(("\n\n" if session.sent_text else "") + final))
        ending = updates.ending_message(result)
        if ending:
            session.send(updates.agent_text(ending))
        if result.success and agent.config.mode is ModeName.PHASED:
            session.send(updates.plan_update(updates.plan_entries("done")))
        await session.flush()
        return schema.PromptResponse(stop_reason=updates.stop_reason(result.finish_reason))

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        session = self.sessions.get(session_id)
        if session is None or session.running is None or session.running.done():
            return
        assert session.agent is not None
        session.agent.cancel()  # between turns
        session.running.cancel()  # in the middle of one (a model call, a command, a question)

    def _session(self, session_id: str) -> AcpSession:
        session = self.sessions.get(session_id)
        if session is None:
            raise acp.RequestError.invalid_params(
                {
                    "sessionId": session_id,
                    "details": "no such session here; create one with "
                    "session/new or reopen it with session/load",
                }
            )
        return session

    async def close(self) -> None:
        for session in list(self.sessions.values()):
            await session.close()


def _stored(session_root: Path, session_id: str) -> bool:
    store = SessionStore(session_root)
    try:
        store.load_session(session_id)
    except SessionNotFoundError:
        return False
    finally:
        store.close()
    return True


def _workspace(cwd: str) -> Path:
    path = Path(cwd)
    if not path.is_absolute():
        raise acp.RequestError.invalid_params(
            {"cwd": cwd, "details": "cwd must be an absolute path"}
        )
    if not path.is_dir():
        raise acp.RequestError.invalid_params({"cwd": cwd, "details": f"{cwd} is not a directory"})
    return path.resolve()


def prompt_text(blocks: list[Any]) -> str:
    """The prompt as one message: its text, linked files named, embedded text files inlined."""
    parts: list[str] = []
    for block in blocks:
        if isinstance(block, schema.TextContentBlock):
            parts.append(block.text)
        elif isinstance(block, schema.ResourceContentBlock):
            parts.append(f"[file: {block.uri}]")
        elif isinstance(block, schema.EmbeddedResourceContentBlock):
            resource = block.resource
            if isinstance(resource, schema.TextResourceContents):
                parts.append(f"[file: {resource.uri}]\n```\n{resource.text}\n```")
            else:
                parts.append(f"[file: {resource.uri} (binary, not included)]")
        else:
            parts.append(f"[a {getattr(block, 'type', 'non-text')} block was left out]")
    return "\n\n".join(parts)
