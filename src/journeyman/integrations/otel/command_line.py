"""Tracing for a run of the command line: on with `--otel` or an OTLP endpoint in the
environment; a missing extra or a collector that cannot be reached is one line on stderr,
never a traceback."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from journeyman.core.errors import ConfigurationError
from journeyman.core.redact import Redactor
from journeyman.integrations.otel.availability import (
    EXTRA_MISSING,
    enabled_by_environment,
    endpoint_variable,
    otel_installed,
    traces_endpoint,
)

if TYPE_CHECKING:
    from journeyman.integrations.otel.tracing import AgentTracing

Note = Callable[[str], None]
"""Prints a line for the user (the CLI adds `journeyman: note:` or `warning:`)."""

PROTOCOL_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
"""Where the OTLP protocol is chosen, the traces-only variable first (it wins, as in the SDK)."""
SUPPORTED_PROTOCOL = "http/protobuf"


def tracing_for_run(explicit: bool, *, note: Note, warn: Note) -> AgentTracing | None:
    """The tracing of one CLI run, or None when it is off.

    `explicit` is `--otel`: without the extra it is a configuration error (exit 2). An endpoint
    variable alone only gets a note that traces are off until the extra is installed.
    """
    if not tracing_wanted(explicit, note=note):
        return None
    from journeyman.integrations.otel.tracing import AgentTracing

    _report_export_failures(warn)
    return AgentTracing()  # OTLP/HTTP per the OTEL_* variables, unless a global provider is set


def tracing_wanted(explicit: bool, *, note: Note) -> bool:
    """Whether runs started from here are traced, checked without starting an exporter (for
    commands whose agents run elsewhere, e.g. in the worker processes of a batch).

    The same rules as `tracing_for_run`: `--otel` without the extra raises ConfigurationError,
    an endpoint variable without it is a note and False.
    """
    if not (explicit or enabled_by_environment()):
        return False
    if not otel_installed():
        if explicit:
            raise ConfigurationError(f"--otel: {EXTRA_MISSING}")
        note(f"{endpoint_variable()} is set, but no traces are sent: {EXTRA_MISSING}")
        return False
    problem = protocol_problem(os.environ)
    if problem:
        note(problem)
    return True


def protocol_problem(env: Mapping[str, str]) -> str | None:
    """What is wrong when the environment asks for an OTLP protocol other than the one spans
    are sent with (OTLP over HTTP with protobuf), or None. Sending HTTP to a gRPC receiver
    only fails later with a vague export warning, so it is said at start."""
    for variable in PROTOCOL_VARIABLES:
        asked = env.get(variable, "").strip().lower()
        if not asked:
            continue
        if asked == SUPPORTED_PROTOCOL:
            return None
        return (
            f"{variable}={asked}, but journeyman sends traces only as {SUPPORTED_PROTOCOL} "
            "(OTLP over HTTP, usually port 4318, not gRPC's 4317); point the endpoint at the "
            f"collector's HTTP receiver and set {variable}={SUPPORTED_PROTOCOL}"
        )
    return None


class _ExportFailures(logging.Handler):
    """Turns OpenTelemetry's log records (export retries, failures, tracebacks) into one line
    each of a kind, once."""

    EXPORT_LOGGERS = ("opentelemetry.exporter", "opentelemetry.sdk.trace.export")

    def __init__(self, warn: Note) -> None:
        super().__init__(logging.WARNING)
        self.warn = warn
        self._told: set[bool] = set()
        self._lock = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        export = record.name.startswith(self.EXPORT_LOGGERS)
        with self._lock:
            if export in self._told:
                return
            self._told.add(export)
        redact = Redactor()
        reason = " ".join(redact(record.getMessage()).split())[:200]
        if export:
            endpoint = redact(traces_endpoint())
            if _unreachable(record.getMessage()):
                reason = (
                    "no collector could be reached there, so this run's spans are dropped "
                    "(start one, or leave out --otel and the endpoint variable)"
                )
            self.warn(f"traces could not be sent to {endpoint}: {reason}")
        else:
            self.warn(f"OpenTelemetry: {reason}")


_UNREACHABLE_SIGNS = (
    "NewConnectionError",
    "Connection refused",
    "Failed to establish",
    "NameResolutionError",
    "ConnectTimeout",
    "timed out",
)


def _unreachable(message: str) -> bool:
    """Whether an export failure says that no collector answered at all."""
    return any(sign in message for sign in _UNREACHABLE_SIGNS)


def _report_export_failures(warn: Note) -> None:
    logger = logging.getLogger("opentelemetry")
    for handler in [h for h in logger.handlers if isinstance(h, _ExportFailures)]:
        logger.removeHandler(handler)
    logger.addHandler(_ExportFailures(warn))
    logger.propagate = False  # nothing reaches Python's last-resort handler (tracebacks)
