"""Running the check: one way, for every caller that must know whether the tests pass.

The check runs through the run's own `run_command` tool, so it gets what every command of the
run gets: the sandbox, the allow-listed environment, redaction of secrets, the output caps and
the kill of the whole process group at its time limit (`verify_timeout_s`, never the tool
timeout). `CheckRunner.run` returns a `CheckRun`: the exit code, the tests the runner's own
summary reports (`context.test_results`), and the workspace's fingerprint right after it
(`tools.fingerprint`), which is what "the check ran on the final tree" is measured against.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from journeyman.context.memory import normalise
from journeyman.context.test_infra import TestChange, TestInfra, blocking
from journeyman.context.test_results import TestTally, parse_test_output
from journeyman.core.errors import (
    AgentError,
    ConfigurationError,
    PermissionDeniedError,
    ToolError,
    ToolTimeoutError,
)
from journeyman.core.messages import ToolCall, ToolResult
from journeyman.core.redact import redact_own_secrets
from journeyman.economics.loop_detector import result_digest
from journeyman.loop.fixed_check import FixedCheck
from journeyman.tools.context import ToolContext, tool_session_id
from journeyman.tools.fingerprint import fingerprint
from journeyman.tools.registry import ToolRegistry
from journeyman.tools.shell import RunCommandArgs, RunCommandTool

COMMAND_TOOL = RunCommandTool.name
"""The tool the check runs through."""
SHELL_CANNOT_EXECUTE = 126
SHELL_NOT_FOUND = 127
PYTEST_NO_TESTS = 5
"""pytest's exit code when it collected no test."""
OUTPUT_TAIL_LINES = 40
OUTPUT_TAIL_CHARS = 3_000
STOP_GRACE_S = 30.0
"""Extra seconds past the check's own limit before the harness gives up waiting for it."""
CHECK_CALL_PREFIX = "verify-"
"""Call ids of the harness's own checks (so a display can tell them from the model's calls)."""
BEFORE_CALL_ID = f"{CHECK_CALL_PREFIX}before"
"""The call id of the check's run before the first turn (a failure there is the task)."""


@dataclass(frozen=True)
class CheckRun:
    """One run of the check command by the harness, judged."""

    command: str
    result: ToolResult
    """The `run_command` result, as a tool result (for the mode's accounting)."""
    passed: bool
    exit_code: int | None
    duration_s: float
    timeout_s: float
    workspace_fingerprint: str = ""
    """The workspace's fingerprint right after the check."""
    error: AgentError | None = None
    """Why it did not pass, as a typed error (None when it passed)."""
    not_run: str | None = None
    tally: TestTally | None = None
    """The tests the runner's summary reports; None when its output held no summary."""
    problem: str | None = None
    """Why it is not a pass (see `CheckEvidence.problem`); None when it passed."""
    test_changes: tuple[TestChange, ...] = ()
    tests_removed: bool = False

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
        tests = f"; {self.tally.describe()}" if self.tally is not None else ""
        return f"exit code {self.exit_code}{tests}"

    def summary(self) -> dict[str, Any]:
        """The short record a receipt keeps of a check run (its "before")."""
        return {
            "exit_code": self.exit_code,
            "passed": self.exit_code == 0 and not self.timed_out,
            "tests": None if self.tally is None else self.tally.to_dict(),
            "duration_s": round(self.duration_s, 3),
        }


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


def tally_of(result: ToolResult) -> TestTally | None:
    return parse_test_output(failure_output(result.content))


def assess(
    run: CheckRun, fixed: FixedCheck, now: TestInfra, *, allow_test_edits: bool
) -> CheckRun:
    """`run` judged beyond its exit code: a test summary with at least one test, the test
    infrastructure of `fixed` unchanged in `now`, no fewer tests than before the first turn
    (the last two waived by `allow_test_edits`); `problem` names the first thing that fails."""
    changes = tuple(now.changes_since(fixed.infra))
    before, tally = fixed.tests_before, run.tally
    removed = before is not None and tally is not None and tally.ran < before
    no_tests = tally is not None and tally.ran == 0
    problem: str | None = None
    if run.exit_code != 0:
        problem = "no_tests" if no_tests or run.exit_code == PYTEST_NO_TESTS else "failed"
    elif tally is None and fixed.needs_summary:
        problem = "no_summary"
    elif no_tests:
        problem = "no_tests"
    elif blocking(list(changes)) and not allow_test_edits:
        problem = "test_changes"
    elif removed and not allow_test_edits:
        problem = "tests_removed"
    judged = dataclasses.replace(
        run, passed=problem is None, problem=problem, test_changes=changes, tests_removed=removed
    )
    if problem not in (None, "failed"):
        judged = dataclasses.replace(judged, error=ToolError(explain(judged, before)))
    return judged


