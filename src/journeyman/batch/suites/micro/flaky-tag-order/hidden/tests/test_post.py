from blog import Post


def test_summary():
    assert Post("Hello", ["a", "b", "a"]).summary() == "Hello [2 tags]"
