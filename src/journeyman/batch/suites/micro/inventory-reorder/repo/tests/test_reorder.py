from inventory import Item, Stock


def test_item_above_its_level_is_not_reordered():
    stock = Stock()
    stock.add(Item("washer", 9, 5))
    assert stock.reorder_list() == []
