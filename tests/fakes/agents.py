"""A scripted agent for tests: model turns built by hand, an `Agent` on a `ScriptedProvider`.

    agent, provider = make_agent(tmp_path, [turn(call("read_file", path="a.py")), finish()])
    result = await agent.run("read a.py")
    assert provider.requests[1].messages[-1].tool_result.content == ...

The workspace is `tmp_path / "ws"` (created when missing, left as it is when a test prepared
it) and sessions are stored under `tmp_path / sessions`. Unlike the fake servers next to it,
this module imports journeyman: it drives the real kernel with a model that cannot surprise.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from journeyman import Agent, AgentConfig, ToolArgs, tool
from journeyman.context.compaction import SUMMARY_REQUEST
from journeyman.context.rules import RulesLoader
from journeyman.core.events import Event
from journeyman.core.messages import Role, ToolCall, Usage
from journeyman.policy.permissions import PermissionMode, PermissionsConfig
from journeyman.providers.base import ModelRequest, ModelResponse
from journeyman.providers.resilient import RetryPolicy
from journeyman.providers.scripted import ScriptedProvider, ScriptStep
from journeyman.tools.base import Tool
from journeyman.tools.builtin import default_tools

TURN_USAGE = Usage(10, 5)
"""What every scripted turn costs unless a test says otherwise."""

NO_WAIT = RetryPolicy(max_retries=2, base_delay_s=0.0, jitter=0.0, max_retry_after_s=0.0)
"""Retries without sleeping, for tests that script provider errors."""

NO_RETRY = RetryPolicy(max_retries=0, base_delay_s=0.0, jitter=0.0, max_retry_after_s=0.0)
"""A provider error is final at once."""


class EchoArgs(ToolArgs):
    text: str
    """What the tool echoes back."""


class Probe:
    """Test tools (look, change, echo, slow, finish) that record how the kernel ran them."""

    def __init__(self) -> None:
        self.running = 0
        self.max_running = 0
        self.barrier = asyncio.Event()
        self.arrived = 0

    def tools(self) -> list[Any]:
        probe = self

        @tool(args=EchoArgs, read_only=True, parallel_safe=True)
        async def look(args: EchoArgs, ctx: object) -> str:
            """Read-only echo that waits until two calls are inside at once."""
            probe.arrived += 1
            if probe.arrived >= 2:
                probe.barrier.set()
            await asyncio.wait_for(probe.barrier.wait(), timeout=2)
            return f"saw {args.text}"

        @tool(args=EchoArgs)
        async def change(args: EchoArgs, ctx: object) -> str:
            """A mutating tool: must never overlap with another call."""
            probe.running += 1
            probe.max_running = max(probe.max_running, probe.running)
            await asyncio.sleep(0.01)
            probe.running -= 1
            return f"changed {args.text}"

        @tool(args=EchoArgs)
        async def echo(args: EchoArgs, ctx: object) -> str:
            """Returns its input."""
            return args.text

        @tool(args=EchoArgs)
        async def slow(args: EchoArgs, ctx: object) -> str:
            """Sleeps far longer than any timeout in these tests."""
            await asyncio.sleep(30)
            return "never"

        finish = next(t for t in default_tools() if t.name == "finish")
        return [look, change, echo, slow, finish]


def call(name: str, cid: str = "", **arguments: Any) -> ToolCall:
    """A tool call; its id is derived from the name and arguments unless `cid` is given."""
    return ToolCall(cid or f"{name}-{sorted(arguments.items())}", name, arguments)


def turn(*calls: ToolCall, text: str = "", usage: Usage | None = None) -> ModelResponse:
    """One model reply: some text and the tool calls it makes."""
    return ModelResponse(text=text, tool_calls=tuple(calls), usage=usage or TURN_USAGE)


def finish(summary: str = "done", *, cid: str = "fin", text: str = "") -> ModelResponse:
    """A reply that calls the `finish` tool."""
    return turn(ToolCall(cid, "finish", {"summary": summary}), text=text)


class Crash(BaseException):
    """Stands in for kill -9: nothing in the agent catches it, so the run stops mid-step."""


def crash(_request: ModelRequest) -> ModelResponse:
    """A script step that kills the run where the model would have answered."""
    raise Crash


def hang_at(provider: ScriptedProvider, index: int) -> asyncio.Event:
    """Make the provider's request number `index` (from 0) hang until it is cancelled; the
    returned event is set once it hangs."""
    hanging = asyncio.Event()
    play = provider.complete

    async def complete(request: ModelRequest, on_text: Any = None) -> ModelResponse:
        if len(provider.requests) == index:
            provider.requests.append(request)
            hanging.set()
            await asyncio.Event().wait()
        return await play(request, on_text)

    provider.complete = complete  # type: ignore[method-assign]
    return hanging


def make_agent(
    tmp_path: Path,
    script: Iterable[ScriptStep],
    *,
    tools: Iterable[Tool] | None = None,
    events: list[Event] | None = None,
    sessions: str = "sessions",
    retry_policy: RetryPolicy | None = None,
    provider_options: Mapping[str, Any] | None = None,
    agent_options: Mapping[str, Any] | None = None,
    **config: Any,
) -> tuple[Agent, ScriptedProvider]:
    """An agent on `tmp_path / "ws"` that plays `script`; `config` goes to `AgentConfig`.

    `tools` replaces the built-in tools, `events` collects every event, `provider_options` go to
    `ScriptedProvider` (a `name`/`model` to price, `capabilities`) and `agent_options` to `Agent`
    (`approver`, `permission_approver`, `assume_yes`, `rules`, ...).
    """
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    if "verify_command" not in config:
        # most scripted runs test the loop, not the verdict: a run without a check would end
        # `unverified`, so checking is on only where a test asks for it (or names a check)
        config.setdefault("verify", False)
    provider = ScriptedProvider(script, **(provider_options or {}))
    agent = Agent(
        provider,
        workspace=workspace,
        tools=tools,
        config=AgentConfig(session_dir=tmp_path / sessions, **config),
        on_event=events.append if events is not None else None,
        retry_policy=retry_policy,
        **(agent_options or {}),
    )
    return agent, provider


def is_summary_call(request: ModelRequest) -> bool:
    """Whether a request is a summary call (compaction's, or the phased mode's memory): its last
    message asks for the summary."""
    last = request.messages[-1] if request.messages else None
    return (
        last is not None
        and last.role is Role.USER
        and last.content.startswith(SUMMARY_REQUEST.split("{transcript}")[0])
    )


def user_texts(request: ModelRequest) -> list[str]:
    """The texts of the user messages a request carried."""
    return [m.content for m in request.messages if m.role is Role.USER]


# --- the budget runs: an echo tool and a fake read_file -----------------------------------


class TextArgs(ToolArgs):
    text: str


@tool(args=TextArgs)
def echo(args: TextArgs, ctx: object) -> str:
    """Returns its input."""
    return args.text


@tool(args=TextArgs, name="read_file", read_only=True)
def fake_read(args: TextArgs, ctx: object) -> str:
    """Pretends to read a file."""
    return f"contents of {args.text}"


def spend_turn(*calls: tuple[str, str], tokens: int, text: str = "") -> ModelResponse:
    """A reply calling (tool, text) pairs that produced `tokens` output tokens."""
    tool_calls = [ToolCall(f"c{i}-{t}", name, {"text": t}) for i, (name, t) in enumerate(calls)]
    return turn(*tool_calls, text=text, usage=Usage(0, tokens))


def budget_agent(
    tmp_path: Path, script: list[Any], events: list[Event], **config: Any
) -> tuple[Agent, ScriptedProvider]:
    """An agent with `echo` and a fake `read_file`; an `approver` in `config` goes to `Agent`."""
    approver = config.pop("approver", None)
    options = {"approver": approver} if approver else {}
    tools = [echo, fake_read]
    return make_agent(
        tmp_path, script, tools=tools, events=events, sessions="s", agent_options=options, **config
    )


# --- the permission runs: rules from a fake home, a write and a finish ----------------------


WRITE = call("write_file", path="out.txt", content="hello\n")
FINISH = call("finish", summary="done")


def policy_agent(
    tmp_path: Path, script: list[Any], *, mode: PermissionMode | None = None, **kwargs: Any
) -> tuple[Agent, ScriptedProvider, Path]:
    """An agent with rules from `tmp_path / "home"`; `mode`, `deny` and `ask` set permissions,
    `config` other `AgentConfig` fields, and the remaining keywords go to `Agent`."""
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    config_fields: dict[str, Any] = {}
    if mode is not None:
        config_fields["permissions"] = PermissionsConfig(
            mode=mode, deny=kwargs.pop("deny", []), ask=kwargs.pop("ask", [])
        )
    config_fields.update(kwargs.pop("config", {}))
    kwargs.setdefault("rules", RulesLoader(workspace, home=tmp_path / "home"))
    agent, provider = make_agent(tmp_path, script, agent_options=kwargs, **config_fields)
    return agent, provider, workspace
