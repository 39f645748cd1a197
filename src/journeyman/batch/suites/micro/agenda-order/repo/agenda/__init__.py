"""A day's agenda from (time, title) pairs."""

from .events import Event, build_agenda, render
from .times import parse_time

__all__ = ["Event", "build_agenda", "parse_time", "render"]
