SEPARATOR = ","
_SPECIAL = (SEPARATOR, '"', "\r", "\n")


def quote(field: str) -> str:
    """The field as it must appear between separators."""
    if any(char in field for char in _SPECIAL):
        return '"' + field.replace('"', '""') + '"'
    return field
