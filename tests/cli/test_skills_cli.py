"""`journeyman skills` as a user runs it, and a run in a repository written for another agent:
the model calls the skill tool on a skill under .claude/skills/ and gets its instructions."""

from __future__ import annotations

import json
from pathlib import Path

from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import reply
from tests.support.cli import clean_env, journeyman

SKILL = "---\nname: {name}\ndescription: {description}\n---\n{body}\n"


def add(root: Path, name: str, description: str = "Does a thing.", body: str = "Steps.") -> None:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(SKILL.format(name=name, description=description, body=body))


def env_with_user_folder(tmp_path: Path) -> tuple[dict[str, str], Path]:
    config = tmp_path / "user-config"
    (config / "skills").mkdir(parents=True)
    return clean_env(JOURNEYMAN_CONFIG_DIR=str(config)), config / "skills"


def test_skills_lists_yours_and_the_repositorys_with_where_they_came_from(tmp_path: Path) -> None:
    env, user = env_with_user_folder(tmp_path)
    workspace = tmp_path / "repo"
    add(user, "deploy", "Ship it the way I do.")
    add(workspace / ".claude/skills", "pdf-tools", "Read PDF files.")
    add(workspace / ".agents/skills", "deploy", "The repository's deploy.")

    done = journeyman("skills", "-w", str(workspace), env=env)

    assert done.returncode == 0, done.stderr
    assert "deploy  (yours: " in done.stdout and "Ship it the way I do." in done.stdout
    assert "pdf-tools  (repository: .claude/skills/pdf-tools)" in done.stdout
    assert "The repository's deploy." not in done.stdout
    assert "2 skill(s), about" in done.stdout
    assert "warning: skill .agents/skills/deploy skipped: your own skill" in done.stderr


def test_skills_json(tmp_path: Path) -> None:
    env, _ = env_with_user_folder(tmp_path)
    workspace = tmp_path / "repo"
    add(workspace / ".journeyman/skills", "lint", "Lint the code.")
    (workspace / ".claude/skills/broken").mkdir(parents=True)
    (workspace / ".claude/skills/broken/SKILL.md").write_text("no front matter")

    done = journeyman("skills", "-w", str(workspace), "--json", env=env)

    assert done.returncode == 0, done.stderr
    listing = json.loads(done.stdout)
    [skill] = listing["skills"]
    assert skill["name"] == "lint" and skill["source"] == "repository"
    assert skill["folder"] == ".journeyman/skills/lint" and skill["description"] == "Lint the code."
    assert [w.split(":")[0] for w in listing["warnings"]] == ["skill .claude/skills/broken skipped"]
    assert [s["folder"] for s in listing["searched"]][1:] == [
        ".journeyman/skills",
        ".claude/skills",
        ".agents/skills",
    ]
    assert 0 < listing["prompt_tokens"] < 100


def test_no_skills_says_where_it_looked(tmp_path: Path) -> None:
    env, _ = env_with_user_folder(tmp_path)
    (tmp_path / "repo").mkdir()

    done = journeyman("skills", "-w", str(tmp_path / "repo"), env=env)

    assert done.returncode == 0
    assert "no skills found (looked in " in done.stdout and ".claude/skills" in done.stdout


def test_a_missing_workspace_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = journeyman("skills", "-w", str(tmp_path / "nowhere"), env=clean_env())

    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "is not a directory" in done.stderr


def test_a_hostile_folder_name_does_not_reach_the_terminal_raw(tmp_path: Path) -> None:
    env, _ = env_with_user_folder(tmp_path)
    workspace = tmp_path / "repo"
    folder = workspace / ".claude/skills/\x1b]52;c;aGk=\x07x"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(SKILL.format(name="x", description="\x1b[2J", body=""))

    done = journeyman("skills", "-w", str(workspace), env=env)

    assert done.returncode == 0
    assert "\x1b" not in done.stdout + done.stderr and "\\x1b" in done.stderr


def test_help_explains_what_a_skill_is() -> None:
    done = journeyman("skills", "--help", env=clean_env())

    assert done.returncode == 0
    assert "SKILL.md" in done.stdout and ".claude/skills/" in done.stdout


def test_a_run_reads_a_claude_skill_with_the_skill_tool(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    env, _ = env_with_user_folder(tmp_path)
    workspace = tmp_path / "repo"
    add(
        workspace / ".claude/skills",
        "changelog",
        "Write the changelog entry for a change.",
        "Add a line under UNRELEASED in CHANGES.md, newest first.",
    )
    fake_openai.enqueue(
        reply(tool_calls=[("skill", {"name": "changelog"})]),
        reply(tool_calls=[("finish", {"summary": "read the skill"})]),
    )
    run_env = {**env, "OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": fake_openai.base_url}

    done = journeyman(
        "run", "--yes", "--no-verify", "note the change", "-w", str(workspace),
        "--sandbox", "local", "--session-dir", str(tmp_path / "s"), env=run_env,
    )  # fmt: skip

    assert done.returncode == 0, done.stderr
    first, second = (request.json for request in fake_openai.requests)
    system = first["messages"][0]["content"]
    assert "- changelog: Write the changelog entry for a change." in system
    assert "newest first" not in system
    assert "skill" in [tool["function"]["name"] for tool in first["tools"]]
    [result] = [m for m in second["messages"] if m["role"] == "tool"]
    assert "Add a line under UNRELEASED in CHANGES.md, newest first." in result["content"]
