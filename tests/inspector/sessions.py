"""Scripted sessions to build reports from: a fix with a failed attempt and an undone change, a
phased run, a run that compacts its context, a parent with two subagents, and a hostile one
whose every text tries to run script in the page.

Each builder runs the real kernel on a scripted model and returns (sessions folder, id).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from journeyman import Agent, AgentConfig
from journeyman.context.compaction import CompactionSettings
from journeyman.context.rules import RulesLoader
from journeyman.core.messages import ToolCall, Usage
from journeyman.providers.base import Capabilities, ModelRequest, ModelResponse
from journeyman.providers.scripted import ScriptedProvider
from journeyman.session.store import SessionStore
from journeyman.session.undo import FileChangeTracker
from journeyman.swarm import SubagentConfig, enable_subagents
from journeyman.swarm.spawn import ChildSpec
from journeyman.tools.builtin import default_tools
from tests.fakes.agents import NO_RETRY, call, finish, make_agent, turn
from tests.fakes.projects import (
    CALC_TEST_COMMAND,
    calc_finish,
    calc_package,
    fix_add,
    phased_calc_agent,
)

PRICE = (3.0, 15.0)
"""US dollars per million input and output tokens."""

SECRET = "sk-ant-api03-" + "Zq7" * 12
"""A key shape the redactor masks wherever it appears."""

HOSTILE = (
    "</script><script>document.title='PWNED'</script>"
    "<img src=x onerror=\"document.title='PWNED'\"><!--"
)


HOSTILE_NAME = "<img src=x onerror=\"document.title='PWNED'\">.txt"
"""A file name is text from the session too."""


def _cached(input_tokens: int, cache_read: int, output: int) -> Usage:
    return Usage(input_tokens, output, cache_read, 0)


async def fixed_calc(tmp_path: Path) -> tuple[Path, str]:
    """A react run on the calc package: reads, a wrong edit whose test fails, the right edit,
    a notes file that is undone afterwards, and a finish checked by the package's test."""
    calc_package(tmp_path)
    script = [
        turn(call("read_file", "r1", path="calc/__init__.py"), usage=_cached(1_200, 0, 60)),
        turn(*fix_add("a - b", "a * b", "e1").tool_calls, usage=_cached(300, 1_100, 80)),
        turn(
            call("run_command", "t1", command=CALC_TEST_COMMAND),
            text="Running the test to check the change.",
            usage=_cached(350, 1_300, 40),
        ),
        turn(*fix_add("a * b", "a + b", "e2").tool_calls, usage=_cached(500, 1_500, 90)),
        turn(
            call("write_file", "w1", path="NOTES.md", content="add() fixed\n"),
            usage=_cached(200, 1_900, 50),
        ),
        calc_finish("add() now adds; the unit test passes"),
    ]
    agent, _ = make_agent(
        tmp_path,
        script,
        retry_policy=NO_RETRY,
        verify_command=CALC_TEST_COMMAND,
        price_per_mtok=PRICE,
        sandbox="local",
    )
    result = await agent.run("make add() add its arguments")
    store = SessionStore(tmp_path / "sessions")
    try:
        FileChangeTracker(store, result.session_id, tmp_path / "ws").undo_file("NOTES.md")
    finally:
        store.close()
    return tmp_path / "sessions", result.session_id


async def phased(tmp_path: Path) -> tuple[Path, str]:
    """The phased mode: a wrong edit fails verification, the fix passes, done."""
    script = [fix_add("a - b", "a * b", "e1"), fix_add("a * b", "a + b", "e2"), calc_finish()]
    agent, _ = phased_calc_agent(tmp_path, script, price_per_mtok=PRICE)
    result = await agent.run("make add() add its arguments")
    return tmp_path / "sessions", result.session_id


def _reader(step: int) -> Any:
    """A turn reading a big file, answered with the prompt size the request really had."""

    def respond(request: ModelRequest) -> ModelResponse:
        if request.tools == ():  # the compaction's summary call
            return ModelResponse(text=f"summary at step {step}", usage=Usage(500, 40))
        chars = sum(len(m.content) for m in request.messages) + len(request.system)
        read = ToolCall(f"r{step}", "read_file", {"path": f"big{step}.txt"})
        return ModelResponse(text="", tool_calls=(read,), usage=Usage(chars // 4, 20))

    return respond


def _finish_or_summary(request: ModelRequest) -> ModelResponse:
    if request.tools == ():
        return ModelResponse(text="summary of the early reads", usage=Usage(500, 40))
    return finish("read them all")


async def compacted(tmp_path: Path) -> tuple[Path, str]:
    """Twelve reads of big files in a small context window: the context is compacted."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    for i in range(14):
        (workspace / f"big{i}.txt").write_text(f"line {i} of text\n" * 400)
    agent, _ = make_agent(
        tmp_path,
        [_reader(i) for i in range(12)] + [_finish_or_summary] * 3,
        retry_policy=NO_RETRY,
        provider_options={"capabilities": Capabilities(context_window=6_000)},
        agent_options={"rules": RulesLoader(workspace, home=tmp_path / "home")},
        max_iterations=40,
        max_total_tokens=60_000,
        compaction=CompactionSettings(keep_recent_observations=2),
        price_per_mtok=PRICE,
        verify=False,
    )
    result = await agent.run("read the big files")
    return tmp_path / "sessions", result.session_id


async def with_subagents(tmp_path: Path) -> tuple[Path, str]:
    """A parent that spawns two read-only subagents, then answers from their reports."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    sessions = tmp_path / "sessions"
    children = {
        "callers": [turn(text="f is called from a.py and b.py.", usage=Usage(2_000, 300))],
        "tests": [turn(text="There are 12 tests.", usage=Usage(800, 100))],
    }
    config: dict[str, Any] = {
        "sandbox": "local",
        "journal_commands": False,
        "verify": False,
        "price_per_mtok": PRICE,
    }
    spawns = [
        ToolCall("s1", "spawn_agent", {"task": "find the callers of f"}),
        ToolCall("s2", "spawn_agent", {"task": "count the tests"}),
    ]
    root = Agent(
        ScriptedProvider([turn(*spawns, usage=Usage(1_000, 200)), turn(text="f is called twice.")]),
        workspace=workspace,
        tools=default_tools(journal_commands=False),
        config=AgentConfig(session_dir=sessions, **config),
        retry_policy=NO_RETRY,
    )

    def make_child(spec: ChildSpec) -> Agent:
        script = next(s for key, s in children.items() if key in spec.task)
        return Agent(
            ScriptedProvider(script),
            workspace=spec.parent.workspace,
            tools=[t for n in spec.tools.names if (t := spec.tools.get(n)) is not None],
            config=spec.config,
            retry_policy=NO_RETRY,
        )

    enable_subagents(root, SubagentConfig(), make_child=make_child)
    result = await root.run("where is f used?")
    return sessions, result.session_id


async def hostile(tmp_path: Path) -> tuple[Path, str]:
    """Every text a session holds tries to end the page's script or run its own; a file's
    content holds a key."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    script = [
        turn(
            call("write_file", "w1", path="page.html", content=f"{HOSTILE}\nkey = {SECRET}\n"),
            text=f"I will write {HOSTILE}",
        ),
        turn(call("read_file", "r1", path="page.html"), text=HOSTILE),
        turn(call("write_file", "w2", path=HOSTILE_NAME, content="x\n")),
        finish(HOSTILE),
    ]
    agent, _ = make_agent(tmp_path, script, retry_policy=NO_RETRY, verify=False, sandbox="local")
    result = await agent.run(f"task {HOSTILE}")
    return tmp_path / "sessions", result.session_id
