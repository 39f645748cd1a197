"""An edit_file call is shown for approval as a diff of the whole file, with the file's own
line numbers, found as the tool finds it."""

from __future__ import annotations

from pathlib import Path

from journeyman.policy.call_description import describe_call
from tests.fakes.long_patch import (
    ESCAPED_LINE,
    ESCAPED_NAME,
    HIDDEN_LINE,
    SETTINGS_TAIL,
    long_patch_workspace,
)


def edit(old: str, new: str, **more: object) -> dict[str, object]:
    return {"path": "app.py", "old_string": old, "new_string": new, **more}


def test_an_edit_is_a_diff_of_the_file_with_its_line_numbers(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("def f(a, b):\n    return a - b\n\n\nx = 1\n")
    shown = describe_call("edit_file", edit("return a - b", "return a + b"), str(tmp_path))
    assert "@@ -1,4 +1,4 @@" in shown
    assert "-    return a - b" in shown and "+    return a + b" in shown
    assert " def f(a, b):" in shown  # context from the file
    assert "shown alone" not in shown


def test_replace_all_changes_every_occurrence_in_the_diff(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("x = 1\ny = 2\nx = 1\n")
    shown = describe_call("edit_file", edit("x = 1", "x = 3", replace_all=True), str(tmp_path))
    assert shown.count("-x = 1") == 2 and shown.count("+x = 3") == 2


def test_an_ambiguous_or_missing_match_shows_the_fragment_and_says_so(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("x = 1\nx = 1\n")
    twice = describe_call("edit_file", edit("x = 1", "x = 2"), str(tmp_path))
    assert "does not match one place" in twice and "-x = 1" in twice and "+x = 2" in twice
    nowhere = describe_call("edit_file", edit("zzz", "y"), str(tmp_path))
    assert "does not match one place" in nowhere and "-zzz" in nowhere


def test_a_file_outside_the_workspace_is_not_read(tmp_path: Path) -> None:
    (tmp_path / "secret.py").write_text("token = 1\nkey = 2\n")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    args = {"path": "../secret.py", "old_string": "key = 2", "new_string": "key = 3"}
    shown = describe_call("edit_file", args, str(workspace))
    assert "token" not in shown
    assert "shown alone" in shown and "-key = 2" in shown


def test_a_new_file_from_an_empty_old_string_is_all_added(tmp_path: Path) -> None:
    shown = describe_call("edit_file", edit("", "print(1)\n"), str(tmp_path))
    assert "+print(1)" in shown and "shown alone" not in shown


def test_a_long_patch_is_shown_whole_up_to_the_file_it_adds_last(tmp_path: Path) -> None:
    patch = long_patch_workspace(tmp_path)
    assert len(patch) > 5_000 and patch.count("\n") > 600
    shown = describe_call("apply_patch", {"patch": patch}, str(tmp_path))
    assert "create backdoor.py:" in shown and f"+{HIDDEN_LINE}" in shown
    assert "not shown" not in shown
    assert shown.count("# doubled") == 620 and f"+{SETTINGS_TAIL}" in shown


def test_names_and_lines_are_escaped_where_they_stand(tmp_path: Path) -> None:
    shown = describe_call("apply_patch", {"patch": long_patch_workspace(tmp_path)}, str(tmp_path))
    assert f"create {ESCAPED_NAME}:" in shown and f"+{ESCAPED_LINE}" in shown
    assert not {"\x1b", "\r", "\x07", "\u202e"} & set(shown)


def test_a_newline_in_a_file_name_cannot_start_a_line_of_its_own(tmp_path: Path) -> None:
    name = "a.txt\n  │ +++ b/harmless.txt"
    shown = describe_call("write_file", {"path": name, "content": "x\n"}, str(tmp_path))
    assert "create a.txt\\n  │ +++ b/harmless.txt:" in shown
    assert not any(line.startswith("  │ +++ b/harmless") for line in shown.split("\n"))


def test_a_carriage_return_inside_a_line_is_shown_not_taken_for_a_line_end(
    tmp_path: Path,
) -> None:
    shown = describe_call(
        "write_file", {"path": "run.sh", "content": "ls\rrm -rf ~\n"}, str(tmp_path)
    )
    assert "+ls\\rrm -rf ~" in shown and "\r" not in shown
