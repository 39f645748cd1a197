"""Provider faults injected into whole agent runs (reliability scenario 1).

Each trial is one in-process run of the real stack: `Agent` with its `ResilientProvider`
around the `OpenAIProvider` (the official `openai` SDK) talking to the fake OpenAI server
(tests/fakes) on 127.0.0.1. The fake answers by step number, as in crash_trials.py, and a
seeded `FaultInjector` replaces 20 % of the answers with one of the faults in `FAULTS`: a 429
with Retry-After, a 500, a 529, a read timeout (the server says nothing for longer than the
client's timeout), a connection reset, a malformed JSON body, a stream cut in the middle of a
tool call, an empty reply. Half of the trials stream, half do not.

Every step of the script appends `step-N` to `ledger.txt` through `run_command` (a side effect
that a second execution would show) and writes `out/N.txt`. A trial passes when the run
completes, the ledger holds every step exactly once and in order, the workspace equals the
expected one, the session store holds one tool result per call, and no step took more
requests than the retry policy allows.

At most `max_in_a_row` faults are injected back to back (fewer than the retries the policy
grants), so a run is never stopped by the dice alone: what is tested is recovery, not luck.

Used by tests/reliability/test_provider_faults.py (a few trials) and bench/reliability.py.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from journeyman.core.result import FinishReason
from journeyman.loop.agent import Agent
from journeyman.loop.config import AgentConfig
from journeyman.providers.openai import OpenAIProvider
from journeyman.providers.resilient import RetryPolicy
from journeyman.session.store import SessionStore
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import (
    RecordedRequest,
    Reply,
    ScriptItem,
    cut_stream,
    disconnect,
    error,
    hang,
    malformed_json,
    reply,
    tool_call,
)

STEPS = 6
CLIENT_TIMEOUT_S = 1.0
"""The SDK's timeout in these runs, so that a hanging server is a read timeout quickly."""
POLICY = RetryPolicy(max_retries=4, base_delay_s=0.02, max_delay_s=0.2)
FAULTS: dict[str, str] = {
    "429": "429 with Retry-After",
    "500": "500",
    "529": "529 overloaded",
    "timeout": "read timeout",
    "reset": "connection reset",
    "malformed": "malformed JSON",
    "cut": "stream cut mid-tool-call",
    "empty": "empty response",
}


def step_of(request: RecordedRequest) -> int:
    return sum(1 for m in request.json["messages"] if m["role"] == "assistant")


def step_reply(index: int) -> Reply:
    """Step N appends to the ledger and writes a file (two tool calls), then `finish`."""
    if index >= STEPS:
        return reply("done", tool_calls=[tool_call("finish", {"summary": "all steps done"})])
    calls = [
        tool_call("run_command", {"command": f"echo step-{index} >> ledger.txt"}, id=f"r{index}"),
        tool_call(
            "write_file", {"path": f"out/{index}.txt", "content": f"{index}\n"}, id=f"w{index}"
        ),
    ]
    return reply(f"step {index}", tool_calls=calls)


def fault(kind: str, good: Reply) -> ScriptItem:
    if kind == "429":
        return error(429, retry_after=0.05)
    if kind == "500":
        return error(500)
    if kind == "529":
        return error(529, "Overloaded", error_type="overloaded_error")
    if kind == "timeout":
        return hang(CLIENT_TIMEOUT_S + 2)
    if kind == "reset":
        return disconnect(reset=True)
    if kind == "malformed":
        return malformed_json('{"id": "chatcmpl-broken", "choices": [{"index": 0, "mess')
    if kind == "cut":
        # Just past the first argument delta of the first call; the second never starts.
        return cut_stream(good)
    if kind == "empty":
        return reply()
    raise ValueError(f"unknown fault {kind!r}")


class FaultInjector:
    """The fake server's default answer: the step's reply, or (20 % of calls) a fault."""

    def __init__(
        self,
        rng: random.Random,
        rate: float = 0.2,
        max_in_a_row: int = 3,
        kinds: tuple[str, ...] = tuple(sorted(FAULTS)),
    ) -> None:
        self.rng = rng
        self.rate = rate
        self.max_in_a_row = max_in_a_row
        self.kinds = kinds
        self.in_a_row = 0
        self.injected: Counter[str] = Counter()
        self.requests_per_step: Counter[int] = Counter()

    def __call__(self, request: RecordedRequest) -> ScriptItem:
        step = step_of(request)
        self.requests_per_step[step] += 1
        good = step_reply(step)
        if self.in_a_row < self.max_in_a_row and self.rng.random() < self.rate:
            kind = self.rng.choice(self.kinds)
            self.injected[kind] += 1
            self.in_a_row += 1
            return fault(kind, good)
        self.in_a_row = 0
        return good


