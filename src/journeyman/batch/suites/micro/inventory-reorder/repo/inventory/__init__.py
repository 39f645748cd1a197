"""A small stock keeper for one warehouse."""

from .items import Item
from .stock import Stock

__all__ = ["Item", "Stock"]
