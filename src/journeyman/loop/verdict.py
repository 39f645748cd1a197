"""The harness's verdict on a run: the model says it is done, the harness decides whether it is.

A success claim (a `finish` call, or a prose answer without tool calls) is accepted when:

- a check command is known and it passed after the last change to the workspace; the check is
  the configured one (`verify_command`, `--verify`), else the first test command the project
  profile detected whose program is installed (`context.profile.runnable_test_command`);
- or no check is known (or checking is off: `--no-verify`, the ask mode, the plan permission
  mode) and no edit or command call of the run was refused without succeeding later. In the
  plan permission mode the user asked for nothing to change, so refused calls are listed in
  the result but do not fail the run.

A failing check goes back to the model as a harness message (command, exit code, output tail)
and the loop goes on, up to `max_verify_rounds` failed checks; then the run ends as
`verification_failed` (or `refused`, when refused calls may explain the failure). A check that
cannot run at all (a deny rule, exit code 126/127) is a configuration error: no edit of the
model can fix it.

The check runs through the same `run_command` tool as the model's commands (same sandbox,
same undo journal), under its own time limit (`verify_timeout_s`), never the tool timeout. It
is the harness's own action, decided by the user's configuration or the project's own test
command, so it does not ask for approval; a deny rule that matches it still holds.

Every mode uses this module: the kernel consults `Verdict.review` where it accepts a success
and `Verdict.annotate` where it builds the RunResult; the phased mode's VERIFY step runs its
checks through `Verdict.check`.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from journeyman.context.memory import normalise
from journeyman.context.profile import detect_profile, runnable_test_command
from journeyman.core import events as ev
from journeyman.core.errors import (
    AgentError,
    ConfigurationError,
    PermissionDeniedError,
    ToolError,
    ToolTimeoutError,
)
from journeyman.core.messages import ToolCall, ToolResult
from journeyman.core.result import CheckEvidence, FinishReason, RefusedCall, RunResult
from journeyman.core.text import one_line
from journeyman.economics.loop_detector import result_digest
from journeyman.loop.config import AgentConfig, ModeName
from journeyman.loop.endings import Termination
from journeyman.loop.recorder import FOLLOW_UP_EVENT
from journeyman.policy.permissions import (
    PERMISSION_ERROR_KIND,
    DecisionKind,
    PermissionGate,
    PermissionMode,
)
from journeyman.session.store import SessionStore
from journeyman.tools.base import ToolKind
from journeyman.tools.context import ToolContext, tool_session_id
from journeyman.tools.registry import ToolRegistry
from journeyman.tools.shell import RunCommandArgs, RunCommandTool

if TYPE_CHECKING:
    from journeyman.loop.state import LoopState, TurnOutcome

log = logging.getLogger(__name__)

COMMAND_TOOL = RunCommandTool.name
"""The tool the check runs through."""
SHELL_CANNOT_EXECUTE = 126
SHELL_NOT_FOUND = 127
OUTPUT_TAIL_LINES = 40
OUTPUT_TAIL_CHARS = 3_000
STOP_GRACE_S = 30.0
"""Extra seconds past the check's own limit before the harness gives up waiting for it."""
NUDGE_KIND = "verification"
CHECK_CALL_PREFIX = "verify-"
"""Call ids of the harness's own checks (so a display can tell them from the model's calls)."""
REFUSAL_CHARS = 240


class Ruling(StrEnum):
    """What the kernel does with a success claim."""

    ACCEPT = "accept"
    """The claim holds: end the run with the mode's success."""
    RETRY = "retry"
    """Not done: a harness message is queued for the model and the loop goes on."""


@dataclass(frozen=True)
class CheckRun:
    """One run of the check command by the harness."""

    command: str
    result: ToolResult
    """The `run_command` result, as a tool result (for the mode's accounting)."""
    passed: bool
    exit_code: int | None
    duration_s: float
    timeout_s: float
    changes_after: int
    """Entries in the session's undo journal right after the check (its own writes included)."""
    error: AgentError | None = None
    """Why it did not pass, as a typed error (None when it passed)."""
    not_run: str | None = None

    @property
    def output(self) -> str:
        return self.result.content

    @property
    def timed_out(self) -> bool:
        return bool(self.result.metadata.get("timed_out"))

    @property
    def fingerprint(self) -> str:
        """Identity of the outcome with numbers masked (timings, line numbers), so the same
        failure seen again is recognised by the loop detector."""
        return result_digest(normalise(self.output))

    @property
    def cannot_run(self) -> bool:
        """The command itself is unusable (refused, not found, not startable): no edit helps."""
        return isinstance(self.error, ConfigurationError | PermissionDeniedError)

    def describe(self) -> str:
        """How it ended, in a few words: "exit code 1", "stopped after 600 s", ..."""
        if self.not_run is not None:
            return f"not run: {self.not_run}"
        if self.timed_out:
            return f"stopped after {self.timeout_s:g} s, its time limit"
        if self.exit_code is None:
            return "did not run to an exit code"
        return f"exit code {self.exit_code}"

    def evidence(self, *, after_last_change: bool) -> CheckEvidence:
        return CheckEvidence(
            command=self.command,
            passed=self.passed,
            exit_code=self.exit_code,
            after_last_change=after_last_change,
            duration_s=self.duration_s,
            output_tail=output_tail(self.output),
            timed_out=self.timed_out,
            timeout_s=self.timeout_s,
            not_run=self.not_run,
        )


