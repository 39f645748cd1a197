def join_url(base: str, path: str) -> str:
    """`path` appended to `base`."""
    return base + "/" + path
