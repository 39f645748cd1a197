"""Write single CSV lines without the csv module's writer objects."""

from .writer import format_row

__all__ = ["format_row"]
