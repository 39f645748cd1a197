from collections.abc import Iterable

from .fields import SEPARATOR, quote


def format_row(values: Iterable[object]) -> str:
    """One CSV line (without the line ending) for `values`."""
    return SEPARATOR.join(quote(str(value)) for value in values)
