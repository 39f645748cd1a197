"""Budget pool under load: random trees of real agents spawning concurrent subagents under a USD
cap, and what the whole tree spent against it.

Scope
    Spend, not time: whether a tree of concurrent subagents stays under one USD cap, read back
    from the session store; the models are scripted, so no figure here says anything about a
    real provider's speed.

Each trial builds a root `Agent` on a scripted model with `spawn_agent` enabled and a random
`--max-budget-usd` cap. The root spawns 2–6 children in one turn (all running at once); each
child works a random number of turns at a random cost per turn and may spawn 0–3 children of
its own. Spending is read back from the session store (`session_tree`, the same figures
`journeyman sessions show` prints), so the figure covers every session of the tree. Prints, per
run, the trees, the children started and refused, the largest share of its cap a tree used and
the overspend (spend above the cap; the target is 0).

    .venv/bin/python bench/pool.py [--trees 50] [--seed 20261124] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

from journeyman import Agent, AgentConfig
from journeyman.core.messages import ToolCall, Usage
from journeyman.providers.base import ModelRequest, ModelResponse
from journeyman.providers.resilient import RetryPolicy
from journeyman.providers.scripted import ScriptedProvider, ScriptStep, billed_prompt_tokens
from journeyman.session.store import SessionStore
from journeyman.swarm import SubagentConfig, enable_subagents
from journeyman.swarm.spawn import ChildSpec
from journeyman.swarm.tree import session_tree
from journeyman.tools.builtin import default_tools

NO_WAIT = RetryPolicy(max_retries=0, base_delay_s=0.0, jitter=0.0, max_retry_after_s=0.0)
PRICE = (3.0, 15.0)
"""US dollars per million input and output tokens (a mid-priced hosted model)."""


def _turn(*calls: ToolCall, text: str = "", reply: int = 100) -> ScriptStep:
    """A reply whose usage is billed like a real provider's: the prompt it was sent, and a reply
    of `reply` tokens (cut to the request's limit by the scripted provider)."""

    def respond(request: ModelRequest) -> ModelResponse:
        usage = Usage(billed_prompt_tokens(request), reply)
        return ModelResponse(text=text, tool_calls=tuple(calls), usage=usage)

    return respond


def _work(rng: random.Random, name: str, children: list[str]) -> list[ScriptStep]:
    """A script: optionally spawn `children`, then list files for some turns, then answer."""
    script = []
    if children:
        spawns = [
            ToolCall(f"{name}-s{i}", "spawn_agent", {"task": c}) for i, c in enumerate(children)
        ]
        script.append(_turn(*spawns))
    for i in range(rng.randint(1, 8)):
        call = ToolCall(f"{name}-r{i}", "list_files", {})
        script.append(_turn(call, reply=rng.randint(50, 6_000)))
    script.append(_turn(text=f"{name} done", reply=rng.randint(20, 400)))
    return script


async def one_tree(rng: random.Random, root_dir: Path) -> dict[str, Any]:
    cap = round(rng.uniform(0.05, 0.6), 3)
    scripts: dict[str, list[ScriptStep]] = {}
    names = [f"child{i}" for i in range(rng.randint(2, 6))]
    for name in names:
        grandchildren = [f"{name}-grand{j}" for j in range(rng.choice((0, 0, 1, 2, 3)))]
        for grand in grandchildren:
            scripts[grand] = _work(rng, grand, [])
        scripts[name] = _work(rng, name, grandchildren)
    root_script = [
        _turn(*(ToolCall(f"root-s{i}", "spawn_agent", {"task": n}) for i, n in enumerate(names))),
        _turn(text="combined", reply=200),
    ]
    workspace = root_dir / "ws"
    workspace.mkdir(parents=True)
    (workspace / "a.txt").write_text("a\n")
    sessions = root_dir / "sessions"

    def make_child(spec: ChildSpec) -> Agent:
        # the longest matching name: "child1-grand0" before "child1"
        key = max((k for k in scripts if k in spec.task), key=len)
        return Agent(
            ScriptedProvider(scripts[key]),
            workspace=spec.parent.workspace,
            tools=[t for n in spec.tools.names if (t := spec.tools.get(n)) is not None],
            config=spec.config,
            retry_policy=NO_WAIT,
        )

    root = Agent(
        ScriptedProvider(root_script),
        workspace=workspace,
        tools=default_tools(journal_commands=False),
        config=AgentConfig(
            session_dir=sessions,
            sandbox="local",
            journal_commands=False,
            verify=False,
            max_budget_usd=cap,
            price_per_mtok=PRICE,
            max_concurrency=6,
        ),
        retry_policy=NO_WAIT,
    )
    enable_subagents(
        root,
        SubagentConfig(max_children_per_turn=6, max_parallel=6, min_child_usd=0.01),
        make_child=make_child,
    )
    result = await root.run("split the work")
    store = SessionStore(sessions)
    try:
        tree = session_tree(store, result.session_id)
        nodes = tree.walk()
        spent = tree.tree_cost_usd or 0.0
    finally:
        store.close()
    planned = len(names) + sum(1 for k in scripts if "-grand" in k)
    return {
        "cap": cap,
        "spent": spent,
        "started": len(nodes) - 1,
        "planned": planned,
        "overspend": max(0.0, spent - cap),
        "finish": result.finish_reason.value,
    }


async def main_async(trees: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(trees):
            rows.append(await one_tree(rng, Path(tmp) / f"t{i}"))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trees", type=int, default=50)
    parser.add_argument("--seed", type=int, default=20261124)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = asyncio.run(main_async(args.trees, args.seed))
    summary = {
        "trees": len(rows),
        "children_planned": sum(r["planned"] for r in rows),
        "children_started": sum(r["started"] for r in rows),
        "largest_share_of_cap": max(r["spent"] / r["cap"] for r in rows),
        "trees_over_cap": sum(1 for r in rows if r["overspend"] > 1e-9),
        "overspend_usd": sum(r["overspend"] for r in rows),
    }
    if args.json:
        json.dump({"summary": summary, "trees": rows}, sys.stdout, indent=2)
        print()
    else:
        print(f"random subagent trees (seed {args.seed}), real agents on a scripted model")
        for key, value in summary.items():
            shown = f"{value:.3f}" if isinstance(value, float) else str(value)
            print(f"  {key:<22} {shown}")
    return 0 if summary["trees_over_cap"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
