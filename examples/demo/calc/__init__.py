"""A tiny statistics package used by journeyman's demo."""

from calc.stats import mean, median

__all__ = ["mean", "median"]
