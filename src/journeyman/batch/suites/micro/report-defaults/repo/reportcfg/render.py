from typing import Any


def render(config: dict[str, Any], rows: list[dict[str, Any]] | None = None) -> str:
    """The report as text."""
    report = config["report"]
    width = config["width"]
    lines = [report["title"].center(width), "-" * width]
    for row in rows or []:
        cells = [str(row[column]) for column in report["columns"]]
        lines.append(" | ".join(cells))
    if report.get("footer"):
        lines.append("-" * width)
        lines.append(report["footer"].upper())
    return "\n".join(lines)
