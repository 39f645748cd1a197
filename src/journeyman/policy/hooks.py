"""Hooks: user code run at points of a session's life, able to veto, stop or add to it.

A hook is either a Python callable registered through the API, ``callback(event, payload)``
returning a `HookOutcome` or None (sync or async), or a shell command from the config
(`ShellHookConfig`) that receives the payload as JSON on stdin.

Shell protocol:

- exit 0: the run continues, unless stdout holds a JSON object
  ``{"decision": "continue" | "deny" | "halt", "reason": ..., "message": ..., "append": ...}``
  (every key optional; "block" is read as "deny"). Other stdout text is ignored.
- exit 2: deny, with stderr as the reason.
- any other exit status, a crash, invalid JSON or a timeout: the failure is reported in
  `HookRunResult.errors` and logged, and the run carries on as if the hook had said continue.
  A hook that runs past its timeout is killed with every process it started (its own process
  group).

What the outcomes mean is up to the caller; the loop reads them so:

================== ===================================================================
outcome            effect
================== ===================================================================
deny               PreToolUse: the tool is not run and the reason is its error result.
                   UserPromptSubmit: the prompt is refused. Stop: the run may not end
                   yet; the reason goes back to the model. Elsewhere: ignored.
halt               the run stops (any event), with the reason as the halt reason.
message            text added to the conversation as a user message.
append             PostToolUse / PostToolUseFailure: text appended to the tool result.
================== ===================================================================

When several hooks answer one event, all of them run (concurrently), halt beats deny beats
continue, and texts are collected in the order the hooks were registered. A hook's matcher is a
regular expression that must match the whole tool name (``edit_file|write_file``); it applies
to the events that carry a tool name and is ignored for the others. No hook can break the run:
failures are reported, never raised (cancellation of the run itself still propagates).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import os
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from journeyman.core.messages import ToolResult
from journeyman.core.text import clip, clip_noted
from journeyman.tools.shell import KILL_GRACE, _shell, _stop_group

log = logging.getLogger(__name__)

DEFAULT_HOOK_TIMEOUT = 60.0
"""Seconds a hook may run before it is stopped and reported."""
MAX_REASON_CHARS = 4_000
"""Longest reason, message or appended text kept from one hook."""


class HookEvent(StrEnum):
    SESSION_START = "SessionStart"
    SESSION_END = "SessionEnd"
    USER_PROMPT_SUBMIT = "UserPromptSubmit"
    PRE_TOOL_USE = "PreToolUse"
    POST_TOOL_USE = "PostToolUse"
    POST_TOOL_USE_FAILURE = "PostToolUseFailure"
    STOP = "Stop"
    PRE_COMPACT = "PreCompact"
    POST_COMPACT = "PostCompact"
    SUBAGENT_START = "SubagentStart"
    SUBAGENT_STOP = "SubagentStop"
    NOTIFICATION = "Notification"


TOOL_EVENTS = frozenset(
    {HookEvent.PRE_TOOL_USE, HookEvent.POST_TOOL_USE, HookEvent.POST_TOOL_USE_FAILURE}
)
"""Events about one tool call; a hook's matcher is tested against their tool name."""


class HookDecision(StrEnum):
    CONTINUE = "continue"
    DENY = "deny"
    HALT = "halt"


_SEVERITY = {HookDecision.CONTINUE: 0, HookDecision.DENY: 1, HookDecision.HALT: 2}


