"""Model calls of a run: build the request, call the provider, and account each call (usage,
cost, per-phase tokens, the usage log) and calibrate the token estimate against the report."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace

from journeyman.context import compaction
from journeyman.core import events as ev
from journeyman.core.errors import AgentError, ErrorCategory, ProviderError
from journeyman.core.messages import Message, ToolSpec, Usage
from journeyman.core.redact import StreamRedactor
from journeyman.economics.budget import BudgetMode, ExecutionEconomics
from journeyman.economics.phases import WorkPhase
from journeyman.economics.usage_log import UsageRow
from journeyman.loop.call_budget import PromptBound, Remaining, fit_request
from journeyman.loop.config import AgentConfig
from journeyman.loop.recorder import StepRecorder
from journeyman.loop.state import LoopState
from journeyman.providers.base import ModelRequest, ModelResponse, Provider
from journeyman.providers.pricing import add_costs, estimate_fixed_tokens, model_pricer
from journeyman.providers.resilient import complete_within

log = logging.getLogger(__name__)

SUMMARY_MAX_TOKENS = 2_048
FIXED_TOKENS_KEPT = 4
"""Prompt/tool-set pairs whose estimated size `ModelCalls.fixed_tokens` remembers (a run
sends one or two: with its tools, and without them for a closing summary)."""
TOKEN_RATIO_BOUNDS = (0.25, 4.0)
"""The calibration never trusts the estimate by more than 4x either way."""

Compact = Callable[[LoopState], Awaitable[bool]]


class ModelCalls:
    def __init__(
        self,
        provider: Provider,
        config: AgentConfig,
        economics: ExecutionEconomics,
        emit: Callable[[ev.Event], None],
        phase: Callable[[], WorkPhase],
        tool_specs: tuple[ToolSpec, ...],
        system_prompt: str,
    ) -> None:
        self.provider = provider
        self.config = config
        self.economics = economics
        self.emit = emit
        self.phase = phase
        """The phase the economics books a call's tokens to."""
        self.tool_specs = tool_specs
        self.system_prompt = system_prompt
        self.history_meter = compaction.HistoryMeter()
        self.recorder: StepRecorder | None = None
        self.compact_on_overflow: Compact | None = None
        """Shrinks the history when the provider refuses a prompt as too long."""
        self.prompt_bound = PromptBound()
        self._fixed_tokens: list[tuple[tuple[str, tuple[ToolSpec, ...]], int]] = []
        self._told_usage_missing = False

    def cost(self, usage: Usage) -> float | None:
        """US dollars of a call to the provider answering now (a fallback, once the first gave
        up): the configured price, else the price database (None when it has no price)."""
        price = model_pricer(self.config.price_per_mtok, self.provider.name, self.provider.model)
        return price(usage)

    @property
    def priced(self) -> bool:
        """Whether calls of this model can be costed."""
        return self.cost(Usage(1, 1)) is not None

    def system_shared_chars(self) -> int:
        """The configured shared prefix of the system prompt, when the prompt sent really starts
        with it (a resumed run sends its stored prompt); else 0."""
        shared, override = self.config.system_prompt_shared_chars, self.config.system_prompt
        if shared <= 0 or override is None or shared > len(override):
            return 0
        return shared if self.system_prompt.startswith(override[:shared]) else 0

    def fixed_tokens(self, tools: Sequence[ToolSpec] | None = None) -> int:
        """Estimated size of the system prompt and tool specs (remembered: asked several
        times a step, it would otherwise format every tool spec each time)."""
        key = (self.system_prompt, tuple(self.tool_specs if tools is None else tools))
        for known, tokens in self._fixed_tokens:
            if known == key:  # the same objects compare by identity first: cheap
                return tokens
        tokens = estimate_fixed_tokens(*key)
        self._fixed_tokens = [*self._fixed_tokens[-(FIXED_TOKENS_KEPT - 1) :], (key, tokens)]
        return tokens

    async def call(
        self, state: LoopState, *, tools_enabled: bool = True, extra: Sequence[Message] = ()
    ) -> ModelResponse:
        """One model call with the current history; emits events and accounts usage/cost."""

        def build() -> ModelRequest:
            request = ModelRequest(
                system=self.system_prompt,
                messages=(*state.messages, *extra),
                tools=self.tool_specs if tools_enabled else (),
                max_output_tokens=self.config.max_output_tokens,
                temperature=self.config.temperature,
                system_shared_chars=self.system_shared_chars(),
            )
            return self._fit(request)

        request = build()
        iteration = state.iterations + 1
        self.emit(
            ev.ModelRequestSent(
                iteration, len(request.messages), len(request.tools), request.max_output_tokens
            )
        )
        # redacted as one text, not fragment by fragment: a key split across two fragments
        # would otherwise pass in halves
        stream = StreamRedactor() if self.config.stream else None
        on_text = self._text_emitter(stream)
        started = time.monotonic()
        try:
            response = await complete_within(
                self.provider, request, on_text, deadline=self._deadline()
            )
        except ProviderError as error:
            # the provider says the prompt is too long: compact hard, then try once more
            if not error.details.get("context_overflow") or self.compact_on_overflow is None:
                raise
            if not await self.compact_on_overflow(state):
                raise
            request = build()
            response = await complete_within(
                self.provider, request, on_text, deadline=self._deadline()
            )
        finally:
            if stream is not None and (rest := stream.flush()):
                self.emit(ev.TextDelta(rest))
        latency = time.monotonic() - started
        response, clamped = _clamp_usage(response)
        response = self._charged(request, response)
        self._calibrate(state, extra, request, response)
        call_cost = self.cost(response.usage)
        self._account(state, response.usage, call_cost, latency, tools_enabled)
        self.emit(
            ev.ModelResponseReceived(
                iteration=iteration,
                text=response.text,
                tool_calls=response.tool_calls,
                usage=response.usage,
                cost_usd=call_cost,
                stop_reason=response.stop_reason,
                latency_s=latency,
                model=response.model or self.provider.model,
                provider=self.provider.name,  # a fallback's, when the first provider gave up
            )
        )
        self._note_clamped(clamped)
        return response

    def _text_emitter(self, stream: StreamRedactor | None) -> Callable[[str], None] | None:
        """What hears streamed text: `text_delta` events of what `stream` lets through."""
        if stream is None:
            return None

        def on_text(fragment: str) -> None:
            shown = stream.feed(fragment)
            if shown:
                self.emit(ev.TextDelta(shown))

        return on_text

    def _note_clamped(self, clamped: list[str]) -> None:
        """Say that a reply's usage report had negative counts, counted as 0."""
        if not clamped:
            return
        message = (
            f"{self.provider.name}:{self.provider.model} reported negative token counts "
            f"({', '.join(clamped)}); they were counted as 0"
        )
        log.warning("%s", message)
        self.emit(ev.ErrorOccurred("provider", message, True, {"negative_usage": clamped}))

    def _deadline(self) -> float | None:
        """When the run's `--max-duration` runs out (a monotonic time), so that one model call
        cannot outlast it; None without a duration limit."""
        limit = self.economics.limits.max_duration_s
        if limit is None:
            return None
        return time.monotonic() + max(0.0, limit - self.economics.elapsed_s)

    async def summarise(
        self, state: LoopState, transcript: str, *, after_history: bool = True
    ) -> str:
        """The compaction's model call; a failure only skips the summary stage ("").
        `after_history` False asks it alone (the provider refused the history as too long)."""
        request = self._summary_request(state, transcript, after_history)
        started = time.monotonic()
        try:
            request = self._fit(request)
            response = await complete_within(
                self.provider, request, None, deadline=self._deadline()
            )
        except AgentError as error:
            log.warning("compaction summary failed: %s", error.message)
            return ""
        response, clamped = _clamp_usage(response)
        response = self._charged(request, response)
        call_cost = self.cost(response.usage)
        latency = time.monotonic() - started
        self._account(state, response.usage, call_cost, latency, tools=True)
        self._note_clamped(clamped)
        self.emit(
            ev.SummaryCallMade(
                iteration=state.iterations + 1,
                usage=response.usage,
                cost_usd=call_cost,
                latency_s=latency,
                max_output_tokens=request.max_output_tokens,
                model=response.model or self.provider.model,
                provider=self.provider.name,
                stop_reason=response.stop_reason,
            )
        )
        return response.text

    def _summary_request(
        self, state: LoopState, transcript: str, after_history: bool
    ) -> ModelRequest:
        """The summary call, asked after the run's history with the same system prompt and
        tools: it then starts with the previous request (a prompt cache reads all of it), and
        the next request starts with it. Asked on its own when the history would not leave
        room (the compaction of a nearly full window) or was refused as too long."""
        ask = Message.user(compaction.SUMMARY_REQUEST.format(transcript=transcript))
        settings = self.config.compaction or compaction.CompactionSettings()
        room = settings.trigger_fraction * self.provider.capabilities.context_window
        projected = self._estimate(state, (ask,), self.tool_specs) * state.token_ratio
        after_history = after_history and projected <= room
        return ModelRequest(
            system=self.system_prompt,
            messages=(*state.messages, ask) if after_history else (ask,),
            tools=self.tool_specs if after_history else (),
            max_output_tokens=min(SUMMARY_MAX_TOKENS, self.config.max_output_tokens),
            temperature=self.config.temperature,
            system_shared_chars=self.system_shared_chars(),
        )

    def _estimate(
        self, state: LoopState, extra: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> int:
        """Estimated prompt size of the history plus `extra`, with the system prompt and
        `tools`."""
        return self.history_meter.tokens(
            state.messages, compaction.estimate_tokens(extra, self.fixed_tokens(tools))
        )

    def _fit(self, request: ModelRequest) -> ModelRequest:
        """`request` with a reply short enough that the call cannot overrun what is left of
        the run's USD limit or of its token limit; raises when no useful reply fits.

        The token limit is a cap in the strict budget mode (counted from the baseline: the
        first call's prompt is the baseline, so only its reply counts) and, with
        `hard_token_limit`, on every billed token; the advisory and soft modes never stop on
        tokens, so their calls are not shortened for them."""
        limits, economics = self.economics.limits, self.economics
        usd_left = None if limits.max_usd is None else limits.max_usd - (economics.cost_usd or 0)
        bound = self.prompt_bound.of(request)
        tokens_left = None
        if limits.max_total_tokens is not None:
            if self.config.hard_token_limit:
                tokens_left = limits.max_total_tokens - economics.total_tokens
            elif economics.mode is BudgetMode.STRICT:
                tokens_left = limits.max_total_tokens - economics.incremental_tokens
                if not economics.baseline_refined:
                    tokens_left += bound
        if usd_left is None and tokens_left is None:
            return request
        left = Remaining(tokens=tokens_left, usd=usd_left)
        return fit_request(request, bound, left, self.cost)

    def _charged(self, request: ModelRequest, response: ModelResponse) -> ModelResponse:
        """`response` with the usage it is charged: its own, or, when the provider reported
        none, the worst case of `request` (its prompt's bound and its longest reply), said
        once a run. A reply counted as free would let a run pass every cap unseen."""
        if not response.usage_missing:
            return response
        worst = Usage(self.prompt_bound.of(request), request.max_output_tokens)
        if not self._told_usage_missing:
            self._told_usage_missing = True
            self.emit(
                ev.ErrorOccurred(
                    ErrorCategory.BUDGET.value,
                    f"the provider ({self.provider.name}) reported no usage; charging the "
                    f"worst case: a call's prompt bound and longest reply ({worst.input_tokens:,}"
                    f" and {worst.output_tokens:,} tokens now)",
                    False,
                    {"usage_missing": True},
                )
            )
        return dataclasses.replace(response, usage=worst)

    def _calibrate(
        self,
        state: LoopState,
        extra: Sequence[Message],
        request: ModelRequest,
        response: ModelResponse,
    ) -> None:
        """`request` was the history plus `extra`; compare its estimated size with the report
        (a reply without usage teaches nothing)."""
        if response.usage_missing:
            return
        reported = response.usage.total_input_tokens
        self.prompt_bound.learn(request, reported)
        estimated = self._estimate(state, extra, request.tools)
        if reported > 0 and estimated > 0:
            low, high = TOKEN_RATIO_BOUNDS
            state.token_ratio = min(high, max(low, reported / estimated))

    def _account(
        self, state: LoopState, usage: Usage, call_cost: float | None, latency: float, tools: bool
    ) -> None:
        state.cost_usd = add_costs(state.cost_usd, call_cost, first=state.model_calls == 0)
        state.model_calls += 1
        state.usage = state.usage + usage
        record = self.economics.record_call(
            usage,
            call_cost,
            model=self.provider.model,
            latency_s=latency,
            phase=self.phase() if tools else WorkPhase.WRAPUP,
        )
        if self.recorder is not None:
            self.recorder.usage(
                UsageRow(
                    session_id=state.session_id,
                    call_index=record.index,
                    provider=self.provider.name,
                    model=self.provider.model,
                    usage=usage,
                    cost_usd=call_cost,
                    latency_s=latency,
                )
            )


def _clamp_usage(response: ModelResponse) -> tuple[ModelResponse, list[str]]:
    """`response` with no negative token count in its usage, and the counts that were."""
    usage, clamped = response.usage.clamped()
    if not clamped:
        return response, []
    return replace(response, usage=usage), clamped
