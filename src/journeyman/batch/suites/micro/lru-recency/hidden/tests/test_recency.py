from cachekit import CachedLoader, LRUCache


def test_get_refreshes_an_entry():
    cache = LRUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1
    cache.put("c", 3)
    assert "a" in cache and "c" in cache and "b" not in cache


def test_loader_keeps_hot_keys():
    loader = CachedLoader(str.upper, capacity=2)
    for key in ["hot", "x", "hot", "y", "hot", "z", "hot"]:
        assert loader(key) == key.upper()
    assert loader.loads == 4
