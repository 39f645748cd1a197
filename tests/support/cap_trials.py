"""Token caps under random runs: does any run count more tokens than its cap?

Each trial is one in-process run of the real `Agent` (kernel, tools, SQLite store) on a
`ScriptedProvider` whose replies report honest usage: the prompt tokens are counted from the
request the provider was sent by a tokenizer the trial picks (`TOKENIZERS`), never from the
harness's own estimate, and the reply tokens are what the model chose to write, cut at the
request's `max_output_tokens` as a real model is.

Per trial, from one seed: the language of the task and of the files read (English prose, Python
code, Chinese, emoji-laden text, or a mix), the token cap (3,000 to 400,000), whether it is the
strict budget counted from the baseline or a hard cap on every billed token (a subagent's or a
batch task's grant), the reply limit, whether compaction runs in a small context window, and
how long the model's replies are. The model reads files, writes files with text in the trial's
language, answers the compaction's summary calls and the budget's closing report, and never
finishes on its own: every run ends at its cap, its iteration limit, or a call that no longer
fits.

The overshoot of a trial is the most its counted tokens ever passed its cap (after any call,
summary calls included). Used by tests/loop/test_token_cap_trial.py (200 trials, all must be 0)
and bench/token_caps.py (figures).
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from journeyman.context.compaction import CompactionSettings
from journeyman.core import events as ev
from journeyman.core.messages import ToolCall, Usage
from journeyman.loop.agent import Agent
from journeyman.loop.config import AgentConfig
from journeyman.providers.base import Capabilities, ModelRequest, ModelResponse
from journeyman.providers.scripted import ScriptedProvider
from journeyman.tools.builtin import default_tools
from tests.fakes.agents import is_summary_call

LANGUAGES = ("english", "code", "cjk", "emoji", "mixed")

_ENGLISH = " ".join(
    (
        "the agent reads each file before it edits anything and keeps its changes small so that",
        "every test still passes after the last edit was made",
    )
).split(" ")
_CODE = [
    "def parse(line: str) -> dict[str, int]:",
    "    return {k: int(v) for k, v in (p.split('=') for p in line.split(','))}",
    "class Cache:",
    "    def __init__(self) -> None:",
    "        self._items: dict[str, bytes] = {}",
    "if __name__ == '__main__':",
    "    raise SystemExit(main(sys.argv[1:]))",
    "for index, value in enumerate(values):",
    "        total += value ** 2 if value > 0 else -value",
]
_CJK = "请把这个函数改成异步的并且为它写一个测试修复登录页面的错误提示信息读取配置文件时忽略空行"
_EMOJI = "🎉🚀✅🔥💡🐍📦🧪⚠️👍"


def _text(rng: random.Random, language: str, chars: int) -> str:
    """About `chars` characters of text in `language`."""
    parts: list[str] = []
    size = 0
    while size < chars:
        kind = rng.choice(LANGUAGES[:4]) if language == "mixed" else language
        if kind == "english":
            piece = " ".join(rng.choice(_ENGLISH) for _ in range(12)) + ".\n"
        elif kind == "code":
            piece = "\n".join(rng.choice(_CODE) for _ in range(4)) + "\n"
        elif kind == "cjk":
            piece = "".join(rng.choice(_CJK) for _ in range(30)) + "。\n"
        else:
            words = (rng.choice(_ENGLISH) + rng.choice(_EMOJI) for _ in range(8))
            piece = " ".join(words) + "\n"
        parts.append(piece)
        size += len(piece)
    return "".join(parts)


# --- tokenizers: what the fake provider bills ---------------------------------------------


def _bpe_like(text: str) -> int:
    """Tokens as a byte-level BPE tokenizer of today's models makes them, roughly: English words
    of up to 4 letters a token, digits 3 a token, a run of spaces one, a punctuation mark one,
    a CJK character one to three (tokenizers split the rarer ones into bytes), an emoji two to
    four, other letters one."""
    tokens = 0
    run = 0  # letters or digits in the current word

    def flush() -> None:
        nonlocal tokens, run
        if run:
            tokens += math.ceil(run / 4)
            run = 0

    previous_space = False
    for char in text:
        point = ord(char)
        if char.isascii() and char.isalnum():
            run += 1
            previous_space = False
            continue
        flush()
        if char.isspace():
            tokens += 0 if previous_space else 1
            previous_space = True
            continue
        previous_space = False
        if point < 0x80:
            tokens += 1
        elif 0x3000 <= point <= 0x9FFF or 0xAC00 <= point <= 0xD7AF:
            tokens += 1 + (point % 3 == 0) + (point % 11 == 0)
        elif point >= 0x1F000:
            tokens += 2 + point % 3
        else:
            tokens += 1
    flush()
    return tokens


def _bytes(text: str) -> int:
    """The worst a byte-level tokenizer can do: a token for every UTF-8 byte."""
    return len(text.encode("utf-8"))


TOKENIZERS: dict[str, Callable[[str], int]] = {"bpe": _bpe_like, "bytes": _bytes}

MESSAGE_FRAMING = 4
"""Tokens a chat format adds around a message (role markers, separators)."""
TOOL_USE_PREAMBLE = 346
"""Tokens a provider adds to a request that offers tools (Anthropic's tool-use prompt)."""


def billed_tokens(request: ModelRequest, count: Callable[[str], int]) -> int:
    """The prompt tokens a provider using `count` bills for `request`: the system prompt, each
    tool definition as JSON, each message's text, tool calls (id, name, JSON arguments) and
    tool results (the call they answer), with the chat format's framing."""
    tokens = 3 + count(request.system) + MESSAGE_FRAMING
    if request.tools:
        tokens += TOOL_USE_PREAMBLE
    for tool in request.tools:
        schema = json.dumps(tool.parameters)
        tokens += count(tool.name) + count(tool.description) + count(schema) + 8
    for message in request.messages:
        tokens += count(message.content) + MESSAGE_FRAMING
        for call in message.tool_calls:
            tokens += count(call.id) + count(call.name) + count(json.dumps(call.arguments)) + 5
        if message.tool_result is not None:
            tokens += count(message.tool_result.call_id) + 3
    return tokens


# --- one trial ------------------------------------------------------------------------------


@dataclass
class TrialSetup:
    seed: int
    language: str
    tokenizer: str
    cap: int
    hard: bool
    """A cap on every billed token (a grant) rather than the strict budget from a baseline."""
    max_output_tokens: int
    compaction: bool
    greedy: float
    """How often the model writes as long a reply as it is allowed."""


@dataclass
class TrialResult:
    setup: TrialSetup
    calls: int
    peak_counted: int
    finish_reason: str
    closing_calls: int
    """Calls made without tools (the budget's closing report)."""

    @property
    def overshoot(self) -> int:
        return max(0, self.peak_counted - self.setup.cap)


def setup_for(seed: int) -> TrialSetup:
    rng = random.Random(seed)
    return TrialSetup(
        seed=seed,
        language=rng.choice(LANGUAGES),
        tokenizer="bytes" if rng.random() < 0.2 else "bpe",
        cap=rng.randint(3_000, 80_000) if rng.random() < 0.6 else rng.randint(80_000, 400_000),
        hard=rng.random() < 0.3,
        max_output_tokens=rng.choice((256, 1_024, 4_096, 8_192)),
        compaction=rng.random() < 0.3,
        greedy=rng.random(),
    )


class TrialModel:
    """The scripted model of one trial: reads and writes files, answers summary and closing
    calls, and bills honestly."""

    def __init__(self, setup: TrialSetup, files: list[str]) -> None:
        self.rng = random.Random(setup.seed * 7_919 + 1)
        self.setup = setup
        self.files = files
        self.count = TOKENIZERS[setup.tokenizer]
        self.turn = 0

    def __call__(self, request: ModelRequest) -> ModelResponse:
        self.turn += 1
        allowed = request.max_output_tokens
        if self.rng.random() < self.setup.greedy:
            written = allowed
        else:
            written = self.rng.randint(1, max(1, allowed))
        usage = Usage(billed_tokens(request, self.count), written)
        if not request.tools or is_summary_call(request):  # a summary or the closing report
            text = _text(self.rng, self.setup.language, 120)
            return ModelResponse(text=text, usage=usage)
        if self.rng.random() < 0.6:
            name = self.rng.choice(self.files)
            call = ToolCall(f"t{self.turn}", "read_file", {"path": name})
        else:
            content = _text(self.rng, self.setup.language, self.rng.randint(50, 800))
            path = f"out{self.turn}.txt"
            call = ToolCall(f"t{self.turn}", "write_file", {"path": path, "content": content})
        return ModelResponse(text="", tool_calls=(call,), usage=usage)


async def run_trial(setup: TrialSetup, root: Path) -> TrialResult:
    rng = random.Random(setup.seed)
    workspace = root / "ws"
    workspace.mkdir(parents=True)
    files = []
    for index in range(6):
        name = f"doc{index}.txt"
        (workspace / name).write_text(_text(rng, setup.language, rng.randint(200, 6_000)))
        files.append(name)
    model = TrialModel(setup, files)
    window = 12_000 if setup.compaction else 1_000_000
    provider = ScriptedProvider([model] * 150, capabilities=Capabilities(context_window=window))
    tools = [
        t for t in default_tools(journal_commands=False) if t.name in ("read_file", "write_file")
    ]
    config = AgentConfig(
        session_dir=root / "sessions",
        max_total_tokens=setup.cap,
        hard_token_limit=setup.hard,
        max_output_tokens=setup.max_output_tokens,
        max_iterations=60,
        max_unproductive_iterations=60,
        compaction=CompactionSettings() if setup.compaction else None,
        sandbox="local",
        verify=False,
    )
    peak = 0
    closing = 0
    agent: Agent

    def watch(event: ev.Event) -> None:
        nonlocal peak, closing
        if isinstance(event, ev.ModelResponseReceived | ev.SummaryCallMade):
            economics = agent.economics
            counted = economics.total_tokens if setup.hard else economics.incremental_tokens
            peak = max(peak, counted)
        if isinstance(event, ev.ModelRequestSent) and event.tool_count == 0:
            closing += 1

    agent = Agent(provider, workspace=workspace, tools=tools, config=config, on_event=watch)
    task = _text(rng, setup.language, 300)
    result = await agent.run(task)
    return TrialResult(setup, len(provider.requests), peak, result.finish_reason.value, closing)


def run_trials(count: int, first_seed: int = 0) -> list[TrialResult]:
    """`count` trials with seeds `first_seed`, `first_seed + 1`, ..., each in its own folder."""
    results = []
    for seed in range(first_seed, first_seed + count):
        with tempfile.TemporaryDirectory(prefix="jm-cap-") as folder:
            results.append(asyncio.run(run_trial(setup_for(seed), Path(folder))))
    return results


@dataclass
class Summary:
    trials: int
    over: int
    """Trials whose counted tokens passed their cap."""
    worst_tokens: int
    worst_share: float
    """The largest overshoot as a share of its cap."""
    calls: int
    closing_calls: int
    by_language: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Language: (trials, trials over their cap)."""
    endings: Counter[str] = field(default_factory=Counter)


def summarise(results: list[TrialResult]) -> Summary:
    over = [r for r in results if r.overshoot > 0]
    by_language: dict[str, tuple[int, int]] = {}
    for language in LANGUAGES:
        mine = [r for r in results if r.setup.language == language]
        by_language[language] = (len(mine), sum(1 for r in mine if r.overshoot > 0))
    worst = max(results, key=lambda r: r.overshoot / r.setup.cap)
    return Summary(
        trials=len(results),
        over=len(over),
        worst_tokens=max((r.overshoot for r in results), default=0),
        worst_share=worst.overshoot / worst.setup.cap,
        calls=sum(r.calls for r in results),
        closing_calls=sum(r.closing_calls for r in results),
        by_language=by_language,
        endings=Counter(r.finish_reason for r in results),
    )