def expected_tree() -> dict[str, bytes]:
    files = {f"out/{i}.txt": f"{i}\n".encode() for i in range(STEPS)}
    files["ledger.txt"] = "".join(f"step-{i}\n" for i in range(STEPS)).encode()
    files["README.md"] = b"fault trial\n"
    return files


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


@dataclass
class FaultOutcome:
    trial: int
    streaming: bool
    finish_reason: str = ""
    completed: bool = False
    crashed: bool = False
    """The run raised instead of returning a result."""
    data_lost: bool = False
    """A file, a ledger line or a stored tool result is missing."""
    duplicated: int = 0
    """Tool executions seen more than once (ledger lines, stored tool results)."""
    injected: Counter[str] = field(default_factory=Counter)
    retries: int = 0
    """Requests beyond one per step."""
    max_requests_per_step: int = 0
    problems: list[str] = field(default_factory=list)


async def fault_trial(
    root: Path, trial: int, seed: int, *, only: str | None = None, streaming: bool | None = None
) -> FaultOutcome:
    """One run with faults injected; `root` is an empty scratch folder.

    `only` names one fault of `FAULTS` to inject on the first request of every step (each step
    then fails once and succeeds on its retry) instead of drawing 20 % of calls at random.
    `streaming` defaults to even trials streaming."""
    streaming = trial % 2 == 0 if streaming is None else streaming
    outcome = FaultOutcome(trial, streaming)
    workspace = root / "ws"
    workspace.mkdir(parents=True)
    (workspace / "README.md").write_text("fault trial\n")
    rng = random.Random(seed * 1_000 + trial)
    if only is None:
        injector = FaultInjector(rng)
    else:
        injector = FaultInjector(rng, rate=1.0, max_in_a_row=1, kinds=(only,))
    with FakeOpenAIServer(default=injector) as server:
        provider = OpenAIProvider(
            "gpt-4.1-mini", api_key="sk-test", base_url=server.base_url, timeout=CLIENT_TIMEOUT_S
        )
        config = AgentConfig(
            sandbox="local",
            stream=streaming,
            session_dir=root / "sessions",
            max_iterations=40,
            verify=False,  # the trial counts how runs end under faults; its folder has no tests
        )
        agent = Agent(
            provider, workspace=workspace, config=config, retry_policy=POLICY, assume_yes=True
        )
        try:
            result = await agent.run("work through the steps")
        except Exception as exc:  # a crash is what this trial counts
            outcome.crashed = True
            outcome.problems.append(f"run raised {type(exc).__name__}: {exc}")
            return outcome
        finally:
            await provider.aclose()
    outcome.injected = injector.injected
    outcome.finish_reason = result.finish_reason.value
    outcome.completed = result.finish_reason is FinishReason.COMPLETED
    if not outcome.completed:
        outcome.problems.append(f"finished with {outcome.finish_reason}: {result.error}")
    outcome.retries = sum(injector.requests_per_step.values()) - len(injector.requests_per_step)
    outcome.max_requests_per_step = max(injector.requests_per_step.values())
    if outcome.max_requests_per_step > POLICY.max_retries + 1:
        outcome.problems.append(f"a step took {outcome.max_requests_per_step} requests")

    ledger = (workspace / "ledger.txt").read_text() if (workspace / "ledger.txt").exists() else ""
    lines = ledger.splitlines()
    outcome.duplicated += len(lines) - len(set(lines))
    files = snapshot(workspace)
    if files != expected_tree():
        outcome.problems.append("workspace differs: ledger " + repr(lines))
        missing = set(expected_tree()) - set(files)
        outcome.data_lost = outcome.data_lost or bool(missing) or len(set(lines)) < STEPS

    store = SessionStore(root / "sessions")
    try:
        results = Counter(
            str(event.get("result", {}).get("call_id") or event.get("call_id"))
            for event in store.events(result.session_id)
            if event.get("type") == "tool_result"
        )
    finally:
        store.close()
    expected_calls = 2 * STEPS + 1  # two per step, then finish
    outcome.duplicated += sum(n - 1 for n in results.values() if n > 1)
    if len(results) < expected_calls:
        outcome.data_lost = True
        outcome.problems.append(f"the store holds {len(results)} of {expected_calls} results")
    if outcome.duplicated:
        outcome.problems.append(f"{outcome.duplicated} duplicated tool execution(s)")
    return outcome


def run_fault_trials(root: Path, trials: int, seed: int) -> list[FaultOutcome]:
    """`trials` runs, each in its own folder under `root`."""
    return [asyncio.run(fault_trial(root / f"t{n}", n, seed)) for n in range(trials)]
