"""The spawn_agent tool: children as sidechain sessions, read-only by default, concurrent,
budgeted from the parent's pool under the root's hard cap, with depth and per-turn caps and the
SubagentStart/SubagentStop hooks."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from journeyman import Agent, AgentConfig
from journeyman.core.messages import ToolCall, ToolResult, Usage
from journeyman.core.result import FinishReason
from journeyman.policy.hooks import HookEvent, HookOutcome, HookPayload
from journeyman.providers.base import ModelRequest, ModelResponse
from journeyman.providers.resilient import RetryPolicy
from journeyman.providers.scripted import ScriptedProvider, billed_prompt_tokens
from journeyman.session.store import SessionStore
from journeyman.swarm import SubagentConfig, enable_subagents
from journeyman.swarm.spawn import ChildSpec
from journeyman.swarm.tree import session_tree
from journeyman.tools.base import ToolArgs, tool
from journeyman.tools.builtin import default_tools
from journeyman.tools.context import ToolContext

NO_WAIT = RetryPolicy(max_retries=0, base_delay_s=0.0, jitter=0.0, max_retry_after_s=0.0)
PRICE = (10.0, 10.0)
"""US dollars per million tokens: $0.01 per thousand tokens, so costs are easy to read (and a
prompt, priced before each call, stays small against the caps)."""


def turn(*calls: ToolCall, text: str = "", usage: Usage | None = None) -> ModelResponse:
    return ModelResponse(text=text, tool_calls=tuple(calls), usage=usage or Usage(1_000, 500))


def spawn(task: str, cid: str, **extra: Any) -> ToolCall:
    return ToolCall(cid, "spawn_agent", {"task": task, **extra})


class Tree:
    """A root agent whose children each play their own script, chosen by their task."""

    def __init__(
        self,
        tmp_path: Path,
        root_script: list[Any],
        children: dict[str, list[Any]],
        subagents: SubagentConfig | None = None,
        **config: Any,
    ) -> None:
        self.workspace = tmp_path / "ws"
        self.workspace.mkdir(exist_ok=True)
        self.sessions = tmp_path / "sessions"
        self.scripts = children
        self.child_providers: dict[str, ScriptedProvider] = {}
        self.specs: list[ChildSpec] = []
        self.root_provider = ScriptedProvider(root_script)
        settings: dict[str, Any] = {"sandbox": "local", "journal_commands": False, "verify": False}
        settings.update(config)
        self.root = Agent(
            self.root_provider,
            workspace=self.workspace,
            tools=default_tools(journal_commands=False),
            config=AgentConfig(session_dir=self.sessions, **settings),
            retry_policy=NO_WAIT,
        )
        enable_subagents(self.root, subagents or SubagentConfig(), make_child=self.make_child)

    def make_child(self, spec: ChildSpec) -> Agent:
        self.specs.append(spec)
        task_key = next(k for k in self.scripts if k in spec.task)
        provider = ScriptedProvider(self.scripts[task_key])
        self.child_providers[task_key] = provider
        return Agent(
            provider,
            workspace=spec.parent.workspace,
            tools=[t for n in spec.tools.names if (t := spec.tools.get(n)) is not None],
            config=spec.config,
            retry_policy=NO_WAIT,
        )

    def store(self) -> SessionStore:
        return SessionStore(self.sessions)


def results_of(provider: ScriptedProvider, request: int) -> list[ToolResult]:
    return [m.tool_result for m in provider.requests[request].messages if m.tool_result]


@pytest.fixture
def make_tree(tmp_path: Path) -> Callable[..., Tree]:
    return lambda *args, **kwargs: Tree(tmp_path, *args, **kwargs)


async def test_child_report_returns_as_the_tool_result_and_its_session_is_a_sidechain(
    make_tree: Callable[..., Tree],
) -> None:
    tree = make_tree(
        [turn(spawn("find the callers of f", "s1")), turn(text="f is called twice.")],
        {"callers": [turn(text="f is called from a.py and b.py.", usage=Usage(2_000, 1_000))]},
    )
    result = await tree.root.run("where is f used?")
    assert result.success and result.final_text == "f is called twice."
    (report,) = results_of(tree.root_provider, 1)
    assert not report.is_error
    assert "f is called from a.py and b.py." in report.content
    child_id = report.metadata["child_session_id"]
    assert child_id.startswith(result.session_id)
    store = tree.store()
    child = store.load_session(child_id)
    assert child.parent_id == result.session_id
    assert child.task == "find the callers of f"
    assert store.summary(child_id).finish_reason == "answered"
    # a reader by default: no tool that writes or runs commands, but may spawn (depth 1 of 2)
    (spec,) = tree.specs
    assert not spec.write and spec.depth == 1
    offered = {t.name for t in tree.child_providers["callers"].requests[0].tools}
    assert "read_file" in offered and "spawn_agent" in offered
    assert not offered & {"write_file", "edit_file", "run_command"}


async def test_writer_opts_in_and_its_diff_comes_back(make_tree: Callable[..., Tree]) -> None:
    write = ToolCall("w1", "write_file", {"path": "notes.txt", "content": "hello\n"})
    tree = make_tree(
        [turn(spawn("write the notes", "s1", write=True)), turn(text="Notes written.")],
        {"notes": [turn(write), turn(text="Wrote notes.txt.")]},
    )
    result = await tree.root.run("take notes")
    assert result.success
    (report,) = results_of(tree.root_provider, 1)
    assert "Wrote notes.txt." in report.content
    assert "+hello" in report.content and "notes.txt" in report.content
    assert (tree.workspace / "notes.txt").read_text() == "hello\n"
    assert "write_file" in {t.name for t in tree.child_providers["notes"].requests[0].tools}


async def test_six_concurrent_children_under_a_cap_never_spend_more_than_it(
    make_tree: Callable[..., Tree],
) -> None:
    cap = 1.0
    # every child would spend $0.05 a turn for 5 turns; its allocation stops it first
    listing = Usage(2_500, 2_500)
    busy = [turn(ToolCall(f"r{i}", "list_files", {}), usage=listing) for i in range(5)]
    busy.append(turn(text="done", usage=Usage(500, 500)))
    tree = make_tree(
        [
            turn(*(spawn(f"part {i}", f"s{i}") for i in range(6))),
            turn(text="Combined the parts."),
        ],
        {f"part {i}": list(busy) for i in range(6)},
        SubagentConfig(max_children_per_turn=6, max_parallel=6, min_child_usd=0.15),
        max_budget_usd=cap,
        price_per_mtok=PRICE,
        max_concurrency=6,
    )
    result = await tree.root.run("do six parts")
    results = results_of(tree.root_provider, 1)
    assert len(results) == 6
    refused = [r for r in results if r.metadata.get("error") == "allocation_refused"]
    started = [r for r in results if "child_session_id" in r.metadata]
    assert len(refused) == 2 and len(started) == 4
    for r in refused:
        assert r.is_error
        assert "not started — budget pool: no USD allocation left" in r.content
    store = tree.store()
    children = [store.load_session(r.metadata["child_session_id"]) for r in started]
    child_spend = sum(r.metadata["cost_usd"] for r in started)
    assert all(r.metadata["cost_usd"] <= 0.15 + 1e-9 for r in started)
    total = (result.cost_usd or 0.0) + child_spend
    assert total <= cap
    assert all(c.parent_id == result.session_id for c in children)
    stats = tree.root.subagents.ledger.stats()  # type: ignore[attr-defined]
    assert stats.open_reservations == 0 and stats.overspend.usd == 0
    node = session_tree(store, result.session_id)
    assert len(node.children) == 4 and node.tree_cost_usd == pytest.approx(total)
    # the root's own limit now leaves room only for what the children did not spend
    assert tree.root.economics.limits.max_usd == pytest.approx(cap - child_spend)


async def test_per_turn_and_depth_caps_are_tool_results_the_model_sees(
    make_tree: Callable[..., Tree],
) -> None:
    tree = make_tree(
        [
            turn(spawn("alpha", "s1"), spawn("beta", "s2"), spawn("gamma", "s3")),
            turn(text="ok"),
        ],
        {
            "alpha": [turn(text="alpha done")],
            "beta": [turn(text="beta done")],
            "gamma": [turn(text="never runs")],
        },
        SubagentConfig(max_children_per_turn=2, max_depth=1),
        max_concurrency=1,  # one after the other: the third call is the one refused
    )
    await tree.root.run("three things")
    results = results_of(tree.root_provider, 1)
    assert [r.is_error for r in results] == [False, False, True]
    assert "at most 2 subagents" in results[2].content
    assert results[2].metadata["error"] == "children_per_turn"
    assert "gamma" not in tree.child_providers
    # at the depth cap a child is not offered the spawn tool at all
    offered = {t.name for t in tree.child_providers["alpha"].requests[0].tools}
    assert "spawn_agent" not in offered


async def test_subagent_hooks_fire_and_a_start_hook_can_refuse(
    make_tree: Callable[..., Tree],
) -> None:
    tree = make_tree(
        [turn(spawn("allowed task", "s1"), spawn("forbidden task", "s2")), turn(text="ok")],
        {"allowed": [turn(text="did it")], "forbidden": [turn(text="never")]},
    )
    seen: list[tuple[str, HookPayload]] = []

    def on_start(event: HookEvent, payload: HookPayload) -> HookOutcome | None:
        seen.append((event.value, payload))
        if "forbidden" in (payload.prompt or ""):
            return HookOutcome.deny("not this one")
        return None

    tree.root.hooks.add(HookEvent.SUBAGENT_START, on_start)
    tree.root.hooks.add(HookEvent.SUBAGENT_STOP, lambda e, p: seen.append((e.value, p)))
    result = await tree.root.run("two things")
    starts = [p for e, p in seen if e == "SubagentStart"]
    stops = [p for e, p in seen if e == "SubagentStop"]
    assert len(starts) == 2 and len(stops) == 1
    assert all(p.parent_session_id == result.session_id for p in starts + stops)
    assert stops[0].message == "did it" and stops[0].is_error is False
    assert stops[0].extra["finish_reason"] == "answered"
    assert stops[0].session_id in {p.session_id for p in starts}
    refusal = next(r for r in results_of(tree.root_provider, 1) if r.is_error)
    assert "SubagentStart hook refused it: not this one" in refusal.content
    assert "forbidden" not in tree.child_providers


async def test_token_pool_grants_children_a_share_and_the_parent_keeps_its_reserve(
    make_tree: Callable[..., Tree],
) -> None:
    tree = make_tree(
        [turn(spawn("look around", "s1")), turn(text="ok")],
        {"look": [turn(text="seen")]},
        max_total_tokens=100_000,
    )
    result = await tree.root.run("look")
    assert result.success
    (spec,) = tree.specs
    # 75 % of the budget is the pool (less the root's first turn); one child takes 60 % of it
    assert spec.config.max_total_tokens is not None
    assert 44_000 < spec.config.max_total_tokens <= 45_000
    assert tree.root.economics.limits.max_total_tokens is not None
    assert tree.root.economics.limits.max_total_tokens < 100_000


class Stalling(ScriptedProvider):
    """Plays its script, then hangs (a model that stopped answering)."""

    async def complete(self, request: Any, on_text: Any = None) -> ModelResponse:
        if self.remaining == 0:
            await asyncio.sleep(30)
        return await super().complete(request, on_text)


async def test_a_child_past_its_time_limit_ends_and_settles_what_it_spent(
    make_tree: Callable[..., Tree],
) -> None:
    tree = make_tree(
        [turn(spawn("slow work", "s1")), turn(text="gave up on it")],
        {"slow": []},
        SubagentConfig(child_timeout_s=0.3),
        max_budget_usd=1.0,
        price_per_mtok=PRICE,
    )
    stalling = Stalling([turn(ToolCall("r1", "list_files", {}), usage=Usage(2_500, 2_500))])

    def make_child(spec: ChildSpec) -> Agent:
        return Agent(
            stalling,
            workspace=spec.parent.workspace,
            tools=[t for n in spec.tools.names if (t := spec.tools.get(n)) is not None],
            config=spec.config,
            retry_policy=NO_WAIT,
        )

    tree.root.subagents.make_child = make_child  # type: ignore[attr-defined]
    result = await tree.root.run("try the slow thing")
    assert result.success
    (timed_out,) = results_of(tree.root_provider, 1)
    assert timed_out.is_error and timed_out.metadata["finish_reason"] == "max_duration"
    assert "ended: max_duration" in timed_out.content
    stats = tree.root.subagents.ledger.stats()  # type: ignore[attr-defined]
    assert stats.open_reservations == 0
    assert stats.spent.usd == pytest.approx(0.015 + 0.05)  # the root's first turn, the child's
    assert tree.root.economics.limits.max_usd == pytest.approx(0.95)


class Gauge:
    """Counts children inside a model call at once; each call lingers until `expected` are in
    (or briefly, when that never happens), so overlap shows whenever it is allowed."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.inside = 0
        self.most = 0
        self.all_in = asyncio.Event()

    def provider(self, text: str) -> ScriptedProvider:
        gauge = self

        class Gauged(ScriptedProvider):
            async def complete(self, request: Any, on_text: Any = None) -> ModelResponse:
                gauge.inside += 1
                gauge.most = max(gauge.most, gauge.inside)
                if gauge.inside >= gauge.expected:
                    gauge.all_in.set()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(gauge.all_in.wait(), timeout=0.5)
                gauge.inside -= 1
                return await super().complete(request, on_text)

        return Gauged([turn(text=text)])


