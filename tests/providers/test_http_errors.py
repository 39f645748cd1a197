"""The HTTP error conventions shared by the SDK adapters."""

from __future__ import annotations

import email.utils

import pytest

from journeyman.core.errors import ErrorCategory
from journeyman.core.result import FinishReason
from journeyman.loop.endings import finish_reason_for
from journeyman.providers.http_errors import (
    mentions_context_overflow,
    provider_error_from_status,
    retry_after_seconds,
    status_is_retryable,
)

NOW = 1_800_000_000.0


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({}, None),
        ({"retry-after": "12"}, 12.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after": "-3"}, 0.0),
        ({"retry-after-ms": "250"}, 0.25),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after-ms": "soon", "retry-after": "9"}, 9.0),
        ({"retry-after": email.utils.formatdate(NOW + 42, usegmt=True)}, 42.0),
        ({"retry-after": email.utils.formatdate(NOW - 42, usegmt=True)}, 0.0),
        ({"retry-after": "next tuesday"}, None),
    ],
)
def test_retry_after_seconds(headers: dict[str, str], expected: float | None) -> None:
    assert retry_after_seconds(headers, now=NOW) == expected


@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503, 504, 529])
def test_retryable_statuses(status: int) -> None:
    assert status_is_retryable(status)


@pytest.mark.parametrize("status", [400, 401, 402, 403, 404, 413, 422])
def test_final_statuses(status: int) -> None:
    assert not status_is_retryable(status)


@pytest.mark.parametrize(
    "message",
    [
        "prompt is too long: 210000 tokens > 200000 maximum",
        "This model's maximum context length is 8192 tokens.",
        "the request exceeds the available context size, try increasing it",
        "context_length_exceeded",
    ],
)
def test_context_overflow_messages(message: str) -> None:
    assert mentions_context_overflow(message)
    err = provider_error_from_status("p", 400, message, {}, env_var="P_KEY")
    assert err.details == {"context_overflow": True}
    assert err.retryable is False


def test_ordinary_bad_request_is_not_an_overflow() -> None:
    assert not mentions_context_overflow("messages.0.content: field required")
    err = provider_error_from_status("p", 400, "field required", {}, env_var="P_KEY")
    assert err.details == {}
    assert err.retryable is False


def test_error_reported_inside_a_stream_is_retryable() -> None:
    err = provider_error_from_status("p", None, "Overloaded", {}, env_var="P_KEY")
    assert err.retryable is True
    assert err.status_code is None


def test_messages_say_what_to_do() -> None:
    unauthorised = provider_error_from_status("p", 401, "bad key", {}, env_var="P_KEY")
    assert "P_KEY" in unauthorised.message and "bad key" in unauthorised.message
    limited = provider_error_from_status(
        "p", 429, "slow down", {"retry-after": "4"}, env_var="P_KEY"
    )
    assert "4s" in limited.message
    assert limited.retry_after == 4.0


@pytest.mark.parametrize("status", [401, 403])
def test_a_refused_key_is_a_configuration_error(status: int) -> None:
    refused = provider_error_from_status("p", status, "no", {}, env_var="P_KEY")
    assert refused.category is ErrorCategory.CONFIGURATION and not refused.retryable
    assert finish_reason_for(refused) is FinishReason.CONFIGURATION_ERROR


def test_a_key_refused_by_another_server_says_where_that_server_is_set() -> None:
    refused = provider_error_from_status(
        "p", 401, "no", {}, env_var="P_KEY", base_url="http://u:pw@10.0.0.9:8000/v1",
        base_url_env="P_BASE_URL",
    )  # fmt: skip
    assert "10.0.0.9:8000" in refused.message and "pw" not in refused.message
    assert "P_KEY" in refused.message and "--base-url (or P_BASE_URL)" in refused.message
