"""`trace_agent`: attach OpenTelemetry tracing to an `Agent` (and the subagents it spawns).

    from journeyman.integrations.otel import trace_agent

    with trace_agent(agent):          # OTLP/HTTP to OTEL_EXPORTER_OTLP_ENDPOINT
        agent.run_sync("make the failing test pass")

With a `tracer_provider`, spans go there (yours to shut down); without one, to the global
provider when the application set one, else to a provider made here that exports over
OTLP/HTTP as the standard `OTEL_*` variables say, which `close()` flushes and shuts down.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from types import TracebackType
from typing import Any, Protocol, TypeVar
from urllib.parse import urlsplit

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import OTELResourceDetector, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from journeyman.core import events as ev
from journeyman.core.events import EventHandler
from journeyman.core.package import package_version
from journeyman.core.redact import Redactor
from journeyman.integrations.otel.availability import (
    capture_content_by_environment,
    export_timeout,
)
from journeyman.integrations.otel.spans import ModelSettings, ParentLookup, RunTracer

INSTRUMENTATION_NAME = "journeyman"
SPAWN_TOOL = "spawn_agent"
"""`swarm.spawn.TOOL_NAME`: its calls are the parents of subagent runs."""

log = logging.getLogger(__name__)


class Traceable(Protocol):
    """What tracing needs of an agent (a `journeyman.Agent`): a way to hear its events. Its
    `config`, `options` and `subagents` are read when present."""

    def add_listener(self, listener: EventHandler) -> Callable[[], None]:
        """Have `listener` hear the agent's events first; returns what removes it."""
        ...


AgentT = TypeVar("AgentT", bound=Traceable)


