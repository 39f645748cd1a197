"""The agent offers skills: the skill tool and the prompt section when a skill is found, neither
when none is or when the caller chose the tools; a question (ask mode) keeps them."""

from __future__ import annotations

from pathlib import Path

from journeyman.context.skills import SkillsLoader
from journeyman.core.messages import ToolCall
from journeyman.tools.builtin import default_tools
from journeyman.tools.skill import SKILL_TOOL
from tests.fakes.agents import finish, make_agent, turn

SKILL = "---\nname: release\ndescription: Cut a release.\n---\nBUMP THE VERSION FIRST\n"


def with_skill(tmp_path: Path) -> None:
    folder = tmp_path / "ws/.claude/skills/release"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(SKILL)


async def test_the_model_sees_names_in_the_prompt_and_reads_the_body_with_the_tool(
    tmp_path: Path,
) -> None:
    with_skill(tmp_path)
    agent, provider = make_agent(
        tmp_path, [turn(ToolCall("s1", SKILL_TOOL, {"name": "release"})), finish()]
    )

    result = await agent.run("make a release")

    assert result.success
    first, second = provider.requests
    assert SKILL_TOOL in [spec.name for spec in first.tools]
    assert "- release: Cut a release." in first.system
    assert "BUMP THE VERSION FIRST" not in first.system
    answer = second.messages[-1].tool_result
    assert answer is not None and not answer.is_error
    assert "BUMP THE VERSION FIRST" in answer.content


def test_no_skill_no_tool_and_no_section(tmp_path: Path) -> None:
    agent, _ = make_agent(tmp_path, [finish()])

    assert agent.registry.get(SKILL_TOOL) is None
    assert agent.skills.skills == []


def test_tools_chosen_by_the_caller_get_no_skill_tool(tmp_path: Path) -> None:
    with_skill(tmp_path)
    agent, _ = make_agent(tmp_path, [finish()], tools=default_tools())

    assert agent.registry.get(SKILL_TOOL) is None


async def test_a_question_keeps_the_skill_tool(tmp_path: Path) -> None:
    with_skill(tmp_path)
    agent, provider = make_agent(tmp_path, [finish("answer")], mode="ask")

    await agent.run("how do releases work here?")

    [request] = provider.requests
    assert SKILL_TOOL in [spec.name for spec in request.tools]
    assert "# Skills" in request.system


def test_skills_given_to_the_agent_are_used(tmp_path: Path) -> None:
    other = tmp_path / "other"
    (other / ".agents/skills/lint").mkdir(parents=True)
    (other / ".agents/skills/lint/SKILL.md").write_text(
        "---\nname: lint\ndescription: Lint.\n---\n"
    )
    agent, _ = make_agent(tmp_path, [finish()], agent_options={"skills": SkillsLoader(other, None)})

    assert [s.name for s in agent.skills.skills] == ["lint"]
    assert agent.registry.get(SKILL_TOOL) is not None
