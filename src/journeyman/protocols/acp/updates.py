"""What a client of the Agent Client Protocol is shown of a run: journeyman's events, tool
calls, file changes, phases and finish reasons turned into ACP session updates.

Pure functions over journeyman's records and the `acp` schema; `server.py` sends what they
build."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence, Set
from pathlib import Path
from typing import Any

from acp import schema

from journeyman.context.test_results import TestTally
from journeyman.core.display import command_for_approval, printable, printable_name
from journeyman.core.errors import AgentError
from journeyman.core.messages import Message, Role, ToolCall, ToolResult
from journeyman.core.result import FinishReason, RunResult
from journeyman.core.text import clip, clip_noted
from journeyman.core.tool_kind import ToolKind
from journeyman.loop.verdict import BEFORE_CALL_ID, CHECK_CALL_PREFIX, refused_summary
from journeyman.policy.call_description import describe_arguments
from journeyman.session.store import FileChange
from journeyman.tools.context import ToolContext
from journeyman.tools.patch import PatchPreview, preview_patch

RESULT_CHARS_SHOWN = 4_000
"""Characters of a tool's output shown in its tool call; the model still gets all of it."""
TITLE_CHARS = 120
HARNESS_PREFIX = "[journeyman]"
"""User messages starting with this are the harness's own (nudges, check results)."""

ACP_KINDS: Mapping[ToolKind, schema.ToolKind] = {
    ToolKind.READ: "read",
    ToolKind.EDIT: "edit",
    ToolKind.COMMAND: "execute",
    ToolKind.FINISH: "other",
    ToolKind.OTHER: "other",
}

STOP_REASONS: Mapping[FinishReason, schema.StopReason] = {
    FinishReason.COMPLETED: "end_turn",
    FinishReason.ANSWERED: "end_turn",
    FinishReason.CANCELLED: "cancelled",
    FinishReason.MAX_ITERATIONS: "max_turn_requests",
    FinishReason.MAX_CONSECUTIVE_MISTAKES: "max_turn_requests",
    FinishReason.NO_PROGRESS: "max_turn_requests",
    FinishReason.MAX_TOKENS: "max_tokens",
    FinishReason.MAX_BUDGET_USD: "max_tokens",
    FinishReason.MAX_DURATION: "max_tokens",
    FinishReason.HALTED: "refusal",
}
"""How a run's finish reason reads as the prompt's stop reason. The limits map to the nearest
ACP reasons (turns, or tokens for every spending limit); the rest (refused calls, a failing
check, provider and internal errors) end the turn normally, after a message saying why, so the
session stays usable."""

PHASES: Sequence[tuple[str, str]] = (
    ("discover", "Discover: read the task and the workspace"),
    ("plan", "Plan the next changes"),
    ("act", "Make the changes"),
    ("verify", "Verify: run the check after the last change"),
)
"""The phased mode's workflow, shown to the client as the plan of the turn."""


def stop_reason(reason: FinishReason) -> schema.StopReason:
    return STOP_REASONS.get(reason, "end_turn")


EDITOR_REFUSED_ADVICE = (
    "to let them run, choose Allow (or Always allow) when the editor asks, or change the deny "
    "rule or permission mode in your journeyman config, then send the prompt again"
)
"""How to let refused calls run, for someone in an editor (there are no flags to pass)."""


def ending_message(result: RunResult) -> str | None:
    """What the client is told at the end of a run: why it did not succeed, or the receipt
    of the check that confirmed it (None when there is neither)."""
    if result.finish_reason is FinishReason.CANCELLED:
        return None
    if result.success:
        check = result.verification
        if check is None or not check.passed:
            return None
        tests = TestTally.from_dict(check.tests).describe() if check.tests else "no summary"
        return f"\n\n[journeyman check `{check.command}` passed: {tests}, on the final tree]"
    why = result.error or "the run did not succeed"
    if result.refused_calls:  # the count and the advice for someone in an editor
        cli_summary = refused_summary(result.refused_calls)
        before = (
            why.removesuffix(cli_summary).removesuffix("; ") if why.endswith(cli_summary) else ""
        )
        editor_summary = refused_summary(result.refused_calls, EDITOR_REFUSED_ADVICE)
        why = f"{before}; {editor_summary}" if before else editor_summary
    return f"\n\n[journeyman stopped: {result.finish_reason.value}] {why}"


