"""The one pricer and the one token estimate.

`model_pricer` prices a call's usage for a provider and model: at the user's `price_per_mtok`
when given, else from the `genai-prices` database; a model it does not know costs None, never
0 — except the embedded model (`LOCAL_PROVIDERS`), which runs inside journeyman and costs
nothing. Every cost — a call's, a budget's fitting before a call, a pool's floor — comes from
it. The database is loaded only for a model whose price is not kept in the user's cache folder
yet (`price_cache`).

`estimate_tokens` (four characters a token) sizes prompts before a provider reports real counts
(the context pack, compaction, the budget baseline, the workspace index).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from datetime import UTC, date, datetime
from decimal import Decimal
from functools import lru_cache
from typing import TYPE_CHECKING

from journeyman.core.messages import Usage
from journeyman.providers import price_cache

if TYPE_CHECKING:
    from genai_prices import Usage as PriceUsage
    from genai_prices.types import ModelPrice

_PROVIDER_IDS = {"anthropic": "anthropic", "openai": "openai"}

LOCAL_PROVIDERS = frozenset({"local"})
"""Providers whose model runs on this machine, inside journeyman: their calls cost $0. (An
OpenAI-compatible server may run anywhere and may bill: its price is unknown unless
`price_per_mtok` gives one.)"""

Pricer = Callable[[Usage], float | None]
"""US dollars of a call's usage; None when the model's price is not known."""


def model_pricer(price_per_mtok: tuple[float, float] | None, provider: str, model: str) -> Pricer:
    """What calls of `provider`'s `model` cost: `price_per_mtok` (US dollars per million input,
    output tokens; cached tokens count as input) when given, else the price database."""
    if price_per_mtok is None:
        if provider in LOCAL_PROVIDERS:
            return lambda usage: 0.0
        return lambda usage: _database_price(provider, model, usage)
    per_input, per_output = price_per_mtok
    return lambda usage: (
        (usage.total_input_tokens * per_input + usage.output_tokens * per_output) / 1e6
    )


def _database_price(provider: str, model: str, usage: Usage) -> float | None:
    """Price of one call in US dollars from `genai-prices`, or None when it does not know it."""
    price = _database_pricer(provider, model)
    return None if price is None else price(usage)


@lru_cache(maxsize=64)
def _database_pricer(provider: str, model: str) -> Pricer | None:
    """How the price database prices calls of `model` (None: it does not know the model), from
    the prices kept in the user's cache folder when they are there (`price_cache`)."""
    provider_id = _PROVIDER_IDS.get(provider)
    if provider_id is None:
        return None
    database = price_cache.database_identity()
    key = f"{provider_id}/{model}"
    today = datetime.now(UTC).date()
    cached = price_cache.load(database, key, today) if database else None
    if cached is None:
        cached = _look_up(provider_id, model, today)
        if cached is None:  # prices that change with the time of day: the database each call
            return lambda usage: _call_price(provider_id, model, usage)
        if database:
            price_cache.store(database, key, cached)
    if cached.rates is None:
        return None
    return _rates_pricer(cached.rates, cached.until, provider_id, model)


def _price_usage(usage: Usage) -> PriceUsage:
    from genai_prices import Usage as PriceUsage

    return PriceUsage(
        # genai-prices counts cached tokens inside input_tokens.
        input_tokens=usage.total_input_tokens,
        output_tokens=usage.output_tokens,
        cache_read_tokens=usage.cache_read_tokens,
        cache_write_tokens=usage.cache_write_tokens,
    )


def _call_price(provider_id: str, model: str, usage: Usage) -> float:
    """The database's price of one call, found from the whole database."""
    from genai_prices import calc_price

    return float(calc_price(_price_usage(usage), model, provider_id=provider_id).total_price)


def _rates_pricer(
    kept: price_cache.Rates, until: date | None, provider_id: str, model: str
) -> Pricer:
    """Prices calls at the `kept` rates through `genai-prices` itself (it applies the tiers),
    or from the whole database again from the day `until` on."""
    from genai_prices.types import ModelPrice, Tier, TieredPrices

    rates = ModelPrice(
        **{
            name: (
                TieredPrices(value.base, [Tier(start, price) for start, price in value.tiers])
                if isinstance(value, price_cache.Tiered)
                else value
            )
            for name, value in kept.items()
        }
    )

    def price(usage: Usage) -> float:
        if until is not None and datetime.now(UTC).date() >= until:
            return _call_price(provider_id, model, usage)
        return float(rates.calc_price(_price_usage(usage))["total_price"])

    return price


def _look_up(provider_id: str, model: str, today: date) -> price_cache.CachedPrice | None:
    """What the whole database says of `model` (loading it: ~150 ms), as a price to keep; None
    when its price cannot be kept (it changes with the time of day)."""
    from genai_prices import Usage as PriceUsage
    from genai_prices import calc_price
    from genai_prices.types import ModelPrice, StartDateConstraint

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            found = calc_price(PriceUsage(input_tokens=1), model, provider_id=provider_id)
    except LookupError:
        return price_cache.CachedPrice(None)
    until = None
    if not isinstance(found.model.prices, ModelPrice):  # prices that change on given dates
        constraints = [price.constraint for price in found.model.prices if price.constraint]
        if not all(isinstance(c, StartDateConstraint) for c in constraints):
            return None
        later = [c.start_date for c in constraints if isinstance(c, StartDateConstraint)]
        until = min((day for day in later if day > today), default=None)
    rates = _rates_of(found.model_price)
    return None if rates is None else price_cache.CachedPrice(rates, until)


def _rates_of(model_price: ModelPrice) -> price_cache.Rates | None:
    from genai_prices.types import TieredPrices

    rates: price_cache.Rates = {}
    for name, value in vars(model_price).items():
        if name.startswith("_") or value is None:
            continue
        if isinstance(value, Decimal):
            rates[name] = value
        elif isinstance(value, TieredPrices):
            tiers = tuple((tier.start, tier.price) for tier in value.tiers)
            rates[name] = price_cache.Tiered(value.base, tiers)
        else:
            return None  # a kind of price this cache does not know
    return rates


def add_costs(total: float | None, call: float | None, *, first: bool) -> float | None:
    """Accumulate call costs; once any call is unpriced the total is unknown (None)."""
    if call is None:
        return None
    if first:
        return call
    return None if total is None else total + call


CHARS_PER_TOKEN = 4
"""Characters per token assumed for English text and code; the kernel calibrates its prompt
sizes against the counts the provider reports."""


def tokens_for_chars(chars: int) -> int:
    """Estimated tokens of `chars` characters of prompt text, rounded up."""
    return -(-chars // CHARS_PER_TOKEN)


def estimate_tokens(text: str) -> int:
    """Estimated tokens of `text` (about four characters a token)."""
    return tokens_for_chars(len(text))


def estimate_fixed_tokens(system: str, tools: Sequence[object]) -> int:
    """Estimated tokens of a request's fixed part: its system prompt and tool definitions."""
    return tokens_for_chars(len(system) + sum(len(repr(tool)) for tool in tools))
