from datetime import date

from .dates import days_in_range


def daily_average(total: float, start: date, end: date) -> float:
    """`total` spread evenly over the days of the period."""
    return total / days_in_range(start, end)
