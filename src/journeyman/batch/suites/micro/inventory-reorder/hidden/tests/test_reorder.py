from inventory import Item, Stock


def test_item_above_its_level_is_not_reordered():
    stock = Stock()
    stock.add(Item("washer", 9, 5))
    assert stock.reorder_list() == []


def test_item_at_its_level_is_reordered():
    stock = Stock()
    stock.add(Item("washer", 5, 5))
    stock.add(Item("bolt", 6, 5))
    stock.add(Item("nut", 1, 5))
    assert stock.reorder_list() == ["nut", "washer"]


def test_reorder_list_after_taking_down_to_the_level():
    stock = Stock()
    stock.add(Item("screw", 8, 3))
    stock.take("screw", 5)
    assert stock.reorder_list() == ["screw"]