@dataclass(frozen=True)
class HookPayload:
    """What a hook is told; fields that do not apply to an event stay None."""

    session_id: str = ""
    cwd: str = ""
    """The workspace; shell hooks also run in it."""
    tool_name: str | None = None
    tool_args: Mapping[str, Any] | None = None
    tool_result: str | None = None
    """The result text (PostToolUse, PostToolUseFailure)."""
    is_error: bool | None = None
    prompt: str | None = None
    """The user's prompt (UserPromptSubmit) or the task (SessionStart)."""
    message: str | None = None
    """The notification text (Notification) or the final text (Stop)."""
    parent_session_id: str | None = None
    """The parent session of a subagent (SubagentStart, SubagentStop)."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    """More event-specific fields, merged into the JSON object."""

    def to_json(self, event: HookEvent) -> dict[str, Any]:
        """The object a shell hook reads: ``event``, ``session_id``, ``cwd``, then the rest."""
        data: dict[str, Any] = dict(self.extra)
        data.update(event=event.value, session_id=self.session_id, cwd=self.cwd)
        optional = {
            "tool_name": self.tool_name,
            "tool_args": dict(self.tool_args) if self.tool_args is not None else None,
            "tool_result": self.tool_result,
            "is_error": self.is_error,
            "prompt": self.prompt,
            "message": self.message,
            "parent_session_id": self.parent_session_id,
        }
        data.update({k: v for k, v in optional.items() if v is not None})
        return data


@dataclass(frozen=True)
class HookOutcome:
    """One hook's answer. The default is "carry on, nothing to add"."""

    decision: HookDecision = HookDecision.CONTINUE
    reason: str = ""
    """Why it denied or halted; shown to the model (deny) or the user (halt)."""
    message: str = ""
    """Text to add to the conversation."""
    append: str = ""
    """Text to append to the tool result (PostToolUse events)."""

    @classmethod
    def deny(cls, reason: str) -> HookOutcome:
        return cls(HookDecision.DENY, reason=reason)

    @classmethod
    def halt(cls, reason: str) -> HookOutcome:
        return cls(HookDecision.HALT, reason=reason)

    @classmethod
    def inject(cls, message: str) -> HookOutcome:
        return cls(message=message)

    @classmethod
    def augment(cls, text: str) -> HookOutcome:
        return cls(append=text)


HookCallback = Callable[
    [HookEvent, HookPayload], "HookOutcome | Awaitable[HookOutcome | None] | None"
]
"""A Python hook. Sync callbacks run on the event loop's thread, so keep them quick; async
ones are cancelled at their timeout."""


class ShellHookConfig(BaseModel):
    """One ``[[hooks]]`` entry of the config file."""

    model_config = ConfigDict(extra="forbid")

    event: HookEvent
    """When to run: one of the HookEvent names, e.g. "PreToolUse"."""
    command: str = Field(min_length=1)
    """Shell command line (bash); the JSON payload arrives on its stdin."""
    matcher: str | None = None
    """Regular expression the whole tool name must match; empty or "*" means every tool."""
    timeout: float = Field(default=DEFAULT_HOOK_TIMEOUT, gt=0)
    """Seconds before the command, and every process it started, is killed."""

    @field_validator("matcher")
    @classmethod
    def _matcher_compiles(cls, value: str | None) -> str | None:
        _compile_matcher(value)
        return value


@dataclass(frozen=True)
class HookError:
    """A hook that failed; reported, never raised."""

    hook: str
    kind: str
    """"exception", "timeout", "exit_status", "invalid_output", "bad_return" or "spawn"."""
    message: str


@dataclass
class HookRunResult:
    """Every matching hook's answer to one event, combined."""

    event: HookEvent
    decision: HookDecision = HookDecision.CONTINUE
    reasons: list[str] = field(default_factory=list)
    """Reasons given by the hooks that denied or halted, in registration order."""
    messages: list[str] = field(default_factory=list)
    appends: list[str] = field(default_factory=list)
    errors: list[HookError] = field(default_factory=list)
    ran: int = 0
    """How many hooks matched and ran."""

    @property
    def denied(self) -> bool:
        """A hook denied (or halted, which is stronger)."""
        return self.decision is not HookDecision.CONTINUE

    @property
    def halted(self) -> bool:
        return self.decision is HookDecision.HALT

    @property
    def reason(self) -> str:
        return "\n".join(self.reasons)

    @property
    def message(self) -> str:
        """The messages to add to the conversation, one paragraph each; "" when none."""
        return "\n\n".join(self.messages)

    @property
    def append(self) -> str:
        return "\n\n".join(self.appends)

    def apply_to(self, result: ToolResult) -> ToolResult:
        """`result` with the hooks' appended text at its end (unchanged when there is none)."""
        if not self.appends:
            return result
        return replace(result, content=f"{result.content}\n\n{self.append}")


