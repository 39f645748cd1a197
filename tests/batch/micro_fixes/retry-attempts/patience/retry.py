import time
from collections.abc import Callable
from typing import TypeVar

from .backoff import delays

T = TypeVar("T")


class RetryError(Exception):
    """Every attempt failed."""


def retry(
    func: Callable[[], T],
    attempts: int = 3,
    base_delay: float = 0.1,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """The result of the first call of `func` that does not raise."""
    if attempts < 1:
        raise ValueError("attempts must be at least 1")
    waits = delays(base_delay)
    last_error: Exception | None = None
    for attempt in range(1, attempts + 1):
        try:
            return func()
        except Exception as error:
            last_error = error
            if attempt < attempts:
                sleep(next(waits))
    raise RetryError(f"gave up after {attempts} attempts") from last_error
