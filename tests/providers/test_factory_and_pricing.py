from __future__ import annotations

import pytest

from journeyman.core.errors import ConfigurationError
from journeyman.core.messages import Usage
from journeyman.providers.factory import create_provider, detect_provider
from journeyman.providers.pricing import add_costs, model_pricer


def test_detection_order() -> None:
    assert detect_provider({"ANTHROPIC_API_KEY": "a", "OPENAI_API_KEY": "b"}) == "anthropic"
    assert detect_provider({"OPENAI_API_KEY": "b"}) == "openai"
    assert detect_provider({"OPENAI_BASE_URL": "http://127.0.0.1:1/v1"}) == "openai"
    assert detect_provider({}) is None


def test_no_provider_explains_how_to_configure() -> None:
    with pytest.raises(ConfigurationError) as info:
        create_provider(env={})
    assert "ANTHROPIC_API_KEY" in info.value.message and "OPENAI_API_KEY" in info.value.message


def test_explicit_provider_without_key_is_a_clear_error() -> None:
    with pytest.raises(ConfigurationError, match="ANTHROPIC_API_KEY"):
        create_provider("anthropic", env={})
    with pytest.raises(ConfigurationError, match="unknown provider"):
        create_provider("mystery", env={})


def test_local_server_needs_no_key() -> None:
    provider = create_provider("openai", "qwen", "http://127.0.0.1:9/v1", env={})
    assert (provider.name, provider.model) == ("openai", "qwen")


def test_costs_come_from_the_price_database_and_unknown_is_none() -> None:
    # $3 per million input tokens below the 200k-token tier, cache reads a tenth of that
    sonnet = model_pricer(None, "anthropic", "claude-sonnet-4-5")
    assert sonnet(Usage(100_000, 0)) == pytest.approx(0.3)
    assert sonnet(Usage(0, 0, cache_read_tokens=100_000)) == pytest.approx(0.03)
    assert model_pricer(None, "openai", "no-such-model-xyz")(Usage(10, 10)) is None
    assert model_pricer(None, "scripted", "scripted")(Usage(10, 10)) is None
    assert add_costs(None, 1.0, first=False) is None
    assert add_costs(1.0, None, first=False) is None
    assert add_costs(0.0, 0.5, first=True) == 0.5


def test_the_embedded_model_costs_nothing_and_a_local_server_is_unpriced() -> None:
    assert model_pricer(None, "local", "smollm2-135m")(Usage(5_000, 700)) == 0.0
    # an OpenAI-compatible server on this machine may still be a proxy that bills
    assert model_pricer(None, "openai", "qwen2.5-coder:7b")(Usage(10, 10)) is None
    # a price the user gives wins, also for the embedded model
    assert model_pricer((1.0, 1.0), "local", "x")(Usage(1_000_000, 0)) == pytest.approx(1.0)


def test_a_given_price_overrides_the_database_for_any_model() -> None:
    # cached tokens are input tokens at the given price
    price = model_pricer((2.0, 10.0), "anthropic", "claude-sonnet-4-5")
    assert price(Usage(1_000_000, 0)) == pytest.approx(2.0)
    assert price(Usage(0, 100_000, cache_read_tokens=500_000)) == pytest.approx(2.0)
    assert model_pricer((2.0, 10.0), "scripted", "scripted")(Usage(0, 1_000)) == pytest.approx(0.01)
