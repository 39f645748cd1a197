"""The one token estimate (providers/pricing.py) that every prompt size is computed with."""

from __future__ import annotations

from journeyman.context import compaction
from journeyman.context.index import indexer
from journeyman.core.messages import Message, ToolSpec
from journeyman.providers.pricing import (
    estimate_fixed_tokens,
    estimate_tokens,
    tokens_for_chars,
)


def test_four_characters_a_token_rounded_up() -> None:
    assert [tokens_for_chars(n) for n in (0, 1, 4, 5, 8)] == [0, 1, 1, 2, 2]
    assert estimate_tokens("") == 0
    assert estimate_tokens("abc") == 1  # some text is never free
    assert estimate_tokens("x" * 400) == 100


def test_fixed_part_counts_system_prompt_and_tools() -> None:
    tool = ToolSpec("read_file", "Read a file.", {"type": "object"})
    assert estimate_fixed_tokens("s" * 40, ()) == 10
    assert estimate_fixed_tokens("s" * 40, (tool,)) == tokens_for_chars(40 + len(repr(tool)))


def test_the_loop_sizes_its_fixed_prompt_with_the_same_estimate() -> None:
    from journeyman.economics.budget import ExecutionEconomics
    from journeyman.economics.phases import WorkPhase
    from journeyman.loop.config import AgentConfig
    from journeyman.loop.model_calls import ModelCalls
    from journeyman.providers.scripted import ScriptedProvider

    tools = (ToolSpec("read_file", "Read a file.", {"type": "object"}),)
    system = "s" * 41  # rounded up, as everywhere else
    calls = ModelCalls(
        ScriptedProvider([]),
        AgentConfig(),
        ExecutionEconomics(),
        lambda _: None,
        lambda: WorkPhase.ACTING,
        tools,
        system,
    )
    assert calls.fixed_tokens() == estimate_fixed_tokens(system, tools)
    assert calls.fixed_tokens(()) == estimate_fixed_tokens(system, ()) == 11


def test_context_sizes_use_the_same_estimate() -> None:
    assert indexer.estimate_tokens is estimate_tokens
    history = [Message.user("hello there"), Message.assistant("x" * 101)]
    chars = sum(message.approx_chars for message in history)
    assert compaction.estimate_tokens(history, 7) == 7 + tokens_for_chars(chars)
    assert compaction.HistoryMeter().tokens(history, 7) == 7 + tokens_for_chars(chars)
