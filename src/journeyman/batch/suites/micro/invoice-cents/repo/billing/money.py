def to_cents(amount: str) -> int:
    """Whole cents in a decimal amount such as "12.30"."""
    return int(float(amount) * 100)


def format_cents(cents: int) -> str:
    """"12.34" for 1234."""
    sign = "-" if cents < 0 else ""
    whole, rest = divmod(abs(cents), 100)
    return f"{sign}{whole}.{rest:02d}"
