"""Does a long session's report still open quickly? Size and render time of a 1,000-step report.

Scope
    The report of a long session: building its HTML in process, and a headless Chromium
    loading and painting it, each next to a blank page in the same browser; the session's
    own run is setup and not timed.

What runs
    One journeyman session of N steps (default 1,000) against a scripted model, with the real
    SQLite store and real file tools on a temporary workspace. Step i makes one tool call,
    cycling through ``write_file`` (a journaled change of a 50-line file), ``edit_file`` of it
    (another), ``read_file`` of it and ``run_command`` (``echo i``), each turn with a line of
    text and usage that grows with the history (most of it read from the prompt cache) at a
    fixed price, so the charts have something to draw. The context window is small enough for
    the run to compact several times (each compaction's summary call is answered by the script
    too, and is not a step). The last step calls ``finish``.

What is measured
    * build: ``load_report`` + ``render_html`` (reading the store, redacting, rendering), and
      the page's size on disk;
    * Chromium: wall time of headless Chromium (Debian's ``chromium``) taking a 1280x2400
      screenshot of the page (load, parse, style, layout, script, paint) next to the same for
      a blank page, so the difference is the page's own cost; the median of ``--repeat`` runs;
      ``--dump-dom`` (load and script, no paint) is measured the same way;
    * in the page: the marks its script leaves on ``<html>``, in ms after navigation start:
      ``data-ready`` (HTML parsed, script run) and ``data-painted`` (the first frame after it),
      read from ``--dump-dom`` (median of ``--repeat``). These exclude Chromium's own start;
    * with Playwright installed (the ``dev`` extra), Chromium's navigation timing for the page:
      DOMContentLoaded, load and first contentful paint (median of ``--repeat``).

Usage (from the repository root)
    .venv/bin/python bench/inspector.py                 # --steps 1000 --repeat 3
    .venv/bin/python bench/inspector.py --steps 200 --json

Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.inspector.browser import chromium, run_chromium  # noqa: E402

from journeyman import Agent, AgentConfig  # noqa: E402
from journeyman.context.compaction import CompactionSettings  # noqa: E402
from journeyman.context.rules import RulesLoader  # noqa: E402
from journeyman.core.messages import ToolCall, Usage  # noqa: E402
from journeyman.inspector import load_report, render_html  # noqa: E402
from journeyman.providers.base import Capabilities, ModelRequest, ModelResponse  # noqa: E402
from journeyman.providers.scripted import ScriptedProvider  # noqa: E402
from journeyman.session.store import SessionStore  # noqa: E402

FILES = 20
PRICE = (3.0, 15.0)


class Script:
    """The scripted model: step i's reply, a summary for a compaction's summary call (which
    does not count as a step), and `finish` at the last step."""

    def __init__(self, steps: int) -> None:
        self.steps = steps
        self.step = 0

    def __call__(self, request: ModelRequest) -> ModelResponse:
        prompt = sum(len(m.content) for m in request.messages) // 4
        if request.tools == ():
            return ModelResponse(text=f"summary before step {self.step}", usage=Usage(prompt, 120))
        i, self.step = self.step, self.step + 1
        if i == self.steps - 1:
            done = ToolCall("fin", "finish", {"summary": "all steps done"})
            return ModelResponse(text="", tool_calls=(done,), usage=Usage(500, 20))
        name = f"f{i // 4 % FILES}.txt"
        kind = i % 4
        if kind == 0:
            content = f"value = {i}\n" + "".join(f"# note {i}.{n}: some text\n" for n in range(48))
            call = ToolCall(f"c{i}", "write_file", {"path": name, "content": content})
        elif kind == 1:
            args = {"path": name, "old_string": f"value = {i - 1}", "new_string": f"value = {i}"}
            call = ToolCall(f"c{i}", "edit_file", args)
        elif kind == 2:
            call = ToolCall(f"c{i}", "read_file", {"path": name})
        else:
            call = ToolCall(f"c{i}", "run_command", {"command": f"echo step {i}"})
        cached = prompt * 4 // 5
        usage = Usage(prompt - cached, 40 + i % 7 * 10, cached, 0)
        return ModelResponse(text=f"Step {i}: working on {name}.", tool_calls=(call,), usage=usage)


async def build_session(root: Path, steps: int) -> tuple[Path, str]:
    workspace = root / "ws"
    workspace.mkdir()
    script = Script(steps)
    provider = ScriptedProvider(
        [script] * (steps * 2),
        capabilities=Capabilities(context_window=40_000),
    )
    agent = Agent(
        provider,
        workspace=workspace,
        config=AgentConfig(
            session_dir=root / "sessions",
            max_iterations=steps + 50,
            price_per_mtok=PRICE,
            verify=False,
            sandbox="local",
            journal_commands=False,
            compaction=CompactionSettings(keep_recent_observations=4),
        ),
        rules=RulesLoader(workspace, home=root / "home"),
    )
    result = await agent.run("work through the steps")
    return root / "sessions", result.session_id


def chromium_seconds(page: Path, repeat: int, *flags: str) -> list[float]:
    return [run_chromium(page, *flags)[1] for _ in range(repeat)]


def in_page_ms(page: Path, repeat: int) -> dict[str, float]:
    """The page's own marks, in ms after navigation start: its script done (`data-ready`: the
    HTML parsed and the script run) and the first frame drawn after it (`data-painted`)."""
    marks: dict[str, list[float]] = {"ready": [], "painted": []}
    for _ in range(repeat):
        dom = run_chromium(page, "--dump-dom")[0]
        for mark in marks:
            found = re.search(f'data-{mark}="([0-9.]+)"', dom)
            if found:
                marks[mark].append(float(found.group(1)))
    return {mark: statistics.median(values) for mark, values in marks.items() if values}


NAVIGATION_JS = """() => {
  const nav = performance.getEntriesByType('navigation')[0];
  const paint = performance.getEntriesByName('first-contentful-paint')[0];
  return {dom_content_loaded: nav.domContentLoadedEventEnd, load: nav.loadEventEnd,
          first_contentful_paint: paint ? paint.startTime : null};
}"""


def navigation_ms(page: Path, repeat: int) -> dict[str, float]:
    """Chromium's own navigation timing for the page (ms after navigation start), through
    Playwright when it is installed (the `dev` extra); empty otherwise."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return {}
    runs: list[dict[str, float]] = []
    with sync_playwright() as driver:
        browser = driver.chromium.launch(
            executable_path=chromium(), args=["--no-sandbox", "--disable-gpu"]
        )
        for _ in range(repeat):
            tab = browser.new_page(viewport={"width": 1280, "height": 900})
            tab.goto(page.as_uri(), wait_until="load")
            tab.wait_for_selector("html[data-painted]")
            runs.append(tab.evaluate(NAVIGATION_JS))
            tab.close()
        browser.close()
    return {
        key: statistics.median(r[key] for r in runs)
        for key in runs[0]
        if all(r[key] is not None for r in runs)
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--keep", type=Path, help="Copy the page and its screenshot here.")
    args = parser.parse_args()
    if chromium() is None:
        sys.exit("chromium is not installed (apt-get install chromium)")
    with tempfile.TemporaryDirectory(prefix="jm-bench-inspect-") as folder:
        root = Path(folder)
        started = time.perf_counter()
        sessions, session_id = asyncio.run(build_session(root, args.steps))
        run_s = time.perf_counter() - started
        started = time.perf_counter()
        store = SessionStore(sessions)
        try:
            report = load_report(store, session_id)
        finally:
            store.close()
        page_text = render_html(report)
        build_s = time.perf_counter() - started
        page = root / "report.html"
        page.write_text(page_text, encoding="utf-8")
        shot = root / "shot.png"
        blank = root / "blank.html"
        blank.write_text("<!DOCTYPE html><title>blank</title>", encoding="utf-8")
        size = "--window-size=1280,2400"
        timings = {
            "screenshot_page": chromium_seconds(page, args.repeat, size, f"--screenshot={shot}"),
            "screenshot_blank": chromium_seconds(
                blank, args.repeat, size, f"--screenshot={root / 'blank.png'}"
            ),
            "dump_dom_page": chromium_seconds(page, args.repeat, "--dump-dom"),
            "dump_dom_blank": chromium_seconds(blank, args.repeat, "--dump-dom"),
        }
        medians = {k: statistics.median(v) for k, v in timings.items()}
        marks = in_page_ms(page, args.repeat)
        navigation = navigation_ms(page, args.repeat)
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
            shutil.copy(page, args.keep / "inspect-bench.html")
            shutil.copy(root / "shot.png", args.keep / "inspect-bench.png")
        figures = {
            "steps": len(report.steps),
            "tool_calls": report.totals.tool_calls,
            "file_changes": len(report.changes),
            "compactions": report.totals.compactions,
            "run_s": round(run_s, 2),
            "build_s": round(build_s, 3),
            "page_bytes": page.stat().st_size,
            **{f"{k}_s": round(v, 3) for k, v in medians.items()},
            "screenshot_extra_s": round(
                medians["screenshot_page"] - medians["screenshot_blank"], 3
            ),
            "dump_dom_extra_s": round(medians["dump_dom_page"] - medians["dump_dom_blank"], 3),
            "script_done_ms": marks.get("ready"),
            "first_frame_ms": marks.get("painted"),
            **{f"{k}_ms": round(v, 1) for k, v in navigation.items()},
            "python": platform.python_version(),
            "machine": f"{platform.machine()}, {platform.system()}",
        }
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(
        f"{figures['steps']:,} steps, {figures['tool_calls']:,} tool calls, "
        f"{figures['file_changes']:,} file changes, {figures['compactions']} compactions "
        f"(scripted run {figures['run_s']} s)"
    )
    print(f"report built in {figures['build_s']} s: {figures['page_bytes'] / 1024:,.0f} KiB")
    print(
        f"headless Chromium, median of {args.repeat}: screenshot "
        f"{figures['screenshot_page_s']} s (blank page {figures['screenshot_blank_s']} s, "
        f"+{figures['screenshot_extra_s']} s); dump-dom {figures['dump_dom_page_s']} s "
        f"(blank {figures['dump_dom_blank_s']} s, +{figures['dump_dom_extra_s']} s)"
    )
    print(
        f"in the page, after navigation start: script done {figures['script_done_ms']} ms, "
        f"first frame {figures['first_frame_ms']} ms"
    )
    if "load_ms" in figures:
        print(
            f"navigation timing (Playwright): DOMContentLoaded {figures['dom_content_loaded_ms']}"
            f" ms, load {figures['load_ms']} ms, first contentful paint "
            f"{figures.get('first_contentful_paint_ms', '?')} ms"
        )


if __name__ == "__main__":
    main()
