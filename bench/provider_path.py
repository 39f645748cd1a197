"""CPU of one provider call as the history grows: the SDK building the body vs a prebuilt body.

Scope
    One model call through journeyman's provider adapter (`OpenAIProvider`, `AnthropicProvider`)
    and the official SDK under it (`openai`, `anthropic`: request building, transport, reply
    parsing) against the fake server of `tests/fakes` on 127.0.0.1. The fake server runs in its
    own process, so the figures are the CPU of this process alone: the adapter, the SDK and
    httpx, not the server and not the loop, tools or session store around a call. Replies are
    a short text, so the figures are about sending a history, not reading a reply.

What runs
    The history of a run of N steps: the task and a note, then per step an assistant message
    calling one of the built-in tools (their real schemas are sent with every request) and that
    call's result (command output, a file's text, an edit report; about 0.5 to 1.5 KB each). A
    history of 2 + 2s messages is the request of step s: lengths 2, 22 (step 10), 62, 300,
    602 (step 300) and 1,000.

    Two adapters per provider: "sdk" (``prebuilt_body=False``: the SDK builds every body from
    the whole history, as its `create` does) and "prebuilt" (the default: bodies assembled from
    JSON kept between calls). Both are long-lived, as in a run. One sample of a length N is one
    step as a run takes it: an untimed call with the history of the step before (N - 2
    messages), then the timed call with N messages, whose last two are new objects; the two
    adapters take turns sample by sample (A/B interleaved, order alternating), so load on the
    shared machine falls on both alike. Each figure is the median of the samples, in ms of
    `time.process_time()`; "ratio" is sdk / prebuilt, and the last line is the step-300 call
    over the step-10 call for each path. Load averages are printed before and after.

Usage (from the repository root)
    .venv/bin/python bench/provider_path.py                    # both providers, not streamed
    .venv/bin/python bench/provider_path.py --stream --samples 9 --json
    .venv/bin/python bench/provider_path.py --providers openai --lengths 2 62 300 1000

Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

from journeyman.core.messages import Message, Role, ToolCall, ToolResult  # noqa: E402
from journeyman.providers.anthropic import AnthropicProvider  # noqa: E402
from journeyman.providers.base import ModelRequest, ToolSpec  # noqa: E402
from journeyman.providers.openai import OpenAIProvider  # noqa: E402
from journeyman.tools.base import tool_spec  # noqa: E402
from journeyman.tools.builtin import default_tools  # noqa: E402

LENGTHS = (2, 22, 62, 300, 602, 1000)
STEP_10, STEP_300 = 22, 602
SYSTEM = "You are a careful coding agent working in a Python repository. " * 40
FILE_TEXT = "".join(f"def helper_{i}(value):\n    return value * {i}  # ü\n\n" for i in range(30))


def step_messages(step: int) -> tuple[Message, Message]:
    """The assistant call and its result of step `step` (new objects on every call)."""
    cid = f"call_{step}"
    kind = step % 3
    if kind == 0:
        call = ToolCall(cid, "run_command", {"command": f"python -m pytest -q tests/t{step}.py"})
        output = f"{step} passed\n" + "".join(
            f"tests/t{step}.py::test_{i} PASSED\n" for i in range(25)
        )
    elif kind == 1:
        call = ToolCall(cid, "read_file", {"path": f"src/pkg/module_{step}.py"})
        output = FILE_TEXT
    else:
        call = ToolCall(
            cid, "edit_file", {"path": f"src/pkg/module_{step}.py", "old": "* 3", "new": "* 4"}
        )
        output = f"Edited src/pkg/module_{step}.py: 1 replacement.\n"
    thought = f"Step {step}: checking the next part of the package."
    return (
        Message.assistant(thought, (call,)),
        Message.tool(ToolResult(cid, call.name, output)),
    )


def base_history(length: int) -> tuple[Message, ...]:
    """A history of `length` messages (even, at least 2)."""
    messages: list[Message] = [
        Message.user("Make the test suite pass: tests/test_calc.py fails on add()."),
        Message(Role.USER, "Repository notes: run tests with pytest -q; keep the API stable."),
    ]
    for step in range(1, (length - 2) // 2 + 1):
        messages.extend(step_messages(step))
    return tuple(messages)


def start_fake(kind: str) -> tuple[subprocess.Popen[str], str]:
    """The fake server of `kind` in its own process, and its base URL."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.fakes",
            kind,
            "--default",
            json.dumps({"text": "Looking at the output now."}),
            "--until-stdin-closes",
        ],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": f"{ROOT / 'src'}:{ROOT}"},
    )
    assert process.stdout is not None
    return process, process.stdout.readline().strip()


