"""The harness's verdict on a run: the model says it is done, the harness decides whether it is.

The check is fixed before the model's first turn (`fixed_check`): the user's `--verify`, else
the test command the project profile finds in the workspace as it was, together with a
manifest of the test infrastructure; it also runs once then, so the receipt can show before
and after. A success claim (a `finish` call, or a prose answer without tool calls) is accepted
only when that check, run on the tree as it is now (`check_runner`: the run's sandbox,
environment, redaction and time limit):

- exited 0, and its runner's own summary shows at least one test ran (a detected check, or a
  known runner, that prints no summary or counts no test is *inconclusive*, not a pass);
- ran with the test infrastructure as it was at the start: existing test files, conftest.py
  files, test settings and modules that shadow the runner unchanged (new test files run too);
- ran no fewer tests than before the first turn;
- and no edit or command call of the run was refused without succeeding later.

`allow_test_edits` (`--allow-test-edits`) lets the last two pass for tasks about the tests;
the changes stay on the receipt. No check at all ends the run `unverified`; with checking off
(`--no-verify`, the ask mode, the plan permission mode) the model's word is taken, and in the
plan permission mode refused calls are listed but do not fail the run.

A check that does not pass goes back to the model as a harness message, up to
`max_verify_rounds` times; then the run ends as `verification_failed` (or `refused`, when
refused calls may explain it). A check that cannot run at all (a deny rule, exit code 126/127)
is a configuration error: no edit of the model can fix it. The check is the harness's own
action, so it asks for no approval; a deny rule that matches it still holds.

The receipt (`CheckEvidence`) carries the command, where it came from, the sandbox it ran in,
its exit code and test counts, before and after, the test infrastructure changes, and the
workspace fingerprints when it ran and when the run ended: equal fingerprints are what "the
check ran on the final tree" means.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import shlex
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from journeyman.context.test_infra import blocking, take_manifest
from journeyman.core import events as ev
from journeyman.core.errors import PermissionDeniedError, ToolError
from journeyman.core.messages import ToolCall, ToolResult
from journeyman.core.result import CheckEvidence, FinishReason, RefusedCall, RunResult
from journeyman.core.text import one_line
from journeyman.loop.check_runner import (
    BEFORE_CALL_ID,
    CHECK_CALL_PREFIX,
    COMMAND_TOOL,
    CheckRun,
    CheckRunner,
    assess,
    explain,
    failure_output,
    output_tail,
)
from journeyman.loop.config import AgentConfig, ModeName
from journeyman.loop.endings import Termination
from journeyman.loop.fixed_check import FixedCheck, fix_check, runner_of, stored_check
from journeyman.policy.permissions import (
    PERMISSION_ERROR_KIND,
    DecisionKind,
    PermissionGate,
    PermissionMode,
)
from journeyman.session.store import SessionStore
from journeyman.tools.base import ToolKind
from journeyman.tools.fingerprint import fingerprint
from journeyman.tools.registry import ToolRegistry

if TYPE_CHECKING:
    from journeyman.loop.state import LoopState, TurnOutcome

__all__ = [
    "BEFORE_CALL_ID",
    "CHECK_CALL_PREFIX",
    "COMMAND_TOOL",
    "CheckRun",
    "Ruling",
    "Verdict",
    "failure_output",
    "output_tail",
]

log = logging.getLogger(__name__)

NUDGE_KIND = "verification"
JUDGED_EVENTS = frozenset({"tool_call", "tool_result", "nudge", "follow_up"})
"""The stored events the verdict reads: calls and their results (refusals), nudges (failed
checks) and follow-ups (where the current user message begins)."""
REFUSAL_CHARS = 240


class Ruling(StrEnum):
    """What the kernel does with a success claim."""

    ACCEPT = "accept"
    """The claim holds: end the run with the mode's success."""
    RETRY = "retry"
    """Not done: a harness message is queued for the model and the loop goes on."""