@dataclass(frozen=True)
class _Hook:
    event: HookEvent
    name: str
    matcher: re.Pattern[str] | None
    timeout: float
    callback: HookCallback | None = None
    command: str | None = None

    def applies(self, event: HookEvent, payload: HookPayload) -> bool:
        if event is not self.event:
            return False
        if self.matcher is None or event not in TOOL_EVENTS:
            return True
        return self.matcher.fullmatch(payload.tool_name or "") is not None


def _compile_matcher(matcher: str | None) -> re.Pattern[str] | None:
    if matcher is None or matcher.strip() in ("", "*"):
        return None
    try:
        return re.compile(matcher)
    except re.error as exc:
        raise ValueError(
            f"hook matcher {matcher!r} is not a valid regular expression: {exc}"
        ) from None


class HookRunner:
    """Holds the hooks of a run and runs the ones matching an event."""

    def __init__(
        self,
        *,
        cwd: str | os.PathLike[str] | None = None,
        kill_grace: float = KILL_GRACE,
    ) -> None:
        self.cwd = Path(cwd) if cwd is not None else None
        """Where shell hooks run when the payload names no cwd."""
        self.kill_grace = kill_grace
        self._hooks: list[_Hook] = []

    @classmethod
    def from_config(
        cls, hooks: Sequence[ShellHookConfig], *, cwd: str | os.PathLike[str] | None = None
    ) -> HookRunner:
        runner = cls(cwd=cwd)
        for config in hooks:
            runner.add_shell(config)
        return runner

    def add(
        self,
        event: HookEvent | str,
        callback: HookCallback,
        *,
        matcher: str | None = None,
        timeout: float = DEFAULT_HOOK_TIMEOUT,
        name: str | None = None,
    ) -> None:
        """Register a Python hook for `event` (optionally only for tools matching `matcher`)."""
        label = name or getattr(callback, "__qualname__", None) or repr(callback)
        self._hooks.append(
            _Hook(HookEvent(event), label, _compile_matcher(matcher), timeout, callback=callback)
        )

    def add_shell(self, config: ShellHookConfig) -> None:
        name = clip(config.command, 60)
        self._hooks.append(
            _Hook(
                config.event,
                name,
                _compile_matcher(config.matcher),
                config.timeout,
                command=config.command,
            )
        )

    def has(self, event: HookEvent | str) -> bool:
        """Whether any hook listens to `event` (to skip building a payload nobody reads)."""
        return any(h.event is HookEvent(event) for h in self._hooks)

    async def run(
        self, event: HookEvent | str, payload: HookPayload | None = None
    ) -> HookRunResult:
        """Run every hook registered for `event` whose matcher accepts the payload."""
        event = HookEvent(event)
        payload = payload or HookPayload(cwd=str(self.cwd) if self.cwd else "")
        hooks = [h for h in self._hooks if h.applies(event, payload)]
        result = HookRunResult(event, ran=len(hooks))
        if not hooks:
            return result
        answers = await asyncio.gather(*(self._run_one(h, event, payload) for h in hooks))
        for hook, answer in zip(hooks, answers, strict=True):
            if isinstance(answer, HookError):
                log.warning(
                    "%s hook %r failed (%s): %s", event, hook.name, answer.kind, answer.message
                )
                result.errors.append(answer)
                continue
            if _SEVERITY[answer.decision] > _SEVERITY[result.decision]:
                result.decision = answer.decision
            if answer.decision is not HookDecision.CONTINUE:
                result.reasons.append(
                    answer.reason or f"{event} hook {hook.name!r} said {answer.decision}"
                )
            if answer.message:
                result.messages.append(answer.message)
            if answer.append:
                result.appends.append(answer.append)
        return result

    async def _run_one(
        self, hook: _Hook, event: HookEvent, payload: HookPayload
    ) -> HookOutcome | HookError:
        if hook.callback is not None:
            return await _run_callable(hook, hook.callback, event, payload)
        assert hook.command is not None
        return await self._run_shell(hook, hook.command, event, payload)

    async def _run_shell(
        self, hook: _Hook, command: str, event: HookEvent, payload: HookPayload
    ) -> HookOutcome | HookError:
        cwd = payload.cwd or (str(self.cwd) if self.cwd else None)
        env = dict(os.environ)
        env.update(
            JOURNEYMAN_HOOK_EVENT=event.value,
            JOURNEYMAN_SESSION_ID=payload.session_id,
            JOURNEYMAN_PROJECT_DIR=cwd or os.getcwd(),
        )
        data = (json.dumps(payload.to_json(event), default=str) + "\n").encode()
        try:
            proc = await asyncio.create_subprocess_shell(
                command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=cwd,
                env=env,
                start_new_session=True,
                executable=_shell(),
            )
        except OSError as exc:
            return HookError(hook.name, "spawn", f"could not start: {exc}")
        try:
            stdout, stderr = await asyncio.wait_for(proc.communicate(data), hook.timeout)
        except TimeoutError:
            await self._stop(proc)
            return HookError(
                hook.name,
                "timeout",
                f"still running after {hook.timeout:g} s; stopped with every process it started",
            )
        except BaseException:  # the run was cancelled: leave nothing behind
            await asyncio.shield(self._stop(proc))
            raise
        return _shell_outcome(hook.name, proc.returncode, stdout, stderr)

    async def _stop(self, proc: asyncio.subprocess.Process) -> None:
        await _stop_group(proc.pid, self.kill_grace)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(proc.wait(), self.kill_grace + 1.0)


