"""The model is told the truth about its tools: the system prompt, the tool descriptions and
the harness's own messages name only tools that are in the request, for each provider's tool
set, a question, a registry without run_command and the phased mode."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from journeyman import Agent, AgentConfig
from journeyman.core.messages import ToolCall
from journeyman.integrations.lsp import tools as lsp_tools
from journeyman.loop import prompts
from journeyman.loop.choices import ModeName
from journeyman.swarm.spawn import TOOL_NAME as SPAWN_TOOL
from journeyman.tools.base import BaseTool
from journeyman.tools.builtin import default_tools
from journeyman.tools.notes import NoteTool
from journeyman.tools.shell import RunCommandTool
from tests.fakes.agents import make_agent, turn, user_texts
from tests.fakes.anthropic_server import FakeAnthropicServer
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import RecordedRequest, reply
from tests.support.cli import clean_env, jm

LSP_TOOLS = sorted(
    cls.name
    for cls in vars(lsp_tools).values()
    if isinstance(cls, type)
    and issubclass(cls, BaseTool)
    and getattr(cls, "name", "").startswith("lsp_")
)
BUILTIN_TOOLS = sorted(
    {t.name for t in default_tools(edit_tool="both")} | {NoteTool.name, SPAWN_TOOL, *LSP_TOOLS}
)
"""Every tool journeyman itself can offer."""
TOOL_NAME = re.compile(r"\b(" + "|".join(BUILTIN_TOOLS) + r")\b")
TASK = "make the failing test pass"
DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo"


def named(text: str) -> set[str]:
    """The built-in tools a text names."""
    return set(TOOL_NAME.findall(text))


def test_the_tool_name_pattern_knows_the_whole_builtin_set() -> None:
    assert {"edit_file", "apply_patch", "write_file", "run_command", "finish", "note"} <= set(
        BUILTIN_TOOLS
    )
    assert {"lsp_definition", "lsp_diagnostics", SPAWN_TOOL} <= set(BUILTIN_TOOLS)
    assert named("call finish, then edit_file's old_string; a note") == {
        "finish",
        "edit_file",
        "note",
    }


@pytest.mark.parametrize(
    "offered",
    [
        [t.name for t in default_tools(provider="anthropic")],
        [t.name for t in default_tools(provider="openai")],
        [t.name for t in default_tools(edit_tool="both")],
        ["read_file", "list_files", "glob", "grep", "finish"],
        ["read_file", "write_file", "finish"],
        ["read_file", "apply_patch"],
        [],
        [*(t.name for t in default_tools(provider="openai")), *LSP_TOOLS, SPAWN_TOOL, "note"],
    ],
)
def test_the_built_in_prompt_names_only_offered_tools(offered: list[str]) -> None:
    prompt = prompts.system_prompt(Path("/ws"), offered)
    assert named(prompt) <= set(offered), prompt
    assert named(prompts.empty_reply("finish" in offered)) <= set(offered)


def test_the_prompt_says_how_to_edit_with_the_offered_tool() -> None:
    patch = prompts.system_prompt(Path("/ws"), [t.name for t in default_tools(provider="openai")])
    assert "apply_patch" in patch and "indentation included" in patch
    edit = prompts.system_prompt(Path("/ws"), [t.name for t in default_tools(provider="x")])
    assert "Prefer edit_file" in edit and "run_command" in edit and "call finish" in edit
    question = prompts.system_prompt(Path("/ws"), ["read_file", "grep", "finish"])
    assert "looking only" in question and "call finish with it" in question
    assert "language server" not in question and "child agent" not in question
    with_lsp = prompts.system_prompt(Path("/ws"), ["read_file", "lsp_hover", "lsp_definition"])
    assert "lsp_hover and lsp_definition ask a language server" in with_lsp
    no_finish = prompts.system_prompt(Path("/ws"), ["read_file", "edit_file"])
    assert "reply without calling a tool" in no_finish and "No command can be run" in no_finish


def test_an_override_is_sent_as_given() -> None:
    assert prompts.system_prompt(Path("/ws"), [], "Mine.", "## Rules\nx") == "Mine.\n\n## Rules\nx"


def test_the_skills_section_follows_the_rules_only_when_the_skill_tool_is_offered() -> None:
    rules, skills = "# Rules\nr", "# Skills\n- pdf: Read PDFs."

    offered = prompts.system_prompt(Path("/ws"), ["skill"], "Mine.", rules, skills)
    assert offered == f"Mine.\n\n{rules}\n\n{skills}"
    alone = prompts.system_prompt(Path("/ws"), ["skill"], "Mine.", "", skills)
    assert alone == f"Mine.\n\n{skills}"
    assert prompts.system_prompt(Path("/ws"), ["read_file"], "Mine.", "", skills) == "Mine."


# --------------------------------------------------------------------------------------------
# What the providers are sent


def _text(content: Any) -> str:
    """The text of a message's or a system prompt's content, plain or in parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_text(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def sent(request: RecordedRequest) -> tuple[str, dict[str, str], list[str]]:
    """The system prompt, the offered tools (name -> description) and the user messages of
    one request, in either provider's wire format."""
    body = request.json
    tools = {}
    for spec in body.get("tools", []):
        function = spec.get("function", spec)
        tools[function["name"]] = function.get("description", "")
    messages = body["messages"]
    system = _text(body.get("system", ""))
    if not system and messages and messages[0]["role"] == "system":
        system = _text(messages[0]["content"])
    users = [_text(m["content"]) for m in messages if m["role"] == "user"]
    return system, tools, users


def assert_truthful(requests: Iterable[RecordedRequest]) -> tuple[str, set[str]]:
    """Every built-in tool the system prompt, a tool description or a harness message names
    is in the request's tools; returns the first request's prompt and tool names."""
    first: tuple[str, set[str]] | None = None
    for request in requests:
        system, tools, users = sent(request)
        offered = set(tools)
        assert named(system) <= offered, (named(system) - offered, system)
        for name, description in tools.items():
            assert named(description) - {name} <= offered, (name, description)
        for text in users:
            if text != TASK:  # the user's own words may name anything
                assert named(text) <= offered, (named(text) - offered, text)
        first = first or (system, offered)
    assert first is not None, "no request was made"
    return first


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    target = tmp_path / "demo"
    shutil.copytree(DEMO, target)
    return target


def agent_on(
    spec: str, server: FakeOpenAIServer | FakeAnthropicServer, demo: Path, **config: Any
) -> Agent:
    settings = {"session_dir": demo.parent / "sessions", "sandbox": "local", **config}
    tools = settings.pop("tools", None)
    return Agent(
        spec,
        workspace=demo,
        base_url=server.base_url,
        api_key="sk-test",
        config=AgentConfig(**settings),
        tools=tools,
    )


FINISH = ("finish", {"summary": "done"})


async def test_anthropic_is_told_about_edit_file(
    fake_anthropic: FakeAnthropicServer, demo: Path
) -> None:
    fake_anthropic.enqueue(reply(tool_calls=[FINISH]))
    await agent_on("anthropic:claude-test", fake_anthropic, demo, verify=False).run(TASK)
    system, offered = assert_truthful(fake_anthropic.requests)
    assert "edit_file" in offered and "apply_patch" not in offered
    assert "edit_file" in system and "run_command" in system


async def test_an_openai_compatible_model_is_told_about_apply_patch(
    fake_openai: FakeOpenAIServer, demo: Path
) -> None:
    fake_openai.enqueue(reply(tool_calls=[FINISH]))
    await agent_on("openai:gpt-4.1-mini", fake_openai, demo, verify=False).run(TASK)
    system, offered = assert_truthful(fake_openai.requests)
    assert "apply_patch" in offered and "edit_file" not in offered
    assert "apply_patch" in system and "edit_file" not in system


async def test_a_question_is_told_it_can_only_look(
    fake_openai: FakeOpenAIServer, demo: Path
) -> None:
    fake_openai.enqueue(reply("median() returns the middle value."))
    await agent_on("openai:gpt-4.1-mini", fake_openai, demo, mode=ModeName.ASK).run(TASK)
    system, offered = assert_truthful(fake_openai.requests)
    assert not offered & {"apply_patch", "edit_file", "write_file", "run_command"}
    assert "looking only" in system


async def test_a_registry_without_run_command_or_finish(
    fake_openai: FakeOpenAIServer, demo: Path
) -> None:
    tools = [
        t
        for t in default_tools(provider="openai")
        if not isinstance(t, RunCommandTool) and t.name != "finish"
    ]
    fake_openai.enqueue(reply("nothing to do"))
    await agent_on("openai:gpt-4.1-mini", fake_openai, demo, verify=False, tools=tools).run(TASK)
    system, offered = assert_truthful(fake_openai.requests)
    assert not offered & {"run_command", "finish"}
    assert "No command can be run here" in system and "reply without calling a tool" in system


@pytest.mark.parametrize("mode", [ModeName.REACT, ModeName.PHASED])
@pytest.mark.parametrize("with_finish", [True, False])
async def test_an_empty_reply_is_answered_naming_only_offered_tools(
    tmp_path: Path, mode: ModeName, with_finish: bool
) -> None:
    tools = [t for t in default_tools() if with_finish or t.name != "finish"]
    agent, provider = make_agent(
        tmp_path,
        [turn(), turn(text="done")],
        tools=tools,
        mode=mode,
        verify=False,
        verify_command="python -c pass",
        max_iterations=3,
    )
    await agent.run(TASK)
    reminder = user_texts(provider.requests[1])[-1]
    assert "Your last reply was empty" in reminder
    offered = {spec.name for spec in provider.requests[1].tools}
    assert named(reminder) <= offered and ("call finish" in reminder) is with_finish
    for request in provider.requests:
        assert named(request.system) <= {spec.name for spec in request.tools}


async def test_the_phased_mode_names_only_its_tools(
    fake_openai: FakeOpenAIServer, demo: Path
) -> None:
    fake_openai.enqueue(
        reply("The task: fix median.\n1. read stats.py\n2. fix it", [FINISH]),
        reply(tool_calls=[FINISH]),
    )
    agent = agent_on(
        "openai:gpt-4.1-mini",
        fake_openai,
        demo,
        mode=ModeName.PHASED,
        verify_command="python -c pass",
        max_iterations=4,
    )
    await agent.run(TASK)
    _, offered = assert_truthful(fake_openai.requests)
    assert {"note", "apply_patch", "finish"} <= offered
    discovery = sent(fake_openai.requests[0])[2][-1]
    assert "`note` tool" in discovery and "call finish" in discovery


@pytest.mark.parametrize("mode", [ModeName.ASK, ModeName.REACT])
async def test_a_tool_result_suggests_run_command_only_when_offered(
    tmp_path: Path, mode: ModeName
) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "logo.png").write_bytes(b"\x89PNG\x00\x01" * 40)
    script = [turn(ToolCall("r", "read_file", {"path": "logo.png"})), turn(text="a picture")]
    agent, provider = make_agent(tmp_path, script, mode=mode, verify=False)
    await agent.run("what is logo.png?")
    result = provider.requests[1].messages[-1].tool_result
    assert result is not None and "is a binary file" in result.content
    offered = {spec.name for spec in provider.requests[1].tools}
    assert ("run_command" in result.content) is (mode is ModeName.REACT)
    assert named(result.content) <= offered


