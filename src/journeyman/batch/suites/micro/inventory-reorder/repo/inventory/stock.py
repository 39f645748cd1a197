from .items import Item


class Stock:
    """Items by SKU."""

    def __init__(self) -> None:
        self._items: dict[str, Item] = {}

    def add(self, item: Item) -> None:
        self._items[item.sku] = item

    def take(self, sku: str, count: int) -> None:
        item = self._items[sku]
        if count > item.quantity:
            raise ValueError(f"only {item.quantity} of {sku} left, cannot take {count}")
        item.quantity -= count

    def reorder_list(self) -> list[str]:
        """SKUs to order again, sorted."""
        return sorted(sku for sku, item in self._items.items() if item.needs_reorder())
