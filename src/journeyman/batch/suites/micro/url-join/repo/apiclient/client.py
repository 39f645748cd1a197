from urllib.parse import urlencode

from .urls import join_url


class Client:
    def __init__(self, base_url: str) -> None:
        self.base_url = base_url

    def url_for(self, endpoint: str, **params: object) -> str:
        url = join_url(self.base_url, endpoint)
        if params:
            url += "?" + urlencode(sorted(params.items()))
        return url