ADVICE = {
    "no_tests": "; give a check that runs tests with --verify CMD, or --no-verify for a task "
    "that needs no check",
    "no_summary": "; give a check whose runner prints its summary with --verify CMD, or "
    "--no-verify for a task that needs no check",
    "tests_removed": "; pass --allow-test-edits if the task is to remove tests",
    "test_changes": "; pass --allow-test-edits if the task is to change the tests",
}


def explain(run: CheckRun, tests_before: int | None) -> str:
    """Why `run` is not a pass, in one line for the user, with what to do about it."""
    problem = run.problem or "failed"
    listed = ", ".join(c.describe() for c in blocking(list(run.test_changes)))
    after = run.tally.ran if run.tally is not None else 0
    what = {
        "failed": f"fails ({run.describe()})",
        "no_tests": "ran no test, so it proves nothing",
        "no_summary": "printed no test summary, so nothing shows a test ran",
        "tests_removed": f"ran {after} test(s), fewer than the {tests_before} before the run",
        "test_changes": f"ran with test files or settings the run changed: {listed}",
    }.get(problem)
    if what is None:  # a problem found past `assess` says itself what it is
        return run.error.message if run.error is not None else f"the check `{run.command}` failed"
    return f"the check `{run.command}` {what}{ADVICE.get(problem, '')}"


class CheckRunner:
    """Runs check commands through the registry's `run_command` tool (see the module doc)."""

    def __init__(
        self,
        workspace: Path,
        registry: ToolRegistry,
        journal: Callable[[], Any] = lambda: None,
        *,
        output_bytes: int | None = None,
    ) -> None:
        self.workspace = workspace
        self.registry = registry
        self.journal = journal
        """The run's undo journal writer (so files the check changes are journaled too)."""
        self.output_bytes = output_bytes
        """Bytes of output kept from the end of a check (None: as the command tool keeps);
        a grader that reads every test's line needs more than the model is shown."""
        self._tool: RunCommandTool | None = None

    @property
    def sandbox(self) -> str:
        """Where checks run, as the sandbox describes itself."""
        sandbox = self._command_tool(0).sandbox
        return sandbox.description if sandbox is not None else "local (no isolation)"

    async def run(
        self, call: ToolCall, command: str, timeout: float, session_id: str, iteration: int
    ) -> tuple[ToolResult, float, str]:
        """(the result, seconds taken, the workspace fingerprint after it)."""
        tool = self._command_tool(timeout)
        ctx = ToolContext(
            self.workspace,
            session_id=tool_session_id(session_id),
            run_session_id=session_id,
            iteration=iteration,
            journal=self.journal(),
        )
        args = RunCommandArgs(command=command, timeout=timeout)
        started = time.monotonic()
        try:
            result = await asyncio.wait_for(tool.execute(args, ctx), timeout + STOP_GRACE_S)
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
        duration = time.monotonic() - started
        tree = await asyncio.to_thread(fingerprint, self.workspace)
        # the agent's own secrets never reach the model, a store or a prompt through a check
        content = redact_own_secrets(result.content)
        result = dataclasses.replace(result, call_id=call.id, name=COMMAND_TOOL, content=content)
        return result, duration, tree.digest

    async def check(
        self, command: str, timeout: float, call_id: str, session_id: str = "", iteration: int = 0
    ) -> CheckRun:
        """Run `command` as the check and judge it by its exit code alone (`assess` does
        the rest)."""
        call = ToolCall(call_id, COMMAND_TOOL, {"command": command})
        result, duration, tree = await self.run(call, command, timeout, session_id, iteration)
        error = judge_error(command, result, timeout)
        code = result.metadata.get("exit_code")
        return CheckRun(
            command=command,
            result=result,
            passed=error is None,
            exit_code=code if isinstance(code, int) else None,
            duration_s=duration,
            timeout_s=timeout,
            workspace_fingerprint=tree,
            error=error,
            tally=tally_of(result),
        )

    def _command_tool(self, timeout: float) -> RunCommandTool:
        """The run's `run_command` tool (same sandbox and journal), allowed `timeout` seconds."""
        if self._tool is None:
            tools = (self.registry.get(name) for name in self.registry.names)
            found = next((t for t in tools if isinstance(t, RunCommandTool)), None)
            # a shallow copy shares the sandbox and the command snapshots of the original
            self._tool = copy.copy(found) if found is not None else RunCommandTool()
        self._tool.max_timeout = max(self._tool.max_timeout, timeout)
        if self.output_bytes is not None:
            self._tool.tail_bytes = max(self._tool.tail_bytes, self.output_bytes)
        return self._tool
