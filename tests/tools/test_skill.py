"""The skill tool: a skill's instructions and its files, read rules respected, nothing run, and
files of a skill outside the workspace read only from inside its folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from journeyman.context.skills import Skill, SkillsLoader
from journeyman.core.tool_kind import ToolKind
from journeyman.policy.permissions import PermissionPolicy
from journeyman.tools.context import ToolContext
from journeyman.tools.skill import MAX_LISTED_FILES, SkillArgs, SkillTool

SKILL = "---\nname: {name}\ndescription: Handles {name}.\n---\n# {name}\n\nRun scripts/go.sh.\n"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    folder = ws / ".claude/skills/pdf"
    write(folder / "SKILL.md", SKILL.format(name="pdf"))
    write(folder / "scripts/go.sh", "touch ran\n")
    write(folder / "reference/notes.md", "notes\n")
    return ws


@pytest.fixture
def user(tmp_path: Path) -> Path:
    folder = tmp_path / "config/skills"
    write(folder / "mine/SKILL.md", SKILL.format(name="mine"))
    write(folder / "mine/scripts/go.sh", "echo mine\n")
    write(tmp_path / "config/config.toml", "SECRET-CONFIG\n")
    return folder


def skills(workspace: Path, user: Path | None = None) -> list[Skill]:
    return SkillsLoader(workspace, user).skills


async def call(tool: SkillTool, ctx: ToolContext, **args: str) -> tuple[str, bool]:
    result = await tool.execute(SkillArgs(**args), ctx)  # type: ignore[arg-type]
    return result.content, result.is_error


def test_the_tool_declares_itself_a_parallel_read_matched_by_name() -> None:
    tool = SkillTool([])
    assert tool.kind is ToolKind.READ and tool.read_only and tool.parallel_safe
    assert tool.permission_arg == "name"


async def test_a_workspace_skill_gives_its_instructions_and_its_files(workspace: Path) -> None:
    tool = SkillTool(skills(workspace))

    text, error = await call(tool, ToolContext(workspace), name="pdf")

    assert not error
    assert "# pdf\n\nRun scripts/go.sh." in text
    assert ".claude/skills/pdf/scripts/go.sh (10 bytes)" in text
    assert ".claude/skills/pdf/reference/notes.md (6 bytes)" in text
    assert "SKILL.md (" not in text  # the instructions are not listed as a file
    assert "run_command" in text
    assert not (workspace / "ran").exists()  # nothing is run


async def test_an_unknown_name_lists_the_skills(workspace: Path) -> None:
    text, error = await call(SkillTool(skills(workspace)), ToolContext(workspace), name="../x")

    assert error and "no skill named '../x'" in text and "the skills are: pdf" in text


async def test_read_rules_keep_a_workspace_skill_from_the_model(workspace: Path) -> None:
    policy = PermissionPolicy("default", deny=["read_file(**/scripts/**)"], workspace=workspace)
    ctx = ToolContext(workspace, unreadable=policy.unreadable)
    tool = SkillTool(skills(workspace))

    text, error = await call(tool, ctx, name="pdf")

    assert not error and "scripts/go.sh (" not in text and "notes.md (" in text
    assert "1 file(s) not listed" in text

    policy = PermissionPolicy("default", deny=["read_file(.claude/**)"], workspace=workspace)
    text, error = await call(tool, ToolContext(workspace, unreadable=policy.unreadable), name="pdf")
    assert error and "read_file(.claude/**)" in text and "Run scripts" not in text


async def test_links_out_of_a_skill_folder_are_not_listed(workspace: Path, tmp_path: Path) -> None:
    write(tmp_path / "secret.txt", "secret")
    os.symlink(tmp_path / "secret.txt", workspace / ".claude/skills/pdf/leak.txt")

    text, _ = await call(SkillTool(skills(workspace)), ToolContext(workspace), name="pdf")

    assert "leak.txt" not in text and "1 file(s) not listed" in text


async def test_a_big_skill_folder_is_listed_up_to_the_cap(workspace: Path) -> None:
    for number in range(MAX_LISTED_FILES + 20):
        write(workspace / f".claude/skills/pdf/data/{number:04d}.txt", "x")

    text, _ = await call(SkillTool(skills(workspace)), ToolContext(workspace), name="pdf")

    assert text.count(" bytes)") == MAX_LISTED_FILES
    assert f"only the first {MAX_LISTED_FILES} files are listed" in text


async def test_a_workspace_skills_files_are_read_with_read_file(workspace: Path) -> None:
    tool = SkillTool(skills(workspace))

    text, error = await call(tool, ToolContext(workspace), name="pdf", file="scripts/go.sh")

    assert error and "read_file" in text and ".claude/skills/pdf/scripts/go.sh" in text


async def test_a_users_skill_lists_its_files_and_gives_one_on_request(
    workspace: Path, user: Path
) -> None:
    tool = SkillTool(skills(workspace, user))
    ctx = ToolContext(workspace)

    text, error = await call(tool, ctx, name="mine")
    assert not error and "  scripts/go.sh (10 bytes)" in text and "file=PATH" in text

    text, error = await call(tool, ctx, name="mine", file="scripts/go.sh")
    assert not error and text == "echo mine\n"


@pytest.mark.parametrize(
    "path", ["../../config.toml", "../../../etc/passwd", "/etc/passwd", "", "missing.txt"]
)
async def test_a_users_skill_file_is_read_only_from_inside_its_folder(
    workspace: Path, user: Path, path: str
) -> None:
    tool = SkillTool(skills(workspace, user))

    text, error = await call(tool, ToolContext(workspace), name="mine", file=path)

    assert error and "SECRET-CONFIG" not in text and "root:" not in text


async def test_a_link_out_of_a_users_skill_folder_is_not_followed(
    workspace: Path, user: Path
) -> None:
    os.symlink(user.parent / "config.toml", user / "mine/config-link")
    tool = SkillTool(skills(workspace, user))

    text, error = await call(tool, ToolContext(workspace), name="mine", file="config-link")

    assert error and "SECRET-CONFIG" not in text


async def test_a_run_that_cannot_run_commands_is_not_told_to(workspace: Path) -> None:
    ctx = ToolContext(workspace, offered=frozenset({"skill", "read_file"}))

    text, _ = await call(SkillTool(skills(workspace)), ctx, name="pdf")

    assert "run_command" not in text and "no command can be run here" in text
