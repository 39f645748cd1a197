from dataclasses import dataclass

from .times import parse_time


@dataclass(frozen=True)
class Event:
    start: str
    title: str

    def __post_init__(self) -> None:
        parse_time(self.start)


def build_agenda(pairs: list[tuple[str, str]]) -> list[Event]:
    """Events ordered by start time."""
    events = [Event(start, title) for start, title in pairs]
    return sorted(events, key=lambda event: event.start)


def render(events: list[Event]) -> list[str]:
    return [f"{event.start:>5}  {event.title}" for event in events]