async def test_a_session_continued_with_another_edit_tool_is_told_the_new_one(
    tmp_path: Path,
) -> None:
    first, _ = make_agent(tmp_path, [turn(text="done")], tools=default_tools(), verify=False)
    started = await first.run(TASK)
    patching = default_tools(provider="openai")
    later, provider = make_agent(tmp_path, [turn(text="done")], tools=patching, verify=False)
    await later.send(started.session_id, "now the other one")
    system = provider.requests[0].system
    assert "apply_patch" in system and named(system) <= {t.name for t in patching}
    # a prompt of the user's own is kept as it was stored
    mine = "Edit with edit_file only."
    own, _ = make_agent(tmp_path, [turn(text="done")], verify=False, system_prompt=mine)
    kept = await own.run(TASK)
    again, provider = make_agent(
        tmp_path, [turn(text="ok")], tools=patching, verify=False, system_prompt=mine
    )
    await again.send(kept.session_id, "more")
    assert provider.requests[0].system == mine


# --------------------------------------------------------------------------------------------
# Through the CLI, as a user runs it

SHIFTED_FIX = """\
*** Begin Patch
*** Update File: calc/stats.py
@@
       if len(ordered) % 2:
           return ordered[middle]
-      return ordered[middle]
+      return (ordered[middle - 1] + ordered[middle]) / 2
*** End Patch
"""
"""The median fix with every hunk line two spaces too deep: re-indented to the file's."""


def test_the_cli_tells_an_openai_compatible_model_about_apply_patch(
    fake_openai: FakeOpenAIServer, demo: Path
) -> None:
    fake_openai.enqueue(
        reply(tool_calls=[("apply_patch", {"patch": SHIFTED_FIX})]), reply(tool_calls=[FINISH])
    )
    env = clean_env(
        OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=fake_openai.base_url, JOURNEYMAN_EDIT_TOOL="auto"
    )
    done = jm(
        "run", TASK, "-w", str(demo), "--session-dir", str(demo.parent / "sessions"),
        "--sandbox", "local", "--yes", env=env, timeout=90,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    system, offered = assert_truthful(fake_openai.requests)
    assert "apply_patch" in offered and "edit_file" not in offered
    assert "Make small, precise edits with apply_patch" in system and "edit_file" not in system
    fixed = (demo / "calc/stats.py").read_text()
    assert fixed.endswith("    return (ordered[middle - 1] + ordered[middle]) / 2\n")
