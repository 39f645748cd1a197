from dataclasses import dataclass, field

from .tags import normalize_tags


@dataclass
class Post:
    title: str
    raw_tags: list[str] = field(default_factory=list)

    @property
    def tags(self) -> list[str]:
        return normalize_tags(self.raw_tags)

    def summary(self) -> str:
        return f"{self.title} [{len(self.tags)} tags]"