CHECK_FAILED = """\
Before accepting the result, journeyman ran the check `{command}`{when}: {how}. The task is not \
done yet.

{problem}

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
PROBLEM_TEXT = {
    "failed": "The tests fail.",
    "no_tests": (
        "It ran no test at all, and a check that tests nothing proves nothing. If your changes "
        "removed tests or broke how they are found, put that back."
    ),
    "no_summary": (
        "Its output holds no test summary, so nothing shows that any test ran (a test run that "
        "ends the process early looks like this)."
    ),
    "tests_removed": (
        "It ran {after} test(s), fewer than the {before} it ran before you started; tests may "
        "not be removed."
    ),
    "new_tests_interfere": (
        "The existing tests pass only together with the test files you added; run without "
        "them, they fail. A new test must not change what the old ones see (for example by "
        "replacing the code under test when it is imported): fix the code itself."
    ),
    "test_changes": (
        "The check judges your work with the project's tests as they were when you started, "
        "and these differ now: {changes}. Put them back as they were (new test files are "
        "fine). Only the user can allow changed tests, for a task that is about them."
    ),
}
NO_CHECK = (
    "no check confirms the work: none was given (--verify) and no test command was found in "
    "{workspace}; pass --verify CMD to name one, or --no-verify to accept the model's word"
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
        self.runner = CheckRunner(workspace, registry, journal)
        """Runs the check the way the run runs commands (sandbox, environment, limits)."""
        self.last: CheckRun | None = None
        """The latest check of this kernel (the harness's or the phased mode's)."""
        self.failures = 0
        """Failed checks of `review` so far (the phased mode's own checks do not count)."""
        self._counted_for: str | None = None
        """The session whose earlier failed checks (before a resume) are in `failures`."""
        self._fixed: FixedCheck | None = None
        self._fixed_for: str | None = None

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

    async def prepare(self, state: LoopState) -> None:
        """Fix a new session's check from the workspace as it is, record it, and run it once
        before the model's first turn (the receipt's "before")."""
        if not self.active:
            return
        fixed = await fix_check(self.workspace, self.config.verify_command)
        if fixed.command is not None and self._denied(fixed.command) is None:
            before = await self._execute(state, fixed.command, BEFORE_CALL_ID)
            fixed = FixedCheck(
                fixed.command, fixed.source, fixed.runner, fixed.infra, before.summary()
            )
            # the outcome on this tree is known: a claim made before any change needs no rerun
            self.last = await self._judge(before, fixed)
        self._fixed, self._fixed_for = fixed, state.session_id
        self.emit(fixed.event())

    async def fixed(self, session_id: str) -> FixedCheck:
        """The session's fixed check: stored with it, else fixed now (a session from before
        checks were fixed, or one that started with checking off)."""
        if self._fixed is None or self._fixed_for != session_id:
            stored = stored_check(self.store, session_id)
            fixed = stored or await fix_check(self.workspace, self.config.verify_command)
            self._fixed, self._fixed_for = fixed, session_id
            if stored is None:
                self.emit(fixed.event())
        return self._fixed

    async def command(self) -> str | None:
        """The check command: the session's fixed one, else the configured or detected one."""
        if self._fixed is not None:
            return self._fixed.command
        return (await fix_check(self.workspace, self.config.verify_command)).command

    async def check(self, state: LoopState, command: str | None = None) -> CheckRun:
        """Run the check now (under its own timeout), judge it and remember the outcome."""
        fixed = await self.fixed(state.session_id)
        command = command or fixed.command
        if command is None:
            raise ToolError(NO_CHECK.format(workspace=self.workspace))
        run = await self._execute(state, command, f"{CHECK_CALL_PREFIX}{state.iterations}")
        judged = await self._judge(run, fixed)
        if judged.passed:
            judged = await self._without_new_tests(state, judged, fixed)
        self.last = judged
        return judged

    async def _without_new_tests(
        self, state: LoopState, run: CheckRun, fixed: FixedCheck
    ) -> CheckRun:
        """A passing pytest check with new test files runs once more without them: a new
        test module can change what the old tests see (patch the code under test at import),
        so the old tests must pass on their own too."""
        added = [c.path for c in run.test_changes if c.allowed and c.path.endswith(".py")]
        if not added or runner_of(run.command) != "pytest":
            return run
        ignores = " ".join(f"--ignore={shlex.quote(path)}" for path in added)
        alone = await self._execute(
            state, f"{run.command} {ignores}", f"{CHECK_CALL_PREFIX}{state.iterations}-old"
        )
        if alone.exit_code == 0:
            return run
        message = (
            f"the check `{run.command}` passes only with the new test files "
            f"({', '.join(added)}): without them the existing tests fail "
            f"({alone.describe()}); a new test must not change what the old ones see"
        )
        return dataclasses.replace(
            run, passed=False, problem="new_tests_interfere", error=ToolError(message)
        )

    async def _execute(self, state: LoopState, command: str, call_id: str) -> CheckRun:
        """Run `command` as the check, with its events; judged by its exit code alone."""
        call = ToolCall(call_id, COMMAND_TOOL, {"command": command})
        self.emit(ev.ToolCallStarted(state.iterations, call))
        refusal = self._denied(command)
        if refusal is None:
            run = await self.runner.check(
                command, self.config.verify_timeout_s, call_id, state.session_id, state.iterations
            )
        else:
            run = self._refused(call, command, refusal)
        self.emit(ev.ToolResultReceived(state.iterations, run.result, run.duration_s))
        return run

    def _refused(self, call: ToolCall, command: str, refusal: str) -> CheckRun:
        result = ToolResult(
            call.id,
            COMMAND_TOOL,
            f"{COMMAND_TOOL}: the check was not run: {refusal}",
            is_error=True,
            metadata={"error": "verification_refused"},
        )
        error = PermissionDeniedError(
            f"the check `{command}` is refused by the permission policy ({refusal}); allow "
            f"it, pass another check with --verify, or run with --no-verify",
            tool_name=COMMAND_TOOL,
        )
        return CheckRun(
            command=command,
            result=result,
            passed=False,
            exit_code=None,
            duration_s=0.0,
            timeout_s=self.config.verify_timeout_s,
            error=error,
            not_run=refusal,
        )

    async def _judge(self, run: CheckRun, fixed: FixedCheck) -> CheckRun:
        """The run with what makes it a pass or not beyond its exit code (module docstring)."""
        if run.not_run is not None or run.cannot_run or run.timed_out:
            return dataclasses.replace(run, problem="failed")
        now = await asyncio.to_thread(take_manifest, self.workspace)
        return assess(run, fixed, now, allow_test_edits=self.config.allow_test_edits)

    def _model_text(self, run: CheckRun, problem: str) -> str:
        """Why the check is not a pass, for the model."""
        changes = blocking(list(run.test_changes))
        listed = ", ".join(c.describe() for c in changes) or "none"
        before = self._fixed.tests_before if self._fixed is not None else None
        after = run.tally.ran if run.tally is not None else 0
        text = PROBLEM_TEXT[problem].format(changes=listed, before=before, after=after)
        if problem != "test_changes" and changes:
            text += "\n\n" + PROBLEM_TEXT["test_changes"].format(changes=listed)
        return text

    def _denied(self, command: str) -> str | None:
        """The deny rule's reason when the user's rules forbid the check, else None."""
        if self.permissions is None:
            return None
        decision = self.permissions.policy.decide(COMMAND_TOOL, {"command": command}, False)
        return decision.reason if decision.kind is DecisionKind.DENY else None

    # --- the verdict ----------------------------------------------------------------------

    async def review(self, state: LoopState, outcome: TurnOutcome) -> Ruling | Termination:
        """Decide on the mode's success claim in `outcome` (see the module docstring): accept
        it, send it back to work, or end the run with the reason it is not a success."""
        counted = self._counted_for == state.session_id
        events = (
            [] if self._planning and counted else self._current_message_events(state.session_id)
        )
        refused = [] if self._planning else self._standing_refusals(events)
        if not counted:  # a resumed session keeps its count
            self._counted_for = state.session_id
            self.failures = sum(
                1
                for event in events
                if isinstance(event, ev.NudgeInjected) and event.kind == NUDGE_KIND
            )
        if not self.active:
            if refused:
                return _reject(state, outcome, FinishReason.REFUSED, refused_summary(refused))
            return Ruling.ACCEPT
        fixed = await self.fixed(state.session_id)
        if fixed.command is None:
            if refused:
                return _reject(state, outcome, FinishReason.REFUSED, refused_summary(refused))
            return _reject(
                state, outcome, FinishReason.UNVERIFIED, NO_CHECK.format(workspace=self.workspace)
            )
        tree = await asyncio.to_thread(fingerprint, self.workspace)
        run = self.last
        if run is None or run.workspace_fingerprint != tree.digest:
            run = await self.check(state, fixed.command)  # the tree is not the one last checked
        if run.passed:
            return Ruling.ACCEPT
        assert run.error is not None
        if run.cannot_run:
            return _reject(state, outcome, FinishReason.CONFIGURATION_ERROR, run.error.message)
        self.failures += 1
        limit = self.config.max_verify_rounds
        if self.failures >= limit:
            return _reject(state, outcome, *self._final_failure(run, refused))
        problem = run.problem or "failed"
        calls = ", ".join(_call_text(r) for r in refused)
        message = CHECK_FAILED.format(
            command=run.command,
            when="" if self._changes(state.session_id) else NOTHING_CHANGED,
            how=run.describe(),
            problem=self._model_text(run, problem),
            tail=output_tail(run.output) or "(no output)",
            count=self.failures,
            limit=limit,
            refused=REFUSED_NOTE.format(calls=calls) if refused else "",
        )
        state.pending_nudges.append((NUDGE_KIND, message))
        return Ruling.RETRY

    def _final_failure(self, run: CheckRun, refused: list[RefusedCall]) -> tuple[FinishReason, str]:
        problem = run.problem or "failed"
        if problem == "failed":
            error = (
                f"the check `{run.command}` still fails ({run.describe()}) after "
                f"{self.failures} check(s); the task is not done"
            )
            if run.timed_out:
                error += "; if the check needs longer, raise --verify-timeout"
        else:
            error = explain(run, self._fixed.tests_before if self._fixed is not None else None)
        if refused:
            error += f"; {refused_summary(refused)}"
        return (FinishReason.REFUSED if refused else FinishReason.VERIFICATION_FAILED), error

    def annotate(self, state: LoopState, result: RunResult) -> None:
        """Fill in the result's refused calls, changed files and receipt."""
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
            result.verification = self.receipt(self.last)

    def receipt(self, run: CheckRun) -> CheckEvidence:
        """The evidence of `run`, with the workspace's fingerprint taken now."""
        final = fingerprint(self.workspace).digest
        fixed = self._fixed
        return CheckEvidence(
            command=run.command,
            passed=run.passed,
            exit_code=run.exit_code,
            after_last_change=bool(run.workspace_fingerprint)
            and run.workspace_fingerprint == final,
            duration_s=run.duration_s,
            output_tail=output_tail(run.output),
            timed_out=run.timed_out,
            timeout_s=run.timeout_s,
            not_run=run.not_run,
            source=fixed.source if fixed is not None else None,
            runner=fixed.runner if fixed is not None else None,
            sandbox=self.runner.sandbox,
            tests=None if run.tally is None else run.tally.to_dict(),
            before=fixed.before if fixed is not None else None,
            problem=run.problem,
            test_changes=tuple(change.to_dict() for change in run.test_changes),
            tests_removed=run.tests_removed,
            fingerprint=run.workspace_fingerprint or None,
            final_fingerprint=final,
        )

    # --- what the journal and the events say ----------------------------------------------

    def _changes(self, session_id: str) -> int:
        return len(self.store.file_changes(session_id))

    def _current_message_events(self, session_id: str) -> list[ev.StoredEvent]:
        """The session's calls, results and nudges since its latest user message began (the
        task, or the last follow-up): an earlier message's refusals and failed checks are not
        this one's. Only those types are read back (a run's log is mostly other events); an
        event this version cannot read is left out."""
        events: list[ev.StoredEvent] = []
        for _, event in self.store.read_step_events(session_id, types=JUDGED_EVENTS):
            if isinstance(event, ev.FollowUpSent):
                events.clear()
            if not isinstance(event, ev.UnreadableEvent):
                events.append(event)
        return events

    def refusals(self, session_id: str) -> list[RefusedCall]:
        """Edit and command calls of the current user message refused by the permission
        policy and never run later."""
        return self._standing_refusals(self._current_message_events(session_id))

    def _standing_refusals(self, events: list[ev.StoredEvent]) -> list[RefusedCall]:
        """The refusals that `events` (the current message's, in order) leave standing."""
        calls: dict[str, ToolCall] = {}
        refused: dict[tuple[str, str | None], list[RefusedCall]] = {}
        for event in events:
            if isinstance(event, ev.ToolCallStarted):
                calls[event.call.id] = event.call
                continue
            if not isinstance(event, ev.ToolResultReceived):
                continue
            result = event.result
            call = calls.get(result.call_id)
            if call is None:
                continue
            tool = self.registry.get(call.name)
            if tool is None or tool.kind not in (ToolKind.EDIT, ToolKind.COMMAND):
                continue
            argument = _key_argument(call.arguments, tool.permission_arg)
            key = (tool.kind.value, argument)
            if result.metadata.get("error") == PERMISSION_ERROR_KIND:
                refusal = RefusedCall(tool.name, argument, _shorten(result.content))
                refused.setdefault(key, []).append(refusal)  # each refused attempt counts
            elif not result.is_error:
                refused.pop(key, None)
        return [refusal for attempts in refused.values() for refusal in attempts]


CLI_REFUSED_ADVICE = (
    "to let them run, pass --yes or add allow rules (calls that needed approval), or change "
    "the deny rule that matched, then run again"
)
"""How to let refused calls run, for someone at the command line."""


def refused_summary(refused: list[RefusedCall], advice: str = CLI_REFUSED_ADVICE) -> str:
    """How many edit and command calls were refused, which (a call refused again and again
    once, with its count) and why, then `advice`."""
    counts: dict[RefusedCall, int] = {}
    for refusal in refused:
        counts[refusal] = counts.get(refusal, 0) + 1
    calls = "; ".join(
        f"{_call_text(r)}{f' ({n} times)' if n > 1 else ''}: {r.reason}" for r, n in counts.items()
    )
    return (
        f"{len(refused)} edit/command call(s) were refused by the permission policy and never "
        f"ran: {calls}; {advice}"
    )


def _call_text(refusal: RefusedCall) -> str:
    return f"{refusal.tool}({refusal.argument})" if refusal.argument else refusal.tool


def _key_argument(arguments: dict[str, Any], name: str | None) -> str | None:
    value = arguments.get(name) if name else None
    return value if isinstance(value, str) else None


def _shorten(text: str) -> str:
    return one_line(text, REFUSAL_CHARS)


def _reject(
    state: LoopState, outcome: TurnOutcome, reason: FinishReason, error: str
) -> Termination:
    state.final_text = outcome.final_text
    return Termination(reason, error)
