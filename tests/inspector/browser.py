"""Headless Chromium (Debian's `chromium`) for the report tests and `bench/inspect.py`: the DOM
after the page's script ran, a screenshot, and a small parser to query the DOM."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "inspector"
"""Screenshots of the reports (git-ignored): look at them after a run."""


def chromium() -> str | None:
    """The Chromium executable, or None when it is not installed."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


def run_chromium(
    page: Path, *extra: str, timeout: float = 90, fragment: str = ""
) -> tuple[str, float]:
    """Run Chromium on `page` (at `#fragment` if given); (stdout, wall seconds)."""
    executable = chromium()
    assert executable is not None, "chromium is not installed"
    with tempfile.TemporaryDirectory(prefix="jm-chromium-") as profile:
        started = time.perf_counter()
        done = subprocess.run(
            [
                executable,
                *CHROMIUM_FLAGS,
                f"--user-data-dir={profile}",
                *extra,
                page.as_uri() + fragment,
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        elapsed = time.perf_counter() - started
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout, elapsed


def dump_dom(page: Path, fragment: str = "") -> str:
    """The page's DOM, serialised after it loaded and its script ran."""
    return run_chromium(page, "--dump-dom", fragment=fragment)[0]


def screenshot(page: Path, png: Path, *, width: int = 1280, height: int = 2400) -> float:
    """Save a screenshot of the page's top `height` pixels; returns the wall seconds it took."""
    png.parent.mkdir(parents=True, exist_ok=True)
    return run_chromium(page, f"--window-size={width},{height}", f"--screenshot={png}")[1]


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    text: list[str] = field(default_factory=list)

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())


class Dom(HTMLParser):
    """Every element of a page with its attributes and direct text, in document order."""

    def __init__(self, page: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[Element] = []
        self._open: list[Element] = []
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {k: v or "" for k, v in attrs})
        self.elements.append(element)
        if tag not in {"meta", "link", "br", "img", "input", "hr", "path", "line", "rect"}:
            self._open.append(element)

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self._open) - 1, -1, -1):
            if self._open[i].tag == tag:
                del self._open[i:]
                break

    def handle_data(self, data: str) -> None:
        if self._open:
            self._open[-1].text.append(data)

    def find(self, tag: str, css_class: str | None = None) -> list[Element]:
        return [
            e
            for e in self.elements
            if e.tag == tag and (css_class is None or css_class in e.classes)
        ]

    def by_id(self, element_id: str) -> Element | None:
        return next((e for e in self.elements if e.attrs.get("id") == element_id), None)