def acp_kind(kind: ToolKind | None) -> schema.ToolKind:
    return ACP_KINDS.get(kind, "other") if kind is not None else "other"


def title_of(call: ToolCall) -> str:
    """A one-line title: the command for a command, the tool and its path for a file tool."""
    args = call.arguments
    command = args.get("command")
    if isinstance(command, str):
        first = command.strip().splitlines()[0] if command.strip() else ""
        return _clip(printable(first))
    path = args.get("path")
    if isinstance(path, str):
        return _clip(f"{printable_name(call.name)} {printable_name(path)}")
    pattern = args.get("pattern") or args.get("query")
    if isinstance(pattern, str):
        return _clip(f"{printable_name(call.name)} {printable_name(pattern)}")
    return printable_name(call.name)


def _clip(text: str) -> str:
    return clip(text, TITLE_CHARS)


def absolute(root: Path, path: str) -> str:
    """A workspace path as the protocol wants file paths: absolute, and escaped as the
    approval questions of the other surfaces escape names (`printable_name`: the same
    path for every ordinary name)."""
    return str(root / printable_name(path))


def diff(
    root: Path, path: str, old_text: str | None, new_text: str
) -> schema.FileEditToolCallContent:
    """A file's change as the client shows it: whole, never cut, with the text escaped by
    `printable` as the terminal, the app and the MCP server's questions escape it (a CR, an
    escape sequence or a bidi override in the file is shown, not obeyed)."""
    return schema.FileEditToolCallContent(
        type="diff",
        path=absolute(root, path),
        old_text=None if old_text is None else printable(old_text),
        new_text=printable(new_text),
    )


def locations_of(
    root: Path, call: ToolCall, paths: Sequence[str] | None = None
) -> list[schema.ToolCallLocation]:
    found = list(paths or ())
    path = call.arguments.get("path")
    if isinstance(path, str) and path not in found:
        found.insert(0, path)
    return [schema.ToolCallLocation(path=absolute(root, p)) for p in found]


def _text(text: str) -> schema.ContentToolCallContent:
    return schema.ContentToolCallContent(
        type="content", content=schema.TextContentBlock(type="text", text=text)
    )


def proposed_content(
    root: Path, call: ToolCall, kind: ToolKind | None, current: str | None
) -> list[schema.ContentToolCallContent | schema.FileEditToolCallContent]:
    """What a call is about to do, as the client shows it before (and while asking about) it:
    the command for a command (whole and escaped as the terminal shows it), the edit as a diff
    for a file edit (`current` is the file's text now, for a whole-file write)."""
    args = call.arguments
    command = args.get("command")
    if isinstance(command, str):
        return [_text(f"$ {command_for_approval(command)}")]
    path = args.get("path")
    if kind is ToolKind.EDIT and isinstance(path, str):
        if isinstance(args.get("old_string"), str):
            return [diff(root, path, str(args["old_string"]), str(args.get("new_string", "")))]
        if isinstance(args.get("content"), str):
            return [diff(root, path, current, str(args["content"]))]
    patch = args.get("patch")
    if isinstance(patch, str):
        return patch_content(root, patch)
    return []


def question_content(
    root: Path, call: ToolCall, kind: ToolKind | None, current: str | None
) -> list[schema.ContentToolCallContent | schema.FileEditToolCallContent]:
    """What a permission question shows: what the call is about to do, or, for a call that is
    neither a command nor an edit (an MCP server's tool), its arguments as the terminal shows
    them."""
    return proposed_content(root, call, kind, current) or [
        _text(describe_arguments(call.arguments))
    ]


def patch_content(
    root: Path, patch: str
) -> list[schema.ContentToolCallContent | schema.FileEditToolCallContent]:
    """Every file a patch would change, as a whole-file diff; the whole patch, escaped, when
    it cannot be applied as it stands. Never cut: what is approved is what runs."""
    try:
        changes = preview_patch(patch, ToolContext(root))
    except AgentError:
        return [_text(printable(patch))]
    return [*change_diffs(root, changes)]


def change_diffs(
    root: Path, changes: Sequence[FileChange | PatchPreview]
) -> list[schema.FileEditToolCallContent]:
    """File changes (a call's, from the undo journal, or a patch's to come) as whole-file
    diffs."""
    return [diff(root, change.path, change.before, change.after or "") for change in changes]


