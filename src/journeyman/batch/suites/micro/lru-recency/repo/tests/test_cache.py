from cachekit import LRUCache


def test_put_and_get():
    cache = LRUCache(2)
    cache.put("a", 1)
    assert cache.get("a") == 1


def test_capacity_is_respected():
    cache = LRUCache(2)
    for key in "abc":
        cache.put(key, key)
    assert len(cache) == 2 and "a" not in cache


def test_missing_key():
    assert LRUCache(1).get("nope", 7) == 7
