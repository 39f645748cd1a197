def parse_time(text: str) -> tuple[int, int]:
    """(hour, minute) from "9:05" or "21:30"."""
    hours, _, minutes = text.strip().partition(":")
    if not (hours.isdigit() and minutes.isdigit() and len(minutes) == 2):
        raise ValueError(f"not a time: {text!r}")
    hour, minute = int(hours), int(minutes)
    if hour > 23 or minute > 59:
        raise ValueError(f"not a time of day: {text!r}")
    return hour, minute
