def format_duration(seconds: int) -> str:
    """The shortest "1h2m3s"-style text for `seconds` ("0s" for zero)."""
    if seconds < 0:
        raise ValueError("durations are never negative")
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{hours}h" if hours else "", f"{minutes}m" if minutes else ""]
    parts.append(f"{secs}s" if secs or not (hours or minutes) else "")
    return "".join(parts)
