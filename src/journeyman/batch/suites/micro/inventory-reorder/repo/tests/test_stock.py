import pytest

from inventory import Item, Stock


def test_take_reduces_quantity():
    stock = Stock()
    stock.add(Item("bolt", 10, 2))
    stock.take("bolt", 4)
    assert stock._items["bolt"].quantity == 6


def test_taking_too_much_is_refused():
    stock = Stock()
    stock.add(Item("nut", 1, 0))
    with pytest.raises(ValueError):
        stock.take("nut", 2)
