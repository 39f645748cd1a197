"""Date ranges for reports."""

from .dates import days_in_range, parse_day, weekdays
from .report import daily_average

__all__ = ["daily_average", "days_in_range", "parse_day", "weekdays"]
