"""A parent killed with SIGKILL while its children run, then resumed: the child that had
finished is not run again (its stored report is used) and the one cut off mid-run resumes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

PROGRAM = textwrap.dedent(
    """
    import asyncio, json, os, signal, sys
    from pathlib import Path
    from journeyman import Agent, AgentConfig
    from journeyman.core.messages import ToolCall, Usage
    from journeyman.core.errors import LLMError
    from journeyman.providers.base import ModelResponse
    from journeyman.providers.resilient import RetryPolicy
    from journeyman.providers.scripted import ScriptedProvider
    from journeyman.swarm import SubagentConfig, enable_subagents
    from journeyman.tools.builtin import default_tools

    phase, root_dir = sys.argv[1], Path(sys.argv[2])
    workspace, sessions = root_dir / "ws", root_dir / "sessions"
    workspace.mkdir(exist_ok=True)
    (workspace / "a.txt").write_text("alpha")
    NO_WAIT = RetryPolicy(max_retries=0, base_delay_s=0.0, jitter=0.0, max_retry_after_s=0.0)

    def turn(*calls, text=""):
        return ModelResponse(text=text, tool_calls=tuple(calls), usage=Usage(10, 5))

    def die(request):
        os.kill(os.getpid(), signal.SIGKILL)

    def never(request):
        raise LLMError("this child must not run again", retryable=False)

    spawns = turn(
        ToolCall("s1", "spawn_agent", {"task": "first: say hello"}),
        ToolCall("s2", "spawn_agent", {"task": "second: read a.txt"}),
    )
    read = turn(ToolCall("r1", "read_file", {"path": "a.txt"}))
    if phase == "first":
        root = [spawns]
        children = {"first": [turn(text="hello")], "second": [read, die]}
    else:
        root = [spawns, turn(text="both reported")]
        children = {"first": [never], "second": [turn(text="a.txt says alpha")]}
    calls = {}

    def make_child(spec):
        key = spec.task.split(":")[0]
        calls[key] = calls.get(key, 0) + 1
        return Agent(
            ScriptedProvider(children[key]), workspace=spec.parent.workspace,
            tools=[t for n in spec.tools.names if (t := spec.tools.get(n)) is not None],
            config=spec.config, retry_policy=NO_WAIT,
        )

    config = AgentConfig(session_dir=sessions, sandbox="local", journal_commands=False,
                         verify=False)
    agent = Agent(ScriptedProvider(root), workspace=workspace,
                  tools=default_tools(journal_commands=False), config=config,
                  retry_policy=NO_WAIT)
    enable_subagents(agent, SubagentConfig(max_parallel=1), make_child=make_child)
    if phase == "first":
        asyncio.run(agent.run("ask two helpers", session_id="root-session"))
    else:
        result = asyncio.run(agent.resume("root-session"))
        print(json.dumps({"final": result.final_text, "success": result.success}))
    """
)


def test_killed_parent_resumes_without_rerunning_finished_children(tmp_path: Path) -> None:
    program = tmp_path / "tree.py"
    program.write_text(PROGRAM)
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOURNEYMAN_")}
    first = subprocess.run(
        [sys.executable, str(program), "first", str(tmp_path)],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert first.returncode == -signal.SIGKILL, first.stderr
    from journeyman.session.store import SessionStore

    store = SessionStore(tmp_path / "sessions")
    children = {
        s.record.task.split(":")[0]: s
        for s in store.list_sessions()
        if s.record.parent_id == "root-session"
    }
    assert children["first"].finish_reason == "answered"
    assert children["second"].finish_reason is None and children["second"].steps == 1
    store.close()

    second = subprocess.run(
        [sys.executable, str(program), "resume", str(tmp_path)],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout.strip().splitlines()[-1]) == {
        "final": "both reported",
        "success": True,
    }
    store = SessionStore(tmp_path / "sessions")
    after = {
        s.record.task.split(":")[0]: s
        for s in store.list_sessions()
        if s.record.parent_id == "root-session"
    }
    assert set(after) == {"first", "second"}  # no new child sessions
    assert after["first"].steps == 1  # not run again
    assert after["second"].finish_reason == "answered"
    assert after["second"].final_text == "a.txt says alpha"
    # the root's tool results: the stored report of the first, the resumed second's report
    results = [m.tool_result for m in store.messages("root-session") if m.tool_result]
    store.close()
    assert "hello" in results[0].content and "its stored report" in results[0].content
    assert "a.txt says alpha" in results[1].content
