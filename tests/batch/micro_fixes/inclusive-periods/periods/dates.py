from datetime import date, timedelta


def parse_day(text: str) -> date:
    """A date from "YYYY-MM-DD"."""
    return date.fromisoformat(text.strip())


def days_in_range(start: date, end: date) -> int:
    """How many days the period from `start` to `end` covers."""
    if end < start:
        raise ValueError(f"period ends ({end}) before it starts ({start})")
    return (end - start).days + 1


def weekdays(start: date, end: date) -> list[date]:
    """Monday-to-Friday dates from `start` to `end`, both included."""
    days = (start + timedelta(n) for n in range((end - start).days + 1))
    return [day for day in days if day.weekday() < 5]
