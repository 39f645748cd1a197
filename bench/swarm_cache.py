"""Prompt-cache reads of a 4-worker swarm on Anthropic, measured the way the API reports them.

Scope
    Cache reads as the fake Messages API's prompt-cache model counts them (a model of the
    API's rules, not a real provider's hit rate), through the official `anthropic` SDK; no
    timing.

What runs
    The real `Swarm` (planning turn, four workers in their own git worktrees, quality gates,
    merges) with `AnthropicProvider` and the official `anthropic` SDK, against the fake Messages
    API on 127.0.0.1 (``tests.fakes.FakeAnthropicServer``) with its prompt-cache model
    (``tests.fakes.anthropic_cache.FakePromptCache``): a request reads from the cache when its
    prompt up to a `cache_control` breakpoint (or up to one of the 20 blocks before one) is a
    prefix an earlier request wrote, at least 1,024 tokens long (characters / 4). The model is
    scripted (``tests.fakes.swarm.SwarmModel``): each worker reads `--reads` documents of the
    repository (about 800 tokens each, one a turn), then its own file, writes it and finishes
    (`--reads` + 3 requests). Before the swarm starts, two failures of earlier workers are
    recorded in its shared state, so every worker's prompt carries failure guidance after the
    shared prefix, as in a swarm that has been running for a while.

    * before: one system block with a breakpoint at its end, none in the messages (what the
      provider sent before; reproduced by leaving both newer breakpoints out);
    * shared_prefix: a breakpoint after the workers' shared prefix as well;
    * now: as journeyman sends requests now, also with a breakpoint on the last message.

    The figure is cache-read tokens as a share of all input tokens (uncached + written + read),
    for the workers' requests, for their first requests alone, and for every request of the run;
    and the workers' input priced in uncached tokens (a cache write costs 1.25, a read 0.1).

Usage (from the repository root)
    .venv/bin/python bench/swarm_cache.py
    .venv/bin/python bench/swarm_cache.py --reads 6 --workers 4 --json

Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT / "src"))
sys.path.insert(0, str(REPO_ROOT))

from tests.fakes import FakeAnthropicServer  # noqa: E402
from tests.fakes.anthropic_cache import CacheReport, FakePromptCache  # noqa: E402
from tests.fakes.anthropic_swarm import anthropic_reply, anthropic_system_of  # noqa: E402
from tests.fakes.swarm import Step, SwarmModel, WorkerScript, git_repo  # noqa: E402

from journeyman.loop.config import AgentConfig  # noqa: E402
from journeyman.providers import anthropic as anthropic_provider  # noqa: E402
from journeyman.providers.anthropic import AnthropicProvider  # noqa: E402
from journeyman.swarm.orchestrator import Swarm, SwarmConfig, SwarmResult  # noqa: E402
from journeyman.tools.sandbox import SandboxKind  # noqa: E402

DOC_LINE = "Settings are read from config.toml; unknown keys are reported with their line.\n"


def reads_then_write(name: str, reads: int) -> WorkerScript:
    """Read `reads` of the shared documents (one a turn) and its own file, write it, finish."""

    def script(attempt: int, turn: int) -> Step:
        if turn < reads:
            return Step(calls=[("read_file", {"path": f"docs/doc{turn + 1}.md"})])
        if turn == reads:
            return Step(calls=[("read_file", {"path": name})])
        if turn == reads + 1:
            return Step(calls=[("write_file", {"path": name, "content": f"{name} done\n"})])
        return Step(calls=[("finish", {"summary": f"updated {name}"})])

    return script


LAYOUTS = {
    "before": (False, False),
    "shared_prefix": (True, False),
    "now": (True, True),
}
"""Request layouts: (breakpoint after the shared prefix, breakpoint on the last message)."""


@contextlib.contextmanager
def layout(shared_prefix: bool, history: bool) -> Iterator[None]:
    """Make `AnthropicProvider` send the older layouts by leaving out either breakpoint."""
    saved = anthropic_provider.to_anthropic_system, anthropic_provider.with_history_breakpoint
    if not shared_prefix:
        anthropic_provider.to_anthropic_system = lambda system, shared_chars=0: saved[0](system)
    if not history:
        anthropic_provider.with_history_breakpoint = lambda messages: messages
    try:
        yield
    finally:
        anthropic_provider.to_anthropic_system, anthropic_provider.with_history_breakpoint = saved


WRITE_PRICE, READ_PRICE = 1.25, 0.1
"""Anthropic's price of a 5-minute cache write and of a cache read, per uncached input token."""