def judge_error(command: str, result: ToolResult, timeout_s: float) -> AgentError | None:
    """Why running `command` did not pass, decided by the exit code; None when it passed."""
    exit_code = result.metadata.get("exit_code")
    code = exit_code if isinstance(exit_code, int) else None
    if result.metadata.get("timed_out") or result.metadata.get("error") == "timeout":
        return ToolTimeoutError(
            f"the check `{command}` was still running after {timeout_s:g} s, its time limit, "
            "and was stopped; make the tests faster or raise --verify-timeout"
        )
    if code is None:
        return ConfigurationError(
            f"the check `{command}` could not be run: {result.content.strip()[:300]}"
        )
    if code in (SHELL_CANNOT_EXECUTE, SHELL_NOT_FOUND):
        return ConfigurationError(
            f"the check `{command}` cannot be executed (exit code {code}); pass a working one "
            "with --verify, or --no-verify"
        )
    if code != 0:
        return ToolError(f"the check `{command}` failed with exit code {code}")
    return None


def output_tail(output: str) -> str:
    """The last lines of a command's output, without the tool's bracketed notes at its end."""
    lines = failure_output(output).splitlines()[-OUTPUT_TAIL_LINES:]
    text = "\n".join(lines)
    return text[-OUTPUT_TAIL_CHARS:]


def failure_output(output: str) -> str:
    """The command's own output, without the tool's bracketed notes at its end."""
    lines = output.rstrip().splitlines()
    while lines and lines[-1].startswith("[") and lines[-1].endswith("]"):
        lines.pop()
    return "\n".join(lines)


CHECK_FAILED = """\
Before accepting the result, journeyman ran the check `{command}`{when}: {how}. The task is not \
done yet.

Last lines of its output:
{tail}

Find the cause, fix it, then finish again; the check runs again at that point. This was failed \
check {count} of {limit}: when check {limit} fails, the run ends as not done.{refused}"""
NOTHING_CHANGED = " (the workspace has not been changed in this run)"
REFUSED_NOTE = (
    "\n\nThese calls were refused by the permission policy and did not run: {calls}. Asking "
    "for them again will be refused too; find another way, or say in your final answer what "
    "the user must allow."
)


