from collections.abc import Iterable


def normalize_tags(raw: Iterable[str]) -> list[str]:
    """Lower-cased, stripped tags, each once, blank ones dropped."""
    cleaned = (tag.strip().lower() for tag in raw)
    return list({tag for tag in cleaned if tag})
