"""The report read from scripted sessions and the page written from it (no browser here: see
test_browser.py for the rendered DOM)."""

from __future__ import annotations

import base64
import hashlib
import json
import re

from journeyman.core.redact import MASK
from journeyman.inspector.assets import SCRIPT
from journeyman.inspector.charts import nice_ceiling
from journeyman.inspector.render import script_safe_json
from tests.inspector.conftest import Built
from tests.inspector.sessions import HOSTILE, HOSTILE_NAME, SECRET


def test_every_stored_step_is_in_the_report_with_its_calls_and_usage(fixed: Built) -> None:
    report = fixed.report
    assert [s.number for s in report.steps] == list(range(1, fixed.stored_steps + 1))
    assert fixed.html.count('<details class="step') == fixed.stored_steps
    names = [c.name for s in report.steps for c in s.calls if c.call_id != "verify-before"]
    assert names[:4] == ["read_file", "edit_file", "run_command", "edit_file"]
    failed_test = report.steps[2].calls[0]
    assert failed_test.exit_code == 1 and "exit code 1" in fixed.html
    assert report.totals.failed_calls == 1 and report.steps[2].has_error
    assert '<details class="step err" id="step-3"' in fixed.html
    # usage rows land on the step they were written with
    assert [s.usage.cache_read_tokens for s in report.steps[:5]] == [0, 1_100, 1_300, 1_500, 1_900]
    assert report.totals.cost_usd is not None
    assert abs(sum(s.cost_usd or 0 for s in report.steps) - report.totals.cost_usd) < 1e-9


def test_the_overview_gives_outcome_check_cost_and_tokens(fixed: Built) -> None:
    page = fixed.html
    assert 'class="outcome success"' in page
    assert ">completed<" in page
    assert "add() now adds; the unit test passes" in page
    assert "-m unittest -q tests.test_calc</code>: passed" in page
    totals = fixed.report.totals
    assert f"${totals.cost_usd:,.4f}" in page
    assert totals.iterations == fixed.stored_steps
    assert "3 changes: 2 pending, 1 undone" in page
    assert "check run by journeyman" in page  # the harness's check is told from the model's calls


def test_file_changes_are_diffs_with_their_undo_state(fixed: Built) -> None:
    changes = fixed.report.changes
    assert [(c.path, c.undone) for c in changes] == [
        ("calc/__init__.py", False),
        ("calc/__init__.py", False),
        ("NOTES.md", True),
    ]
    page = fixed.html
    assert '<span class="d">-    return a - b</span>' in page
    assert '<span class="a">+    return a * b</span>' in page
    assert '<span class="a">+    return a + b</span>' in page
    notes = page[page.index('id="change-3"') :]
    assert '<span class="state undone">undone</span>' in notes
    assert page.count('<span class="state pending">pending</span>') == 2


def test_a_phased_run_shows_its_phases_and_transitions(phased: Built) -> None:
    phases = [s.phase for s in phased.report.steps]
    assert phases[-1] == "done" and "verify" in phases and "plan" in phases
    transitions = [n.title for s in phased.report.steps for n in s.notes if n.kind == "phase"]
    assert "verify → plan" in transitions  # the failed check sends the workflow back
    assert 'id="chart-phase"' in phased.html
    assert "the check failed (exit code 1)</li>" in phased.html
    assert 'class="ph-verify"' in phased.html


def test_compactions_are_marked_on_the_charts_and_the_timeline(compacted: Built) -> None:
    steps = compacted.report.steps
    marked = [s.number for s in steps if s.compacted]
    assert marked and compacted.report.totals.compactions == len(marked)
    assert all(
        any(n.kind == "compaction" and "→" in n.title for n in s.notes)
        for s in steps
        if s.compacted
    )
    for chart in ("chart-input", "chart-output", "chart-cost"):
        svg = re.search(f'<svg class="chart" id="{chart}".*?</svg>', compacted.html)
        assert svg is not None
        assert svg.group().count('class="marker-tip"') == len(marked)


def test_the_session_tree_gives_each_subagent_and_its_cost(tree: Built) -> None:
    node = tree.report.tree
    assert node is not None and len(node.children) == 2
    page = tree.html
    assert 'id="subagents"' in page
    for child in node.children:
        assert child.summary.record.id in page
        assert child.cost_usd is not None and f"${child.cost_usd:,.4f}" in page
    assert node.tree_cost_usd is not None and node.tree_cost_usd > (node.cost_usd or 0)
    assert page.index('id="subagents"') < page.index('id="timeline"')
    spawned = [c.child_session_id for s in tree.report.steps for c in s.calls]
    outcomes = [c.child_outcome for s in tree.report.steps for c in s.calls]
    assert outcomes[0].startswith("answered, 2,300 tokens, $0.0105")
    assert sorted(c for c in spawned if c) == sorted(c.summary.record.id for c in node.children)


def test_session_text_is_escaped_everywhere(hostile: Built) -> None:
    page = hostile.html
    assert [c.path for c in hostile.report.changes] == ["page.html", HOSTILE_NAME]
    assert HOSTILE not in page and HOSTILE_NAME not in page
    assert "<img" not in page and "<!--" not in page
    assert page.count("<script") == 2  # the data block and the page's own script
    assert "&lt;/script&gt;&lt;script&gt;document.title=&#x27;PWNED&#x27;" in page
    data = page[page.index('id="jm-data">') : page.index("</script>")]
    assert "<" not in data[len('id="jm-data">') :]


def test_secrets_are_redacted_even_from_the_exact_text_undo_keeps(hostile: Built) -> None:
    change = hostile.report.changes[0]
    assert change.after is not None and MASK in change.after
    assert SECRET not in hostile.html and MASK in hostile.html


def test_only_the_pages_own_script_may_run_and_nothing_is_loaded(fixed: Built) -> None:
    page = fixed.html
    digest = base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()
    assert f"script-src &#x27;sha256-{digest}&#x27;" in page
    assert "default-src &#x27;none&#x27;" in page
    assert f"<script>{SCRIPT}</script>" in page
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)


def test_chart_data_cannot_close_its_script_element() -> None:
    text = script_safe_json({"phase": ["</script><!--", "a&b"]})
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == {"phase": ["</script><!--", "a&b"]}


def test_chart_scales_round_up_to_readable_values() -> None:
    assert [nice_ceiling(v) for v in (0, 0.7, 3, 4.2, 10, 11, 260, 0.031)] == [
        1.0,
        1.0,
        5.0,
        5.0,
        10.0,
        20.0,
        500.0,
        0.05,
    ]
