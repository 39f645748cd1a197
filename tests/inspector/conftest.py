"""Reports of the scripted sessions in `sessions.py`, built once per test module."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from journeyman.inspector import Report, load_report, render_html
from journeyman.session.store import SessionStore
from tests.inspector import sessions

Builder = Callable[[Path], Awaitable[tuple[Path, str]]]


class Built:
    """A scripted session, its report and the page written from it."""

    def __init__(self, root: Path, builder: Builder) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.sessions, self.session_id = asyncio.run(builder(root))
        store = SessionStore(self.sessions)
        try:
            self.report: Report = load_report(store, self.session_id)
            self.stored_steps = store.summary(self.session_id).steps
        finally:
            store.close()
        self.html = render_html(self.report)
        self.page = root / "report.html"
        self.page.write_text(self.html, encoding="utf-8")


def _built(name: str, builder: Builder) -> Callable[[pytest.TempPathFactory], Built]:
    @pytest.fixture(scope="module", name=name)
    def fixture(tmp_path_factory: pytest.TempPathFactory) -> Built:
        return Built(tmp_path_factory.mktemp(name), builder)

    return fixture


fixed = _built("fixed", sessions.fixed_calc)
phased = _built("phased", sessions.phased)
compacted = _built("compacted", sessions.compacted)
tree = _built("tree", sessions.with_subagents)
hostile = _built("hostile", sessions.hostile)
