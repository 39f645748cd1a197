"""OpenTelemetry traces of journeyman runs (the `otel` extra: `pip install 'journeyman[otel]'`).

A run is an `invoke_agent journeyman` span; each model call a `chat {model}` span and each
tool call an `execute_tool {tool}` span under it; a subagent's run sits under the
`spawn_agent` call that started it. Names and attributes follow the OpenTelemetry GenAI
semantic conventions; see docs/otel.md.

`trace_agent(agent)` (in `tracing`) attaches tracing to an `Agent`; `RunTracer` (in `spans`) is
the bare event handler. Both need the extra; `otel_installed()` says whether it is there
without importing it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from journeyman.integrations.otel.availability import EXTRA_MISSING, otel_installed

if TYPE_CHECKING:
    from journeyman.integrations.otel.spans import RunTracer
    from journeyman.integrations.otel.tracing import AgentTracing, trace_agent

__all__ = ["EXTRA_MISSING", "AgentTracing", "RunTracer", "otel_installed", "trace_agent"]

_LAZY = {
    "AgentTracing": "journeyman.integrations.otel.tracing",
    "trace_agent": "journeyman.integrations.otel.tracing",
    "RunTracer": "journeyman.integrations.otel.spans",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if not otel_installed():
        raise ImportError(EXTRA_MISSING)
    import importlib

    return getattr(importlib.import_module(module), name)
