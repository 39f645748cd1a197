"""Simple descriptive statistics."""

from __future__ import annotations

from collections.abc import Sequence


def mean(values: Sequence[float]) -> float:
    """Arithmetic mean of a non-empty sequence."""
    if not values:
        raise ValueError("mean() needs at least one value")
    return sum(values) / len(values)


def median(values: Sequence[float]) -> float:
    """Middle value of a non-empty sequence (average of the two middle values when even)."""
    if not values:
        raise ValueError("median() needs at least one value")
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return ordered[middle]
