"""The one pricer and the one token estimate.

`model_pricer` prices a call's usage for a provider and model: at the user's `price_per_mtok`
when given, else from the `genai-prices` database; a model it does not know costs None, never
0 — except the embedded model (`LOCAL_PROVIDERS`), which runs inside journeyman and costs
nothing. Every cost — a call's, a budget's fitting before a call, a pool's floor — comes from
it.

`estimate_tokens` (four characters a token) sizes prompts before a provider reports real counts
(the context pack, compaction, the budget baseline, the workspace index).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from functools import lru_cache

from journeyman.core.messages import Usage

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
    if not _is_priced(provider, model):
        return None
    from genai_prices import Usage as PriceUsage
    from genai_prices import calc_price

    price_usage = PriceUsage(
        # genai-prices counts cached tokens inside input_tokens.
        input_tokens=usage.total_input_tokens,
        output_tokens=usage.output_tokens,
        cache_read_tokens=usage.cache_read_tokens,
        cache_write_tokens=usage.cache_write_tokens,
    )
    calc = calc_price(price_usage, model, provider_id=_PROVIDER_IDS[provider])
    return float(calc.total_price)


@lru_cache(maxsize=64)
def _is_priced(provider: str, model: str) -> bool:
    if provider not in _PROVIDER_IDS:
        return False
    from genai_prices import Usage as PriceUsage
    from genai_prices import calc_price

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            calc_price(PriceUsage(input_tokens=1), model, provider_id=_PROVIDER_IDS[provider])
    except LookupError:
        return False
    return True


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
