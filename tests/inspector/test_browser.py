"""Reports loaded in headless Chromium: the DOM after the page's script ran, and a screenshot of
each (test-artifacts/inspector/*.png, git-ignored) to look at."""

from __future__ import annotations

from pathlib import Path

import pytest

from journeyman.inspector import render
from tests.inspector.browser import ARTIFACTS, Dom, chromium, dump_dom, screenshot
from tests.inspector.conftest import Built

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        chromium() is None,
        reason="chromium is not installed (CI installs Debian's chromium: see .ci/run)",
    ),
]


def rendered(built: Built, name: str) -> Dom:
    """The DOM Chromium built from the page; a screenshot of it is saved as `name`.png."""
    dom = Dom(dump_dom(built.page))
    screenshot(built.page, ARTIFACTS / f"{name}.png")
    assert (ARTIFACTS / f"{name}.png").stat().st_size > 10_000
    html = dom.find("html")[0]
    assert html.attrs.get("data-ready", "").isdigit(), "the page's script did not run"
    return dom


def step_count(dom: Dom) -> int:
    return len(dom.find("details", "step"))


def test_a_fix_renders_its_steps_charts_and_diffs(fixed: Built) -> None:
    dom = rendered(fixed, "fix")
    assert step_count(dom) == fixed.stored_steps
    assert {e.attrs["id"] for e in dom.find("svg", "chart")} == {
        "chart-input",
        "chart-output",
        "chart-cost",
    }
    assert len(dom.find("path", "bar-cache-read")) == 1  # cache reads drawn apart
    assert dom.find("polyline", "line-cum")
    added = ["".join(e.text) for e in dom.find("span", "a")]
    assert "+    return a + b" in added
    shown = dom.by_id("shown")
    assert shown is not None and "".join(shown.text) == "6 of 6 steps shown"  # the filter ran


def test_a_phased_run_renders_its_phase_band(phased: Built) -> None:
    dom = rendered(phased, "phased")
    assert step_count(dom) == phased.stored_steps
    assert dom.by_id("chart-phase") is not None
    tags = {"".join(e.text) for e in dom.find("span", "phase-tag")}
    assert {"plan", "act", "verify", "done"} <= tags
    assert dom.find("span", "a")  # the diff of the edit


def test_a_compacted_run_renders_its_compaction_markers(compacted: Built) -> None:
    dom = rendered(compacted, "compacted")
    assert step_count(dom) == compacted.stored_steps
    marked = sum(1 for s in compacted.report.steps if s.compacted)
    assert len(dom.find("path", "marker-tip")) == 3 * marked  # on each of the three charts
    assert len(dom.find("div", "n-compaction")) == marked


def test_a_parent_renders_its_session_tree(tree: Built) -> None:
    dom = rendered(tree, "subagents")
    assert dom.by_id("subagents") is not None
    assert len(dom.find("table", "tree")) == 1
    rows = [e for e in dom.find("span", "badge")]
    assert len(rows) == 3  # the parent and its two subagents


def test_hostile_session_text_runs_nothing(hostile: Built) -> None:
    dom = rendered(hostile, "hostile")
    title = "".join(dom.find("title")[0].text)
    assert title.startswith("journeyman · task </script>")  # the payload would set "PWNED"
    assert not dom.find("img")
    assert len(dom.find("script")) == 2
    assert step_count(dom) == hostile.stored_steps


def test_a_link_to_a_step_opens_it_in_a_long_session(
    compacted: Built, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(render, "OPEN_STEPS_UP_TO", 0)  # as in a session of 41 steps or more
    page = tmp_path / "collapsed.html"
    page.write_text(render.render_html(compacted.report), encoding="utf-8")
    dom = Dom(dump_dom(page, "#step-4"))
    opened = [e.attrs["id"] for e in dom.find("details", "step") if "open" in e.attrs]
    assert opened == ["step-4"]
