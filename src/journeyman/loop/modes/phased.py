"""The phased mode: DISCOVER -> PLAN -> ACT -> VERIFY, ending in DONE or FAIL.

Each kernel turn runs one phase step, and the step's checkpoint holds the phase and the
structured memory (`context.memory.AgentState`), so a resumed run carries on in the phase it
stopped in: with the tool calls still to run (ACT) or the check still to make (VERIFY).

- DISCOVER refreshes the workspace index, builds the context pack (goal, project profile,
  relevant snippets, latest error, test results, memory) and gives it to the model; the same
  turn then goes on to PLAN. It comes first, after a passing verification, and when a loop
  intervention forces a fresh start.
- PLAN asks the model for its next actions as native tool calls. Tool calls go to ACT; a
  `finish` call or a reply without tool calls means the model says it is done.
- ACT runs the calls through the kernel (file tools before commands), records them in memory,
  and goes to VERIFY when the workspace changed, else back to PLAN.
- VERIFY runs the check command (`loop.verdict`, the same check every mode ends with) and
  decides by its exit code.
- DONE needs both: the model said it is done, and the last verification passed after the last
  change to the workspace. A claim without such a verification sends the run to VERIFY first;
  a failing verification sends it back to PLAN with the error, never to DONE.
- FAIL ends the run when an error is fatal (`loop.recovery`) or loops persist after every
  intervention (`loop.interventions`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from journeyman.context.index import WorkspaceIndexer
from journeyman.context.memory import AgentState, LastError, MemoryFormatter, compress
from journeyman.context.pack import ContextPackBuilder, render_error
from journeyman.context.profile import ProjectProfile, detect_profile
from journeyman.core import events as ev
from journeyman.core.errors import AgentError, ConfigurationError
from journeyman.core.messages import Message, ToolCall, ToolResult
from journeyman.core.result import FinishReason
from journeyman.economics.loop_detector import LoopCheck, result_digest
from journeyman.loop import prompts
from journeyman.loop.budget_gate import capacity_reason
from journeyman.loop.config import PhasedSettings
from journeyman.loop.interventions import Intervention, InterventionLadder
from journeyman.loop.modes.react import EMPTY_REPLY, counts_as_mistake
from journeyman.loop.recovery import Severity, classify, format_for_model
from journeyman.loop.state import LoopState, TurnOutcome
from journeyman.loop.verdict import COMMAND_TOOL, CheckRun, failure_output
from journeyman.session.undo import FileChangeTracker
from journeyman.tools.finish import FinishTool

if TYPE_CHECKING:
    from journeyman.loop.kernel import Kernel

FINISH_TOOL = FinishTool.name
VERIFY_SIGNATURE = "verify"
"""Name under which failing verifications are counted by the loop detector."""
MAX_DIFF_CHARS = 8_000
"""The pending diff kept in memory for the context pack (the pack may cut it further)."""
MAX_FILE_READ = 200_000
"""Bytes of a changed file read to remember its content (larger files are not remembered)."""


class Phase(StrEnum):
    DISCOVER = "discover"
    PLAN = "plan"
    ACT = "act"
    VERIFY = "verify"
    DONE = "done"
    FAIL = "fail"


DISCOVERY = """\
[journeyman] {header}

{pack}

Work in small steps with tool calls. After you change the workspace, `{command}` runs to check \
it (exit code 0 passes). When the task is complete, call finish: the run ends only once that \
check has passed after your last change."""
FIRST_HEADER = "Here is what is known so far about the task and the workspace."
AGAIN_HEADER = "The check passed. Here is the updated picture of the task and the workspace."
FRESH_HEADER = (
    "Your context was rebuilt from scratch after repeated actions. Start again from this "
    "picture of the task and the workspace."
)

VERIFY_FAILED = """\
[journeyman] The check `{command}` failed, so {consequence}.

{error}