def share(reports: list[CacheReport]) -> dict[str, Any]:
    read = sum(r.cache_read_tokens for r in reports)
    written = sum(r.cache_write_tokens for r in reports)
    total = sum(r.prompt_tokens for r in reports)
    return {
        "requests": len(reports),
        "input_tokens": total,
        "cache_read_tokens": read,
        "cache_write_tokens": written,
        "read_share_pct": round(100 * read / total, 1) if total else 0.0,
        "billed_input_tokens": round(
            total - read - written + WRITE_PRICE * written + READ_PRICE * read
        ),
    }


def one_run(workers: int, reads: int) -> dict[str, Any]:
    names = [f"part{n}.txt" for n in range(1, workers + 1)]
    model = SwarmModel(
        [{"title": name, "task": f"Update {name}.", "files": [name]} for name in names],
        {f"w{n}": reads_then_write(name, reads) for n, name in enumerate(names, start=1)},
    )
    cache = FakePromptCache()
    with (
        tempfile.TemporaryDirectory(prefix="jm-bench-swarm-cache-") as folder,
        FakeAnthropicServer(prompt_cache=cache, default=anthropic_reply(model)) as server,
    ):
        root = Path(folder)
        docs = {f"docs/doc{n}.md": DOC_LINE * 40 for n in range(1, reads + 1)}
        repo = git_repo(root / "repo", {**docs, **{name: "todo\n" for name in names}})
        provider = AnthropicProvider(
            "claude-bench", api_key="sk-ant-bench", base_url=server.base_url, timeout=30.0
        )
        swarm = Swarm(
            provider,
            workspace=repo,
            config=SwarmConfig(workers=workers, verify_command="true"),
            agent_config=AgentConfig(session_dir=root / "sessions", sandbox=SandboxKind.LOCAL),
        )
        for worker, (call, error) in enumerate(
            (
                ('run_command {"command": "pytest"}', "ModuleNotFoundError: No module named 'x'"),
                ('run_command {"command": "make"}', "make: *** No rule to make target 'all'"),
            ),
            start=1,
        ):
            swarm.shared.record_failure(f"earlier-{worker}", call, error)

        async def run() -> SwarmResult:
            try:
                return await swarm.run("update every part")
            finally:
                await provider.aclose()

        result = asyncio.run(run())
        if not result.success:
            raise SystemExit(f"the benchmark swarm failed: {result.summary()}")
        worker_reports, first_reports = [], []
        for request, report in zip(server.requests, cache.reports, strict=True):
            body = request.json
            if "Subtask id:" not in anthropic_system_of(request):
                continue
            worker_reports.append(report)
            if not any(m.get("role") == "assistant" for m in body.get("messages", [])):
                first_reports.append(report)
        first_system = server.requests[-1].json["system"]
        return {
            "system_blocks": len(first_system),
            "workers": share(worker_reports),
            "first_requests": share(first_reports),
            "all_requests": share(cache.reports),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument(
        "--reads",
        type=int,
        default=0,
        help="documents (about 800 tokens each) each worker reads before its own file",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    figures = {}
    for label, (shared_prefix, history) in LAYOUTS.items():
        with layout(shared_prefix, history):
            figures[label] = one_run(args.workers, args.reads)
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(
        f"{args.workers}-worker swarm, {args.reads} document reads a worker, on the fake "
        "Anthropic API with its prompt cache: cache-read tokens / all input tokens"
    )
    print(f"  {'requests':<32}" + "".join(f"{label:>30}" for label in LAYOUTS))
    for group, title in (
        ("workers", "workers' requests"),
        ("first_requests", "workers' first requests"),
        ("all_requests", "every request (with the plan)"),
    ):
        cells = [
            f"{f[group]['read_share_pct']:5.1f} % ({f[group]['cache_read_tokens']:,}"
            f" of {f[group]['input_tokens']:,})"
            for f in figures.values()
        ]
        print(f"  {title:<32}" + "".join(f"{cell:>30}" for cell in cells))
    billed = [f"{f['workers']['billed_input_tokens']:,}" for f in figures.values()]
    print(f"  {'workers, billed as uncached':<32}" + "".join(f"{cell:>30}" for cell in billed))


if __name__ == "__main__":
    main()
