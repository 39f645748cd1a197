from apiclient import Client, join_url


def test_plain_join():
    assert join_url("https://h", "a") == "https://h/a"


def test_query_is_encoded():
    url = Client("https://h").url_for("find", q="a b", page=2)
    assert url == "https://h/find?page=2&q=a+b"


def test_no_query_without_params():
    assert "?" not in Client("https://h").url_for("x")
