"""What a client is shown of a run: finish reasons as stop reasons, the phased workflow as a
plan, a stored conversation replayed, prompts read as one message."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("acp", reason="the agent-client-protocol package is not installed")

from acp import schema

from journeyman.core.messages import Message, ToolCall, ToolResult, Usage
from journeyman.core.result import FinishReason, RefusedCall, RunResult
from journeyman.core.tool_kind import ToolKind
from journeyman.loop.verdict import refused_summary
from journeyman.protocols.acp import updates
from journeyman.protocols.acp.server import _answer, prompt_text
from journeyman.session.store import FileChange
from tests.fakes.long_patch import (
    ESCAPED_LINE,
    ESCAPED_NAME,
    HIDDEN_FILE,
    HIDDEN_LINE,
    SETTINGS_TAIL,
    long_patch_workspace,
)

ROOT = Path("/repo")
KINDS = {
    "edit_file": ToolKind.EDIT,
    "run_command": ToolKind.COMMAND,
    "finish": ToolKind.FINISH,
    "grep": ToolKind.READ,
}


def kind_of(call: ToolCall) -> ToolKind | None:
    return KINDS.get(call.name)


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        (FinishReason.COMPLETED, "end_turn"),
        (FinishReason.ANSWERED, "end_turn"),
        (FinishReason.CANCELLED, "cancelled"),
        (FinishReason.MAX_ITERATIONS, "max_turn_requests"),
        (FinishReason.MAX_TOKENS, "max_tokens"),
        (FinishReason.MAX_BUDGET_USD, "max_tokens"),
        (FinishReason.HALTED, "refusal"),
        (FinishReason.REFUSED, "end_turn"),
        (FinishReason.PROVIDER_ERROR, "end_turn"),
    ],
)
def test_finish_reasons_map_to_stop_reasons(reason: FinishReason, expected: str) -> None:
    assert updates.stop_reason(reason) == expected


def test_every_finish_reason_has_a_valid_stop_reason() -> None:
    for reason in FinishReason:
        schema.PromptResponse(stop_reason=updates.stop_reason(reason))


def test_the_plan_marks_earlier_phases_done_and_the_current_one_in_progress() -> None:
    statuses = [e.status for e in updates.plan_entries("act")]
    assert statuses == ["completed", "completed", "in_progress", "pending"]
    assert {e.status for e in updates.plan_entries("done")} == {"completed"}
    assert updates.plan_entries("discover")[0].status == "in_progress"


def test_a_replay_shows_the_users_messages_the_models_text_and_the_calls() -> None:
    edit = ToolCall("c1", "edit_file", {"path": "a.py", "old_string": "x", "new_string": "y"})
    command = ToolCall("c2", "run_command", {"command": "pytest -q"})
    done = ToolCall("c3", "finish", {"summary": "all good"})
    messages = [
        Message.user("fix a.py"),
        Message.assistant("Looking.", [edit, command]),
        Message.tool(ToolResult("c1", "edit_file", "edited")),
        Message.tool(ToolResult("c2", "run_command", "1 failed", is_error=True)),
        Message.user("[journeyman] the check failed"),
        Message.assistant("", [done]),
    ]

    shown = updates.replay(ROOT, messages, kind_of)

    assert [u.session_update for u in shown] == [
        "user_message_chunk",
        "agent_message_chunk",
        "tool_call",
        "tool_call",
        "agent_message_chunk",
    ]
    assert shown[0].content.text == "fix a.py"  # the harness's nudge is left out
    edited, ran = shown[2], shown[3]
    assert (edited.kind, edited.status) == ("edit", "completed")
    assert edited.content[0].path == "/repo/a.py" and edited.content[0].new_text == "y"
    assert edited.locations[0].path == "/repo/a.py"
    assert (ran.kind, ran.status, ran.title) == ("execute", "failed", "pytest -q")
    assert [c.content.text for c in ran.content] == ["$ pytest -q", "1 failed"]
    assert shown[4].content.text == "all good"  # the finish summary is the agent's last word


def test_a_call_without_a_result_replays_as_failed() -> None:
    call = ToolCall("c1", "grep", {"pattern": "TODO"})
    [shown] = updates.replay(ROOT, [Message.assistant("", [call])], kind_of)
    assert (shown.status, shown.kind, shown.title) == ("failed", "read", "grep TODO")


def test_result_content_prefers_the_journal_diffs_and_clips_long_output() -> None:
    long = ToolResult("c1", "run_command", "x" * (updates.RESULT_CHARS_SHOWN + 50))
    [text] = updates.result_content(ROOT, long, ())
    assert len(text.content.text) < updates.RESULT_CHARS_SHOWN + 40
    assert text.content.text.endswith("[50 more characters]")


def test_the_checks_card_fails_when_its_tests_fail_except_before_the_first_turn() -> None:
    def ran(call_id: str, exit_code: int | None) -> ToolResult:
        return ToolResult(call_id, "run_command", "FAILED", metadata={"exit_code": exit_code})

    assert updates.result_status(ran("verify-2", 1), check=True) == "failed"
    assert updates.result_status(ran("verify-2", None), check=True) == "failed"  # did not run
    assert updates.result_status(ran("verify-2", 0), check=True) == "completed"
    assert updates.result_status(ran("verify-before", 1), check=True) == "completed"  # the task
    assert updates.result_status(ran("c1", 1)) == "completed"  # a model's command ran


def test_a_call_the_model_names_like_the_check_is_not_the_check() -> None:
    assert updates.is_check("verify-3", set())
    assert not updates.is_check("verify-3", {"verify-3"})
    assert not updates.is_check("c1", set())


def test_the_checks_card_shows_its_output_even_when_files_changed() -> None:
    change = FileChange(1, "s", 1, "a.py", "modified", "a\n", "b\n", "run_command", 0.0)
    result = ToolResult("verify-2", "run_command", "Ran 1 test\nOK")
    [shown] = updates.result_content(ROOT, result, [change], check=True)
    assert shown.type == "content" and shown.content.text == "Ran 1 test\nOK"
    [diff] = updates.result_content(ROOT, result, [change])
    assert diff.type == "diff"


def test_titles_are_one_short_line() -> None:
    call = ToolCall("c", "run_command", {"command": "echo one\necho two"})
    assert updates.title_of(call) == "echo one"
    long = ToolCall("c", "run_command", {"command": "x" * 500})
    assert len(updates.title_of(long)) == updates.TITLE_CHARS
    escape = ToolCall("c", "read_file", {"path": "a\x1b[31m.py"})
    assert "\x1b" not in updates.title_of(escape)


def test_a_prompt_reads_as_one_message() -> None:
    blocks = [
        schema.TextContentBlock(type="text", text="explain this"),
        schema.ResourceContentBlock(type="resource_link", name="a.py", uri="file:///repo/a.py"),
        schema.EmbeddedResourceContentBlock(
            type="resource",
            resource=schema.TextResourceContents(uri="file:///repo/b.py", text="print(1)"),
        ),
    ]
    text = prompt_text(blocks)
    assert text.startswith("explain this")
    assert "[file: file:///repo/a.py]" in text and "print(1)" in text


@pytest.mark.parametrize(
    ("outcome", "always_offered", "expected"),
    [
        (schema.AllowedOutcome(outcome="selected", option_id="allow_once"), True, "allow"),
        (schema.AllowedOutcome(outcome="selected", option_id="allow_always"), True, "always"),
        (schema.AllowedOutcome(outcome="selected", option_id="allow_always"), False, "deny"),
        (schema.AllowedOutcome(outcome="selected", option_id="reject_once"), True, "deny"),
        (schema.AllowedOutcome(outcome="selected", option_id="made-up"), True, "deny"),
        (schema.DeniedOutcome(outcome="cancelled"), True, "deny"),
    ],
)
def test_the_clients_answer_is_the_approval(
    outcome: schema.AllowedOutcome | schema.DeniedOutcome, always_offered: bool, expected: str
) -> None:
    response = schema.RequestPermissionResponse(outcome=outcome)
    assert _answer(response, always_offered).value == expected


def test_a_long_patch_is_asked_about_with_every_file_whole_and_escaped(tmp_path: Path) -> None:
    patch = long_patch_workspace(tmp_path)
    call = ToolCall("p1", "apply_patch", {"patch": patch})
    diffs = updates.proposed_content(tmp_path, call, ToolKind.EDIT, None)
    assert [Path(d.path).name for d in diffs] == ["settings.py", ESCAPED_NAME, HIDDEN_FILE]
    settings, tricky, hidden = diffs
    assert isinstance(settings, schema.FileEditToolCallContent)
    assert settings.new_text.count("# doubled") == 620  # not cut
    assert settings.new_text.endswith(SETTINGS_TAIL + "\n")
    assert hidden.old_text is None and hidden.new_text == HIDDEN_LINE + "\n"
    assert tricky.new_text == ESCAPED_LINE + "\n"
    assert not any({"\x1b", "\r", "\x07", "\u202e"} & set(d.path + d.new_text) for d in diffs)


def test_a_question_about_another_call_shows_its_arguments_escaped() -> None:
    call = ToolCall("m1", "mcp__db__query", {"sql": "select 1\x1b]52;c;aGk=\x07\u202e"})
    [text] = updates.question_content(ROOT, call, ToolKind.OTHER, None)
    assert isinstance(text, schema.ContentToolCallContent)
    shown = text.content.text
    assert '"sql": "select 1\\u001b]52;c;aGk=\\u0007\\u202e"' in shown
    assert not {"\x1b", "\x07", "\u202e"} & set(shown)
    assert updates.question_content(
        ROOT, ToolCall("c", "run_command", {"command": "ls"}), None, None
    )


def test_a_failed_check_with_refused_calls_keeps_the_check_and_advises_the_editor() -> None:
    refused = [
        RefusedCall("run_command", "make deploy", "denied by rule run_command(make *)"),
        RefusedCall("edit_file", "app.py", "the user declined"),
    ]
    check = "the check `pytest -q` failed: 1 failed"
    result = RunResult(
        "",
        FinishReason.REFUSED,
        3,
        2,
        Usage(),
        None,
        1.0,
        "s1",
        error=f"{check}; {refused_summary(refused)}",
        refused_calls=refused,
    )
    told = updates.ending_message(result)
    assert told is not None and "--yes" not in told
    assert told.startswith(f"\n\n[journeyman stopped: refused] {check}; 2 edit/command call(s)")
    assert "run_command(make deploy): denied by rule" in told and "choose Allow" in told
