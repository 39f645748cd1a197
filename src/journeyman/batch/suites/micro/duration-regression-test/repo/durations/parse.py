import re

UNITS = {"h": 3600, "m": 60, "s": 1}
_PART = re.compile(r"(\d+)([hms])")


def parse_duration(text: str) -> int:
    """Seconds in a duration such as "90s", "5m" or "1h30m"."""
    cleaned = text.strip().lower()
    if not cleaned:
        raise ValueError("empty duration")
    total = 0
    consumed = ""
    for number, unit in _PART.findall(cleaned):
        total = int(number) * UNITS[unit]
        consumed += number + unit
    if consumed != cleaned:
        raise ValueError(f"not a duration: {text!r}")
    return total
