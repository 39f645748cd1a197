"""`RunTracer`: turns the events of one agent's runs into OpenTelemetry spans.

One `invoke_agent journeyman` span per run, with a `chat {model}` span per model call and an
`execute_tool {tool}` span per tool call under it. Everything comes from the events the loop
emits (`core.events`), so the loop knows nothing of tracing. Span times are the events' own
timestamps.

No prompt, model text, tool argument or tool output is put on a span unless content capture is
on; then it goes through `core.redact` first. Error descriptions are redacted too.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

import journeyman.integrations.otel.conventions as gen
from journeyman.core import events as ev
from journeyman.core.messages import ToolCall, ToolResult, Usage
from journeyman.core.redact import Redactor
from journeyman.core.text import clip, one_line

CHECK_CALL_PREFIX = "verify-"
"""Call ids of the harness's check runs (`loop.verdict.CHECK_CALL_PREFIX`, repeated here so
that tracing does not load the loop)."""
MAX_CONTENT_CHARS = 4096
"""Captured content (opt-in) longer than this is cut."""
MAX_DESCRIPTION_CHARS = 200
"""Span status descriptions longer than this are cut."""

ParentLookup = Callable[[ev.RunStarted], Context | None]
"""Where a run's span goes: the context of its parent span, or None for a new trace (or the
caller's current span)."""


@dataclass(frozen=True)
class ModelSettings:
    """What the events do not say about the model calls of an agent, when it is known."""

    max_output_tokens: int | None = None
    temperature: float | None = None
    server_address: str | None = None
    server_port: int | None = None


@dataclass
class _Run:
    span: Span
    started: ev.RunStarted
    model_call: Span | None = None
    tool_calls: dict[str, list[tuple[Span, ToolCall]]] = field(default_factory=dict)
    last_error: ev.ErrorOccurred | None = None


