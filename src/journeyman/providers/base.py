"""The `Provider` protocol every model adapter implements, and its request/response records."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from journeyman.core.messages import Message, ToolCall, ToolSpec, Usage

__all__ = ["Capabilities", "ModelRequest", "ModelResponse", "Provider", "ToolSpec"]

TextCallback = Callable[[str], None]


@dataclass(frozen=True)
class Capabilities:
    native_tools: bool = True
    """The model accepts tool schemas and answers with structured tool calls."""
    streaming: bool = True
    prompt_caching: bool = False
    context_window: int = 128_000


@dataclass(frozen=True)
class ModelRequest:
    """One call to the model. `system` and `tools` form the stable, cacheable prefix."""

    system: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    max_output_tokens: int = 4096
    temperature: float | None = None
    system_shared_chars: int = 0
    """How many leading characters of `system` other runs send byte for byte too (the shared
    prefix of a swarm's workers). A provider with explicit cache breakpoints puts one after
    them, so those runs read that part from one cache entry; 0 marks nothing."""


@dataclass(frozen=True)
class ModelResponse:
    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = field(default_factory=Usage)
    stop_reason: str | None = None
    model: str | None = None
    format_error: str | None = None
    """Set when the reply tried to call a tool in a shape we could not parse; the model is told."""
    usage_missing: bool = False
    """The provider reported no usage (or no prompt tokens) for this reply: `usage` is not a
    count, and the loop charges the call's worst case instead."""


@runtime_checkable
class Provider(Protocol):
    """An async model adapter. Implementations raise `ProviderError`/`LLMError` on failure."""

    @property
    def name(self) -> str:
        """Provider id used for pricing and messages, e.g. "anthropic" or "openai"."""
        ...

    @property
    def model(self) -> str: ...

    @property
    def capabilities(self) -> Capabilities: ...

    async def complete(
        self, request: ModelRequest, on_text: TextCallback | None = None
    ) -> ModelResponse:
        """Send one request; when `on_text` is given, stream and report text deltas to it."""
        ...
