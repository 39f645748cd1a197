"""Compaction: shrink the conversation when it nears the model's context window, cheapest first.

Stages, each applied only while the history is still above its target size:

1. **cap** oversized tool outputs: keep the head and the tail of a long result, with a line
   saying how much was cut (the model can re-run the tool for the rest);
2. **mask** old observations: tool results older than the most recent few are replaced by a
   one-line stub that names the tool (the call with its arguments stays in the assistant
   message before it), so the model knows how to fetch it again; a mode's context pack
   (`CONTEXT_PACK_PREFIX`) counts as an observation once a newer pack follows it;
3. **summarise** the oldest turns with the model: they become one user message holding a
   summary, and the recent turns stay verbatim.

Pinned messages survive every stage unchanged: the task (the first user message), every
message marked as pinned by the caller, and the most recent failed tool result (the error the
model is working on). A summary never splits an assistant's tool calls from their results.

Each stage rewrites old messages in one go, then leaves them alone until the next compaction,
so the requests between two compactions share their prefix (prompt caching keeps working).

Besides the size trigger, stale observations have a budget of their own: when the tool results
older than the most recent few hold more than `stale_observation_tokens`, they are masked even
though the window is far from full. Masking in batches like this keeps every request's prefix
identical to the previous one except right after a batch, while the total tokens sent over a
long run stop growing with the square of its length.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from operator import attrgetter

from pydantic import BaseModel, ConfigDict, Field

from journeyman.core.messages import Message, Role, ToolResult
from journeyman.core.text import clip, head_and_tail
from journeyman.providers.pricing import tokens_for_chars

MASKED_PREFIX = "[earlier output removed to save context"
CONTEXT_PACK_PREFIX = "[journeyman context pack]"
"""How a mode's context pack message starts: once a newer pack follows, an older one is stale
(the newer one restates the task, the plan and the state of the work) and is masked with the
old tool results."""
SUMMARY_PREFIX = "[summary of earlier work]"

Summariser = Callable[[str], Awaitable[str]]
"""Turns a transcript of old turns into a short summary (a model call in the kernel)."""


class Stage(StrEnum):
    CAP = "cap_outputs"
    MASK = "mask_observations"
    SUMMARISE = "summarise"


class CompactionSettings(BaseModel):
    """When and how hard the conversation is compacted."""

    model_config = ConfigDict(extra="forbid")

    trigger_fraction: float = Field(default=0.8, gt=0, le=1)
    """Compact when the projected prompt passes this fraction of the context window."""
    target_fraction: float = Field(default=0.5, gt=0, le=1)
    """Each stage tries to bring the prompt under this fraction of the window."""
    max_output_chars: int = Field(default=6_000, ge=200)
    """Tool results longer than this are cut to their head and tail by the first stage."""
    keep_recent_observations: int = Field(default=3, ge=0)
    """The newest tool results the masking stage leaves verbatim."""
    keep_recent_messages: int = Field(default=10, ge=2)
    """Messages at the end of the history the summary stage never folds in."""
    stale_observation_tokens: int | None = Field(default=8_000, ge=0)
    """Mask old tool results once they hold more than this many tokens; None: only by size."""


@dataclass
class CompactionResult:
    messages: list[Message]
    tokens_before: int
    tokens_after: int
    stages: list[Stage] = field(default_factory=list)
    """The stages that changed something, in order."""

    @property
    def changed(self) -> bool:
        return bool(self.stages)


def estimate_tokens(messages: Sequence[Message], fixed: int = 0) -> int:
    """Approximate prompt size of `messages` plus `fixed` tokens (system prompt and tools)."""
    chars: int = sum(map(_approx_chars, messages))  # a C loop over cached per-message sizes
    return fixed + tokens_for_chars(chars)


_approx_chars = attrgetter("approx_chars")


class HistoryMeter:
    """Sizes of a history that grows by appending, updated with only the messages added since
    the last look, so that sizing it every turn does not cost more as the run gets longer.

    Another list, or a shorter one, is measured from scratch; after rewriting the same list in
    place (as compaction does), call `reset()`.
    """

    def __init__(self) -> None:
        self._history: list[Message] | None = None
        self._counted = 0
        self._chars = 0
        self._unmasked_result_chars = 0
        """Unmasked tool results and context packs."""
        self._newest_pack_chars = 0

    def reset(self) -> None:
        self._history = None

    def tokens(self, history: list[Message], fixed: int = 0) -> int:
        """`estimate_tokens(history, fixed)`, from the running total."""
        self._update(history)
        return fixed + tokens_for_chars(self._chars)

    def stale_result_chars(self, history: list[Message], keep_recent: int) -> int:
        """Characters of the unmasked tool results older than the `keep_recent` newest, and of
        the context packs older than the newest."""
        self._update(history)
        chars = self._unmasked_result_chars - self._newest_pack_chars
        seen = 0
        for message in reversed(history):
            if seen >= keep_recent:
                break
            if message.tool_result is not None:
                seen += 1
                if not message.content.startswith(MASKED_PREFIX):
                    chars -= len(message.content)
        return chars

    def _update(self, history: list[Message]) -> None:
        if history is not self._history or len(history) < self._counted:
            self._history = history
            self._counted = self._chars = self._unmasked_result_chars = 0
            self._newest_pack_chars = 0
        for message in history[self._counted :]:
            self._chars += message.approx_chars
            if message.tool_result is not None and not message.content.startswith(MASKED_PREFIX):
                self._unmasked_result_chars += len(message.content)
            elif is_context_pack(message):
                self._unmasked_result_chars += len(message.content)
                self._newest_pack_chars = len(message.content)
        self._counted = len(history)


class Compactor:
    """Runs the stages on a history; pure apart from the summariser call."""

    def __init__(self, settings: CompactionSettings | None = None) -> None:
        self.settings = settings or CompactionSettings()

    def should_compact(self, projected_tokens: int, context_window: int) -> bool:
        return projected_tokens > self.settings.trigger_fraction * context_window

    def stale_observations_due(
        self, messages: list[Message], meter: HistoryMeter | None = None
    ) -> bool:
        """Whether the old, unmasked tool results have outgrown their budget (`meter`, if given,
        is the caller's running measure of this same history)."""
        budget = self.settings.stale_observation_tokens
        if budget is None:
            return False
        stale = (meter or HistoryMeter()).stale_result_chars(
            messages, self.settings.keep_recent_observations
        )
        return tokens_for_chars(stale) > budget

    async def mask_stale(self, messages: Sequence[Message]) -> CompactionResult:
        """Only the masking stage, whatever the size (the stale-observation trigger)."""
        history = list(messages)
        before = estimate_tokens(history)
        changed = self._mask(history, _pinned_positions(history, ()))
        return CompactionResult(
            history, before, estimate_tokens(history), [Stage.MASK] if changed else []
        )

    async def compact(
        self,
        messages: Sequence[Message],
        *,
        context_window: int,
        fixed_tokens: int = 0,
        summarise: Summariser | None = None,
        pinned: Sequence[int] = (),
        force: bool = False,
    ) -> CompactionResult:
        """Apply the stages in order until the history fits the target (all of them if `force`:
        after the provider said the prompt is too long, estimates are not to be trusted)."""
        target = int(self.settings.target_fraction * context_window)
        history = list(messages)
        before = estimate_tokens(history, fixed_tokens)
        result = CompactionResult(history, before, before)
        keep = _pinned_positions(history, pinned)

        def fits() -> bool:
            return not force and estimate_tokens(result.messages, fixed_tokens) <= target

        for stage in Stage:
            if fits():
                break
            if stage is Stage.CAP:
                changed = self._cap(result.messages, keep)
            elif stage is Stage.MASK:
                changed = self._mask(result.messages, keep)
            else:
                if summarise is None:
                    continue
                changed, result.messages, keep = await self._summarise(
                    result.messages, keep, summarise
                )
            if changed:
                result.stages.append(stage)
        result.tokens_after = estimate_tokens(result.messages, fixed_tokens)
        return result

    # --- stages ---------------------------------------------------------------------------

    def _cap(self, history: list[Message], keep: set[int]) -> bool:
        limit = self.settings.max_output_chars
        changed = False
        for i, message in enumerate(history):
            result = message.tool_result
            if i in keep or result is None or len(result.content) <= limit:
                continue
            history[i] = _with_content(message, result, cap_text(result.content, limit))
            changed = True
        return changed

    def _mask(self, history: list[Message], keep: set[int]) -> bool:
        changed = False
        for i in _stale_observations(history, self.settings.keep_recent_observations):
            message = history[i]
            result = message.tool_result
            if i in keep:
                continue
            if result is None:  # a context pack a newer one replaces
                note = (
                    f"{MASKED_PREFIX}: an older context pack of {len(message.content):,} "
                    "characters; a newer one follows]"
                )
                if len(note) < len(message.content):  # masking never makes a message longer
                    history[i] = Message.user(note)
                    changed = True
                continue
            # the call, with its arguments, stays in the assistant message just before: the
            # stub need not repeat them (it is sent with every later request)
            stub = (
                f"{MASKED_PREFIX}: {len(result.content):,} characters; call {result.name} "
                "again if you still need them]"
            )
            if len(stub) < len(result.content):
                history[i] = _with_content(message, result, stub)
                changed = True
        return changed

    async def _summarise(
        self, history: list[Message], keep: set[int], summarise: Summariser
    ) -> tuple[bool, list[Message], set[int]]:
        first = 1 if history and history[0].role is Role.USER else 0  # the task stays first
        end = _safe_cut(history, len(history) - self.settings.keep_recent_messages)
        folded = [i for i in range(first, end) if i not in keep]
        if len(folded) < 2:
            return False, history, keep
        transcript = render_transcript([history[i] for i in folded])
        summary = (await summarise(transcript)).strip()
        if not summary:
            return False, history, keep
        summary_message = Message.user(f"{SUMMARY_PREFIX}\n{summary}")
        # a pinned result whose call was folded away would be an orphan: keep it as plain text
        kept_before = [_standalone(history[i]) for i in range(first, end) if i in keep]
        new_history = [*history[:first], summary_message, *kept_before, *history[end:]]
        offset = end - (first + 1 + len(kept_before))
        new_keep = {i for i in keep if i < first}
        new_keep |= {first + 1 + n for n in range(len(kept_before))}
        new_keep |= {i - offset for i in keep if i >= end}
        return True, new_history, new_keep


def cap_text(text: str, limit: int) -> str:
    """The head and tail of `text` within about `limit` characters, with a note of the cut."""
    return head_and_tail(
        text,
        limit,
        head_share=2 / 3,
        note="characters cut to save context; re-run the tool with a narrower range to see them",
    )


def render_transcript(messages: Sequence[Message], per_message: int = 2_000) -> str:
    """Plain-text form of old turns for the summariser."""
    lines = []
    for message in messages:
        if message.tool_result is not None:
            lines.append(
                f"RESULT of {message.tool_result.name}: {clip(message.content, per_message)}"
            )
            continue
        text = clip(message.content, per_message)
        calls = ", ".join(
            f"{c.name}({clip(json.dumps(c.arguments, default=str), 200)})"
            for c in message.tool_calls
        )
        lines.append(
            f"{message.role.value.upper()}: {text}" + (f" CALLS: {calls}" if calls else "")
        )
    return "\n".join(lines)


SUMMARY_REQUEST = """\
Below is the older part of your work on the task. Write a compact summary that lets you carry \
on without it: what you found out (files, functions, causes), what you changed and where, which \
commands you ran and what they showed, and what is still open. Keep paths, names and error \
messages exact. Do not call tools.

{transcript}"""


def _stale_observations(history: Sequence[Message], keep_recent: int) -> list[int]:
    """Positions of unmasked tool results older than the `keep_recent` newest ones, and of the
    context packs older than the newest, in order."""
    observations = [i for i, m in enumerate(history) if m.tool_result is not None]
    older = observations[: max(0, len(observations) - keep_recent)]
    packs = [i for i, m in enumerate(history) if is_context_pack(m)]
    stale = [i for i in older if not history[i].content.startswith(MASKED_PREFIX)]
    return sorted(stale + packs[:-1])


def is_context_pack(message: Message) -> bool:
    """Whether `message` is a mode's context pack (see `CONTEXT_PACK_PREFIX`)."""
    return message.role is Role.USER and message.content.startswith(CONTEXT_PACK_PREFIX)


def _pinned_positions(history: Sequence[Message], pinned: Sequence[int]) -> set[int]:
    keep = {i for i in pinned if 0 <= i < len(history)}
    if history and history[0].role is Role.USER:
        keep.add(0)
    for i in range(len(history) - 1, -1, -1):
        result = history[i].tool_result
        if result is not None and result.is_error:
            keep.add(i)  # the error the model is working on
            break
    return keep


def _safe_cut(history: Sequence[Message], end: int) -> int:
    """Move `end` back so the folded part never ends between tool calls and their results."""
    end = max(0, min(end, len(history)))
    while 0 < end < len(history) and history[end].role is Role.TOOL:
        end -= 1
    return end


def _standalone(message: Message) -> Message:
    result = message.tool_result
    if result is None:
        return message if not message.tool_calls else Message.user(message.content)
    outcome = "failed" if result.is_error else "returned"
    return Message.user(f"[kept from earlier] {result.name} {outcome}:\n{result.content}")


def _with_content(message: Message, result: ToolResult, text: str) -> Message:
    return replace(message, content=text, tool_result=replace(result, content=text))
