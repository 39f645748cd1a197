from __future__ import annotations

from journeyman.core.errors import (
    AgentError,
    BudgetExhaustedError,
    CancellationError,
    ConfigurationError,
    ErrorCategory,
    LLMError,
    PermissionDeniedError,
    ProviderError,
    ToolError,
    ToolNotFoundError,
    ToolTimeoutError,
)
from journeyman.core.messages import Message, ToolCall, ToolResult, Usage
from journeyman.core.result import FinishCategory, FinishReason


def test_error_categories_and_retryable_defaults() -> None:
    assert len(ErrorCategory) == 8
    cases: list[tuple[AgentError, ErrorCategory, bool]] = [
        (LLMError("empty"), ErrorCategory.LLM, True),
        (ProviderError("429", provider="openai", status_code=429), ErrorCategory.PROVIDER, True),
        (ToolError("x"), ErrorCategory.TOOL, False),
        (ToolNotFoundError("x"), ErrorCategory.TOOL, False),
        (ToolTimeoutError("x"), ErrorCategory.TOOL, False),
        (BudgetExhaustedError("x"), ErrorCategory.BUDGET, False),
        (CancellationError("x"), ErrorCategory.CANCELLATION, False),
        (PermissionDeniedError("x", tool_name="run_command"), ErrorCategory.PERMISSION, False),
        (ConfigurationError("x"), ErrorCategory.CONFIGURATION, False),
    ]
    for error, category, retryable in cases:
        assert isinstance(error, AgentError)
        assert error.category is category
        assert error.retryable is retryable


def test_provider_error_fields_and_retry_after() -> None:
    error = ProviderError(
        "slow down", provider="anthropic", status_code=429, details={"retry_after": "2.5"}
    )
    assert (error.provider, error.status_code, error.retry_after) == ("anthropic", 429, 2.5)
    auth = ProviderError("bad key", provider="openai", status_code=401, retryable=False)
    assert not auth.retryable and auth.retry_after is None
    assert PermissionDeniedError("no", tool_name="write_file").tool_name == "write_file"


def test_finish_reasons_are_grouped() -> None:
    groups = {reason: reason.category for reason in FinishReason}
    assert {r for r, c in groups.items() if c is FinishCategory.SUCCESS} == {
        FinishReason.COMPLETED,
        FinishReason.ANSWERED,
    }
    assert FinishReason.MAX_ITERATIONS.category is FinishCategory.CAPACITY
    assert FinishReason.MAX_BUDGET_USD.category is FinishCategory.CAPACITY
    assert FinishReason.NO_PROGRESS.category is FinishCategory.RETRYABLE
    assert FinishReason.PROVIDER_ERROR.category is FinishCategory.FATAL
    assert FinishReason.CANCELLED.category is FinishCategory.FATAL


def test_messages_round_trip_through_dicts() -> None:
    call = ToolCall("c1", "read_file", {"path": "a.py"})
    result = ToolResult("c1", "read_file", "1: x", is_error=True, metadata={"k": 1})
    for message in (
        Message.user("hi"),
        Message.assistant("reading", [call]),
        Message.tool(result),
    ):
        assert Message.from_dict(message.to_dict()) == message


def test_usage_adds_up() -> None:
    total = Usage(10, 5, 100, 20) + Usage(1, 1, 0, 0)
    assert total == Usage(11, 6, 100, 20)
    assert total.total_input_tokens == 131
    assert total.total_tokens == 137
    assert Usage.from_dict(total.to_dict()) == total
