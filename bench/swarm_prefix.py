"""How much of two swarm workers' first requests is the same, byte for byte, from the start.

Scope
    Bytes, not time: the shared prefix of two workers' first requests as journeyman builds
    them (system prompt, request in cache order, OpenAI body); an upper bound on what a
    provider's cache could reuse, not measured cache hits.

Providers cache a prompt by its prefix (Anthropic from a `cache_control` breakpoint, OpenAI
automatically from 1,024 tokens): the longer the run of identical bytes the workers' requests
start with, the more of every worker after the first is read from the cache.

What runs
    Two real `Agent`s on `ScriptedProvider` (they finish at once), each in its own workspace
    folder (as swarm workers are, each in its own git worktree), with the built-in tools. Their
    system prompt comes from one `SharedContextEngine` whose state holds failures and
    references recorded by two earlier workers, and a global doom loop; the two measured
    workers (w3, w4) get different subtasks and files. The first request each provider receives
    is serialised in the order a prompt cache reads it: tool schemas (JSON), then the system
    prompt, then the messages; and as the OpenAI Chat Completions body journeyman would send
    (`OpenAIProvider._params`). For comparison, the same two workers with journeyman's built-in
    system prompt (which names the workspace on its second line).

Run: `.venv/bin/python bench/swarm_prefix.py` (`--json` for machine-readable output).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from journeyman import Agent, AgentConfig
from journeyman.core.messages import ToolCall
from journeyman.providers.base import ModelRequest, ModelResponse
from journeyman.providers.openai import OpenAIProvider
from journeyman.providers.scripted import ScriptedProvider
from journeyman.swarm.shared import (
    SharedContextEngine,
    SharedContextState,
    SharedEconomicsState,
    WorkerTask,
)

GOAL = "Make the configuration loader strict: unknown keys are errors with the file and line."
SUBTASKS = (
    WorkerTask(
        "Reject unknown keys in src/config/loader.py and report the file and line.",
        worker_id="w3",
        task_id="loader",
        files=("src/config/loader.py",),
        verify="python -m pytest tests/test_loader.py",
    ),
    WorkerTask(
        "Add tests for unknown keys, nested tables and an empty file to tests/test_loader.py.",
        worker_id="w4",
        task_id="tests",
        files=("tests/test_loader.py",),
        verify="python -m pytest tests/test_loader.py",
    ),
)


def swarm_engine() -> SharedContextEngine:
    context, economics = SharedContextState(), SharedEconomicsState(global_doom_threshold=3)
    context.record_failure(
        "w1", 'run_command {"command": "pytest"}', "ModuleNotFoundError: No module named 'config'"
    )
    context.record_failure(
        "w2",
        'run_command {"command": "pytest -x"}',
        "ModuleNotFoundError: No module named 'config'",
    )
    context.add_references(["src/config/loader.py: load() reads TOML", "docs/config.md"])
    for worker in ("w1", "w2", "w1", "w2"):
        economics.record(worker, "fp-pip", label='run_command {"command": "pip install tomli"}')
    return SharedContextEngine(context, economics, goal=GOAL)


async def first_request(root: Path, name: str, task: WorkerTask, system: str | None) -> Any:
    workspace = root / name
    workspace.mkdir()
    (workspace / "README.md").write_text("a small project\n")
    provider = ScriptedProvider(
        [ModelResponse("", (ToolCall("f", "finish", {"summary": "done"}),))]
    )
    agent = Agent(
        provider,
        workspace=workspace,
        config=AgentConfig(session_dir=root / "sessions", system_prompt=system),
    )
    await agent.run(task.description)
    return provider.requests[0]


def cache_order(request: ModelRequest) -> bytes:
    tools = json.dumps([dataclasses.asdict(spec) for spec in request.tools], sort_keys=True)
    messages = json.dumps([m.to_dict() for m in request.messages], sort_keys=True)
    return f"{tools}\n{request.system}\n{messages}".encode()


def openai_body(request: ModelRequest) -> bytes:
    """The bytes the OpenAI adapter sends for `request` (its prebuilt body)."""
    os.environ.setdefault("OPENAI_API_KEY", "unused")
    provider = OpenAIProvider("gpt-4.1")
    return provider._body(provider._params(request), request, stream=False)


def shared(a: bytes, b: bytes) -> dict[str, Any]:
    common = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        common += 1
    return {
        "shared_bytes": common,
        "bytes": [len(a), len(b)],
        "share_pct": round(100 * common / max(len(a), len(b)), 1),
    }


async def measure() -> dict[str, Any]:
    engine = swarm_engine()
    results: dict[str, Any] = {"engine_prefix_bytes": len(engine.shared_prefix().encode())}
    with tempfile.TemporaryDirectory(prefix="jm-swarm-prefix-") as tmp:
        root = Path(tmp)
        for label, prompts in (
            ("engine", [engine.build_worker_system_prompt(t) for t in SUBTASKS]),
            ("builtin", [None, None]),
        ):
            requests = [
                await first_request(root, f"{label}-{t.worker_id}", t, p)
                for t, p in zip(SUBTASKS, prompts, strict=True)
            ]
            a, b = requests
            results[label] = {
                "system_prompt": shared(a.system.encode(), b.system.encode()),
                "request_cache_order": shared(cache_order(a), cache_order(b)),
                "openai_body": shared(openai_body(a), openai_body(b)),
            }
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    results = asyncio.run(measure())
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"engine's shared prefix: {results['engine_prefix_bytes']:,} bytes")
    for label, title in (("engine", "SharedContextEngine"), ("builtin", "built-in prompt")):
        print(f"\n{title}: two workers' first requests")
        for what, figures in results[label].items():
            print(
                f"  {what:<20} {figures['shared_bytes']:>7,} of {max(figures['bytes']):>7,} "
                f"bytes shared from the start ({figures['share_pct']}%)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