class Verdict:
    """The harness's view of one kernel's runs: its check, refused calls and changed files."""

    def __init__(
        self,
        *,
        workspace: Path,
        config: AgentConfig,
        registry: ToolRegistry,
        store: SessionStore,
        permissions: PermissionGate | None,
        emit: Callable[[ev.Event], None],
        journal: Callable[[], Any] = lambda: None,
    ) -> None:
        self.workspace = workspace
        self.config = config
        self.registry = registry
        self.store = store
        self.permissions = permissions
        self.emit = emit
        self.journal = journal
        """The run's undo journal writer (so files the check changes are journaled too)."""
        self.last: CheckRun | None = None
        """The latest check of this kernel (the harness's or the phased mode's)."""
        self.failures = 0
        """Failed checks of `review` so far (the phased mode's own checks do not count)."""
        self._counted_for: str | None = None
        """The session whose earlier failed checks (before a resume) are in `failures`."""
        self._command: str | None = None
        self._resolved = False
        self._runner: RunCommandTool | None = None

    # --- the check command ----------------------------------------------------------------

    @property
    def active(self) -> bool:
        """Whether success claims are checked at all."""
        if not self.config.verify or self.config.mode is ModeName.ASK:
            return False
        return not self._planning

    @property
    def _planning(self) -> bool:
        """The plan permission mode: the user asked for a plan, nothing may change."""
        gate = self.permissions
        return gate is not None and gate.policy.mode is PermissionMode.PLAN

    async def command(self) -> str | None:
        """The check command: configured, else the first runnable detected one; None if none."""
        if not self._resolved:
            configured = (self.config.verify_command or "").strip()
            if configured:
                self._command = configured
            else:
                profile = await asyncio.to_thread(detect_profile, self.workspace)
                self._command = runnable_test_command(profile)
            self._resolved = True
        return self._command

    async def check(self, state: LoopState, command: str | None = None) -> CheckRun:
        """Run the check now (under its own timeout) and remember the outcome."""
        command = command or await self.command()
        if command is None:
            raise ConfigurationError(
                "no check command is configured (--verify) or detected in the workspace"
            )
        timeout = self.config.verify_timeout_s
        call = ToolCall(
            f"{CHECK_CALL_PREFIX}{state.iterations}", COMMAND_TOOL, {"command": command}
        )
        iteration = state.iterations
        self.emit(ev.ToolCallStarted(iteration, call))
        started = time.monotonic()
        refusal = self._denied(command)
        if refusal is not None:
            result = ToolResult(
                call.id,
                COMMAND_TOOL,
                f"{COMMAND_TOOL}: the check was not run: {refusal}",
                is_error=True,
                metadata={"error": "verification_refused"},
            )
        else:
            result = await self._run(call, command, timeout, state)
        duration = time.monotonic() - started
        self.emit(ev.ToolResultReceived(iteration, result, duration))
        if refusal is not None:
            error: AgentError | None = PermissionDeniedError(
                f"the check `{command}` is refused by the permission policy ({refusal}); allow "
                f"it, pass another check with --verify, or run with --no-verify",
                tool_name=COMMAND_TOOL,
            )
        else:
            error = judge_error(command, result, timeout)
        code = result.metadata.get("exit_code")
        run = CheckRun(
            command=command,
            result=result,
            passed=error is None,
            exit_code=code if isinstance(code, int) else None,
            duration_s=duration,
            timeout_s=timeout,
            changes_after=self._changes(state.session_id),
            error=error,
            not_run=refusal,
        )
        self.last = run
        return run

    def _denied(self, command: str) -> str | None:
        """The deny rule's reason when the user's rules forbid the check, else None."""
        if self.permissions is None:
            return None
        decision = self.permissions.policy.decide(COMMAND_TOOL, {"command": command}, False)
        return decision.reason if decision.kind is DecisionKind.DENY else None

    async def _run(
        self, call: ToolCall, command: str, timeout: float, state: LoopState
    ) -> ToolResult:
        runner = self._command_runner(timeout)
        ctx = ToolContext(
            self.workspace,
            session_id=tool_session_id(state.session_id),
            run_session_id=state.session_id,
            iteration=state.iterations,
            journal=self.journal(),
        )
        args = RunCommandArgs(command=command, timeout=timeout)
        try:
            result = await asyncio.wait_for(runner.execute(args, ctx), timeout + STOP_GRACE_S)
        except TimeoutError:
            result = ToolResult(
                call.id,
                COMMAND_TOOL,
                f"the check was still running after {timeout:g} s and was stopped",
                is_error=True,
                metadata={"error": "timeout", "timed_out": True},
            )
        except AgentError as error:
            result = ToolResult(call.id, COMMAND_TOOL, error.message, is_error=True)
        return dataclasses.replace(result, call_id=call.id, name=COMMAND_TOOL)

    def _command_runner(self, timeout: float) -> RunCommandTool:
        """The run's `run_command` tool (same sandbox and journal), allowed `timeout` seconds."""
        if self._runner is None:
            tools = (self.registry.get(name) for name in self.registry.names)
            found = next((t for t in tools if isinstance(t, RunCommandTool)), None)
            # a shallow copy shares the sandbox and the command snapshots of the original
            self._runner = copy.copy(found) if found is not None else RunCommandTool()
        self._runner.max_timeout = max(self._runner.max_timeout, timeout)
        return self._runner

    # --- the verdict ----------------------------------------------------------------------

    async def review(self, state: LoopState, outcome: TurnOutcome) -> Ruling | Termination:
        """Decide on the mode's success claim in `outcome` (see the module docstring): accept
        it, send it back to work, or end the run with the reason it is not a success."""
        refused = [] if self._planning else self.refusals(state.session_id)
        if self._counted_for != state.session_id:  # a resumed session keeps its count
            self._counted_for = state.session_id
            self.failures = sum(
                1
                for event in self._current_message_events(state.session_id)
                if event.get("type") == "nudge" and event.get("kind") == NUDGE_KIND
            )
        command = await self.command() if self.active else None
        if command is None:
            if refused:
                return self._reject(
                    state, outcome, FinishReason.REFUSED, refused_summary(refused) + "."
                )
            return Ruling.ACCEPT
        changes = self._changes(state.session_id)
        run = self.last
        if run is None or not run.passed or run.changes_after != changes:
            run = await self.check(state, command)
        if run.passed:
            return Ruling.ACCEPT
        assert run.error is not None
        if run.cannot_run:
            return self._reject(state, outcome, FinishReason.CONFIGURATION_ERROR, run.error.message)
        self.failures += 1
        limit = self.config.max_verify_rounds
        if self.failures >= limit:
            error = (
                f"the check `{run.command}` still fails ({run.describe()}) after {self.failures} "
                "check(s); the task is not done"
            )
            if run.timed_out:
                error += "; if the check needs longer, raise --verify-timeout"
            if refused:
                error += f"; {refused_summary(refused)}"
            reason = FinishReason.REFUSED if refused else FinishReason.VERIFICATION_FAILED
            return self._reject(state, outcome, reason, error)
        calls = ", ".join(_call_text(r) for r in refused)
        message = CHECK_FAILED.format(
            command=run.command,
            when="" if changes else NOTHING_CHANGED,
            how=run.describe(),
            tail=output_tail(run.output) or "(no output)",
            count=self.failures,
            limit=limit,
            refused=REFUSED_NOTE.format(calls=calls) if refused else "",
        )
        state.pending_nudges.append((NUDGE_KIND, message))
        return Ruling.RETRY

    def _reject(
        self, state: LoopState, outcome: TurnOutcome, reason: FinishReason, error: str
    ) -> Termination:
        state.final_text = outcome.final_text
        return Termination(reason, error)

    def annotate(self, state: LoopState, result: RunResult) -> None:
        """Fill in the result's refused calls, changed files and check evidence."""
        try:
            changes = self.store.file_changes(state.session_id)
            refused = self.refusals(state.session_id)
        except Exception:  # the result must be built whatever the store's state
            log.warning("could not read the session's changes and refusals", exc_info=True)
            return
        result.files_changed = list(
            dict.fromkeys(change.path for change in changes if not change.undone)
        )
        result.refused_calls = refused
        if self.last is not None:
            result.verification = self.last.evidence(
                after_last_change=self.last.changes_after == len(changes)
            )

    # --- what the journal and the events say ----------------------------------------------

    def _changes(self, session_id: str) -> int:
        return len(self.store.file_changes(session_id))

    def _current_message_events(self, session_id: str) -> list[dict[str, Any]]:
        """The session's events since its latest user message began (the task, or the last
        follow-up): an earlier message's refusals and failed checks are not this one's."""
        events: list[dict[str, Any]] = []
        for event in self.store.events(session_id):
            if event.get("type") == FOLLOW_UP_EVENT:
                events.clear()
            events.append(event)
        return events

    def refusals(self, session_id: str) -> list[RefusedCall]:
        """Edit and command calls of the current user message refused by the permission
        policy and never run later."""
        calls: dict[str, dict[str, Any]] = {}
        refused: dict[tuple[str, str | None], RefusedCall] = {}
        for event in self._current_message_events(session_id):
            if event.get("type") == "tool_call":
                call = event.get("call") or {}
                calls[str(call.get("id"))] = call
                continue
            if event.get("type") != "tool_result":
                continue
            result = event.get("result") or {}
            call = calls.get(str(result.get("call_id")))
            if call is None:
                continue
            tool = self.registry.get(str(call.get("name")))
            if tool is None or tool.kind not in (ToolKind.EDIT, ToolKind.COMMAND):
                continue
            argument = _key_argument(call.get("arguments") or {}, tool.permission_arg)
            key = (tool.kind.value, argument)
            metadata = result.get("metadata") or {}
            if metadata.get("error") == PERMISSION_ERROR_KIND:
                reason = str(result.get("content", ""))
                refused[key] = RefusedCall(tool.name, argument, _shorten(reason))
            elif not result.get("is_error"):
                refused.pop(key, None)
        return list(refused.values())


def refused_summary(refused: list[RefusedCall]) -> str:
    calls = "; ".join(f"{_call_text(r)}: {r.reason}" for r in refused)
    return (
        f"{len(refused)} edit/command call(s) were refused by the permission policy and never "
        f"ran: {calls}; to let them run, pass --yes or add allow rules (calls that needed "
        "approval), or change the deny rule that matched, then run again"
    )


def _call_text(refusal: RefusedCall) -> str:
    return f"{refusal.tool}({refusal.argument})" if refusal.argument else refusal.tool


def _key_argument(arguments: dict[str, Any], name: str | None) -> str | None:
    value = arguments.get(name) if name else None
    return value if isinstance(value, str) else None


def _shorten(text: str) -> str:
    return one_line(text, REFUSAL_CHARS)
