"""The page's script in a real browser: the chart tooltip and its link to the step, and the
timeline's filters (Playwright driving Debian's chromium; no browser is downloaded)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.inspector.browser import chromium
from tests.inspector.conftest import Built

playwright = pytest.importorskip("playwright.sync_api", reason="playwright is a dev dependency")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        chromium() is None,
        reason="chromium is not installed (CI installs Debian's chromium: see .ci/run)",
    ),
]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Ask for it after the session fixtures: its driver runs an event loop in this thread."""
    with playwright.sync_playwright() as driver:
        launched = driver.chromium.launch(
            executable_path=chromium(), args=["--no-sandbox", "--disable-gpu"]
        )
        yield launched
        launched.close()


def open_page(browser: Any, built: Built) -> Any:
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on(
        "console", lambda message: errors.append(message.text) if message.type == "error" else None
    )
    page.goto(built.page.as_uri())
    page.wait_for_selector("html[data-ready]")
    page.errors = errors
    return page


def test_hovering_a_chart_shows_the_steps_figures_and_a_click_opens_it(
    fixed: Built, browser: Any
) -> None:
    page = open_page(browser, fixed)
    page.click("#collapse")
    chart = page.locator("#chart-cost")
    box = chart.bounding_box()
    scale = box["width"] / 960
    plot = float(chart.get_attribute("data-plot-width"))
    x = box["x"] + (64 + plot / 6 * 2.5) * scale  # the middle of the third of six steps
    y = box["y"] + box["height"] / 2
    page.mouse.move(x, y)
    tip = page.locator("#tip")
    assert tip.is_visible()
    text = tip.inner_text()
    assert text.startswith("step 3") and "cache read 1,300" in text and "cost $0.0056" in text
    page.mouse.click(x, y)
    assert page.locator("#step-3").get_attribute("open") is not None
    assert page.url.endswith("#step-3")
    assert page.locator("details.step[open]").count() == 1
    assert page.errors == []


def test_the_timeline_filters_by_errors_changes_and_text(fixed: Built, browser: Any) -> None:
    page = open_page(browser, fixed)
    shown = page.locator("#shown")
    assert shown.inner_text() == "6 of 6 steps shown"
    page.check("#filter-errors")
    assert shown.inner_text() == "1 of 6 steps shown"
    assert page.locator("#step-3").is_visible() and not page.locator("#step-1").is_visible()
    page.uncheck("#filter-errors")
    page.check("#filter-changes")
    assert shown.inner_text() == "3 of 6 steps shown"
    page.uncheck("#filter-changes")
    page.fill("#filter-text", "notes.md")
    assert shown.inner_text() == "1 of 6 steps shown"
    assert page.locator("#step-5").is_visible()
    assert page.errors == []


def test_expand_all_opens_every_step_and_every_tool_call_in_it(fixed: Built, browser: Any) -> None:
    page = open_page(browser, fixed)
    calls = page.locator("details.step details.call")
    assert calls.count() >= 6  # the fixed session's tool calls, the check's runs among them
    page.click("#collapse")
    assert page.locator("details.step[open]").count() == 0
    assert page.locator("details.step details.call[open]").count() == 0
    page.click("#expand")
    assert page.locator("details.step:not([open])").count() == 0
    assert page.locator("details.step details.call:not([open])").count() == 0
    assert page.locator("#step-2 details.call[open]").first.is_visible()
    page.check("#filter-errors")  # one step shown: expanding opens only what is shown
    page.click("#collapse")
    page.click("#expand")
    assert page.locator("details.step[open]").count() == 1
    assert page.locator("#step-3 details.call:not([open])").count() == 0
    assert page.locator("#step-1 details.call[open]").count() == 0
    assert page.errors == []
