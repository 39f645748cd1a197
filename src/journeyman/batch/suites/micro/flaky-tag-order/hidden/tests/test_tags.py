import string

from blog import Post, normalize_tags

MANY = [f"Tag-{letter}{index}" for index, letter in enumerate(string.ascii_lowercase)]


def test_duplicates_are_dropped():
    assert sorted(normalize_tags(["a", "A ", "b", "a"])) == ["a", "b"]


def test_blank_tags_are_dropped():
    assert normalize_tags(["", "  ", "x"]) == ["x"]


def test_tags_keep_their_order():
    given = [*MANY, " TAG-A0 ", "zeta", *reversed(MANY)]
    expected = [tag.lower() for tag in MANY] + ["zeta"]
    assert normalize_tags(given) == expected


def test_post_tags_keep_their_order():
    post = Post("Long", list(reversed(MANY)))
    assert post.tags == [tag.lower() for tag in reversed(MANY)]
