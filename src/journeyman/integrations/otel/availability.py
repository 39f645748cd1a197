"""Whether the `otel` extra is installed, and when tracing is asked for by the environment;
imports nothing from OpenTelemetry."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping

EXTRA_MISSING = (
    "OpenTelemetry export needs the otel extra, which is not installed; "
    "install it with: pip install 'journeyman[otel]'"
)
ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
"""Either turns tracing on by itself (the first wins for the address, as in the SDK)."""
CAPTURE_CONTENT_VARIABLE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""`true` puts redacted tool arguments, tool results and model text on the spans."""
DEFAULT_ENDPOINT = "http://localhost:4318"
TIMEOUT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT")
EXPORT_TIMEOUT_S = 2.0
"""Seconds one export of spans may take, its retries included, unless a timeout variable
says otherwise. The SDK's own default (10 s) is what a run waited at exit for a collector
that is not there; a collector that is there answers in milliseconds."""
_REQUIRED_MODULES = ("opentelemetry.sdk.trace", "opentelemetry.exporter.otlp.proto.http")


def otel_installed() -> bool:
    """Whether the OpenTelemetry SDK and its OTLP/HTTP exporter can be imported."""
    try:
        return all(importlib.util.find_spec(name) is not None for name in _REQUIRED_MODULES)
    except (ImportError, ValueError):  # a parent package is missing or broken
        return False


def enabled_by_environment(env: Mapping[str, str] | None = None) -> bool:
    """Whether an OTLP endpoint is set (and the SDK is not disabled by OTEL_SDK_DISABLED)."""
    env = os.environ if env is None else env
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return any(env.get(name, "").strip() for name in ENDPOINT_VARIABLES)


def endpoint_variable(env: Mapping[str, str] | None = None) -> str | None:
    """The name of the endpoint variable that is set, if any."""
    env = os.environ if env is None else env
    return next((name for name in ENDPOINT_VARIABLES if env.get(name, "").strip()), None)


def traces_endpoint(env: Mapping[str, str] | None = None) -> str:
    """Where spans are sent, as the OTLP/HTTP exporter works it out."""
    env = os.environ if env is None else env
    specific = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    if specific:
        return specific
    base = env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip() or DEFAULT_ENDPOINT
    return base.rstrip("/") + "/v1/traces"


def export_timeout(env: Mapping[str, str] | None = None) -> float | None:
    """The export timeout to give the exporter: `EXPORT_TIMEOUT_S`, or None when the user set
    one in the environment (the SDK reads it)."""
    env = os.environ if env is None else env
    if any(env.get(name, "").strip() for name in TIMEOUT_VARIABLES):
        return None
    return EXPORT_TIMEOUT_S


def capture_content_by_environment(env: Mapping[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    return env.get(CAPTURE_CONTENT_VARIABLE, "").strip().lower() in ("true", "1", "yes")