@pytest.mark.parametrize(("max_parallel", "overlap"), [(3, 3), (1, 1)])
async def test_children_of_one_turn_run_concurrently_up_to_the_bound(
    make_tree: Callable[..., Tree], max_parallel: int, overlap: int
) -> None:
    tree = make_tree(
        [turn(*(spawn(f"job {i}", f"s{i}") for i in range(3))), turn(text="ok")],
        {},
        SubagentConfig(max_parallel=max_parallel),
    )
    gauge = Gauge(expected=3)

    def make_child(spec: ChildSpec) -> Agent:
        return Agent(
            gauge.provider(f"{spec.task} done"),
            workspace=spec.parent.workspace,
            tools=[t for n in spec.tools.names if (t := spec.tools.get(n)) is not None],
            config=spec.config,
            retry_policy=NO_WAIT,
        )

    tree.root.subagents.make_child = make_child  # type: ignore[attr-defined]
    await tree.root.run("three jobs")
    assert gauge.most == overlap
    assert [
        r.content.endswith(f"job {i} done") for i, r in enumerate(results_of(tree.root_provider, 1))
    ] == [True] * 3


class _NoArgs(ToolArgs):
    pass


async def test_tools_see_their_own_session_id_distinct_from_the_run_s(
    make_tree: Callable[..., Tree],
) -> None:
    seen: list[tuple[str, str]] = []

    @tool(args=_NoArgs, read_only=True)
    def whoami(args: _NoArgs, ctx: ToolContext) -> str:
        """Say which session ids a tool is given."""
        seen.append((ctx.session_id, ctx.run_session_id))
        return "noted"

    tree = make_tree(
        [turn(ToolCall("w0", "whoami", {})), turn(spawn("ask who", "s1")), turn(text="ok")],
        {"who": [turn(ToolCall("w1", "whoami", {})), turn(text="asked")]},
    )
    tree.root.registry.register(whoami)
    result = await tree.root.run("who am I?")
    assert result.success
    (root_tool_id, root_run_id), (child_tool_id, child_run_id) = seen
    assert root_run_id == result.session_id and root_tool_id != root_run_id
    assert child_run_id != root_run_id and child_tool_id not in (child_run_id, root_tool_id)
    assert tree.store().load_session(child_run_id).parent_id == root_run_id


