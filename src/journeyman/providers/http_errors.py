"""Turning HTTP-level failures of any provider into our error types.

Shared by the adapters: which statuses are worth a retry, how long the server asked us to
wait, and what to tell the user for authentication failures and context overflows.
"""

from __future__ import annotations

import email.utils
import ipaddress
import time
from collections.abc import Mapping
from datetime import UTC
from urllib.parse import urlsplit

from journeyman.core.errors import ErrorCategory, LLMError, ProviderError

_CONTEXT_OVERFLOW_HINTS = (
    "context_length_exceeded",
    "context length",
    "context window",
    "context size",
    "maximum context",
    "context limit",
    "prompt is too long",
    "input is too long",
    "too many tokens",
    "reduce the length",
)


def status_is_retryable(status: int) -> bool:
    """Timeouts, conflicts, rate limits and server-side failures (incl. 529) may pass on retry."""
    return status in (408, 409, 429) or status >= 500


def mentions_context_overflow(text: str) -> bool:
    """Whether an error message says the prompt does not fit the model's context window."""
    lowered = text.lower()
    return any(hint in lowered for hint in _CONTEXT_OVERFLOW_HINTS)


def retry_after_seconds(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds to wait according to `retry-after-ms` or `Retry-After` (seconds or HTTP date)."""
    milliseconds = headers.get("retry-after-ms")
    if milliseconds:
        try:
            return max(0.0, float(milliseconds) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # an HTTP date is GMT even when it fails to say so
        when = when.replace(tzinfo=UTC)
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def provider_error_from_status(
    provider: str,
    status: int | None,
    message: str,
    headers: Mapping[str, str],
    *,
    env_var: str,
    base_url: str | None = None,
    base_url_env: str | None = None,
) -> ProviderError:
    """Map an error status (None for an error reported inside a stream) to a `ProviderError`.

    408/409/429/5xx are retryable, other 4xx are not; a 400 about the context window carries
    `details["context_overflow"]`; 401/403 are configuration errors naming the environment
    variable that holds the key, and for a 401 from a server other than the provider's own
    service (`base_url`), where that server is set (`--base-url`, `base_url_env`).
    """
    details: dict[str, object] = {}
    retry_after = retry_after_seconds(headers)
    if retry_after is not None:
        details["retry_after"] = retry_after
    label = f"HTTP {status}" if status is not None else "error in the response stream"
    overflow = status in (None, 400, 413, 422) and mentions_context_overflow(message)
    if overflow:
        details["context_overflow"] = True
        text = (
            f"{provider}: the prompt does not fit the model's context window ({label}: {message}); "
            "compact the conversation or choose a model with a larger window"
        )
        return ProviderError(
            text, provider=provider, status_code=status, retryable=False, details=details
        )
    if status in (401, 403):
        return ProviderError(
            _refused_key(provider, status, label, message, env_var, base_url, base_url_env),
            provider=provider,
            status_code=status,
            retryable=False,
            details=details,
            category=ErrorCategory.CONFIGURATION,
        )
    if status == 429:
        wait = f"; the service asks to wait {retry_after:g}s" if retry_after is not None else ""
        text = f"{provider}: rate limited ({label}: {message}){wait}"
    else:
        text = f"{provider}: request failed ({label}: {message})"
    retryable = True if status is None else status_is_retryable(status)
    return ProviderError(
        text, provider=provider, status_code=status, retryable=retryable, details=details
    )


OFFICIAL_HOSTS = frozenset({"api.openai.com", "api.anthropic.com"})
"""The providers' own services: a key they refuse is a wrong key, not a key sent astray."""


def _refused_key(
    provider: str,
    status: int,
    label: str,
    message: str,
    env_var: str,
    base_url: str | None,
    base_url_env: str | None,
) -> str:
    """What to say when the service turned the key down: 403, the key lacks a permission;
    401, the key is wrong, or it went to a server it is not for."""
    if status == 403:
        return (
            f"{provider}: the API key is not allowed to do this ({label}: {message}); "
            f"check the key in {env_var} and its permissions for this model"
        )
    host = urlsplit(base_url).hostname if base_url else None
    if base_url is None or host is None or host in OFFICIAL_HOSTS:
        return (
            f"{provider}: the API key was rejected ({label}: {message}); "
            f"set {env_var} to a valid key"
        )
    where = "--base-url" + (f" (or {base_url_env})" if base_url_env else "")
    return (
        f"{provider}: the server at {host_and_port(base_url)} rejected the API key "
        f"({label}: {message}); set {env_var} to a key that server accepts, or change "
        f"{where} if it is not the server you meant"
    )


def _refused(cause: BaseException) -> bool:
    """Whether a connection failure was a refusal (nothing listening on the port)."""
    seen: set[int] = set()
    current: BaseException | None = cause
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ConnectionRefusedError):
            return True
        current = current.__cause__ or current.__context__
    return False


def is_loopback(base_url: str) -> bool:
    """Whether `base_url` names this machine (localhost, 127.x.x.x, ::1)."""
    host = urlsplit(base_url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def host_and_port(base_url: str) -> str:
    """`host:port` of `base_url` (the scheme's port when none is written), without any
    credentials the URL carries."""
    parts = urlsplit(base_url)
    host = parts.hostname or ""
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        port = None
    shown = f"[{host}]" if ":" in host else host
    return f"{shown}:{port}" if port else shown


def connection_error(
    provider: str, base_url: str, *, timed_out: bool, cause: BaseException
) -> ProviderError:
    """A request that got no HTTP response: refused, reset, or timed out. Retryable, except a
    refused connection to this machine: a local server that is not running will not start on
    its own while we retry."""
    reason = cause.__cause__ or cause
    if not timed_out and is_loopback(base_url) and _refused(cause):
        return ProviderError(
            f"{provider}: nothing is listening on {host_and_port(base_url)}; is the server "
            "running?",
            provider=provider,
            status_code=None,
            retryable=False,
            details={"refused": True},
        )
    if timed_out:
        text = f"{provider}: no answer from {base_url} within the timeout ({type(reason).__name__})"
    else:
        detail = str(reason) or type(reason).__name__
        text = f"{provider}: could not talk to {base_url} ({detail}); is the server reachable?"
    details = {"timeout": True} if timed_out else {}
    return ProviderError(text, provider=provider, status_code=None, retryable=True, details=details)


def stream_interrupted(provider: str, cause: BaseException, received: int) -> LLMError:
    """The connection broke after the reply had started streaming."""
    reason = cause.__cause__ or cause
    text = (
        f"{provider}: the reply stream broke off after {received} chunks "
        f"({type(reason).__name__}: {reason}); the partial reply was discarded"
    )
    return LLMError(text, retryable=True, details={"stream_interrupted": True})