def make_provider(kind: str, url: str, prebuilt: bool) -> OpenAIProvider | AnthropicProvider:
    if kind == "openai":
        return OpenAIProvider("gpt-bench", api_key="sk-bench", base_url=url, prebuilt_body=prebuilt)
    return AnthropicProvider(
        "claude-bench", api_key="sk-bench", base_url=url, prebuilt_body=prebuilt
    )


async def forget_requests(url: str) -> None:
    """Empty the fake server's record of requests (it keeps every body otherwise)."""
    import httpx2

    async with httpx2.AsyncClient() as client:
        await client.post(url.rstrip("/").removesuffix("/v1") + "/_fake/reset")


async def one_step(
    provider: OpenAIProvider | AnthropicProvider,
    base: tuple[Message, ...],
    tools: tuple[ToolSpec, ...],
    length: int,
    stream: bool,
) -> float:
    """CPU ms of the call with `length` messages, after the untimed call of the step before."""
    on_text: Callable[[str], None] | None = (lambda _text: None) if stream else None
    if length == 2:
        messages = base_history(2)  # the task alone: nothing before it
    else:
        before = base[: length - 2]
        await provider.complete(ModelRequest(SYSTEM, before, tools), on_text)
        messages = (*before, *step_messages((length - 2) // 2))
    request = ModelRequest(SYSTEM, messages, tools)
    started = time.process_time()
    await provider.complete(request, on_text)
    return (time.process_time() - started) * 1000


async def measure(kind: str, lengths: list[int], samples: int, stream: bool) -> dict[str, Any]:
    process, url = start_fake(kind)
    try:
        tools = tuple(tool_spec(t) for t in default_tools(provider=kind))
        paths = {"sdk": make_provider(kind, url, False), "prebuilt": make_provider(kind, url, True)}
        warm = base_history(8)
        for provider in paths.values():  # connect, first-use caches
            for length in (4, 6, 8):
                await one_step(provider, warm, tools, length, stream)
        figures: dict[str, dict[int, float]] = {name: {} for name in paths}
        for length in lengths:
            base = base_history(length)
            times: dict[str, list[float]] = {name: [] for name in paths}
            for sample in range(samples):
                order = list(paths) if sample % 2 == 0 else list(reversed(paths))
                for name in order:
                    times[name].append(await one_step(paths[name], base, tools, length, stream))
            await forget_requests(url)
            for name in paths:
                figures[name][length] = statistics.median(times[name])
        for provider in paths.values():
            await provider.aclose()
    finally:
        assert process.stdin is not None
        process.stdin.close()
        process.wait(timeout=10)
    return {"provider": kind, "stream": stream, "samples": samples, "ms": figures}


def report(result: dict[str, Any]) -> None:
    figures = result["ms"]
    mode = "streamed" if result["stream"] else "not streamed"
    print(f"\n{result['provider']} ({mode}), CPU ms per call, median of {result['samples']}")
    print(f"{'messages':>9} {'sdk':>9} {'prebuilt':>9} {'ratio':>7}")
    for length in figures["sdk"]:
        sdk, prebuilt = figures["sdk"][length], figures["prebuilt"][length]
        print(f"{length:>9} {sdk:>9.2f} {prebuilt:>9.2f} {sdk / prebuilt:>6.1f}x")
    if STEP_10 in figures["sdk"] and STEP_300 in figures["sdk"]:
        growth = {n: figures[n][STEP_300] / figures[n][STEP_10] for n in figures}
        print(f"step 300 / step 10: sdk {growth['sdk']:.2f}x, prebuilt {growth['prebuilt']:.2f}x")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--providers", nargs="+", default=["openai", "anthropic"])
    parser.add_argument("--lengths", nargs="+", type=int, default=list(LENGTHS))
    parser.add_argument("--samples", type=int, default=7, help="samples per length and path")
    parser.add_argument("--stream", action="store_true", help="stream the replies")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    args = parser.parse_args()
    if any(n < 2 or n % 2 for n in args.lengths):
        parser.error("--lengths must be even numbers of at least 2")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    results = [
        asyncio.run(measure(kind, args.lengths, args.samples, args.stream))
        for kind in args.providers
    ]
    for result in results:
        report(result)
    print(f"\nload average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.json:
        print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