Find the cause in this output and fix it; the check runs again after your next change."""
FINISH_REFUSED = "the task is not done yet and your finish call was not accepted"
ANSWER_REFUSED = "the task is not done yet, whatever your last reply said"
CHANGE_REFUSED = "your last change needs more work"
SAME_CHECK_FAILURE = (
    "The check `{command}`, which journeyman runs after each change, failed {count} times "
    "with the same output: the changes made since have not changed its result."
)

FINISH_NOT_ALONE = (
    "{name}: not run. finish must be the only call of its turn: make the other calls first, "
    "then call finish alone once they have returned."
)


@dataclass(frozen=True)
class DoneClaim:
    """The model said the task is done: how (finish call or plain answer) and its report."""

    reason: FinishReason
    text: str


class PhasedMode:
    """DISCOVER -> PLAN -> ACT -> VERIFY for the kernel; see the module docstring."""

    def __init__(
        self, settings: PhasedSettings | None = None, *, verify_command: str | None = None
    ) -> None:
        self.settings = settings or PhasedSettings()
        self.configured_command = verify_command
        self.agent_state = AgentState(phase=Phase.DISCOVER)
        self.pending: list[ToolCall] = []
        """Tool calls of the last PLAN, still to run in ACT."""
        self.claim: DoneClaim | None = None
        """A done claim waiting for its verification."""
        self.changes = 0
        """How many ACT steps changed the workspace so far."""
        self.verified_changes: int | None = None
        """`changes` when a verification last passed; None: none has passed yet."""
        self.ladder = InterventionLadder()
        self.rediscovery = False
        """The next DISCOVER is one forced by a loop intervention."""
        self._formatter = MemoryFormatter(self.settings.memory)
        self._profile: ProjectProfile | None = None
        self._index: WorkspaceIndexer | None = None
        self._builder: ContextPackBuilder | None = None

    @property
    def phase(self) -> Phase:
        return Phase(self.agent_state.phase)

    def _enter(self, phase: Phase) -> None:
        self.agent_state.phase = phase.value

    # --- the state machine ----------------------------------------------------------------

    async def iterate(self, state: LoopState, kernel: Kernel) -> TurnOutcome:
        self.agent_state.advance()
        if self.phase is Phase.DONE:  # a Stop hook asked for more work
            self._enter(Phase.PLAN)
        if self.phase is Phase.DISCOVER:
            failed = await self._discover(state, kernel)
            if failed is not None:
                return failed
        if self.phase is Phase.ACT and self.pending:
            return await self._act(state, kernel)
        if self.phase is Phase.VERIFY:
            return await self._verify(state, kernel)
        self._enter(Phase.PLAN)
        return await self._plan(state, kernel)

    async def _discover(self, state: LoopState, kernel: Kernel) -> TurnOutcome | None:
        command = await self._verify_command(kernel)
        if command is None:
            return self._fail(
                state,
                kernel,
                ConfigurationError(
                    "the phased mode needs a verification command, and none was given "
                    f"(--verify or verify_command) or detected in {kernel.workspace}; pass one "
                    "with --verify"
                ),
            )
        await self._workspace_index(kernel)
        await compress(self.agent_state, self.settings.memory, formatter=self._formatter)
        builder = self._pack_builder(state.task, kernel)
        pack = await asyncio.to_thread(builder.for_step, self.agent_state)
        size = self.settings.pack_chars
        if self.rediscovery:
            header = FRESH_HEADER
        elif self.verified_changes is not None:
            header, size = AGAIN_HEADER, self.settings.update_pack_chars
        else:
            header = FIRST_HEADER
        text = pack.to_string(size)
        state.messages.append(
            Message.user(DISCOVERY.format(header=header, pack=text, command=command))
        )
        self.rediscovery = False
        self._enter(Phase.PLAN)
        return None

    async def _plan(self, state: LoopState, kernel: Kernel) -> TurnOutcome:
        text_only = state.budget is not None and state.budget.text_only
        try:
            response = await kernel.call_model(state, tools_enabled=not text_only)
        except AgentError as error:
            return self._on_error(state, kernel, error, during="asking the model what to do next")
        self._remember_response(response.text)
        calls = response.tool_calls
        state.messages.append(Message.assistant(response.text, calls))
        if response.format_error is not None:
            state.messages.append(
                Message.user(prompts.FORMAT_ERROR.format(error=response.format_error))
            )
            return TurnOutcome(text=response.text, mistake=True)
        if text_only:  # the budget's closing report: never a verified success
            reason = capacity_reason(state.budget)
            return TurnOutcome(text=response.text, finish_reason=reason, final_text=response.text)
        if not calls:
            if not response.text.strip():
                state.messages.append(Message.user(EMPTY_REPLY))
                return TurnOutcome(mistake=True)
            claim = DoneClaim(FinishReason.ANSWERED, response.text)
            return self._claim_done(claim, TurnOutcome(text=response.text))
        if any(call.name == FINISH_TOOL for call in calls):
            return await self._finish(state, kernel, response.text, calls)
        self.pending = list(calls)
        self._enter(Phase.ACT)
        return TurnOutcome(text=response.text, calls=calls)

    async def _finish(
        self, state: LoopState, kernel: Kernel, text: str, calls: Sequence[ToolCall]
    ) -> TurnOutcome:
        if len(calls) > 1:
            results = [
                ToolResult(
                    c.id,
                    c.name,
                    FINISH_NOT_ALONE.format(name=c.name),
                    is_error=True,
                    metadata={"error": "finish_not_alone"},
                )
                for c in calls
            ]
            state.messages.extend(Message.tool(r) for r in results)
            return TurnOutcome(text=text, calls=tuple(calls), results=tuple(results), mistake=True)
        results = await kernel.run_tools(state, calls)
        state.messages.extend(Message.tool(r) for r in results)
        outcome = TurnOutcome(text=text, calls=tuple(calls), results=tuple(results))
        finished = next((r for r in results if r.terminate and not r.is_error), None)
        if finished is None:  # invalid arguments, refused by a hook, ...
            return replace(outcome, mistake=all(counts_as_mistake(r) for r in results))
        return self._claim_done(DoneClaim(FinishReason.COMPLETED, finished.content), outcome)

    def _claim_done(self, claim: DoneClaim, outcome: TurnOutcome) -> TurnOutcome:
        """DONE when the work is verified since its last change; otherwise verify first."""
        if self.verified_changes is not None and self.verified_changes == self.changes:
            return self._done(claim, outcome)
        self.claim = claim
        self._enter(Phase.VERIFY)
        return outcome

    def _done(self, claim: DoneClaim, outcome: TurnOutcome) -> TurnOutcome:
        self.claim = None
        self.agent_state.add_milestone("task done: verified after the last change")
        self._enter(Phase.DONE)
        return TurnOutcome(
            text=outcome.text,
            calls=outcome.calls,
            results=outcome.results,
            finish_reason=claim.reason,
            final_text=claim.text,
        )

    async def _act(self, state: LoopState, kernel: Kernel) -> TurnOutcome:
        calls = self.pending
        index = await self._workspace_index(kernel)
        # file changes first, then commands (which may depend on them); results keep the
        # model's order
        order = sorted(range(len(calls)), key=lambda i: calls[i].name == COMMAND_TOOL)
        ran = await kernel.run_tools(state, [calls[i] for i in order])
        by_position = dict(zip(order, ran, strict=True))
        results = [by_position[i] for i in range(len(calls))]
        state.messages.extend(Message.tool(r) for r in results)
        self.pending = []
        outcome = TurnOutcome(
            results=tuple(results),
            mistake=bool(results) and all(counts_as_mistake(r) for r in results),
        )
        stats = await asyncio.to_thread(index.refresh)
        self._remember_actions(kernel, calls, results, stats.added, stats.changed)
        changed = bool(stats.added or stats.changed or stats.removed)
        if changed:
            self.changes += 1
            # on the loop's thread: the store's SQLite connection belongs to it
            self.agent_state.artifacts.current_diff = pending_diff(kernel, state.session_id)
        await compress(self.agent_state, self.settings.memory, formatter=self._formatter)
        loops = [
            kernel.observer.loops.record(c.name, c.arguments, result_digest(r.content))
            for c, r in zip(calls, results, strict=True)
        ]
        looped = next((check for check in loops if check.is_loop), None)
        if looped is not None:
            stop = self._intervene(state, kernel, looped)
            if stop is not None:
                return stop
        if self.phase is Phase.DISCOVER:
            return outcome
        self._enter(Phase.VERIFY if changed else Phase.PLAN)
        return outcome

    async def _verify(self, state: LoopState, kernel: Kernel) -> TurnOutcome:
        command = await self._verify_command(kernel)
        if command is None:
            return self._fail(
                state, kernel, ConfigurationError("no verification command is configured")
            )
        verdict = await kernel.verdict.check(state, command)
        outcome = TurnOutcome(results=(verdict.result,))
        artifacts = self.agent_state.artifacts
        artifacts.test_results = verdict.output
        artifacts.verification_success = verdict.passed
        if state.halted:
            return outcome
        if verdict.passed:
            return self._passed(verdict, outcome)
        assert verdict.error is not None
        if classify(verdict.error) is not Severity.RECOVERABLE:
            return self._fail(state, kernel, verdict.error, outcome)
        output = failure_output(verdict.output)
        error = LastError.from_failure(
            verdict.error.message,
            repro_command=command,
            stderr=output,
            tail_chars=self.settings.pack.stderr_chars,
        )
        self.agent_state.last_error = error
        self.agent_state.record_attempt(
            f"verify: {command}",
            f"exit code {verdict.exit_code}",
            success=False,
            error_signature=error.signature,
        )
        if self.claim is None:
            consequence = CHANGE_REFUSED
        elif self.claim.reason is FinishReason.COMPLETED:
            consequence = FINISH_REFUSED
        else:  # a prose answer: the model never called finish
            consequence = ANSWER_REFUSED
        self.claim = None
        state.messages.append(
            Message.user(
                VERIFY_FAILED.format(
                    command=command,
                    consequence=consequence,
                    error=render_error(error, self.settings.pack.stderr_chars),
                )
            )
        )
        self._enter(Phase.PLAN)
        check = kernel.observer.loops.record(
            VERIFY_SIGNATURE, {"command": command}, verdict.fingerprint
        )
        if check.is_loop:
            # the harness ran the check, not the model: say so rather than "`verify` ran N times"
            detail = SAME_CHECK_FAILURE.format(command=command, count=check.count)
            stop = self._intervene(state, kernel, replace(check, message=detail))
            if stop is not None:
                return stop
        return outcome

    def _passed(self, verdict: CheckRun, outcome: TurnOutcome) -> TurnOutcome:
        self.verified_changes = self.changes
        self.agent_state.last_error = None
        self.agent_state.add_milestone(f"the check `{verdict.command}` passed")
        if self.claim is not None:
            return self._done(self.claim, outcome)
        self._enter(Phase.DISCOVER)
        return outcome

    # --- errors and interventions ---------------------------------------------------------

    def _on_error(
        self, state: LoopState, kernel: Kernel, error: AgentError, *, during: str
    ) -> TurnOutcome:
        severity = classify(error)
        if severity is Severity.TRANSIENT:
            raise error  # the kernel records the service or budget finish reason
        if severity is Severity.FATAL:
            return self._fail(state, kernel, error)
        self.agent_state.last_error = LastError.from_failure(error.message)
        told = format_for_model(error, during=during)
        state.messages.append(Message.user(f"[journeyman] {told}"))
        self._enter(Phase.PLAN)
        return TurnOutcome(mistake=True)

    def _fail(
        self,
        state: LoopState,
        kernel: Kernel,
        error: AgentError,
        outcome: TurnOutcome | None = None,
    ) -> TurnOutcome:
        from journeyman.loop.kernel import finish_reason_for

        self._enter(Phase.FAIL)
        state.error = error.message
        kernel.emit(ev.ErrorOccurred(error.category.value, error.message, error.retryable, {}))
        done = outcome or TurnOutcome()
        return TurnOutcome(
            text=done.text,
            calls=done.calls,
            results=done.results,
            finish_reason=finish_reason_for(error),
        )

    def _intervene(self, state: LoopState, kernel: Kernel, check: LoopCheck) -> TurnOutcome | None:
        """Climb the ladder for a detected loop; a TurnOutcome when the run must stop."""
        rung = self.ladder.escalate()
        if rung is Intervention.ABORT:
            self._enter(Phase.FAIL)
            state.error = (
                "stopped after repeated actions: the same action with the same result kept "
                f"coming back after every intervention ({check.message})"
            )
            return TurnOutcome(finish_reason=FinishReason.NO_PROGRESS)
        state.pending_nudges.append(("loop_intervention", self.ladder.message(rung, check.message)))
        if rung is Intervention.REDISCOVER:
            kernel.observer.loops.reset()
            self.pending = []
            self.rediscovery = True
            self._enter(Phase.DISCOVER)
        return None

    # --- memory ---------------------------------------------------------------------------

    def _remember_response(self, text: str) -> None:
        self.agent_state.record_model_response(text)
        debug = self.agent_state.memory.debug
        keep = self.settings.memory.keep_model_responses
        if len(debug.model_responses) > keep:
            debug.model_responses = debug.model_responses[-keep:] if keep else ()

    def _remember_actions(
        self,
        kernel: Kernel,
        calls: Sequence[ToolCall],
        results: Sequence[ToolResult],
        added: Sequence[str],
        changed: Sequence[str],
    ) -> None:
        limit = self.settings.memory.tool_output_chars * 2
        memory = self.agent_state
        for call, result in zip(calls, results, strict=True):
            arguments = json.dumps(call.arguments, sort_keys=True, default=str)
            memory.record_tool_result(
                call.name,
                arguments,
                _head_and_tail(result.content, limit),
                is_error=result.is_error,
            )
            if kernel.registry.is_read_only(call) is False:
                first = result.content.strip().splitlines()[0] if result.content.strip() else ""
                memory.record_attempt(
                    f"{call.name} {_short(arguments)}", first[:200], success=not result.is_error
                )
        for path in added:
            memory.record_created_file(path)
        keep = self.settings.memory.file_content_chars
        for path in (*added, *changed):
            content = _read_small(kernel.workspace / path)
            if content is not None:
                memory.record_file_content(path, content[:keep])

    # --- workspace knowledge --------------------------------------------------------------

    async def _verify_command(self, kernel: Kernel) -> str | None:
        configured = (self.configured_command or "").strip()
        return configured or await kernel.verdict.command()

    async def _workspace_index(self, kernel: Kernel) -> WorkspaceIndexer:
        """The index, built on first use and brought up to date at each discovery."""
        if self._index is None:
            self._index = WorkspaceIndexer(kernel.workspace)
            await asyncio.to_thread(self._index.bootstrap)
        elif self.phase is Phase.DISCOVER:
            await asyncio.to_thread(self._index.refresh)
        return self._index

    def _pack_builder(self, goal: str, kernel: Kernel) -> ContextPackBuilder:
        if self._builder is None:
            if self._profile is None:
                self._profile = detect_profile(kernel.workspace)
            self._builder = ContextPackBuilder(
                goal=goal,
                files=self._index,
                profile=self._profile,
                settings=self.settings.pack,
                formatter=self._formatter,
            )
        return self._builder

    # --- persistence (StatefulMode) -------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        claim = self.claim
        return {
            "agent_state": self.agent_state.to_dict(),
            "pending_calls": [call.to_dict() for call in self.pending],
            "claim": None if claim is None else {"reason": claim.reason.value, "text": claim.text},
            "changes": self.changes,
            "verified_changes": self.verified_changes,
            "interventions": int(self.ladder.level),
            "rediscovery": self.rediscovery,
        }

    def restore(self, data: Mapping[str, Any]) -> None:
        self.agent_state = AgentState.from_dict(data["agent_state"])
        self.pending = [ToolCall.from_dict(dict(c)) for c in data.get("pending_calls", ())]
        claim = data.get("claim")
        self.claim = (
            None if claim is None else DoneClaim(FinishReason(claim["reason"]), claim["text"])
        )
        self.changes = int(data.get("changes", 0))
        verified = data.get("verified_changes")
        self.verified_changes = None if verified is None else int(verified)
        self.ladder = InterventionLadder(Intervention(int(data.get("interventions", 0))))
        self.rediscovery = bool(data.get("rediscovery", False))
        if self.phase in (Phase.DONE, Phase.FAIL):
            self._enter(Phase.DISCOVER)  # a resumed run starts from a fresh picture


def _head_and_tail(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - limit:,} characters left out ...]\n{text[-half:]}"


def _short(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _read_small(path: Path) -> str | None:
    try:
        if not path.is_file() or path.stat().st_size > MAX_FILE_READ:
            return None
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def pending_diff(kernel: Kernel, session_id: str) -> str:
    """The session's changes not undone yet, as a unified diff (from the undo journal)."""
    diff = FileChangeTracker(kernel.store, session_id, kernel.workspace).diff()
    if len(diff) <= MAX_DIFF_CHARS:
        return diff
    return diff[:MAX_DIFF_CHARS] + f"\n[... {len(diff) - MAX_DIFF_CHARS:,} more characters of diff]"
