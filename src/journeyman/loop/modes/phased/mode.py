"""The phased mode: DISCOVER -> PLAN -> ACT -> VERIFY, ending in DONE or FAIL.

Each port turn runs one phase step, and the step's checkpoint holds the phase and the
structured memory (`context.memory.PhasedState`), so a resumed run carries on in the phase it
stopped in: with the tool calls still to run (ACT) or the check still to make (VERIFY).

- DISCOVER refreshes the workspace index, builds the context pack (goal, project profile,
  relevant snippets, latest error, test results, memory) and gives it to the model; the same
  turn then goes on to PLAN. It comes first, after a passing verification, and when a loop
  intervention forces a fresh start.
- PLAN asks the model for its next actions as native tool calls. Tool calls go to ACT; a
  `finish` call or a reply without tool calls means the model says it is done. The first reply
  that lays out a numbered (or bulleted) plan gives the memory its plan, and the words before
  the list its task summary; until then DISCOVER asks for them, afterwards never again.
- ACT runs the calls through the port (file tools before commands), records them in memory,
  and goes to VERIFY when the workspace changed, else back to PLAN.
- VERIFY runs the check command (`loop.verdict` through the port: the same check every mode
  ends with) and decides by its exit code.
- Memory: decisions, learnings and milestones (and revisions of the plan or task summary)
  come from the `note` tool, offered in phased runs (`tools.notes`; ACT records the call's
  arguments). Raw replies and the workflow's own decision log are kept debug-only: persisted
  in the checkpoint, never rendered into a pack. When the memory outgrows its settings it is
  compressed, and the model stage asks the run's provider through `port.summarise` (booked
  in the run's usage like any call).
- DONE needs both: the model said it is done, and the last verification passed after the last
  change to the workspace. A claim without such a verification sends the run to VERIFY first;
  a failing verification sends it back to PLAN with the error, never to DONE.
- FAIL ends the run when an error is fatal (`recovery`) or loops persist after every
  intervention (`interventions`). Allowed transitions: `workflow`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from journeyman.context.compaction import CONTEXT_PACK_PREFIX
from journeyman.context.memory import LastError, MemoryFormatter, PhasedState, compress
from journeyman.context.pack import render_error
from journeyman.core import events as ev
from journeyman.core.errors import AgentError, ConfigurationError
from journeyman.core.messages import Message, ToolCall, ToolResult
from journeyman.core.result import FinishReason
from journeyman.economics.loop_detector import LoopCheck
from journeyman.loop import prompts
from journeyman.loop.budget_gate import capacity_reason
from journeyman.loop.config import PhasedSettings
from journeyman.loop.endings import Termination, finish_reason_for
from journeyman.loop.modes.phased.interventions import Intervention, InterventionLadder
from journeyman.loop.modes.phased.knowledge import (
    NOTE_TOOL,
    WorkspaceKnowledge,
    log_decision,
    remember_actions,
    remember_plan,
    remember_response,
)
from journeyman.loop.modes.phased.recovery import Severity, classify, format_for_model
from journeyman.loop.modes.phased.workflow import Edge, WorkflowPhase, transition
from journeyman.loop.modes.react import counts_as_mistake, offers, reject_malformed_reply
from journeyman.loop.port import TurnPort
from journeyman.loop.state import LoopState, TurnOutcome
from journeyman.loop.verdict import COMMAND_TOOL, CheckRun, failure_output
from journeyman.tools.finish import FinishTool

FINISH_TOOL = FinishTool.name
VERIFY_SIGNATURE = "verify"
"""Name under which failing verifications are counted by the loop detector."""


DISCOVERY = """\
{prefix} {header}

{pack}

