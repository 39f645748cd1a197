"""The prices of the database kept in the user's cache folder: the same costs as the database,
no database loaded once a model's price is kept, and a damaged or foreign cache never used."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, date, datetime
from pathlib import Path

import pytest
from genai_prices import Usage as PriceUsage
from genai_prices import calc_price
from genai_prices.data import providers as database_providers
from genai_prices.types import ModelPrice, StartDateConstraint

from journeyman.core.messages import Usage
from journeyman.providers import price_cache, pricing
from journeyman.providers.pricing import model_pricer

USAGES = (
    Usage(1_000, 200),
    Usage(300_000, 5_000),  # past the 200k-token tier of the models that have one
    Usage(50_000, 1_000, cache_read_tokens=40_000, cache_write_tokens=5_000),
    Usage(0, 0),
)


@pytest.fixture(autouse=True)
def cache_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv(price_cache.CACHE_ENV, str(tmp_path / "cache"))
    pricing._database_pricer.cache_clear()
    yield tmp_path / "cache"
    pricing._database_pricer.cache_clear()


def _database_cost(provider: str, model: str, usage: Usage) -> float | None:
    """What `genai-prices` itself says (None: it finds no such model)."""
    price_usage = PriceUsage(
        input_tokens=usage.total_input_tokens,
        output_tokens=usage.output_tokens,
        cache_read_tokens=usage.cache_read_tokens,
        cache_write_tokens=usage.cache_write_tokens,
    )
    try:
        return float(calc_price(price_usage, model, provider_id=provider).total_price)
    except LookupError:  # a few ids in the data are not found by their own name ("ft:gpt-4o")
        return None


def _models() -> list[tuple[str, str]]:
    return [
        (provider.id, model.id)
        for provider in database_providers
        if provider.id in ("openai", "anthropic")
        for model in provider.models
    ]


def _no_database(*args: object) -> None:
    raise AssertionError("the database was looked up although the price was kept")


def test_every_openai_and_anthropic_model_costs_what_the_database_says_from_the_cache(
    monkeypatch: pytest.MonkeyPatch, cache_folder: Path
) -> None:
    models = _models()
    assert len(models) > 50
    priced = [m for p, m in models if _database_cost(p, m, USAGES[0]) is not None]
    assert len(priced) > 50
    for provider, model in models:  # first from the database, which fills the cache
        price = model_pricer(None, provider, model)
        for usage in USAGES:
            assert price(usage) == _database_cost(provider, model, usage), (model, usage)
    pricing._database_pricer.cache_clear()
    monkeypatch.setattr(pricing, "_look_up", _no_database)
    for provider, model in models:  # then from the cache alone
        price = model_pricer(None, provider, model)
        for usage in USAGES:
            assert price(usage) == _database_cost(provider, model, usage), (model, usage)
    kept = json.loads((cache_folder / "prices.json").read_text())["models"]
    assert len(kept) == len(models)


def test_an_unknown_model_is_kept_as_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    assert model_pricer(None, "openai", "house-model-7b")(Usage(10, 10)) is None
    pricing._database_pricer.cache_clear()
    monkeypatch.setattr(pricing, "_look_up", _no_database)
    assert model_pricer(None, "openai", "house-model-7b")(Usage(10, 10)) is None
    assert model_pricer(None, "scripted", "scripted")(Usage(10, 10)) is None


def test_a_run_with_kept_prices_loads_no_price_database(cache_folder: Path) -> None:
    probe = (
        "import sys\n"
        "from journeyman.core.messages import Usage\n"
        "from journeyman.providers.pricing import model_pricer\n"
        "costs = [model_pricer(None, p, m)(Usage(1000, 100)) for p, m in\n"
        "         [('openai', 'gpt-4o-mini'), ('openai', 'house-7b'),\n"
        "          ('anthropic', 'claude-sonnet-4-5')]]\n"
        "print(costs, 'genai_prices.data' in sys.modules)\n"
    )
    env = {**os.environ, price_cache.CACHE_ENV: str(cache_folder)}

    def run() -> str:
        done = subprocess.run(
            [sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    first, second = run(), run()
    assert first.endswith("True") and second.endswith("False")
    assert first.removesuffix("True") == second.removesuffix("False")
    assert "None" in second


def _write_cache(cache_folder: Path, database: str | None, models: object) -> None:
    cache_folder.mkdir(parents=True, exist_ok=True)
    document = {"format": 1, "database": database, "models": models}
    (cache_folder / "prices.json").write_text(json.dumps(document))


HOSTILE_ENTRIES = [
    {"rates": {"input_mtok": "-1", "output_mtok": "0"}, "until": None},
    {"rates": {"input_mtok": "NaN", "output_mtok": "0"}, "until": None},
    {"rates": {"input_mtok": "Infinity"}, "until": None},
    {"rates": {"input_mtok": 0.0}, "until": None},
    {"rates": {"input_mtok": "zero"}, "until": None},
    {"rates": "free", "until": None},
    {"rates": {"__class__": "0"}, "until": None},
    {"rates": {"input_mtok": {"base": "0", "tiers": [[200, "0"], [100, "0"]]}}, "until": None},
    {"rates": {"input_mtok": {"base": "0", "tiers": [["x", "0"]]}}, "until": None},
    {"rates": {"input_mtok": "0"}, "until": "someday"},
    {"rates": {"input_mtok": "0"}, "until": None, "extra": 1},
    {"rates": None, "until": "2000-01-01"},  # "unknown", but only until a day long past
    [],
    None,
]


@pytest.mark.parametrize("entry", HOSTILE_ENTRIES, ids=[str(e)[:48] for e in HOSTILE_ENTRIES])
def test_an_entry_that_is_not_a_price_is_looked_up_again(cache_folder: Path, entry: object) -> None:
    database = price_cache.database_identity()
    _write_cache(cache_folder, database, {"openai/gpt-4o-mini": entry})
    usage = Usage(100_000, 10_000)
    assert model_pricer(None, "openai", "gpt-4o-mini")(usage) == _database_cost(
        "openai", "gpt-4o-mini", usage
    )
    kept = json.loads((cache_folder / "prices.json").read_text())["models"]
    assert kept["openai/gpt-4o-mini"]["rates"]["input_mtok"] == "0.15"  # written again, right


def test_prices_kept_for_another_database_are_not_used(cache_folder: Path) -> None:
    free = {"rates": {"input_mtok": "0", "output_mtok": "0"}, "until": None}
    _write_cache(cache_folder, "/old/genai_prices/data.py:1:1", {"openai/gpt-4o-mini": free})
    assert model_pricer(None, "openai", "gpt-4o-mini")(Usage(1_000_000, 0)) == pytest.approx(0.15)
    document = json.loads((cache_folder / "prices.json").read_text())
    assert document["database"] == price_cache.database_identity()


@pytest.mark.parametrize("content", [b"{not json", b"\xff\xfe", b"[1, 2]", b'{"format": 1}'])
def test_a_damaged_cache_file_is_ignored(cache_folder: Path, content: bytes) -> None:
    cache_folder.mkdir(parents=True)
    (cache_folder / "prices.json").write_bytes(content)
    assert model_pricer(None, "openai", "gpt-4o-mini")(Usage(1_000_000, 0)) == pytest.approx(0.15)


def test_a_cache_that_cannot_be_written_still_prices(cache_folder: Path) -> None:
    cache_folder.parent.mkdir(parents=True, exist_ok=True)
    cache_folder.write_text("a file where the folder would be")
    assert model_pricer(None, "openai", "gpt-4o-mini")(Usage(1_000_000, 0)) == pytest.approx(0.15)


def test_a_price_that_changes_on_a_date_is_kept_until_that_date() -> None:
    dated = [
        (provider.id, model.id, min(c.start_date for c in constraints))
        for provider in database_providers
        if provider.id in ("openai", "anthropic")
        for model in provider.models
        if not isinstance(model.prices, ModelPrice)
        and (constraints := [p.constraint for p in model.prices if p.constraint])
        and all(isinstance(c, StartDateConstraint) for c in constraints)
    ]
    assert dated, "the database has no model whose price changes on a date any more"
    provider, model, first_change = dated[0]
    before = pricing._look_up(provider, model, date.fromordinal(first_change.toordinal() - 1))
    assert before is not None and before.until == first_change
    today = datetime.now(UTC).date()
    after = pricing._look_up(provider, model, max(today, first_change))
    assert after is not None and (after.until is None or after.until > today)


def test_kept_rates_past_their_last_day_are_looked_up_again(cache_folder: Path) -> None:
    free = {"rates": {"input_mtok": "0"}, "until": datetime.now(UTC).date().isoformat()}
    _write_cache(cache_folder, price_cache.database_identity(), {"openai/gpt-4o-mini": free})
    assert model_pricer(None, "openai", "gpt-4o-mini")(Usage(1_000_000, 0)) == pytest.approx(0.15)
