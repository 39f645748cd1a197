"""Choosing and building a provider from flags and the environment."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Literal

from journeyman.core.errors import ConfigurationError
from journeyman.core.redact import remember_url_credentials
from journeyman.providers.base import Provider

ProviderName = Literal["anthropic", "openai"]

DEFAULT_MODELS: dict[str, str] = {
    "anthropic": "claude-sonnet-4-5",
    "openai": "gpt-4.1-mini",
}

HOW_TO_CONFIGURE = """\
No model provider is configured. Pick one:
  - Anthropic:  export ANTHROPIC_API_KEY=sk-ant-...     (optional: --model claude-sonnet-4-5)
  - OpenAI:     export OPENAI_API_KEY=sk-...            (optional: --model gpt-4.1-mini)
  - Any OpenAI-compatible server (Ollama, vLLM, llama.cpp, LM Studio, OpenRouter):
                export OPENAI_BASE_URL=http://127.0.0.1:11434/v1  and pass --model NAME
                (or use --provider openai --base-url URL --model NAME)"""


def detect_provider(env: Mapping[str, str] | None = None) -> ProviderName | None:
    """The provider auto-detection picks from the environment, in priority order."""
    env = os.environ if env is None else env
    if env.get("ANTHROPIC_API_KEY"):
        return "anthropic"
    if env.get("OPENAI_API_KEY") or env.get("OPENAI_BASE_URL"):
        return "openai"
    return None


def create_provider(
    provider: str | None = None,
    model: str | None = None,
    base_url: str | None = None,
    *,
    tool_format: Literal["native", "text"] = "native",
    timeout_s: float = 120.0,
    env: Mapping[str, str] | None = None,
) -> Provider:
    """Build the provider named by `provider`, or the auto-detected one when it is None."""
    env = os.environ if env is None else env
    remember_url_credentials(base_url)  # never shown to the model in tool output
    chosen = provider or detect_provider(env)
    if chosen is None:
        if base_url:
            chosen = "openai"
        else:
            raise ConfigurationError(HOW_TO_CONFIGURE)
    if chosen == "anthropic":
        key = env.get("ANTHROPIC_API_KEY")
        if not key:
            raise ConfigurationError(
                "--provider anthropic needs ANTHROPIC_API_KEY in the environment"
            )
        from journeyman.providers.anthropic import AnthropicProvider

        return AnthropicProvider(
            model or env.get("JOURNEYMAN_MODEL") or DEFAULT_MODELS["anthropic"],
            api_key=key,
            base_url=base_url or env.get("ANTHROPIC_BASE_URL"),
            timeout=timeout_s,
        )
    if chosen == "openai":
        from journeyman.providers.openai import OpenAIProvider

        url = base_url or env.get("OPENAI_BASE_URL")
        key = env.get("OPENAI_API_KEY")
        if not key:
            if not url:
                raise ConfigurationError(
                    "--provider openai needs OPENAI_API_KEY (or a --base-url of a local "
                    "OpenAI-compatible server)"
                )
            key = "no-key-needed"  # local servers accept any key
        return OpenAIProvider(
            model or env.get("JOURNEYMAN_MODEL") or DEFAULT_MODELS["openai"],
            api_key=key,
            base_url=url,
            timeout=timeout_s,
            tool_format=tool_format,
        )
    raise ConfigurationError(f"unknown provider {chosen!r}; choose anthropic or openai")
