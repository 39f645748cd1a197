"""Call a flaky function again with exponential backoff."""

from .backoff import delays
from .retry import RetryError, retry

__all__ = ["RetryError", "delays", "retry"]