async def test_a_childs_run_names_the_spawn_call_that_started_it(
    make_tree: Callable[..., Tree],
) -> None:
    tree = make_tree(
        [turn(spawn("count the modules", "s1"), spawn("count the tests", "s2")), turn(text="ok")],
        {"modules": [turn(text="three")], "tests": [turn(text="nine")]},
    )
    result = await tree.root.run("how big is it?")
    reports = {r.call_id: r.metadata["child_session_id"] for r in results_of(tree.root_provider, 1)}
    store = tree.store()
    try:
        started = {
            call_id: [e for e in store.events(child) if e["type"] == "run_started"]
            for call_id, child in reports.items()
        }
    finally:
        store.close()
    assert result.success and set(started) == {"s1", "s2"}
    for call_id, (run,) in started.items():
        assert run["parent_call_id"] == call_id
        assert run["parent_session_id"] == result.session_id


def billed(*calls: ToolCall, text: str = "", reply: int) -> Callable[[ModelRequest], ModelResponse]:
    """A reply billed like a real provider's: the prompt it was sent and `reply` tokens (cut to
    the request's reply limit by the scripted provider)."""

    def respond(request: ModelRequest) -> ModelResponse:
        usage = Usage(billed_prompt_tokens(request), reply)
        return ModelResponse(text=text, tool_calls=tuple(calls), usage=usage)

    return respond


