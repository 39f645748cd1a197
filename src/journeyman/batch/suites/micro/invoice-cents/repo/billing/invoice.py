from dataclasses import dataclass, field

from .money import format_cents, to_cents


@dataclass
class Invoice:
    lines: list[tuple[str, str, int]] = field(default_factory=list)

    def add(self, label: str, unit_price: str, quantity: int = 1) -> None:
        self.lines.append((label, unit_price, quantity))

    def total_cents(self) -> int:
        return sum(to_cents(price) * quantity for _, price, quantity in self.lines)

    def total(self) -> str:
        return format_cents(self.total_cents())
