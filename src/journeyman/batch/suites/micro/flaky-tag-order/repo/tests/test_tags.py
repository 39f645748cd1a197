from blog import normalize_tags


def test_duplicates_are_dropped():
    assert sorted(normalize_tags(["a", "A ", "b", "a"])) == ["a", "b"]


def test_blank_tags_are_dropped():
    assert normalize_tags(["", "  ", "x"]) == ["x"]


def test_tags_keep_their_order():
    # Sometimes fails on CI; passes on a re-run.
    assert normalize_tags(["Python", "testing"]) == ["python", "testing"]
