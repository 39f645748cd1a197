"""Small statistics for eval reports."""

from __future__ import annotations

import math

Z_95 = 1.959963984540054
"""The two-sided 95 % quantile of the standard normal distribution."""


def wilson_interval(successes: int, trials: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval of a success rate: (low, high), both within [0, 1].

    Unlike the normal approximation it stays inside [0, 1] and is not degenerate at 0 % or
    100 %, which matters for the small suites evals run on. With no trials it is (0, 1)."""
    if trials < 0 or successes < 0 or successes > trials:
        raise ValueError(f"need 0 <= successes <= trials, got {successes} of {trials}")
    if trials == 0:
        return 0.0, 1.0
    rate = successes / trials
    z2 = z * z
    centre = (rate + z2 / (2 * trials)) / (1 + z2 / trials)
    spread = (z / (1 + z2 / trials)) * math.sqrt(
        rate * (1 - rate) / trials + z2 / (4 * trials * trials)
    )
    return max(0.0, centre - spread), min(1.0, centre + spread)