def is_check(call_id: str, model_call_ids: Set[str]) -> bool:
    """Whether a call is the harness's own run of the check: its id, and not one the model
    gave a call of its own (a model cannot pose as the check)."""
    return call_id.startswith(CHECK_CALL_PREFIX) and call_id not in model_call_ids


def result_content(
    root: Path, result: ToolResult, changes: Sequence[FileChange], *, check: bool = False
) -> list[schema.ContentToolCallContent | schema.FileEditToolCallContent]:
    """What a finished call shows: the diffs of the files it changed, else its output (always
    its output for the check: its tests' report is what the card is for)."""
    if changes and not result.is_error and not check:
        return [*change_diffs(root, changes)]
    if not result.content:
        return []
    return [_text(clip_noted(result.content, RESULT_CHARS_SHOWN, "{cut:,} more characters"))]


def result_status(result: ToolResult, *, check: bool = False) -> schema.ToolCallStatus:
    """failed for an error, and for a check after the first turn that did not exit 0 (the
    check's failure before the first turn is the task, not an error)."""
    if result.is_error:
        return "failed"
    if check and result.call_id != BEFORE_CALL_ID and result.metadata.get("exit_code") != 0:
        return "failed"
    return "completed"


def plan_entries(phase: str) -> list[schema.PlanEntry]:
    """The workflow as plan entries, with `phase` in progress (every entry done at "done")."""
    order = [name for name, _ in PHASES]
    current = order.index(phase) if phase in order else None
    entries = []
    for index, (_name, content) in enumerate(PHASES):
        status: schema.PlanEntryStatus
        if phase == "done" or (current is not None and index < current):
            status = "completed"
        elif current is not None and index == current:
            status = "in_progress"
        else:
            status = "pending"
        entries.append(schema.PlanEntry(content=content, priority="medium", status=status))
    return entries


def plan_update(entries: Sequence[schema.PlanEntry]) -> schema.AgentPlanUpdate:
    return schema.AgentPlanUpdate(session_update="plan", entries=list(entries))


# --------------------------------------------------------------------------- replay


def replay(
    root: Path, messages: Sequence[Message], kind_of: Callable[[ToolCall], ToolKind | None]
) -> list[Any]:
    """A stored conversation as the updates that show it again (`session/load`): the user's
    messages, the model's text, and each tool call with what it did and its outcome. The
    harness's own messages (nudges, check reports) are left out, as in the terminal app."""
    results = {
        m.tool_result.call_id: m.tool_result
        for m in messages
        if m.role is Role.TOOL and m.tool_result is not None
    }
    updates: list[Any] = []
    for message in messages:
        if message.role is Role.USER and message.content.strip():
            if not message.content.startswith(HARNESS_PREFIX):
                updates.append(user_text(message.content))
        elif message.role is Role.ASSISTANT:
            if message.content.strip():
                updates.append(agent_text(message.content))
            for call in message.tool_calls:
                updates.extend(_replayed_call(root, call, kind_of(call), results.get(call.id)))
    return updates


def _replayed_call(
    root: Path, call: ToolCall, kind: ToolKind | None, result: ToolResult | None
) -> list[Any]:
    if kind is ToolKind.FINISH:
        summary = call.arguments.get("summary")
        return [agent_text(summary)] if isinstance(summary, str) and summary.strip() else []
    content: list[schema.ContentToolCallContent | schema.FileEditToolCallContent]
    content = proposed_content(root, call, kind, None)
    if result is not None and (result.is_error or not content):
        content += result_content(root, result, ())
    return [
        schema.ToolCallStart(
            session_update="tool_call",
            tool_call_id=call.id,
            title=title_of(call),
            kind=acp_kind(kind),
            status=result_status(result) if result is not None else "failed",
            content=content,
            locations=locations_of(root, call),
            raw_input=call.arguments,
        )
    ]


def user_text(text: str) -> schema.UserMessageChunk:
    return schema.UserMessageChunk(
        session_update="user_message_chunk",
        content=schema.TextContentBlock(type="text", text=text),
    )


def agent_text(text: str) -> schema.AgentMessageChunk:
    return schema.AgentMessageChunk(
        session_update="agent_message_chunk",
        content=schema.TextContentBlock(type="text", text=text),
    )
