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


def capture_content_by_environment(env: Mapping[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    return env.get(CAPTURE_CONTENT_VARIABLE, "").strip().lower() in ("true", "1", "yes")
