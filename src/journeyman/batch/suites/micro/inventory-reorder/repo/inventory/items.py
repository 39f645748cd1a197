from dataclasses import dataclass


@dataclass
class Item:
    """One stock-keeping unit and how many of it are on the shelves."""

    sku: str
    quantity: int
    reorder_level: int

    def needs_reorder(self) -> bool:
        """True when the quantity is at or below the reorder level."""
        return self.quantity < self.reorder_level
