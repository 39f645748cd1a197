"""One mapping from the error hierarchy to finish reasons and severities, and the errors the
loop raises where they happen."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from journeyman.core.errors import (
    AgentError,
    BudgetExhaustedError,
    CancellationError,
    ConfigurationError,
    LLMError,
    PermissionDeniedError,
    ProviderError,
    ToolNotFoundError,
)
from journeyman.core.events import ErrorOccurred, Event
from journeyman.core.messages import Usage
from journeyman.core.result import FinishReason
from journeyman.loop.endings import Severity, classify, finish_reason_for
from journeyman.loop.modes.phased import recovery
from journeyman.providers.base import ModelRequest, ModelResponse
from tests.fakes.agents import NO_WAIT, Probe, call, make_agent, turn

CASES: list[tuple[AgentError, Severity, FinishReason]] = [
    (LLMError("garbled"), Severity.RECOVERABLE, FinishReason.PROVIDER_UNAVAILABLE),
    (LLMError("refused", retryable=False), Severity.FATAL, FinishReason.PROVIDER_ERROR),
    (ProviderError("busy", provider="p"), Severity.TRANSIENT, FinishReason.PROVIDER_UNAVAILABLE),
    (
        ProviderError("gave up", provider="p", retryable=False, details={"exhausted": True}),
        Severity.TRANSIENT,
        FinishReason.PROVIDER_UNAVAILABLE,
    ),
    (
        ProviderError("bad key", provider="p", retryable=False),
        Severity.FATAL,
        FinishReason.PROVIDER_ERROR,
    ),
    (ToolNotFoundError("no such tool"), Severity.RECOVERABLE, FinishReason.INTERNAL_ERROR),
    (BudgetExhaustedError("spent"), Severity.TRANSIENT, FinishReason.MAX_BUDGET_USD),
    (
        BudgetExhaustedError("tokens", details={"finish_reason": "max_tokens"}),
        Severity.TRANSIENT,
        FinishReason.MAX_TOKENS,
    ),
    (CancellationError("stop"), Severity.FATAL, FinishReason.CANCELLED),
    (PermissionDeniedError("no", tool_name="t"), Severity.FATAL, FinishReason.INTERNAL_ERROR),
    (ConfigurationError("bad"), Severity.FATAL, FinishReason.CONFIGURATION_ERROR),
    (AgentError("bug"), Severity.FATAL, FinishReason.INTERNAL_ERROR),
]


@pytest.mark.parametrize(("error", "severity", "reason"), CASES)
def test_one_mapping_gives_severity_and_finish_reason(
    error: AgentError, severity: Severity, reason: FinishReason
) -> None:
    assert classify(error) == (severity, reason)
    assert finish_reason_for(error) is reason
    assert recovery.classify(error) is severity  # the phased mode reads the same mapping


async def test_an_unknown_tool_is_a_tool_error_the_model_is_told_about(tmp_path: Path) -> None:
    agent, provider = make_agent(
        tmp_path, [turn(call("nope", x=1)), turn(text="ok")], tools=Probe().tools()
    )
    result = await agent.run("x")
    assert result.success
    told = [m.tool_result for m in provider.requests[1].messages if m.tool_result]
    assert told[0] is not None and "unknown tool 'nope'" in told[0].content
    assert told[0].metadata == {"error": "unknown", "category": "tool", "retryable": False}


async def test_a_capacity_stop_is_an_ending_not_an_error_event(tmp_path: Path) -> None:
    events: list[Event] = []
    script = [turn(call("echo", text=str(i))) for i in range(3)]
    agent, _ = make_agent(tmp_path, script, tools=Probe().tools(), events=events, max_iterations=2)
    result = await agent.run("x")
    assert result.finish_reason is FinishReason.MAX_ITERATIONS
    assert "limit of 2 iterations" in (result.error or "")
    assert not [e for e in events if isinstance(e, ErrorOccurred)]


async def test_ctrl_c_during_a_model_call_ends_as_cancelled(tmp_path: Path) -> None:
    def interrupted(_request: ModelRequest) -> ModelResponse:
        raise asyncio.CancelledError

    agent, _ = make_agent(
        tmp_path, [interrupted, ModelResponse("never", (), Usage())], retry_policy=NO_WAIT
    )
    result = await agent.run("x")
    assert result.finish_reason is FinishReason.CANCELLED
    assert result.error == "cancelled by the user"
