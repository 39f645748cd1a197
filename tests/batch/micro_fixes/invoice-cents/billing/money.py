from decimal import Decimal, InvalidOperation


def to_cents(amount: str) -> int:
    """Whole cents in a decimal amount such as "12.30" (at most two decimal places)."""
    try:
        value = Decimal(amount.strip())
    except InvalidOperation as error:
        raise ValueError(f"not an amount: {amount!r}") from error
    cents = value * 100
    if cents != cents.to_integral_value():
        raise ValueError(f"{amount!r} has more than two decimal places")
    return int(cents)


def format_cents(cents: int) -> str:
    """"12.34" for 1234."""
    sign = "-" if cents < 0 else ""
    whole, rest = divmod(abs(cents), 100)
    return f"{sign}{whole}.{rest:02d}"
