"""Replaying a stored session: its model replies played back in order, without a model, while
the tools run for real; each step's tool results compared with the recorded ones.

The replies come from the stored history (the assistant messages, with their tool calls and
call ids); `ReplayScript.provider` turns them into a `ScriptedProvider` that the launcher builds
an ordinary agent around, so a replay runs through the same sandbox, permissions and redaction
as `run`. Before handing the model's next reply over, the provider compares the results the
previous reply's calls got with the recorded ones; with `keep_going` off it stops the run at the
first difference.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from journeyman.core.errors import LLMError
from journeyman.core.messages import Message, Role, ToolResult
from journeyman.providers.base import ModelRequest, ModelResponse
from journeyman.providers.scripted import ScriptedProvider

DIFF_LINES = 12
"""Lines of a differing result's diff shown in the report."""

_DURATION = re.compile(r"\b\d+(?:\.\d+)?\s?(?:ms|s|sec|secs|seconds)\b")
_TEMP_PATH = re.compile(r"/(?:tmp|var/folders|private/var/folders)/[^\s'\":,)\]]+")


class ReplayStopped(LLMError):
    """The replay reached a step whose tool results differ, and is not to go on."""


@dataclass(frozen=True)
class StepDifference:
    """One step whose tool result differs from the recorded one."""

    step: int
    tool: str
    diff: str
    """A short unified diff of the normalised results (recorded, then replayed)."""

    def to_dict(self) -> dict[str, object]:
        return {"step": self.step, "tool": self.tool, "diff": self.diff}


def normalise_result(text: str, workspaces: Sequence[Path]) -> str:
    """A tool result without what legitimately changes between two runs: the workspace's
    absolute path (a replay works in a copy), temporary paths and timings."""
    for where in sorted({str(w) for w in workspaces if str(w) not in ("", "/")}, key=len)[::-1]:
        text = text.replace(where, "<workspace>")
    text = _TEMP_PATH.sub("<tmp>", text)
    return _DURATION.sub("<time>", text)


def _shown(result: ToolResult | None) -> str:
    if result is None:
        return "(no result)\n"
    flag = "error: " if result.is_error else ""
    return flag + result.content + ("" if result.content.endswith("\n") else "\n")


def results_by_reply(history: Sequence[Message]) -> list[dict[str, ToolResult]]:
    """For each assistant message of `history`, in order, the tool results that follow it, by
    call id (by position first: some providers reuse call ids from one reply to the next)."""
    results: list[dict[str, ToolResult]] = []
    for message in history:
        if message.role is Role.ASSISTANT:
            results.append({})
        elif message.role is Role.TOOL and message.tool_result is not None and results:
            results[-1][message.tool_result.call_id] = message.tool_result
    return results


@dataclass
class ReplayScript:
    """The recorded replies of a session and the results their tool calls got."""

    replies: list[ModelResponse]
    recorded: list[dict[str, ToolResult]]
    """The results of each reply's calls, by call id."""
    workspaces: list[Path]
    keep_going: bool = False
    differences: list[StepDifference] = field(default_factory=list)
    compared: int = 0
    """Replies whose results were compared (those before it are settled)."""

    @classmethod
    def from_history(
        cls, history: Sequence[Message], workspaces: Sequence[Path], *, keep_going: bool = False
    ) -> ReplayScript:
        replies = [
            ModelResponse(text=m.content, tool_calls=m.tool_calls, stop_reason="replayed")
            for m in history
            if m.role is Role.ASSISTANT
        ]
        recorded = results_by_reply(history)
        return cls(replies, recorded, list(workspaces), keep_going)

    def provider(self, name: str, model: str) -> ScriptedProvider:
        """A provider that plays the replies back under the recorded provider's name (the tools
        an agent is given depend on it), comparing before each reply."""
        steps = [self._step(index) for index in range(len(self.replies))]
        return ScriptedProvider(steps, model=model, name=name)

    def _step(self, index: int) -> ReplyStep:
        return ReplyStep(self, index)

    def compare(self, history: Sequence[Message], up_to: int) -> None:
        """Compare the results of replies `compared`..`up_to`-1 found in `history`, whose last
        assistant message is reply `up_to`-1 (a request's history may have lost its start)."""
        replayed = results_by_reply(history)
        offset = up_to - len(replayed)
        for index in range(self.compared, min(up_to, len(self.replies))):
            for call in self.replies[index].tool_calls:
                where = index - offset
                got = replayed[where].get(call.id) if 0 <= where < len(replayed) else None
                self._compare_one(index + 1, call.name, self.recorded_result(index, call.id), got)
        self.compared = max(self.compared, up_to)

    def recorded_result(self, index: int, call_id: str) -> ToolResult | None:
        return self.recorded[index].get(call_id) if index < len(self.recorded) else None

    def _compare_one(
        self, step: int, tool: str, want: ToolResult | None, got: ToolResult | None
    ) -> None:
        before = normalise_result(_shown(want), self.workspaces)
        after = normalise_result(_shown(got), self.workspaces)
        if before == after:
            return
        lines = list(
            difflib.unified_diff(
                before.splitlines(keepends=True),
                after.splitlines(keepends=True),
                "recorded",
                "replayed",
                n=1,
            )
        )
        shown = "".join(lines[:DIFF_LINES])
        if len(lines) > DIFF_LINES:
            shown += f"... ({len(lines) - DIFF_LINES} more diff lines)\n"
        self.differences.append(StepDifference(step, tool, shown))

    def finish(self, history: Sequence[Message], replies_used: int) -> None:
        """Compare what is left once the run ended, and note a run that ended before the
        recording did. A stopped replay is settled: the reply it stopped at was never run."""
        if self.stopped:
            return
        self.compare(history, replies_used)
        if replies_used < len(self.replies):
            self.differences.append(
                StepDifference(
                    replies_used,
                    "end of run",
                    f"the replayed run ended after step {replies_used}; the recorded one "
                    f"went on to step {len(self.replies)}\n",
                )
            )

    @property
    def stopped(self) -> bool:
        return bool(self.differences) and not self.keep_going


@dataclass(frozen=True)
class ReplyStep:
    """The recorded reply `index`, handed over once the earlier replies' results compared."""

    script: ReplayScript
    index: int

    def __call__(self, request: ModelRequest) -> ModelResponse:
        self.script.compare(request.messages, self.index)
        if self.script.stopped:
            first = self.script.differences[0]
            raise ReplayStopped(
                f"replay stopped: step {first.step} ({first.tool}) gave a different result",
                retryable=False,
            )
        return self.script.replies[self.index]
