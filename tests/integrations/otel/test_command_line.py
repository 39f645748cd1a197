"""When the command line traces a run, and how OpenTelemetry's own log lines reach the user."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the otel extra is not installed")

from journeyman.core.errors import ConfigurationError
from journeyman.integrations.otel import availability, command_line
from journeyman.integrations.otel.tracing import AgentTracing


@pytest.fixture(autouse=True)
def opentelemetry_logger_restored() -> Iterator[None]:
    logger = logging.getLogger("opentelemetry")
    handlers, propagate = list(logger.handlers), logger.propagate
    yield
    logger.handlers[:] = handlers
    logger.propagate = propagate


@pytest.fixture(autouse=True)
def no_otel_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("OTEL_SDK_DISABLED", raising=False)
    for name in command_line.PROTOCOL_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize(
    ("env", "said"),
    [
        ({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "OTEL_EXPORTER_OTLP_PROTOCOL=grpc"),
        ({"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "GRPC"}, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=grpc"),
        ({"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, "OTEL_EXPORTER_OTLP_PROTOCOL=http/json"),
        (  # the traces-only variable wins
            {
                "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
                "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
            },
            None,
        ),
        ({"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, None),
    ],
)
def test_a_protocol_other_than_http_protobuf_is_said_at_start(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], said: str | None
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    notes: list[str] = []
    assert command_line.tracing_wanted(True, note=notes.append)
    if said is None:
        assert notes == []
    else:
        assert len(notes) == 1 and said in notes[0]
        assert "http/protobuf" in notes[0] and "4318" in notes[0]


def test_off_without_the_flag_or_an_endpoint() -> None:
    lines: list[str] = []
    assert command_line.tracing_for_run(False, note=lines.append, warn=lines.append) is None
    assert lines == []


@pytest.mark.parametrize(
    ("env", "on"),
    [
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "  "}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"}, False),
    ],
)
def test_an_endpoint_variable_turns_it_on(env: dict[str, str], on: bool) -> None:
    assert availability.enabled_by_environment(env) is on


def test_the_traces_endpoint_is_worked_out_as_the_exporter_does() -> None:
    assert availability.traces_endpoint({}) == "http://localhost:4318/v1/traces"
    assert availability.traces_endpoint({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:1/"}) == (
        "http://c:1/v1/traces"
    )
    specific = {
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t:2/x",
        "OTEL_EXPORTER_OTLP_ENDPOINT": "y",
    }
    assert availability.traces_endpoint(specific) == "http://t:2/x"


def test_the_flag_builds_a_tracing_that_owns_its_provider() -> None:
    tracing = command_line.tracing_for_run(True, note=print, warn=print)
    assert isinstance(tracing, AgentTracing)
    tracing.close()


def test_the_flag_without_the_extra_is_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(command_line, "otel_installed", lambda: False)
    with pytest.raises(ConfigurationError, match=r"--otel: .*pip install 'journeyman\[otel\]'"):
        command_line.tracing_for_run(True, note=print, warn=print)


def test_export_failures_are_one_redacted_warning_each_kind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "https://user:hunter2hunter2@collector:4318")
    warnings: list[str] = []
    command_line._report_export_failures(warnings.append)
    exporter = logging.getLogger("opentelemetry.exporter.otlp.proto.http.trace_exporter")
    for attempt in range(3):
        exporter.warning("Transient error %s encountered, retrying", attempt)
    logging.getLogger("opentelemetry.sdk.trace.export").exception("Exception while exporting")
    logging.getLogger("opentelemetry.trace").warning("Overriding of current TracerProvider")
    assert len(warnings) == 2
    assert warnings[0] == (
        "traces could not be sent to https://user:[REDACTED]@collector:4318/v1/traces: "
        "Transient error 0 encountered, retrying"
    )
    assert warnings[1] == "OpenTelemetry: Overriding of current TracerProvider"


def _closed_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_the_export_timeout_is_short_unless_the_user_sets_one() -> None:
    assert availability.export_timeout({}) == availability.EXPORT_TIMEOUT_S == 2.0
    assert availability.export_timeout({"OTEL_EXPORTER_OTLP_TIMEOUT": "30"}) is None
    assert availability.export_timeout({"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "5"}) is None


def test_a_collector_that_is_not_there_delays_the_end_by_seconds_at_most(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The SDK's own 10 s deadline retried for about 7 s at exit (14 s with two exports);
    journeyman's gives up after one quick retry. The bound is loose for a busy machine."""
    import time

    for name in availability.TIMEOUT_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    endpoint = f"http://127.0.0.1:{_closed_port()}"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
    warnings: list[str] = []
    tracing = command_line.tracing_for_run(True, note=warnings.append, warn=warnings.append)
    assert tracing is not None
    with tracing.tracer.start_as_current_span("a run"):
        pass
    started = time.monotonic()
    tracing.close()
    assert time.monotonic() - started < 5.0
    assert warnings == [
        f"traces could not be sent to {endpoint}/v1/traces: no collector could be reached "
        "there, so this run's spans are dropped (start one, or leave out --otel and the "
        "endpoint variable)"
    ]
