SEPARATOR = ","


def quote(field: str) -> str:
    """The field as it must appear between separators."""
    if SEPARATOR in field:
        return f'"{field}"'
    return field
