"""The phased mode's VERIFY step: which command checks the work, and what its run means.

The command is the one given in the configuration (`verify_command`, `--verify`) or else the
test command the project profile detected. It runs as an ordinary `run_command` call, through
the kernel's tool execution (permissions, hooks, sandbox, timeout), and the verdict is read
from the exit code alone: 0 passes, anything else fails. Exit codes 126 and 127 (the shell
could not execute or find the command) mean the command itself is wrong, which no edit of the
model can fix; every other failure is the model's to fix.
"""

from __future__ import annotations

from dataclasses import dataclass

from journeyman.context.memory import normalise
from journeyman.context.profile import ProjectProfile
from journeyman.core.errors import (
    AgentError,
    ConfigurationError,
    PermissionDeniedError,
    ToolError,
    ToolTimeoutError,
)
from journeyman.core.messages import ToolCall, ToolResult
from journeyman.economics.loop_detector import result_digest
from journeyman.policy.permissions import PERMISSION_ERROR_KIND
from journeyman.tools.shell import RunCommandTool

COMMAND_TOOL = RunCommandTool.name
"""The tool verification runs through."""
SHELL_CANNOT_EXECUTE = 126
SHELL_NOT_FOUND = 127


def resolve_command(configured: str | None, profile: ProjectProfile | None) -> str | None:
    """The configured command, else the profile's recommended test command, else None."""
    if configured and configured.strip():
        return configured.strip()
    return profile.test_command if profile is not None else None


def verification_call(command: str, step: int) -> ToolCall:
    return ToolCall(f"verify-{step}", COMMAND_TOOL, {"command": command})


@dataclass(frozen=True)
class Verdict:
    """What one verification run showed."""

    command: str
    passed: bool
    output: str
    """The command's output as the tool reported it (head and tail when long)."""
    exit_code: int | None = None
    error: AgentError | None = None
    """Why it did not pass, as a typed error (None when it passed)."""

    @property
    def fingerprint(self) -> str:
        """Identity of the outcome with numbers masked (timings, line numbers), so the same
        failure seen again is recognised by the loop detector."""
        return result_digest(normalise(self.output))


def judge(command: str, result: ToolResult) -> Verdict:
    """The verdict for `result` of running `command`, decided by the exit code."""
    exit_code = result.metadata.get("exit_code")
    code = exit_code if isinstance(exit_code, int) else None
    if result.metadata.get("timed_out") or result.metadata.get("error") == "timeout":
        error: AgentError | None = ToolTimeoutError(
            f"the verification command `{command}` ran past its time limit and was stopped; "
            "make the tests faster or raise the tool timeout"
        )
    elif result.metadata.get("error") == PERMISSION_ERROR_KIND:
        error = PermissionDeniedError(
            f"the verification command `{command}` was refused by the permission policy "
            f"({result.content.strip()}); allow it with a rule such as run_command({command}) "
            "or run with --yes",
            tool_name=COMMAND_TOOL,
        )
    elif code is None:
        error = ConfigurationError(
            f"the verification command `{command}` could not be run: {result.content.strip()}"
        )
    elif code in (SHELL_CANNOT_EXECUTE, SHELL_NOT_FOUND):
        error = ConfigurationError(
            f"the verification command `{command}` cannot be executed (exit code {code}); "
            "pass a working one with --verify"
        )
    elif code != 0:
        error = ToolError(f"the verification command `{command}` failed with exit code {code}")
    else:
        error = None
    return Verdict(command, error is None, result.content, code, error)


def failure_output(output: str) -> str:
    """The command's own output, without the tool's bracketed notes at its end."""
    lines = output.rstrip().splitlines()
    while lines and lines[-1].startswith("[") and lines[-1].endswith("]"):
        lines.pop()
    return "\n".join(lines)
