"""The compaction stages on their own: capping, masking, summarising, pinning, tool pairing."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from journeyman.context.compaction import (
    CONTEXT_PACK_PREFIX,
    MASKED_PREFIX,
    SUMMARY_PREFIX,
    CompactionSettings,
    Compactor,
    HistoryMeter,
    Stage,
    cap_text,
    estimate_tokens,
    render_transcript,
)
from journeyman.core.messages import Message, Role, ToolCall, ToolResult


def exchange(i: int, output: str, *, error: bool = False) -> list[Message]:
    call = ToolCall(f"c{i}", "read_file", {"path": f"f{i}.py"})
    return [
        Message.assistant(f"step {i}", (call,)),
        Message.tool(ToolResult(f"c{i}", "read_file", output, is_error=error)),
    ]


def history(n: int, size: int = 400) -> list[Message]:
    messages = [Message.user("the task: fix the parser")]
    for i in range(n):
        messages += exchange(i, f"output {i} " + "x" * size)
    return messages


def tool_pairs_intact(messages: list[Message]) -> bool:
    """Every tool result follows the assistant message that asked for it."""
    open_calls: set[str] = set()
    for message in messages:
        if message.role is Role.ASSISTANT:
            open_calls = {c.id for c in message.tool_calls}
        elif message.tool_result is not None and message.tool_result.call_id not in open_calls:
            return False
    return True


async def never(_text: str) -> str:
    raise AssertionError("the summariser should not be needed")


async def test_nothing_happens_below_the_target() -> None:
    messages = history(3)
    result = await Compactor().compact(messages, context_window=100_000, summarise=never)
    assert not result.changed and result.messages == messages


async def test_cap_stage_keeps_head_and_tail_and_stops_when_enough() -> None:
    messages = [Message.user("task"), *exchange(0, "HEAD" + "y" * 50_000 + "TAIL")]
    compactor = Compactor(CompactionSettings(max_output_chars=1_000))
    result = await compactor.compact(messages, context_window=4_000, summarise=never)
    assert result.stages == [Stage.CAP]
    capped = result.messages[2].content
    assert capped.startswith("HEAD") and capped.endswith("TAIL") and "characters cut" in capped
    assert len(capped) < 1_200 and result.tokens_after < result.tokens_before


async def test_mask_stage_stubs_old_observations_and_keeps_recent_ones() -> None:
    messages = history(12)
    compactor = Compactor(CompactionSettings(keep_recent_observations=3))
    result = await compactor.compact(messages, context_window=2_500, summarise=never)
    assert result.stages == [Stage.MASK]
    results = [m for m in result.messages if m.tool_result is not None]
    assert all(m.content.startswith(MASKED_PREFIX) for m in results[:-3])
    # the stub names the tool and the size; the call with its arguments stays right before it
    assert "read_file" in results[0].content and "characters" in results[0].content
    assert len(results[0].content) < 120
    call = result.messages[result.messages.index(results[0]) - 1].tool_calls[0]
    assert call.id == results[0].tool_result.call_id and call.arguments == {"path": "f0.py"}
    assert [m.content for m in results[-3:]] == [m.content for m in messages[-5::2]]
    assert result.messages[0].content == "the task: fix the parser"
    assert tool_pairs_intact(result.messages)


async def test_latest_error_is_pinned_through_masking() -> None:
    messages = history(4) + exchange(4, "Traceback: KeyError 'x'", error=True) + history(6)[1:]
    compactor = Compactor(CompactionSettings(keep_recent_observations=1))
    result = await compactor.compact(messages, context_window=1_000, summarise=None)
    contents = [m.content for m in result.messages]
    assert "Traceback: KeyError 'x'" in contents


async def test_summary_stage_folds_old_turns_and_keeps_the_task_first() -> None:
    seen: list[str] = []

    async def summarise(text: str) -> str:
        seen.append(text)
        return "read f0..f7; the bug is in f3"

    messages = history(12)
    compactor = Compactor(CompactionSettings(keep_recent_observations=0, keep_recent_messages=6))
    result = await compactor.compact(messages, context_window=600, summarise=summarise)
    assert result.stages == [Stage.CAP, Stage.MASK, Stage.SUMMARISE] or result.stages == [
        Stage.MASK,
        Stage.SUMMARISE,
    ]
    assert result.messages[0].content == "the task: fix the parser"
    assert result.messages[1].content.startswith(SUMMARY_PREFIX)
    assert "the bug is in f3" in result.messages[1].content
    assert result.messages[2:] == result.messages[-6:] and len(result.messages) == 8
    assert tool_pairs_intact(result.messages)
    assert "ASSISTANT: step 0" in seen[0] and "RESULT of read_file" in seen[0]


async def test_a_pinned_result_inside_the_summary_becomes_plain_text() -> None:
    messages = history(3) + exchange(3, "Traceback: boom", error=True) + history(8)[1:]

    async def summarise(_text: str) -> str:
        return "earlier work"

    compactor = Compactor(CompactionSettings(keep_recent_observations=0, keep_recent_messages=4))
    result = await compactor.compact(messages, context_window=300, summarise=summarise)
    assert Stage.SUMMARISE in result.stages
    kept = [m for m in result.messages if "Traceback: boom" in m.content]
    assert len(kept) == 1 and kept[0].role is Role.USER and "read_file failed" in kept[0].content
    assert tool_pairs_intact(result.messages)


async def test_force_runs_every_stage_even_when_estimates_fit() -> None:
    async def summarise(_text: str) -> str:
        return "short"

    compactor = Compactor(CompactionSettings(keep_recent_observations=2, keep_recent_messages=4))
    result = await compactor.compact(
        history(10), context_window=1_000_000, summarise=summarise, force=True
    )
    assert Stage.MASK in result.stages and Stage.SUMMARISE in result.stages


async def test_an_empty_summary_leaves_the_history_alone() -> None:
    async def summarise(_text: str) -> str:
        return "   "

    messages = history(10)
    compactor = Compactor(CompactionSettings(keep_recent_observations=20, max_output_chars=10_000))
    result = await compactor.compact(messages, context_window=100, summarise=summarise)
    assert not result.changed and result.messages == messages


def test_trigger_fraction() -> None:
    compactor = Compactor(CompactionSettings(trigger_fraction=0.8))
    assert not compactor.should_compact(800, 1_000)
    assert compactor.should_compact(801, 1_000)


def test_cap_text_and_transcript_are_bounded() -> None:
    assert len(cap_text("z" * 100_000, 600)) < 800
    transcript = render_transcript(history(2, size=10_000), per_message=100)
    assert len(transcript) < 600


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(st.integers(min_value=0, max_value=3_000), min_size=1, max_size=25),
    error_at=st.integers(min_value=-1, max_value=24),
    window=st.integers(min_value=200, max_value=20_000),
)
async def test_compaction_never_breaks_pairs_or_loses_pinned(
    sizes: list[int], error_at: int, window: int
) -> None:
    messages = [Message.user("the task")]
    for i, size in enumerate(sizes):
        messages += exchange(i, f"r{i}:" + "w" * size, error=i == error_at)

    async def summarise(_text: str) -> str:
        return "summary"

    result = await Compactor().compact(messages, context_window=window, summarise=summarise)
    assert tool_pairs_intact(result.messages)
    assert result.messages[0].content == "the task"
    if 0 <= error_at < len(sizes):
        marker = f"r{error_at}:"
        assert any(m.content.startswith(marker) or marker in m.content for m in result.messages)
    assert result.tokens_after <= result.tokens_before
    assert result.tokens_after == estimate_tokens(result.messages)


async def test_stale_observations_are_masked_in_batches() -> None:
    compactor = Compactor(
        CompactionSettings(keep_recent_observations=2, stale_observation_tokens=1_000)
    )
    messages = history(3, size=1_000)  # one stale result of ~250 tokens: under budget
    assert not compactor.stale_observations_due(messages)
    messages = history(8, size=1_000)  # six stale results, ~1,500 tokens
    assert compactor.stale_observations_due(messages)
    result = await compactor.mask_stale(messages)
    assert result.stages == [Stage.MASK]
    assert not compactor.stale_observations_due(result.messages)
    results = [m for m in result.messages if m.tool_result is not None]
    assert sum(m.content.startswith(MASKED_PREFIX) for m in results) == 6
    # already masked results never count again, so the next batch waits for new ones
    grown = result.messages + exchange(8, "z" * 1_000) + exchange(9, "z" * 1_000)
    assert not compactor.stale_observations_due(grown)


async def test_an_older_context_pack_is_masked_with_the_stale_results_the_newest_kept() -> None:
    first = Message.user(f"{CONTEXT_PACK_PREFIX} first picture " + "a" * 3_000)
    newest = Message.user(f"{CONTEXT_PACK_PREFIX} newer picture " + "b" * 1_000)
    messages = [Message.user("the task"), first, *history(6)[1:], newest, *exchange(9, "z")]
    compactor = Compactor(CompactionSettings(keep_recent_observations=2))
    result = await compactor.mask_stale(messages)
    assert result.stages == [Stage.MASK]
    masked = result.messages[1]
    assert masked.role is Role.USER and masked.content.startswith(MASKED_PREFIX)
    assert "context pack" in masked.content and len(masked.content) < 120
    assert newest in result.messages and result.messages[0].content == "the task"
    assert tool_pairs_intact(result.messages)
    # the packs count towards the stale budget: all but the newest
    meter = HistoryMeter()
    assert meter.stale_result_chars(messages, 2) >= len(first.content)
    assert meter.stale_result_chars(messages, 2) < len(first.content) + 6 * 400 + 100


def test_the_stale_trigger_can_be_turned_off() -> None:
    compactor = Compactor(CompactionSettings(stale_observation_tokens=None))
    assert not compactor.stale_observations_due(history(50, size=5_000))


@settings(max_examples=60, deadline=None)
@given(
    steps=st.lists(
        st.tuples(st.sampled_from(["append", "pack", "mask", "replace"]), st.integers(0, 300)),
        max_size=30,
    ),
    keep_recent=st.integers(0, 4),
)
def test_the_running_meter_matches_a_full_measure(
    steps: list[tuple[str, int]], keep_recent: int
) -> None:
    """Appends are added up as they come; an in-place rewrite announced by reset() and a new
    list are measured again, so the meter always agrees with measuring from scratch."""
    meter = HistoryMeter()
    messages = history(1)
    for i, (action, size) in enumerate(steps):
        if action == "append":
            messages += exchange(i + 10, "y" * size)
        elif action == "pack":
            messages.append(Message.user(f"{CONTEXT_PACK_PREFIX} {'p' * size}"))
        elif action == "mask":
            masked = [
                Message.tool(ToolResult("c", "read_file", f"{MASKED_PREFIX}: gone]"))
                if m.tool_result is not None and j % 2
                else m
                for j, m in enumerate(messages)
            ]
            messages[:] = masked
            meter.reset()
        else:
            messages = list(messages[: max(1, len(messages) - size % 5)])
        assert meter.tokens(messages, 7) == estimate_tokens(messages, 7)
        results = [m for m in messages if m.tool_result is not None]
        older = results[: max(0, len(results) - keep_recent)]
        expected = sum(len(m.content) for m in older if not m.content.startswith(MASKED_PREFIX))
        packs = [m for m in messages if m.content.startswith(CONTEXT_PACK_PREFIX)]
        expected += sum(len(m.content) for m in packs[:-1])
        assert meter.stale_result_chars(messages, keep_recent) == expected