class RunTracer:
    """An event handler (`Agent(on_event=...)`) that records one agent's runs as spans.

    One instance per agent: the events of a run carry no session id after `RunStarted`, so an
    instance follows one run at a time (an agent runs one task at a time).
    """

    def __init__(
        self,
        tracer: trace.Tracer,
        *,
        capture_content: bool = False,
        model_settings: ModelSettings | None = None,
        parent: ParentLookup | None = None,
        redactor: Redactor | None = None,
    ) -> None:
        self.tracer = tracer
        self.capture_content = capture_content
        """Put redacted tool arguments, tool results and model text on the spans."""
        self.model_settings = model_settings or ModelSettings()
        self.parent = parent
        self.redact = redactor or Redactor()
        self._run: _Run | None = None

    # --- what subagent tracing asks -----------------------------------------------------

    def running_call(
        self, tool: str, accepts: Callable[[ToolCall], bool]
    ) -> tuple[Span, ToolCall] | None:
        """The span and call of a running `tool` call that `accepts` takes (the oldest)."""
        if self._run is None:
            return None
        for spans in self._run.tool_calls.values():
            for span, call in spans:
                if call.name == tool and accepts(call):
                    return span, call
        return None

    # --- the handler --------------------------------------------------------------------

    def __call__(self, event: ev.Event) -> None:
        match event:
            case ev.RunStarted():
                self._start_run(event)
            case ev.ModelRequestSent():
                self._start_model_call(event)
            case ev.ModelResponseReceived():
                self._end_model_call(event)
            case ev.ToolCallStarted():
                self._start_tool_call(event)
            case ev.ToolResultReceived():
                self._end_tool_call(event)
            case ev.SummaryCallMade():
                self._summary_call(event)
            case ev.ErrorOccurred():
                self._error(event)
            case ev.RunFinished():
                self._finish_run(event)
            case ev.BudgetUpdated() if event.level != event.previous_level:
                self._note(
                    gen.BUDGET_EVENT,
                    event.timestamp,
                    {
                        "level": event.level,
                        "previous_level": event.previous_level,
                        "driver": event.driver or "",
                        "fraction": event.fraction,
                    },
                )
            case ev.ContextCompacted():
                self._note(
                    gen.COMPACTION_EVENT,
                    event.timestamp,
                    {
                        "reason": event.reason,
                        "stages": list(event.stages),
                        "tokens_before": event.tokens_before,
                        "tokens_after": event.tokens_after,
                    },
                )
            case ev.NudgeInjected():
                self._note(gen.NUDGE_EVENT, event.timestamp, {"kind": event.kind})
            case ev.ApprovalDecided():
                self._note(
                    gen.APPROVAL_EVENT,
                    event.timestamp,
                    {
                        gen.TOOL_NAME: event.tool_name,
                        gen.TOOL_CALL_ID: event.call_id,
                        "granted": event.granted,
                        "decided_by": event.decided_by,
                    },
                )
            case _:
                pass

    # --- runs ---------------------------------------------------------------------------

    def _start_run(self, event: ev.RunStarted) -> None:
        if self._run is not None:  # a run that never finished (its process was interrupted)
            self._close_open_spans(self._run, "the run was left without finishing", event)
            self._run.span.end(_ns(event.timestamp))
        attributes: dict[str, Any] = {
            gen.OPERATION_NAME: gen.INVOKE_AGENT,
            gen.PROVIDER_NAME: gen.provider_name(event.provider),
            gen.AGENT: gen.AGENT_NAME,
            gen.REQUEST_MODEL: event.model,
            gen.CONVERSATION_ID: event.session_id,
        }
        if event.parent_session_id:
            attributes[gen.PARENT_SESSION_ID] = event.parent_session_id
        if event.resumed_at_step is not None:
            attributes[gen.RESUMED_AT_STEP] = event.resumed_at_step
        span = self.tracer.start_span(
            gen.agent_span_name(),
            context=self.parent(event) if self.parent is not None else None,
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            start_time=_ns(event.timestamp),
        )
        self._run = _Run(span, event)

    def _finish_run(self, event: ev.RunFinished) -> None:
        run = self._run
        if run is None:
            return
        result = event.result
        reason = result.finish_reason
        self._close_open_spans(run, f"the run ended ({reason.value})", event)
        span = run.span
        span.set_attributes(
            {
                gen.FINISH_REASON: reason.value,
                gen.FINISH_CATEGORY: reason.category.value,
                gen.ITERATIONS: result.iterations,
                gen.TOOL_CALLS: result.tool_calls_made,
                **_usage_attributes(result.usage),
            }
        )
        if result.cost_usd is not None:
            span.set_attribute(gen.COST_USD, result.cost_usd)
        if not result.success:
            span.set_attribute(gen.ERROR_TYPE, reason.value)
            detail = f"{reason.value}: {result.error}" if result.error else reason.value
            span.set_status(Status(StatusCode.ERROR, self._describe(detail)))
        span.end(_ns(event.timestamp))
        self._run = None

    def _close_open_spans(self, run: _Run, why: str, event: ev.Event) -> None:
        """End the model and tool spans a run leaves open (an error, a cancel, a halt)."""
        error = run.last_error
        error_type = error.category if error is not None else "_OTHER"
        description = self._describe(error.message) if error is not None else why
        if run.model_call is not None:
            _fail(run.model_call, error_type, description)
            run.model_call.end(_ns(event.timestamp))
            run.model_call = None
        for spans in run.tool_calls.values():
            for span, _call in spans:
                _fail(span, error_type, why)
                span.end(_ns(event.timestamp))
        run.tool_calls.clear()

    def _error(self, event: ev.ErrorOccurred) -> None:
        run = self._run
        if run is None:
            return
        run.last_error = event
        run.span.add_event(
            gen.ERROR_EVENT,
            {"category": event.category, "retryable": event.retryable},
            timestamp=_ns(event.timestamp),
        )
        if run.model_call is not None:  # the call this error ended
            _fail(run.model_call, event.category, self._describe(event.message))
            run.model_call.end(_ns(event.timestamp))
            run.model_call = None

    def _note(self, name: str, timestamp: float, attributes: dict[str, Any]) -> None:
        if self._run is not None:
            self._run.span.add_event(name, attributes, timestamp=_ns(timestamp))

    # --- model calls --------------------------------------------------------------------

    def _start_model_call(self, event: ev.ModelRequestSent) -> None:
        run = self._run
        if run is None:
            return
        if run.model_call is not None:  # never answered (should not happen): keep it honest
            _fail(run.model_call, "_OTHER", "no response was recorded")
            run.model_call.end(_ns(event.timestamp))
        attributes = self._chat_attributes(run)
        attributes[gen.ITERATION] = event.iteration
        attributes[gen.MESSAGE_COUNT] = event.message_count
        attributes[gen.TOOL_COUNT] = event.tool_count
        if event.max_output_tokens is not None:  # the limit this request was actually sent with
            attributes[gen.REQUEST_MAX_TOKENS] = event.max_output_tokens
        run.model_call = self.tracer.start_span(
            gen.chat_span_name(run.started.model),
            context=trace.set_span_in_context(run.span),
            kind=SpanKind.CLIENT,
            attributes=attributes,
            start_time=_ns(event.timestamp),
        )

    def _chat_attributes(self, run: _Run) -> dict[str, Any]:
        settings = self.model_settings
        attributes: dict[str, Any] = {
            gen.OPERATION_NAME: gen.CHAT,
            gen.PROVIDER_NAME: gen.provider_name(run.started.provider),
            gen.REQUEST_MODEL: run.started.model,
            gen.CONVERSATION_ID: run.started.session_id,
        }
        if settings.max_output_tokens is not None:
            attributes[gen.REQUEST_MAX_TOKENS] = settings.max_output_tokens
        if settings.temperature is not None:
            attributes[gen.REQUEST_TEMPERATURE] = settings.temperature
        if settings.server_address:
            attributes[gen.SERVER_ADDRESS] = settings.server_address
            if settings.server_port is not None:
                attributes[gen.SERVER_PORT] = settings.server_port
        return attributes

    def _end_model_call(self, event: ev.ModelResponseReceived) -> None:
        run = self._run
        if run is None:
            return
        span = run.model_call
        if span is None:  # attached after the request went out: start it at the request
            attributes = self._chat_attributes(run)
            attributes[gen.ITERATION] = event.iteration
            span = self.tracer.start_span(
                gen.chat_span_name(run.started.model),
                context=trace.set_span_in_context(run.span),
                kind=SpanKind.CLIENT,
                attributes=attributes,
                start_time=_ns(event.timestamp - event.latency_s),
            )
        span.set_attributes(_usage_attributes(event.usage))
        span.set_attribute(gen.LATENCY_S, event.latency_s)
        if event.model:
            span.set_attribute(gen.RESPONSE_MODEL, event.model)
        if event.provider:  # a fallback's, when the first provider gave up
            span.set_attribute(gen.PROVIDER_NAME, gen.provider_name(event.provider))
        if event.stop_reason:
            span.set_attribute(gen.RESPONSE_FINISH_REASONS, [event.stop_reason])
        if event.cost_usd is not None:
            span.set_attribute(gen.COST_USD, event.cost_usd)
        if self.capture_content:
            span.set_attribute(gen.OUTPUT_MESSAGES, self._output_messages(event))
        span.end(_ns(event.timestamp))
        run.model_call = None

    def _summary_call(self, event: ev.SummaryCallMade) -> None:
        """The compaction's summary call: a chat span of its own, marked as such."""
        run = self._run
        if run is None:
            return
        attributes = self._chat_attributes(run)
        attributes[gen.ITERATION] = event.iteration
        attributes[gen.REQUEST_MAX_TOKENS] = event.max_output_tokens
        attributes[gen.COMPACTION_SUMMARY] = True
        span = self.tracer.start_span(
            gen.chat_span_name(run.started.model),
            context=trace.set_span_in_context(run.span),
            kind=SpanKind.CLIENT,
            attributes=attributes,
            start_time=_ns(event.timestamp - event.latency_s),
        )
        span.set_attributes(_usage_attributes(event.usage))
        span.set_attribute(gen.LATENCY_S, event.latency_s)
        if event.model:
            span.set_attribute(gen.RESPONSE_MODEL, event.model)
        if event.provider:
            span.set_attribute(gen.PROVIDER_NAME, gen.provider_name(event.provider))
        if event.stop_reason:
            span.set_attribute(gen.RESPONSE_FINISH_REASONS, [event.stop_reason])
        if event.cost_usd is not None:
            span.set_attribute(gen.COST_USD, event.cost_usd)
        span.end(_ns(event.timestamp))

    def _output_messages(self, event: ev.ModelResponseReceived) -> str:
        parts: list[dict[str, Any]] = []
        if event.text:
            parts.append({"type": "text", "content": event.text})
        for call in event.tool_calls:
            parts.append(
                {"type": "tool_call", "id": call.id, "name": call.name, "arguments": call.arguments}
            )
        message = {"role": "assistant", "parts": parts, "finish_reason": event.stop_reason or ""}
        return self._content(json.dumps([self.redact.tree(message)], default=str))

    # --- tool calls ---------------------------------------------------------------------

    def _start_tool_call(self, event: ev.ToolCallStarted) -> None:
        run = self._run
        if run is None:
            return
        call = event.call
        span = self.tracer.start_span(
            gen.tool_span_name(call.name),
            context=trace.set_span_in_context(run.span),
            kind=SpanKind.INTERNAL,
            attributes=self._tool_attributes(run, call, event.iteration),
            start_time=_ns(event.timestamp),
        )
        if self.capture_content:
            arguments = json.dumps(self.redact.tree(call.arguments), default=str)
            span.set_attribute(gen.TOOL_CALL_ARGUMENTS, self._content(arguments))
        run.tool_calls.setdefault(call.id, []).append((span, call))

    def _tool_attributes(self, run: _Run, call: ToolCall, iteration: int) -> dict[str, Any]:
        attributes: dict[str, Any] = {
            gen.OPERATION_NAME: gen.EXECUTE_TOOL,
            gen.TOOL_NAME: call.name,
            gen.TOOL_CALL_ID: call.id,
            gen.TOOL_TYPE: "function",
            gen.CONVERSATION_ID: run.started.session_id,
            gen.ITERATION: iteration,
        }
        if call.id.startswith(CHECK_CALL_PREFIX):
            attributes[gen.HARNESS_CHECK] = True
        return attributes

    def _end_tool_call(self, event: ev.ToolResultReceived) -> None:
        run = self._run
        if run is None:
            return
        result = event.result
        waiting = run.tool_calls.get(result.call_id)
        if waiting:
            span, _call = waiting.pop(0)
            if not waiting:
                del run.tool_calls[result.call_id]
        else:  # a call refused before it started (e.g. over the turn's budget of calls)
            call = ToolCall(result.call_id, result.name)
            span = self.tracer.start_span(
                gen.tool_span_name(result.name),
                context=trace.set_span_in_context(run.span),
                kind=SpanKind.INTERNAL,
                attributes=self._tool_attributes(run, call, event.iteration),
                start_time=_ns(event.timestamp - event.duration_s),
            )
        if result.terminate:
            span.set_attribute(gen.TERMINATES, True)
        if result.is_error:
            _fail(span, self._error_type(result), f"{result.name} returned an error")
        if self.capture_content:
            span.set_attribute(gen.TOOL_CALL_RESULT, self._content(self.redact(result.content)))
        span.end(_ns(event.timestamp))

    def _error_type(self, result: ToolResult) -> str:
        kind = result.metadata.get("error")
        if isinstance(kind, str) and kind:
            return self.redact(kind)[:64]
        return "tool_error"

    # --- text that leaves the process ---------------------------------------------------

    def _describe(self, text: str) -> str:
        return one_line(self.redact(text), MAX_DESCRIPTION_CHARS)

    def _content(self, text: str) -> str:
        return clip(self.redact(text), MAX_CONTENT_CHARS)


def _usage_attributes(usage: Usage) -> dict[str, int]:
    return {
        gen.INPUT_TOKENS: usage.total_input_tokens,
        gen.OUTPUT_TOKENS: usage.output_tokens,
        gen.CACHE_READ_TOKENS: usage.cache_read_tokens,
        gen.CACHE_WRITE_TOKENS: usage.cache_write_tokens,
    }


def _fail(span: Span, error_type: str, description: str) -> None:
    span.set_attribute(gen.ERROR_TYPE, error_type)
    span.set_status(Status(StatusCode.ERROR, description))


def _ns(timestamp: float) -> int:
    return int(timestamp * 1_000_000_000)