async def _run_callable(
    hook: _Hook, callback: HookCallback, event: HookEvent, payload: HookPayload
) -> HookOutcome | HookError:
    try:
        value = callback(event, payload)
        if inspect.isawaitable(value):
            try:
                value = await asyncio.wait_for(_awaited(value), hook.timeout)
            except TimeoutError:
                return HookError(
                    hook.name, "timeout", f"did not return within {hook.timeout:g} s; cancelled"
                )
    except Exception as exc:
        return HookError(hook.name, "exception", f"{type(exc).__name__}: {exc}")
    if value is None:
        return HookOutcome()
    if isinstance(value, HookOutcome):
        return value
    return HookError(
        hook.name, "bad_return", f"returned {type(value).__name__}; expected HookOutcome or None"
    )


async def _awaited(value: Awaitable[HookOutcome | None]) -> HookOutcome | None:
    return await value


def _shell_outcome(
    name: str, code: int | None, stdout: bytes, stderr: bytes
) -> HookOutcome | HookError:
    err = _clip(stderr.decode("utf-8", errors="replace").strip())
    if code == 2:
        return HookOutcome.deny(err or f"denied by hook {name!r}")
    if code != 0:
        detail = f": {err}" if err else ""
        return HookError(name, "exit_status", f"exited with status {code}{detail}")
    text = stdout.decode("utf-8", errors="replace").strip()
    if not text:
        return HookOutcome()
    try:
        data = json.loads(text)
    except ValueError:
        if text.startswith("{"):
            return HookError(name, "invalid_output", "printed invalid JSON on stdout; ignored")
        return HookOutcome()  # plain output (progress, logs) carries no decision
    if not isinstance(data, dict):
        return HookOutcome()
    raw = str(data.get("decision") or "continue").lower()
    decision = {"block": "deny"}.get(raw, raw)
    if decision not in HookDecision.__members__.values():
        return HookError(
            name,
            "invalid_output",
            f'unknown decision {raw!r}; use "continue", "deny" or "halt"',
        )
    return HookOutcome(
        HookDecision(decision),
        reason=_text(data.get("reason")),
        message=_text(data.get("message")),
        append=_text(data.get("append")),
    )


def _text(value: object) -> str:
    if value is None:
        return ""
    return _clip(value if isinstance(value, str) else json.dumps(value, default=str))


def _clip(text: str) -> str:
    return clip_noted(text, MAX_REASON_CHARS)