def otlp_tracer_provider() -> TracerProvider:
    """A tracer provider that batches spans to the OTLP/HTTP endpoint of the environment
    (`OTEL_EXPORTER_OTLP_ENDPOINT`, headers, timeout, sampler: the SDK reads them). The service
    is `journeyman` unless OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES say otherwise. An
    export gives up after `EXPORT_TIMEOUT_S` unless a timeout variable is set, so a collector
    that is not there delays the end of a run by that much at most."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    ours = Resource.create({"service.name": "journeyman", "service.version": package_version()})
    provider = TracerProvider(resource=ours.merge(OTELResourceDetector().detect()))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(timeout=export_timeout())))
    return provider


class AgentTracing:
    """Records the runs of the agents attached to it as spans, subagents nested under the
    `spawn_agent` call that started them."""

    def __init__(
        self,
        tracer_provider: trace.TracerProvider | None = None,
        *,
        capture_content: bool | None = None,
    ) -> None:
        owned = tracer_provider is None and isinstance(
            trace.get_tracer_provider(), trace.ProxyTracerProvider
        )
        self.provider: trace.TracerProvider = (
            otlp_tracer_provider() if owned else tracer_provider or trace.get_tracer_provider()
        )
        self._owned = owned
        """Made here: `close()` flushes and shuts it down."""
        self.tracer = self.provider.get_tracer(INSTRUMENTATION_NAME, package_version())
        self.capture_content = (
            capture_content_by_environment() if capture_content is None else capture_content
        )
        """Redacted tool arguments, tool results and model text on the spans (off by
        default; `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true` turns it on)."""
        self.redactor = Redactor()
        self._tracers: dict[int, RunTracer] = {}
        self._detach: list[Callable[[], None]] = []

    def handler(
        self,
        agent: Traceable | None = None,
        *,
        parent: Context | None = None,
        lookup: ParentLookup | None = None,
    ) -> RunTracer:
        """A new event handler recording one agent's runs (under `parent` when given, or
        under what `lookup` finds for each run)."""
        if lookup is None and parent is not None:
            lookup = lambda _event: parent  # noqa: E731
        return RunTracer(
            self.tracer,
            capture_content=self.capture_content,
            model_settings=_model_settings(agent) if agent is not None else None,
            parent=lookup,
            redactor=self.redactor,
        )

    def attach(
        self,
        agent: AgentT,
        *,
        parent: Context | None = None,
        lookup: ParentLookup | None = None,
    ) -> AgentT:
        """Trace `agent`'s runs: the tracer hears the events first, then its own handlers as
        before. Returns `agent`."""
        run_tracer = self.handler(agent, parent=parent, lookup=lookup)
        self._tracers[id(agent)] = run_tracer
        self._hook_subagents(agent)

        def on_event(event: ev.Event) -> None:
            try:
                if isinstance(event, ev.RunStarted):
                    self._hook_subagents(agent)  # enabled after attaching (`run --subagents`)
                run_tracer(event)
            except Exception:  # tracing must never disturb a run
                log.exception("tracing failed on a %s event", event.type)

        self._detach.append(agent.add_listener(on_event))
        return agent

    def detach(self) -> None:
        """Stop tracing the attached agents: their own event handlers go on alone."""
        for remove in reversed(self._detach):
            remove()
        self._detach.clear()

    def flush(self, timeout_ms: int = 30_000) -> bool:
        """Export the spans recorded so far; False when they could not all be sent in time."""
        force_flush = getattr(self.provider, "force_flush", None)
        return bool(force_flush(timeout_ms)) if callable(force_flush) else True

    def close(self) -> None:
        """Detach, then flush and shut down the provider if it was made here."""
        self.detach()
        self._tracers.clear()
        if self._owned:
            shutdown = getattr(self.provider, "shutdown", None)
            if callable(shutdown):
                shutdown()
        else:
            self.flush()

    def __enter__(self) -> AgentTracing:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    # --- subagents ----------------------------------------------------------------------

    def _hook_subagents(self, agent: Traceable) -> None:
        """Have the children `agent` spawns traced too, under the spawn call's span."""
        runtime: Any = getattr(agent, "subagents", None)
        if runtime is None or getattr(runtime.make_child, "traced_by", None) is self:
            return
        make_child: Callable[[Any], Traceable] = runtime.make_child

        def traced_child(spec: Any) -> Traceable:
            child = make_child(spec)
            self.attach(child, lookup=lambda event: self._spawn_context(spec.parent, event))
            return child

        traced_child.traced_by = self  # type: ignore[attr-defined]
        runtime.make_child = traced_child

    def _spawn_context(self, parent_agent: Traceable, event: ev.RunStarted) -> Context | None:
        """The context of the spawn call that started this child's run: the running
        `spawn_agent` call of its parent whose id the run names (`parent_call_id`)."""
        parent = self._tracers.get(id(parent_agent))
        if parent is None or not event.parent_call_id:
            return None
        running = parent.running_call(SPAWN_TOOL, lambda call: call.id == event.parent_call_id)
        return None if running is None else trace.set_span_in_context(running[0])


def trace_agent(
    agent: AgentT,
    *,
    tracer_provider: trace.TracerProvider | None = None,
    capture_content: bool | None = None,
) -> AgentTracing:
    """Trace `agent`'s runs (see the module doc); use the result as a context manager, or
    call its `close()` when done so the last spans are sent."""
    tracing = AgentTracing(tracer_provider, capture_content=capture_content)
    tracing.attach(agent)
    return tracing


def _model_settings(agent: Traceable) -> ModelSettings:
    """The request settings and server of an agent's model calls, as far as they are known
    (the server only from a base URL: its host and port, never its credentials)."""
    config = getattr(agent, "config", None)
    options = getattr(agent, "options", None)
    address: str | None = None
    port: int | None = None
    base_url = getattr(options, "base_url", None)
    if base_url:
        try:
            parts = urlsplit(base_url)
            address, port = parts.hostname, parts.port
        except ValueError:
            address = None
    return ModelSettings(
        max_output_tokens=getattr(config, "max_output_tokens", None),
        temperature=getattr(config, "temperature", None),
        server_address=address,
        server_port=port,
    )