async def test_a_token_cap_holds_for_every_billed_token_of_the_tree(
    make_tree: Callable[..., Tree],
) -> None:
    cap = 60_000
    busy = [billed(ToolCall(f"r{i}", "list_files", {}), reply=3_000) for i in range(8)]
    root_after = [billed(ToolCall(f"q{i}", "list_files", {}), reply=4_000) for i in range(10)]
    tree = make_tree(
        [
            billed(*(spawn(f"part {i}", f"s{i}") for i in range(3)), reply=200),
            *root_after,
            billed(text="Combined the parts.", reply=300),
        ],
        {f"part {i}": [*busy, billed(text="done", reply=100)] for i in range(3)},
        SubagentConfig(max_children_per_turn=3, max_parallel=3),
        max_total_tokens=cap,
        max_concurrency=3,
    )
    result = await tree.root.run("do three parts")
    assert tree.root.config.hard_token_limit
    assert result.finish_reason is FinishReason.MAX_TOKENS
    store = tree.store()
    try:
        rows = store.usage_rows()
        node = session_tree(store, result.session_id)
    finally:
        store.close()
    assert len(node.children) == 3  # the children ran, and so did the root after them
    assert len({row.session_id for row in rows}) == 4
    assert sum(row.usage.total_tokens for row in rows) <= cap