{planning}Work in small steps with tool calls. After you change the workspace, `{command}` runs \
to check it (exit code 0 passes). When the task is complete, {done}: the run ends only once \
that check has passed after your last change."""
DONE_BY_FINISH = "call finish"
DONE_BY_ANSWER = "say so in a reply without tool calls"
PLAN_REQUEST = (
    "Before your first change, say in one sentence what the task asks for, then lay out your "
    "plan as a numbered list: both are kept in your memory and shown to you at every step. "
)
NOTE_HINT = (
    "Keep important decisions, learnings and milestones with the `note` tool (it also revises "
    "the plan); notes outlive compaction of old turns. "
)
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
    """DISCOVER -> PLAN -> ACT -> VERIFY for the port; see the module docstring."""

    def __init__(
        self, settings: PhasedSettings | None = None, *, verify_command: str | None = None
    ) -> None:
        self.settings = settings or PhasedSettings()
        self.agent_state = PhasedState(phase=WorkflowPhase.DISCOVER)
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
        self.knowledge = WorkspaceKnowledge(verify_command, self.settings.pack, self._formatter)
        self.emit: Callable[[ev.Event], None] | None = None
        """Where phase changes are reported (the port's `emit`, taken at each turn)."""

    @property
    def phase(self) -> WorkflowPhase:
        return WorkflowPhase(self.agent_state.phase)

    def _enter(self, phase: WorkflowPhase, edge: Edge = Edge.NEXT) -> None:
        source = self.phase
        self.agent_state.phase = transition(source, phase, edge).value
        self._log(f"{source.value} -> {phase.value} ({edge.value})")
        if self.emit is not None:
            self.emit(ev.PhaseChanged(source.value, phase.value, edge.value))

    def _log(self, decision: str) -> None:
        log_decision(self.agent_state, decision, self.settings.memory)

    async def _compress(self, state: LoopState, port: TurnPort) -> None:
        """Compress the memory; its model stage asks the run's provider (usage is booked)."""
        await compress(
            self.agent_state,
            self.settings.memory,
            lambda transcript: port.summarise(state, transcript),
            formatter=self._formatter,
        )

    def _start_over(self, phase: WorkflowPhase) -> None:
        """A new attempt after a finished workflow (a resumed session, a Stop hook that asks
        for more work) starts a new workflow; a terminal phase is never left."""
        source, self.agent_state.phase = self.phase, phase.value
        if self.emit is not None:
            self.emit(ev.PhaseChanged(source.value, phase.value, "restart"))

    # --- the state machine ----------------------------------------------------------------

    async def iterate(self, state: LoopState, port: TurnPort) -> TurnOutcome:
        self.emit = port.emit
        self.agent_state.advance()
        if self.phase is WorkflowPhase.DONE:  # a Stop hook asked for more work
            self._start_over(WorkflowPhase.PLAN)
        if self.phase is WorkflowPhase.DISCOVER:
            failed = await self._discover(state, port)
            if failed is not None:
                return failed
        if self.phase is WorkflowPhase.ACT and self.pending:
            return await self._act(state, port)
        if self.phase is WorkflowPhase.VERIFY:
            return await self._verify(state, port)
        if self.phase is not WorkflowPhase.PLAN:  # ACT with nothing left to run
            self._enter(WorkflowPhase.PLAN, Edge.RECOVER)
        return await self._plan(state, port)

    async def _discover(self, state: LoopState, port: TurnPort) -> TurnOutcome | None:
        command = self.knowledge.configured_command or await port.check_command()
        if command is None:
            return self._fail(
                state,
                port,
                ConfigurationError(
                    "the phased mode needs a verification command, and none was given "
                    f"(--verify or verify_command) or detected in {port.workspace}; pass one "
                    "with --verify"
                ),
            )
        await self.knowledge.index(port.workspace, refresh=True)
        await self._compress(state, port)
        builder = self.knowledge.pack_builder(state.task, port.workspace)
        pack = await asyncio.to_thread(builder.for_step, self.agent_state)
        size = self.settings.pack_chars
        if self.rediscovery:
            header = FRESH_HEADER
        elif self.verified_changes is not None:
            header, size = AGAIN_HEADER, self.settings.update_pack_chars
        else:
            header = FIRST_HEADER
        text = pack.to_string(size)
        # never ask for a plan the model already wrote
        planning = "" if self.agent_state.memory.long_term.plan else PLAN_REQUEST
        if offers(port, NOTE_TOOL):
            planning += NOTE_HINT
        done = DONE_BY_FINISH if offers(port, FINISH_TOOL) else DONE_BY_ANSWER
        state.messages.append(
            Message.user(
                DISCOVERY.format(
                    prefix=CONTEXT_PACK_PREFIX,
                    header=header,
                    pack=text,
                    command=command,
                    planning=planning,
                    done=done,
                )
            )
        )
        self.rediscovery = False
        self._enter(WorkflowPhase.PLAN)
        return None

    async def _plan(self, state: LoopState, port: TurnPort) -> TurnOutcome:
        text_only = state.budget is not None and state.budget.text_only
        try:
            response = await port.call_model(state, tools_enabled=not text_only)
        except AgentError as error:
            return self._on_error(state, port, error, during="asking the model what to do next")
        remember_response(self.agent_state, response.text, self.settings.memory)
        if remember_plan(self.agent_state, response.text):
            steps = len(self.agent_state.memory.long_term.plan)
            self._log(f"plan of {steps} steps recorded from the reply")
        calls = response.tool_calls
        state.messages.append(Message.assistant(response.text, calls))
        if response.format_error is not None:
            return reject_malformed_reply(state, response.text, response.format_error)
        if text_only:  # the budget's closing report: never a verified success
            reason = capacity_reason(state.budget)
            return TurnOutcome(text=response.text, finish_reason=reason, final_text=response.text)
        if not calls:
            if not response.text.strip():
                reminder = prompts.empty_reply(offers(port, FINISH_TOOL))
                state.messages.append(Message.user(reminder))
                return TurnOutcome(mistake=True)
            claim = DoneClaim(FinishReason.ANSWERED, response.text)
            return self._claim_done(claim, TurnOutcome(text=response.text))
        if any(call.name == FINISH_TOOL for call in calls):
            return await self._finish(state, port, response.text, calls)
        self.pending = list(calls)
        self._enter(WorkflowPhase.ACT)
        # the calls are reported with their results, by the ACT step that runs them
        return TurnOutcome(text=response.text, calls_pending=True)

    async def _finish(
        self, state: LoopState, port: TurnPort, text: str, calls: Sequence[ToolCall]
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
        results = await port.run_tools(state, calls)
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
        self._enter(WorkflowPhase.ACT)  # the claim is the action of this step; it needs its check
        self._enter(WorkflowPhase.VERIFY)
        return outcome

    def _done(self, claim: DoneClaim, outcome: TurnOutcome) -> TurnOutcome:
        self.claim = None
        self.agent_state.add_milestone("task done: verified after the last change")
        self._enter(WorkflowPhase.DONE)
        return TurnOutcome(
            text=outcome.text,
            calls=outcome.calls,
            results=outcome.results,
            finish_reason=claim.reason,
            final_text=claim.text,
        )

    async def _act(self, state: LoopState, port: TurnPort) -> TurnOutcome:
        calls = self.pending
        index = await self.knowledge.index(port.workspace, refresh=False)
        # file changes first, then commands (which may depend on them); results keep the
        # model's order
        order = sorted(range(len(calls)), key=lambda i: calls[i].name == COMMAND_TOOL)
        ran = await port.run_tools(state, [calls[i] for i in order])
        by_position = dict(zip(order, ran, strict=True))
        results = [by_position[i] for i in range(len(calls))]
        state.messages.extend(Message.tool(r) for r in results)
        self.pending = []
        outcome = TurnOutcome(
            calls=tuple(calls),
            results=tuple(results),
            mistake=bool(results) and all(counts_as_mistake(r) for r in results),
        )
        stats = await asyncio.to_thread(index.refresh)
        done = [(c, r, port.tool_kind(c)) for c, r in zip(calls, results, strict=True)]
        remember_actions(
            self.agent_state,
            self.settings.memory,
            port.workspace,
            done,
            stats.added,
            stats.changed,
        )
        changed = bool(stats.added or stats.changed or stats.removed)
        if changed:
            self.changes += 1
            # on the loop's thread: the store's SQLite connection belongs to it
            self.agent_state.artifacts.current_diff = port.pending_diff(state.session_id)
        await self._compress(state, port)
        # repeated calls are seen by the loop's observer, which reports them to
        # `on_repetition`
        if changed:
            self._enter(WorkflowPhase.VERIFY)
        else:
            self._enter(WorkflowPhase.PLAN, Edge.UNCHANGED)
        return outcome

    async def _verify(self, state: LoopState, port: TurnPort) -> TurnOutcome:
        command = self.knowledge.configured_command or await port.check_command()
        if command is None:
            return self._fail(
                state, port, ConfigurationError("no verification command is configured")
            )
        verdict = await port.run_check(state, command)
        outcome = TurnOutcome(results=(verdict.result,), by_harness=True)
        artifacts = self.agent_state.artifacts
        artifacts.test_results = verdict.output
        artifacts.verification_success = verdict.passed
        if verdict.passed:
            return self._passed(verdict, outcome)
        assert verdict.error is not None
        if classify(verdict.error) is not Severity.RECOVERABLE:
            return self._fail(state, port, verdict.error, outcome)
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
        self._enter(WorkflowPhase.PLAN, Edge.RECOVER)
        check = port.record_repetition(VERIFY_SIGNATURE, {"command": command}, verdict.fingerprint)
        if check.is_loop:
            # the harness ran the check, not the model: say so rather than "`verify` ran N times"
            detail = SAME_CHECK_FAILURE.format(command=command, count=check.count)
            ending = self._intervene(state, port, replace(check, message=detail))
            if ending is not None:
                return replace(outcome, finish_reason=ending.reason, error=ending.message)
        return outcome

    def _passed(self, verdict: CheckRun, outcome: TurnOutcome) -> TurnOutcome:
        self.verified_changes = self.changes
        self.agent_state.last_error = None
        self.agent_state.add_milestone(f"the check `{verdict.command}` passed")
        if self.claim is not None:
            return self._done(self.claim, outcome)
        self._enter(WorkflowPhase.DISCOVER)
        return outcome

    # --- errors and interventions ---------------------------------------------------------

    def _on_error(
        self, state: LoopState, port: TurnPort, error: AgentError, *, during: str
    ) -> TurnOutcome:
        severity = classify(error)
        if severity is Severity.TRANSIENT:
            raise error  # the kernel records the service or budget finish reason
        if severity is Severity.FATAL:
            return self._fail(state, port, error)
        self.agent_state.last_error = LastError.from_failure(error.message)
        told = format_for_model(error, during=during)
        state.messages.append(Message.user(f"[journeyman] {told}"))
        self._enter(WorkflowPhase.PLAN, Edge.RECOVER)
        return TurnOutcome(mistake=True)

    def _fail(
        self,
        state: LoopState,
        port: TurnPort,
        error: AgentError,
        outcome: TurnOutcome | None = None,
    ) -> TurnOutcome:
        self._enter(WorkflowPhase.FAIL)
        port.emit(ev.ErrorOccurred(error.category.value, error.message, error.retryable, {}))
        done = outcome or TurnOutcome()
        return replace(done, finish_reason=finish_reason_for(error), error=error.message)

    def on_repetition(
        self, state: LoopState, check: LoopCheck, port: TurnPort
    ) -> Termination | None:
        """The loop's observer saw a repeated call: climb the intervention ladder."""
        return self._intervene(state, port, check)

    def _intervene(self, state: LoopState, port: TurnPort, check: LoopCheck) -> Termination | None:
        """Climb the ladder for a detected loop; a Termination when the run must stop."""
        rung = self.ladder.escalate()
        if rung is Intervention.ABORT:
            self._enter(WorkflowPhase.FAIL)
            return Termination(
                FinishReason.NO_PROGRESS,
                "stopped after repeated actions: the same action with the same result kept "
                f"coming back after every intervention ({check.message})",
            )
        state.pending_nudges.append(("loop_intervention", self.ladder.message(rung, check.message)))
        if rung is Intervention.REDISCOVER:
            port.forget_repetitions()
            self.pending = []
            self.rediscovery = True
            self._enter(WorkflowPhase.DISCOVER, Edge.INTERVENE)
        return None

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
        self.agent_state = PhasedState.from_dict(data["agent_state"])
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
        if self.phase in (WorkflowPhase.DONE, WorkflowPhase.FAIL):
            self._start_over(WorkflowPhase.DISCOVER)  # a resumed run starts from a fresh picture
