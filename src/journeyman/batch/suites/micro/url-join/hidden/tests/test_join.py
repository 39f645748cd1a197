from apiclient import Client, join_url


def test_one_slash_between():
    for base in ["https://h/v1", "https://h/v1/", "https://h/v1//"]:
        for path in ["users", "/users", "//users"]:
            assert join_url(base, path) == "https://h/v1/users", (base, path)


def test_client_urls():
    client = Client("https://api.example.com/v1/")
    assert client.url_for("/users") == "https://api.example.com/v1/users"
    assert client.url_for("/users/7", fields="name") == (
        "https://api.example.com/v1/users/7?fields=name"
    )