async def test_a_child_the_pool_cannot_fund_a_first_call_for_is_refused_before_it_starts(
    make_tree: Callable[..., Tree],
) -> None:
    work = [billed(ToolCall("r", "list_files", {}), reply=500), billed(text="done", reply=50)]
    tree = make_tree(
        [
            billed(*(spawn(f"part {i}", f"s{i}") for i in range(4)), reply=200),
            billed(text="Combined what came back.", reply=100),
        ],
        {f"part {i}": list(work) for i in range(4)},
        SubagentConfig(max_children_per_turn=4, max_parallel=4),
        max_budget_usd=0.08,
        price_per_mtok=(3.0, 15.0),
        max_concurrency=4,
    )
    result = await tree.root.run("do four parts")
    floor = tree.root.opening_call_floor("part 0", tree.specs[0].tools)
    assert floor.usd is not None and floor.usd > 0.08 * 0.75 / 4  # an even split is too small
    results = results_of(tree.root_provider, 1)
    refused = [r for r in results if r.metadata.get("error") == "allocation_refused"]
    started = [r for r in results if "child_session_id" in r.metadata]
    assert refused and started
    for r in refused:
        assert r.is_error
        assert "not started — the pool cannot fund another child: $" in r.content
        assert "left, a call needs about $" in r.content
    # every child that started was given enough for its first call, and made it
    assert all((spec.config.max_budget_usd or 0) >= floor.usd for spec in tree.specs)
    assert all(r.metadata["tokens"] > 0 for r in started)
    assert result.success
