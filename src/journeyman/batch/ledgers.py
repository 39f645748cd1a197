"""Where a batch's budget ledger lives: in the batch's process, in a named Ray actor, or in
Redis (`--ledger`), so that every worker of a cluster, and several batches or evals naming the
same ledger, draw on one cap.

Every backend keeps the same record, a `LedgerBook`: the pool itself
(`economics.ledger.BudgetLedger`), the batch that set its cap, and what each batch spent
through it (its *account*). Only how the book is kept differs:

- `LocalLedger`: in this process, behind a lock (the default);
- `RayLedger` (`batch.ray_ledger`): inside a Ray actor, one method at a time; named with
  `--ledger NAME`, it outlives the batch (detached) so later batches share it;
- `RedisLedger`: one key on a Redis server (`--ledger redis://host:port/N`, or
  `redis://host:port/N#NAME` for a ledger of another name), read, changed and written back in a
  `WATCH`/`MULTI` transaction that is retried when another driver wrote in between — so two
  drivers can never both take the last dollar.

A batch `join`s the ledger before it reserves anything: a ledger that holds another cap is
refused (naming both caps and the batch that set the first), reservations an earlier run of
the same batch left open (it was killed) are closed at what they reported, and what the
session store says the batch already spent is charged, less what the ledger already counted
for it — so a batch is never charged twice, whether the ledger is new or remembers it.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar
from urllib.parse import quote, urlsplit

from journeyman.core.errors import AgentError, ConfigurationError
from journeyman.economics.ledger import (
    Amount,
    BudgetLedger,
    LedgerPolicy,
    LedgerStats,
    Reservation,
)

BATCH_POLICY = LedgerPolicy(reserve_share=0.0, max_share=1.0, min_tokens=1, min_usd=0.0)
"""How every batch ledger sizes grants: no share kept back, no cap on one holder's share; the
scheduler asks for exactly what it grants (`batch.allocation`)."""
DEFAULT_LEDGER_NAME = "default"
"""The name of a Redis ledger whose url names none."""
REDIS_KEY_PREFIX = "journeyman:ledger:"
T = TypeVar("T")


class LedgerError(AgentError):
    """The shared ledger cannot be reached or holds something else than a ledger."""


class LedgerCapMismatch(ConfigurationError):
    """A batch joined a shared ledger that holds another cap."""


class LedgerClient(Protocol):
    """The global ledger as the scheduler uses it, wherever it lives. `account` is the batch
    that spends."""

    def join(self, account: str, cap: Amount, already: Amount) -> None:
        """Take part in the ledger (see the module's docstring); `LedgerCapMismatch` when it
        holds another cap."""
        ...

    def reserve(self, account: str, holder: str, grant: Amount) -> Reservation:
        """Reserve exactly `grant` (`AllocationRefused` when what is left cannot)."""
        ...

    def report(self, reservation: Reservation, used: Amount, run: str = "") -> None:
        """What the reservation's holder has spent so far (a running total) in `run` (one
        process's attempt: a run that died still counts when another takes over)."""
        ...

    def settle(self, reservation: Reservation, used: Amount) -> Amount:
        """Close the reservation at `used` (at least what was reported); returns what went
        back to the pool."""
        ...

    def available(self) -> Amount:
        """What could still be reserved, all together (None: not limited)."""
        ...

    def stats(self) -> LedgerStats:
        """The whole ledger (every batch that shares it)."""
        ...

    def account(self, account: str) -> Amount:
        """What one batch spent through the ledger (settled and charged)."""
        ...

    def for_workers(self) -> LedgerClient | None:
        """This ledger as a worker on another process or node can use it to report its
        spend per model call, or None when it cannot travel (the in-process one)."""
        ...

    def describe(self) -> str:
        """How the ledger is named in messages ("the batch's own ledger", "Redis ledger ...")."""
        ...


@dataclass
class LedgerBook:
    """The record every backend keeps: the pool, who set its cap, and each batch's account."""

    name: str
    pool: BudgetLedger
    owner: str
    """The batch that opened the ledger (and so set its cap)."""
    accounts: dict[str, list[float]] = field(default_factory=dict)
    """What each batch spent through the ledger: [tokens, USD]."""
    holders: dict[int, str] = field(default_factory=dict)
    """The batch of each open reservation."""

    @classmethod
    def open(cls, name: str, account: str, cap: Amount) -> LedgerBook:
        return cls(name, BudgetLedger(cap, BATCH_POLICY), account)

    def join(self, account: str, cap: Amount, already: Amount) -> None:
        if cap != self.pool.total:
            raise LedgerCapMismatch(
                f"ledger {self.name!r} holds a cap of {self.pool.total}, set by batch "
                f"{self.owner}; batch {account} asks for {cap}. Batches share a ledger only "
                "under one cap: give the same global budget, or name another ledger"
            )
        for reservation in self.pool.open_reservations():
            if self.holders.get(reservation.id) == account:  # left open by a killed run
                self.settle(reservation, Amount(0, 0.0))
        recorded = self.accounts.get(account, [0.0, 0.0])
        extra = Amount(
            max(0, (already.tokens or 0) - int(recorded[0])),
            max(0.0, (already.usd or 0.0) - recorded[1]),
        )
        if extra.tokens or extra.usd:
            self.pool.charge(extra)
            self._add(account, extra)

    def reserve(self, account: str, holder: str, grant: Amount) -> Reservation:
        reservation = self.pool.reserve(holder, request=grant, floor=_floor(grant))
        self.holders[reservation.id] = account
        return reservation

    def report(self, reservation: Reservation, used: Amount, run: str = "") -> None:
        self.pool.report(reservation, used, run)

    def settle(self, reservation: Reservation, used: Amount) -> Amount:
        account = self.holders.pop(reservation.id, None)
        before = self.pool.stats().spent
        returned = self.pool.settle(reservation, used)
        after = self.pool.stats().spent
        if account is not None:
            self._add(
                account,
                Amount(
                    (after.tokens or 0) - (before.tokens or 0), (after.usd or 0) - (before.usd or 0)
                ),
            )
        return returned

    def account(self, account: str) -> Amount:
        tokens, usd = self.accounts.get(account, [0.0, 0.0])
        return Amount(int(tokens), usd)

    def _add(self, account: str, amount: Amount) -> None:
        entry = self.accounts.setdefault(account, [0.0, 0.0])
        entry[0] += amount.tokens or 0
        entry[1] += amount.usd or 0.0

    def to_state(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "owner": self.owner,
            "pool": self.pool.to_state(),
            "accounts": self.accounts,
            "holders": {str(k): v for k, v in self.holders.items()},
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> LedgerBook:
        return cls(
            name=str(state["name"]),
            pool=BudgetLedger.from_state(state["pool"]),
            owner=str(state["owner"]),
            accounts={str(k): [float(v[0]), float(v[1])] for k, v in state["accounts"].items()},
            holders={int(k): str(v) for k, v in state["holders"].items()},
        )


def _floor(grant: Amount) -> Amount:
    """A grant is all or nothing: its floor is itself."""
    return Amount(grant.tokens or 0, grant.usd or 0.0)


class LocalLedger:
    """The batch's own ledger, in its process (the default)."""

    def __init__(self, cap: Amount, name: str = "the batch's own ledger") -> None:
        self._cap = cap
        self._name = name
        self._book: LedgerBook | None = None
        self._lock = threading.Lock()

    def _book_for(self, account: str, cap: Amount) -> LedgerBook:
        if self._book is None:
            self._book = LedgerBook.open(self._name, account, cap)
        return self._book

    def _with(self, change: Callable[[LedgerBook], T]) -> T:
        with self._lock:
            return change(self._book_for("", self._cap))

    def join(self, account: str, cap: Amount, already: Amount) -> None:
        with self._lock:
            self._book_for(account, cap).join(account, cap, already)

    def reserve(self, account: str, holder: str, grant: Amount) -> Reservation:
        return self._with(lambda book: book.reserve(account, holder, grant))

    def report(self, reservation: Reservation, used: Amount, run: str = "") -> None:
        self._with(lambda book: book.report(reservation, used, run))

    def settle(self, reservation: Reservation, used: Amount) -> Amount:
        return self._with(lambda book: book.settle(reservation, used))

    def available(self) -> Amount:
        return self._with(lambda book: book.pool.available())

    def stats(self) -> LedgerStats:
        return self._with(lambda book: book.pool.stats())

    def account(self, account: str) -> Amount:
        return self._with(lambda book: book.account(account))

    def for_workers(self) -> LedgerClient | None:
        return None

    def describe(self) -> str:
        return self._name


REDIS_PASSWORD_ENV = "JOURNEYMAN_LEDGER_REDIS_PASSWORD"
"""Where a worker finds the password of a Redis ledger whose url has one: the password never
travels with a task (like API keys, it comes from the worker's own environment)."""


class RedisLedger:
    """A ledger kept under one key of a Redis server; every change is a WATCH/MULTI transaction
    on that key, retried when another client changed it first. Pickles as its url, without
    its password, and name: a worker that receives it opens its own connection, with the
    password from its own environment (`REDIS_PASSWORD_ENV`)."""

    def __init__(
        self, url: str, name: str = DEFAULT_LEDGER_NAME, *, timeout_s: float = 5.0
    ) -> None:
        self.url = url
        self.name = name
        self.timeout_s = timeout_s
        self._client: Any = None

    def __getstate__(self) -> dict[str, Any]:
        url, had_password = _strip_password(self.url)
        return {
            "url": url,
            "password": had_password,
            "name": self.name,
            "timeout_s": self.timeout_s,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        url = state["url"]
        password = os.environ.get(REDIS_PASSWORD_ENV) if state["password"] else None
        if password:
            parts = urlsplit(url)
            user = quote(parts.username or "", safe="")
            netloc = f"{user}:{quote(password, safe='')}@{parts.netloc.rsplit('@', 1)[-1]}"
            url = parts._replace(netloc=netloc).geturl()
        self.__init__(url, state["name"], timeout_s=state["timeout_s"])  # type: ignore[misc]

    @property
    def key(self) -> str:
        return REDIS_KEY_PREFIX + self.name

    def _redis(self) -> Any:
        if self._client is None:
            try:
                import redis
            except ImportError:
                raise ConfigurationError(
                    "--ledger redis://... needs the redis client: pip install 'journeyman[redis]'"
                ) from None
            try:
                self._client = redis.Redis.from_url(
                    self.url, socket_timeout=self.timeout_s, socket_connect_timeout=self.timeout_s
                )
            except ValueError as error:
                raise ConfigurationError(f"--ledger {self.url}: {error}") from None
        return self._client

    def _change(self, change: Callable[[LedgerBook | None], tuple[LedgerBook, T]]) -> T:
        """Read the book, `change` it, write it back unless another client wrote first (then
        start over)."""
        import redis

        client = self._redis()
        try:
            with client.pipeline() as pipe:
                while True:
                    try:
                        pipe.watch(self.key)
                        book = self._decode(pipe.get(self.key))
                        changed, result = change(book)
                        pipe.multi()
                        pipe.set(self.key, json.dumps(changed.to_state()))
                        pipe.execute()
                        return result
                    except redis.WatchError:
                        continue
        except redis.RedisError as error:
            raise self._unreachable(error) from None

    def _read(self) -> LedgerBook:
        import redis

        try:
            book = self._decode(self._redis().get(self.key))
        except redis.RedisError as error:
            raise self._unreachable(error) from None
        if book is None:
            raise LedgerError(f"{self.describe()} holds nothing yet")
        return book

    def _decode(self, raw: bytes | None) -> LedgerBook | None:
        if raw is None:
            return None
        try:
            return LedgerBook.from_state(json.loads(raw))
        except (ValueError, KeyError, TypeError, IndexError) as error:
            raise LedgerError(
                f"Redis key {self.key} at {_without_password(self.url)} does not hold a "
                f"journeyman ledger ({error}); name another ledger with redis://host:port/N#NAME"
            ) from None

    def _unreachable(self, error: Exception) -> LedgerError:
        return LedgerError(
            f"the Redis ledger at {_without_password(self.url)} cannot be reached ({error}); "
            "check that the server runs and the url is right"
        )

    def _existing(self, book: LedgerBook | None) -> LedgerBook:
        if book is None:
            raise LedgerError(f"{self.describe()} was removed mid-batch")
        return book

    def join(self, account: str, cap: Amount, already: Amount) -> None:
        def change(book: LedgerBook | None) -> tuple[LedgerBook, None]:
            book = book or LedgerBook.open(self.name, account, cap)
            book.join(account, cap, already)
            return book, None

        try:
            self._change(change)
        except LedgerError as error:  # before anything ran: the user's --ledger is unusable
            raise ConfigurationError(error.message) from None

    def reserve(self, account: str, holder: str, grant: Amount) -> Reservation:
        def change(book: LedgerBook | None) -> tuple[LedgerBook, Reservation]:
            book = self._existing(book)
            return book, book.reserve(account, holder, grant)

        return self._change(change)

    def report(self, reservation: Reservation, used: Amount, run: str = "") -> None:
        def change(book: LedgerBook | None) -> tuple[LedgerBook, None]:
            book = self._existing(book)
            book.report(reservation, used, run)
            return book, None

        self._change(change)

    def settle(self, reservation: Reservation, used: Amount) -> Amount:
        def change(book: LedgerBook | None) -> tuple[LedgerBook, Amount]:
            book = self._existing(book)
            return book, book.settle(reservation, used)

        return self._change(change)

    def available(self) -> Amount:
        return self._read().pool.available()

    def stats(self) -> LedgerStats:
        return self._read().pool.stats()

    def account(self, account: str) -> Amount:
        return self._read().account(account)

    def for_workers(self) -> LedgerClient | None:
        return self

    def describe(self) -> str:
        return f"Redis ledger {self.name!r} at {_without_password(self.url)}"


@dataclass(frozen=True)
class LedgerSpec:
    """What `--ledger` names: a Redis url (and key name), or a Ray actor's name."""

    redis_url: str | None = None
    name: str | None = None


def parse_ledger(value: str | None) -> LedgerSpec:
    """`--ledger`'s value: `redis://host:port/N[#NAME]` (also rediss://) or a plain NAME (a
    named Ray actor); `ConfigurationError` saying what is wrong."""
    if value is None:
        return LedgerSpec()
    text = value.strip()
    if text.startswith(("redis://", "rediss://")):
        url, _, name = text.partition("#")
        parts = urlsplit(url)
        if not parts.hostname:
            raise ConfigurationError(
                f"--ledger {_without_password(url)}: the Redis url names no host"
            )
        db = parts.path.strip("/")
        if db and not db.isdigit():
            raise ConfigurationError(
                f"--ledger {_without_password(url)}: the database after the port must be a number "
                "(redis://host:port/0); name the ledger after a # (redis://host:port/0#team)"
            )
        shown = f"{_without_password(url)}#{name}"
        return LedgerSpec(redis_url=url, name=_checked_name(name or DEFAULT_LEDGER_NAME, shown))
    if "://" in text:
        raise ConfigurationError(
            f"--ledger {value}: only redis:// urls are supported (or a plain name for a "
            "ledger in a Ray actor)"
        )
    return LedgerSpec(name=_checked_name(text, value))


def _checked_name(name: str, value: str) -> str:
    if not name or len(name) > 100 or not all(c.isalnum() or c in "-_." for c in name):
        raise ConfigurationError(
            f"--ledger {value}: a ledger's name is 1-100 letters, digits, '-', '_' or '.'"
        )
    return name


def _without_password(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[-1]
    return parts._replace(netloc=f"***@{netloc}").geturl()


def _strip_password(url: str) -> tuple[str, bool]:
    """`url` without its password (the user name kept), and whether it had one."""
    parts = urlsplit(url)
    if parts.password is None:
        return url, False
    host = parts.netloc.rsplit("@", 1)[-1]
    netloc = f"{parts.username}@{host}" if parts.username else host
    return parts._replace(netloc=netloc).geturl(), True


def cap_of(global_usd: float | None, global_tokens: int | None) -> Amount:
    return Amount(global_tokens, global_usd)


__all__ = [
    "BATCH_POLICY",
    "DEFAULT_LEDGER_NAME",
    "LedgerBook",
    "LedgerCapMismatch",
    "LedgerClient",
    "LedgerError",
    "LedgerSpec",
    "LocalLedger",
    "RedisLedger",
    "cap_of",
    "parse_ledger",
]
