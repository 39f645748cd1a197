from collections.abc import Iterator


def delays(base: float, factor: float = 2.0) -> Iterator[float]:
    """base, base*factor, base*factor**2, ... without end."""
    delay = base
    while True:
        yield delay
        delay *= factor
