"""The prices `genai-prices` gave for each model, kept in the user's cache folder.

Loading the price database takes about 150 ms of CPU (the data module is one large literal),
which every run paid before its first model call. A model's price found once is written to
``prices.json`` in the cache folder (``JOURNEYMAN_CACHE_DIR``, else the platform's user cache
folder), under the identity of the installed database (`database_identity`: the path, size and
modification time of its data file), so an upgrade of `genai-prices` or any change to its data
looks every model up again. A model the database does not know is kept as unknown too.

What is kept is the database's own price record for the model, to be applied by `genai-prices`
itself (tiers and all); a price that changes on a date is kept until that date, and one that
changes with the time of day is not kept. The file is the user's, like the config folder (the
bubblewrap sandbox hides both from commands); an entry that does not read back as prices (not
JSON, a negative, infinite or non-numeric price, an unknown shape) is looked up in the database
again, never used.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import tempfile
from dataclasses import dataclass
from datetime import date
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

CACHE_ENV = "JOURNEYMAN_CACHE_DIR"
FILE_NAME = "prices.json"
FORMAT = 1
MAX_MODELS = 256
"""A file that would hold more starts over (models are looked up again as they are used)."""

Tier = tuple[int, Decimal]
"""From how many input tokens on, the price per million."""


@dataclass(frozen=True)
class Tiered:
    """A price per million that changes with the number of input tokens of the call."""

    base: Decimal
    tiers: tuple[Tier, ...]


Rates = dict[str, Decimal | Tiered]
"""A model's price record: price key (``input_mtok``, ...) -> price."""


@dataclass(frozen=True)
class CachedPrice:
    """What the database said of one model."""

    rates: Rates | None
    """None: the database does not know the model."""
    until: date | None = None
    """The first day (UTC) the rates may no longer hold; None: until the database changes."""


def database_identity() -> str | None:
    """Names the installed price database without importing it; None when it is not there."""
    spec = importlib.util.find_spec("genai_prices")
    if spec is None or not spec.submodule_search_locations:
        return None
    data = Path(next(iter(spec.submodule_search_locations))) / "data.py"
    try:
        stat = data.stat()
    except OSError:
        return None
    return f"{data}:{stat.st_size}:{stat.st_mtime_ns}"


def cache_file() -> Path:
    root = os.environ.get(CACHE_ENV)
    if not root:
        from platformdirs import user_cache_dir

        root = user_cache_dir("journeyman")
    return Path(root) / FILE_NAME


def load(database: str, key: str, today: date) -> CachedPrice | None:
    """The kept price of model `key` under `database`, if there is a usable one for `today`."""
    models = _read(database)
    entry = models.get(key)
    if entry is None:
        return None
    cached = _decode(entry)
    if cached is None or (cached.until is not None and today >= cached.until):
        return None
    return cached


def store(database: str, key: str, price: CachedPrice) -> None:
    """Keep `price` for model `key` (best effort: a cache that cannot be written is skipped)."""
    models = _read(database)
    if len(models) >= MAX_MODELS:
        models = {}
    models[key] = _encode(price)
    path = cache_file()
    body = json.dumps({"format": FORMAT, "database": database, "models": models})
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=".prices-", dir=path.parent)
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                out.write(body)
            os.replace(temporary, path)  # readers see the old file or the new one, never half
        except OSError:
            Path(temporary).unlink(missing_ok=True)
            raise


def _read(database: str) -> dict[str, Any]:
    try:
        document = json.loads(cache_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(document, dict):
        return {}
    models = document.get("models")
    if document.get("format") != FORMAT or document.get("database") != database:
        return {}
    return models if isinstance(models, dict) else {}


def _encode(price: CachedPrice) -> dict[str, Any]:
    rates = None
    if price.rates is not None:
        rates = {
            name: (
                {"base": str(value.base), "tiers": [[start, str(p)] for start, p in value.tiers]}
                if isinstance(value, Tiered)
                else str(value)
            )
            for name, value in price.rates.items()
        }
    until = None if price.until is None else price.until.isoformat()
    return {"rates": rates, "until": until}


_PRICE_KEY = re.compile(r"[a-z][a-z0-9_]{0,63}")


class _Unreadable(ValueError):
    pass


def _decode(entry: object) -> CachedPrice | None:
    """The price an entry holds, or None when it is not exactly what `_encode` writes."""
    try:
        if not isinstance(entry, dict) or entry.keys() != {"rates", "until"}:
            raise _Unreadable
        until = entry["until"]
        if until is not None and not isinstance(until, str):
            raise _Unreadable
        day = None if until is None else date.fromisoformat(until)
        if entry["rates"] is None:
            return CachedPrice(None, day)
        if not isinstance(entry["rates"], dict):  # {}: the database prices nothing of it
            raise _Unreadable
        rates: Rates = {
            _price_key(name): _tiered(value) if isinstance(value, dict) else _decimal(value)
            for name, value in entry["rates"].items()
        }
        return CachedPrice(rates, day)
    except ValueError:  # _Unreadable, a bad date
        return None


def _price_key(name: object) -> str:
    if not isinstance(name, str) or not _PRICE_KEY.fullmatch(name):
        raise _Unreadable
    return name


def _decimal(value: object) -> Decimal:
    if not isinstance(value, str):
        raise _Unreadable
    try:
        number = Decimal(value)
    except InvalidOperation:
        raise _Unreadable from None
    if not number.is_finite() or number < 0:
        raise _Unreadable
    return number


def _tiered(value: dict[str, Any]) -> Tiered:
    tiers = value.get("tiers")
    if value.keys() != {"base", "tiers"} or not isinstance(tiers, list):
        raise _Unreadable
    parsed: list[Tier] = []
    for tier in tiers:
        if not isinstance(tier, list) or len(tier) != 2 or type(tier[0]) is not int:
            raise _Unreadable
        if tier[0] < 0 or (parsed and tier[0] < parsed[-1][0]):
            raise _Unreadable
        parsed.append((tier[0], _decimal(tier[1])))
    return Tiered(_decimal(value["base"]), tuple(parsed))
