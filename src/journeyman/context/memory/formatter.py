"""Renders the state as titled sections; subclass and override a section to change it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from journeyman.context.compaction import cap_text
from journeyman.context.memory.sections import (
    PRIORITY_ACTIVITY,
    PRIORITY_CONTEXT,
    PRIORITY_EARLIER,
    PRIORITY_FILES,
    PRIORITY_GUIDANCE,
    PRIORITY_PLAN,
    PRIORITY_STATE,
    PRIORITY_TASK,
    PRIORITY_TOOL_RESULTS,
    MemorySection,
    MemorySummary,
)
from journeyman.context.memory.settings import MemorySettings
from journeyman.core.text import clip, clip_noted

if TYPE_CHECKING:
    from journeyman.context.memory.state import PhasedState


class MemoryFormatter:
    """Renders the state as titled sections; subclass and override a section to change it."""

    def __init__(self, settings: MemorySettings | None = None) -> None:
        self.settings = settings or MemorySettings()

    def format(self, state: PhasedState) -> MemorySummary:
        built = [
            ("Warnings", self.warnings(state), PRIORITY_GUIDANCE),
            ("Task", state.memory.long_term.task_summary.strip(), PRIORITY_TASK),
            ("Plan", self.plan(state), PRIORITY_PLAN),
            ("Key context", self.key_context(state), PRIORITY_CONTEXT),
            ("Earlier work", self.earlier_work(state), PRIORITY_EARLIER),
            ("Recent activity", self.recent_activity(state), PRIORITY_ACTIVITY),
            ("Tool results", self.tool_results(state), PRIORITY_TOOL_RESULTS),
            ("Modified files", self.modified_files(state), PRIORITY_FILES),
            ("Current state", self.current_state(state), PRIORITY_STATE),
            ("Next step", self.next_step(state), PRIORITY_GUIDANCE),
        ]
        return MemorySummary(tuple(MemorySection(t, b, p) for t, b, p in built if b))

    def warnings(self, state: PhasedState) -> str:
        lines = []
        error = state.last_error
        if error is not None and error.signature:
            repeats = sum(
                1 for a in state.memory.facts.attempts if a.error_signature == error.signature
            )
            if repeats >= 2:
                lines.append(
                    f"- The same error has come back {repeats} times. Repeating the last fix "
                    "will not help: re-read the failing code and try a different approach."
                )
        if state.artifacts.verification_success is False:
            lines.append("- The last verification failed; the task is not done until it passes.")
        return "\n".join(lines)

    def plan(self, state: PhasedState) -> str:
        return "\n".join(f"{n}. {step}" for n, step in enumerate(state.memory.long_term.plan, 1))

    def key_context(self, state: PhasedState) -> str:
        long_term = state.memory.long_term
        lines = [
            f"- decision (step {d.step}): {d.text}" + (f" because {d.reason}" if d.reason else "")
            for d in long_term.decisions
        ]
        lines += [f"- milestone (step {m.step}): {m.text}" for m in long_term.milestones]
        lines += [f"- learned: {text}" for text in long_term.learnings]
        return "\n".join(lines)

    def earlier_work(self, state: PhasedState) -> str:
        long_term = state.memory.long_term
        parts = [long_term.earlier_summary.strip()] if long_term.earlier_summary.strip() else []
        parts += [f"- {line}" for line in long_term.earlier_work]
        return "\n".join(parts)

    def recent_activity(self, state: PhasedState) -> str:
        return "\n".join(
            f"- step {a.step}: {a.action} -> {'ok' if a.success else 'FAILED'}"
            + (f": {a.outcome}" if a.outcome else "")
            for a in state.memory.facts.attempts
        )

    def tool_results(self, state: PhasedState) -> str:
        limit = self.settings.tool_output_chars
        blocks = []
        for record in state.memory.facts.tool_results:
            status = "error" if record.is_error else "ok"
            output = (
                record.output if len(record.output) <= limit else cap_text(record.output, limit)
            )
            blocks.append(
                f"### step {record.step}: {record.tool}({clip(record.arguments, 200)}) "
                f"[{status}]\n{output}"
            )
        return "\n".join(blocks)

    def modified_files(self, state: PhasedState) -> str:
        limit = self.settings.file_content_chars
        blocks = []
        for snapshot in state.memory.facts.modified_files:
            note = "{cut:,} more characters; read the file for the rest"
            content = clip_noted(snapshot.content, limit, note)
            blocks.append(f"### {snapshot.path} (after step {snapshot.step})\n{content}")
        return "\n".join(blocks)

    def current_state(self, state: PhasedState) -> str:
        facts, artifacts = state.memory.facts, state.artifacts
        verified = {None: "not run yet", True: "passed", False: "failed"}
        lines = [f"- step {state.step}" + (f", phase {state.phase}" if state.phase else "")]
        if facts.created_files:
            lines.append(f"- created: {', '.join(facts.created_files)}")
        if facts.modified_files:
            lines.append(f"- modified: {', '.join(s.path for s in facts.modified_files)}")
        if state.last_error is not None:
            lines.append(f"- last error: {state.last_error.summary}")
        lines.append(f"- verification: {verified[artifacts.verification_success]}")
        return "\n".join(lines)

    def next_step(self, state: PhasedState) -> str:
        error = state.last_error
        if error is not None:
            how = f" (reproduce it with `{error.repro_command}`)" if error.repro_command else ""
            return f"Fix the last error first{how}, then verify again."
        if state.artifacts.verification_success is False:
            return "Read the failing tests in the test results, fix the cause, then verify again."
        if not state.memory.long_term.plan:
            return "Write a short plan before changing files."
        if state.artifacts.verification_success:
            return "Verification passed: finish if the task is complete, else continue the plan."
        return "Carry out the next step of the plan, then verify."


DEFAULT_FORMATTER = MemoryFormatter()
