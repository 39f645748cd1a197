"""The report as one self-contained HTML page: overview, charts, timeline, file changes and
subagents, with the stylesheet, the script and the charts inline.

Every text that comes from the session (task, model replies, tool arguments and output, file
contents, paths) goes through `html.escape`; the chart data travels as JSON in a non-executed
`<script type="application/json">` block with `<`, `>` and `&` escaped; and the Content
Security Policy lets only the page's own script run (by its hash) and loads nothing from
anywhere.
"""

from __future__ import annotations

import base64
import difflib
import hashlib
import json
import time
from collections.abc import Iterable, Sequence
from html import escape
from typing import Any

from journeyman.context.test_results import TestTally
from journeyman.core.messages import Message, Role
from journeyman.core.text import clip
from journeyman.inspector.assets import SCRIPT, STYLE
from journeyman.inspector.charts import Series, band_chart, step_chart
from journeyman.inspector.model import CallView, Note, Report, StepView
from journeyman.session.store import FileChange
from journeyman.swarm.tree import SessionNode

OPEN_STEPS_UP_TO = 40
"""Sessions with at most this many steps show every step open; longer ones start collapsed."""
OPEN_CHANGES_UP_TO = 20
MAX_DIFF_LINES = 400
"""Longer diffs are cut (the rest is one `journeyman diff` away)."""
SHOWN_CHIPS = 6


def render_html(report: Report, *, generated_at: float | None = None) -> str:
    """The whole page."""
    generated = time.strftime("%Y-%m-%d %H:%M", time.localtime(generated_at or time.time()))
    script_hash = base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()
    policy = (
        "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
        f"script-src 'sha256-{script_hash}'; base-uri 'none'; form-action 'none'"
    )
    record = report.record
    first_line = record.task.strip().splitlines()[0] if record.task.strip() else record.id
    title = f"journeyman · {clip(first_line, 80)}"
    sections = [_overview(report)]
    nav_links = [("overview", "Overview")]
    if report.tree is not None:  # the tree first: where the money went
        sections.append(_subagents(report.tree))
        nav_links.append(("subagents", f"Subagents ({len(report.tree.walk()) - 1})"))
    sections += [_charts(report), _timeline(report), _files(report)]
    nav_links += [
        ("charts", "Charts"),
        ("timeline", f"Timeline ({len(report.steps)})"),
        ("files", f"Files ({len(report.changes)})"),
    ]
    nav = "".join(f'<a href="#{anchor}">{escape(label)}</a>' for anchor, label in nav_links)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{escape(policy)}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="referrer" content="no-referrer">'
        f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>"
        f'<nav><span class="brand">journeyman inspect</span>{nav}'
        f'<span class="sid mono">{escape(record.id)}</span></nav>'
        f"<main>{''.join(sections)}"
        f"<footer>Generated {escape(generated)} from the session store; secrets are "
        "redacted. Offline page: nothing is loaded from the network.</footer></main>"
        '<div id="tip"></div>'
        f'<script type="application/json" id="jm-data">{_chart_data(report)}</script>'
        f"<script>{SCRIPT}</script></body></html>\n"
    )


# --- overview -------------------------------------------------------------------------------


def outcome_class(report: Report) -> str:
    """success, capacity, failure or unfinished: the colour of the outcome."""
    reason = report.summary.finish_reason
    if reason is None:
        return "unfinished"
    if report.outcome is not None:
        category = report.outcome.finish_reason.category.value
    else:
        category = _category_of(reason)
    return {"success": "success", "capacity": "capacity"}.get(category, "failure")


def _category_of(reason: str) -> str:
    from journeyman.core.result import FinishReason

    try:
        return FinishReason(reason).category.value
    except ValueError:
        return "unknown"


def _overview(report: Report) -> str:
    record, summary = report.record, report.summary
    css = outcome_class(report)
    reason = summary.finish_reason or "unfinished"
    final = (
        summary.error
        or summary.final_text
        or (
            "the run has not ended (still running, or the process stopped)"
            if summary.finish_reason is None
            else ""
        )
    )
    stored_config = record.settings.get("config")
    config: dict[str, Any] = stored_config if isinstance(stored_config, dict) else {}
    stat_html = "".join(
        f'<div class="stat"><div class="k">{escape(k)}</div><div class="v">{escape(v)}</div>'
        f'<div class="s">{escape(s)}</div></div>'
        for k, v, s in _stats(report)
    )
    meta_html = "".join(f"<span>{escape(m)}</span>" for m in _meta(report, config))
    return (
        '<section class="panel" id="overview">'
        f'<h1>Session <span class="mono">{escape(record.id)}</span></h1>'
        f'<pre class="task">{escape(record.task)}</pre>'
        f'<div class="outcome {css}" id="outcome"><div class="reason">{escape(reason)}</div>'
        f'<div class="final"><pre>{escape(final)}</pre>{_check(report)}</div></div>'
        f'<div class="stats">{stat_html}</div><div class="meta">{meta_html}</div>'
        f"{_highlights(report)}</section>"
    )


def _stats(report: Report) -> list[tuple[str, str, str]]:
    """The overview's figures: (name, value, detail)."""
    totals = report.totals
    usage = totals.usage
    pending = sum(1 for c in report.changes if not c.undone)
    undone = len(report.changes) - pending
    files = len({c.path for c in report.changes})
    stats = [
        ("cost", _usd(totals.cost_usd, local=totals.local), f"{totals.model_calls:,} model calls"),
        (
            "tokens",
            _compact(usage.total_tokens),
            f"{_compact(usage.input_tokens + usage.cache_write_tokens)} in · "
            f"{_compact(usage.cache_read_tokens)} cached · {_compact(usage.output_tokens)} out",
        ),
        ("duration", _duration(totals.duration_s), _plural(totals.runs, "run")),
        ("iterations", f"{totals.iterations:,}", f"{len(report.steps):,} steps stored"),
        (
            "tool calls",
            f"{totals.tool_calls:,}",
            f"{totals.failed_calls:,} failed" if totals.failed_calls else "none failed",
        ),
        (
            "files changed",
            f"{files:,}",
            f"{_plural(len(report.changes), 'change')}: {pending} pending, {undone} undone"
            if report.changes
            else "no changes",
        ),
        ("compactions", f"{totals.compactions:,}", "of the context"),
    ]
    if report.tree is not None:
        tree_cost = report.tree.tree_cost_usd
        stats.append(
            ("with subagents", _usd(tree_cost), _plural(len(report.tree.walk()) - 1, "subagent"))
        )
    return stats


def _meta(report: Report, config: dict[str, Any]) -> list[str]:
    """The overview's facts about the session: model, mode, workspace, start, limits, origin."""
    record, settings = report.record, report.record.settings
    model = str(settings.get("model") or settings.get("model_name") or "?")
    provider = str(settings.get("provider") or "")
    mode = str(config.get("mode") or ("react" if config else "not recorded"))
    limits = _limits(config)
    relation = ""
    if record.parent_id and record.forked_at_step is not None:
        relation = f"forked from {record.parent_id} at step {record.forked_at_step}"
    elif record.parent_id:
        relation = f"subagent of {record.parent_id}"
    meta = [
        f"model {provider + ':' if provider else ''}{model}",
        f"mode {mode}",
        f"workspace {record.workspace}",
        "started " + time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(record.created_at)),
    ]
    if limits:
        meta.append("limits " + limits)
    if relation:
        meta.append(relation)
    if len(report.models) > 1:
        meta.append("models used " + ", ".join(report.models))
    return meta


HIGHLIGHT_KINDS = frozenset({"error", "budget", "extension", "hook", "state", "run"})
MAX_HIGHLIGHTS = 12


def _highlights(report: Report) -> str:
    """The events a reader should not miss (errors, budget levels, refusals, hook objections,
    resumed runs), each linked to its step."""
    items: list[tuple[int, str, str]] = []
    runs = sum(1 for s in report.steps for n in s.notes if n.kind == "run")
    for step in report.steps:
        for note in step.notes:
            if note.kind not in HIGHLIGHT_KINDS or (note.kind == "run" and runs <= 1):
                continue
            items.append((step.number, note.kind, note.title))
        for call in step.calls:
            if call.refused_by:
                items.append((step.number, "error", f"{call.name} refused ({call.refused_by})"))
            elif call.by_harness and call.failed:
                failed = f"exit code {call.exit_code}" if call.exit_code else "did not run"
                items.append((step.number, "error", f"the check failed ({failed})"))
    if not items:
        return ""
    shown = "".join(
        f'<li><a href="#step-{number}">step {number}</a> '
        f'<span class="chip n-{escape(kind)}">{escape(kind)}</span> {escape(title)}</li>'
        for number, kind, title in items[:MAX_HIGHLIGHTS]
    )
    more = (
        f'<li class="empty">and {len(items) - MAX_HIGHLIGHTS:,} more: filter the timeline '
        "by events</li>"
        if len(items) > MAX_HIGHLIGHTS
        else ""
    )
    return f'<h2 class="sub">Worth a look</h2><ul class="highlights">{shown}{more}</ul>'


def _check(report: Report) -> str:
    """The harness's last run of the check command, from the last run's result."""
    check = report.outcome.verification if report.outcome is not None else None
    if check is None or not check.command:
        return ""
    if check.not_run:
        verdict = f"not run: {check.not_run}"
    elif check.timed_out:
        verdict = "timed out"
    else:
        verdict = "passed" if check.passed else f"failed (exit code {check.exit_code})"
    if check.after_last_change is False:
        verdict += ", but files changed after it ran"
    if check.tests is not None:
        verdict += f"; {TestTally.from_dict(check.tests).describe()}"
    before = check.before
    if isinstance(before, dict) and isinstance(before.get("tests"), dict):
        verdict += f" (before the run: {TestTally.from_dict(before['tests']).describe()})"
    if check.problem not in (None, "failed"):
        verdict += f"; not a pass: {check.problem}"
    changes = [c for c in check.test_changes if isinstance(c, dict)]
    listed = "".join(
        f"<li>{escape(str(c.get('path')))}: {escape(str(c.get('change')))}"
        f"{' (new test)' if c.get('allowed') else ''}</li>"
        for c in changes
    )
    command = escape(check.command)
    extra = f"<ul>{listed}</ul>" if listed else ""
    return f'<div class="check">check <code>{command}</code>: {escape(verdict)}{extra}</div>'


def _limits(config: dict[str, Any]) -> str:
    parts = []
    if isinstance(config.get("max_iterations"), int):
        parts.append(f"{config['max_iterations']:,} iterations")
    if isinstance(config.get("max_budget_usd"), int | float):
        parts.append(f"${config['max_budget_usd']:g}")
    if isinstance(config.get("max_total_tokens"), int):
        parts.append(f"{config['max_total_tokens']:,} tokens")
    if isinstance(config.get("max_duration_s"), int | float):
        parts.append(_duration(float(config["max_duration_s"])))
    return ", ".join(parts)


# --- charts ---------------------------------------------------------------------------------


def _charts(report: Report) -> str:
    steps = report.steps
    if not any(s.model_calls for s in steps):
        return (
            '<section class="panel" id="charts"><h2>Charts</h2>'
            '<p class="empty">No model call of this session was recorded, so there is '
            "nothing to chart.</p></section>"
        )
    markers = [i for i, s in enumerate(steps) if s.compacted]
    marker_legend = (
        '<span><i class="lg-marker"></i>context compacted (before the step)</span>'
        if markers
        else ""
    )
    return (
        '<section class="panel" id="charts"><h2>Per-step usage <span class="count">'
        "(hover for figures, click a bar to open its step)</span></h2>"
        + _token_blocks(steps, markers, marker_legend)
        + _cost_block(steps, markers, marker_legend, local=report.totals.local)
        + (_phase_block(steps) if report.phased else "")
        + "</section>"
    )


def _token_blocks(steps: Sequence[StepView], markers: list[int], marker_legend: str) -> str:
    """The charts of input tokens (by cache use) and output tokens per step."""
    numbers = [s.number for s in steps]
    input_chart = step_chart(
        "chart-input",
        "input tokens per step",
        numbers,
        [
            Series("input", [s.usage.input_tokens for s in steps], "bar-input"),
            Series("cache write", [s.usage.cache_write_tokens for s in steps], "bar-cache-write"),
            Series("cache read", [s.usage.cache_read_tokens for s in steps], "bar-cache-read"),
        ],
        _compact,
        markers=markers,
    )
    output_chart = step_chart(
        "chart-output",
        "output tokens per step",
        numbers,
        [Series("output", [s.usage.output_tokens for s in steps], "bar-output")],
        _compact,
        markers=markers,
    )
    return _chart_block(
        "Input tokens per step",
        input_chart,
        [
            ("lg-input", "input (not cached)"),
            ("lg-cache-write", "written to the cache"),
            ("lg-cache-read", "read from the cache"),
        ],
        marker_legend,
    ) + _chart_block(
        "Output tokens per step", output_chart, [("lg-output", "output")], marker_legend
    )


def _cost_block(
    steps: Sequence[StepView], markers: list[int], marker_legend: str, *, local: bool
) -> str:
    """The chart of cost per step and cumulative cost; a note when a price is unknown, or when
    every call was the embedded model's (free)."""
    if local:
        return (
            '<div class="chart-block"><h3>Cost</h3><p class="empty">$0 (local): every model '
            "call ran on this machine, on the embedded model.</p></div>"
        )
    costs = [s.cost_usd for s in steps]
    if not all(c is not None for c in costs):
        return (
            '<div class="chart-block"><h3>Cost</h3><p class="empty">Unknown: at least one '
            "model call had no price (pass --price-per-mtok for models the price list "
            "lacks).</p></div>"
        )
    known = [c or 0.0 for c in costs]
    cost_chart = step_chart(
        "chart-cost",
        "cost per step and cumulative cost",
        [s.number for s in steps],
        [Series("cost", known, "bar-cost")],
        _usd_axis,
        line=Series("cumulative", _running(known), "line-cum"),
        markers=markers,
    )
    return _chart_block(
        "Cost per step (bars, left axis) and cumulative cost (line, right axis)",
        cost_chart,
        [("lg-cost", "cost of the step"), ("lg-cum", "cumulative cost")],
        marker_legend,
    )


def _phase_block(steps: Sequence[StepView]) -> str:
    """The band of each step's phase (phased mode), with its legend."""
    return (
        band_chart("chart-phase", "phase", [s.phase for s in steps], "ph-")
        + '<div class="legend">'
        + "".join(
            f'<span><i class="phase-tag {p}"></i>{p}</span>'
            for p in ("discover", "plan", "act", "verify", "done", "fail")
        )
        + "</div>"
    )


def _chart_block(
    title: str, svg: str, legend: Sequence[tuple[str, str]], extra_legend: str = ""
) -> str:
    items = "".join(f'<span><i class="{css}"></i>{escape(label)}</span>' for css, label in legend)
    return (
        f'<div class="chart-block"><h3>{escape(title)}</h3>{svg}'
        f'<div class="legend">{items}{extra_legend}</div></div>'
    )


def _chart_data(report: Report) -> str:
    steps = report.steps
    costs = [s.cost_usd for s in steps]
    cumulative: list[float | None] = []
    total: float | None = 0.0
    for cost in costs:
        total = None if total is None or cost is None else total + cost
        cumulative.append(total)
    data = {
        "steps": [s.number for s in steps],
        "input": [s.usage.input_tokens for s in steps],
        "cacheRead": [s.usage.cache_read_tokens for s in steps],
        "cacheWrite": [s.usage.cache_write_tokens for s in steps],
        "output": [s.usage.output_tokens for s in steps],
        "cost": costs,
        "cumCost": cumulative,
        "phase": [s.phase or "" for s in steps],
        "compacted": [1 if s.compacted else 0 for s in steps],
    }
    return script_safe_json(data)


def script_safe_json(data: Any) -> str:
    """JSON that cannot end the `<script>` element holding it, nor open a comment in it."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


# --- timeline -------------------------------------------------------------------------------


def _timeline(report: Report) -> str:
    changes = {c.id: c for c in report.changes}
    open_all = len(report.steps) <= OPEN_STEPS_UP_TO
    local = report.totals.local
    body = "".join(_step(step, changes, open_all, local) for step in report.steps)
    if report.conversation:
        body = _conversation(report.conversation)
    elif not body:
        body = '<p class="empty">No step was stored for this session.</p>'
    return (
        '<section class="panel" id="timeline">'
        f'<h2>Timeline <span class="count">({len(report.steps):,} steps)</span></h2>'
        '<div class="toolbar"><input type="search" id="filter-text" '
        'placeholder="Filter steps by text (tool, path, output…)">'
        '<label><input type="checkbox" id="filter-errors"> errors</label>'
        '<label><input type="checkbox" id="filter-changes"> file changes</label>'
        '<label><input type="checkbox" id="filter-notes"> events</label>'
        '<button type="button" id="expand">Expand all</button>'
        '<button type="button" id="collapse">Collapse all</button>'
        '<span class="shown" id="shown"></span></div>'
        f"{body}</section>"
    )


def _step(step: StepView, changes: dict[int, FileChange], open_all: bool, local: bool) -> str:
    classes = ["step"]
    if step.has_error:
        classes.append("err")
    if step.changes:
        classes.append("changed")
    if step.notes:
        classes.append("noted")
    chips = []
    if step.phase:
        chips.append(f'<span class="phase-tag {escape(step.phase)}">{escape(step.phase)}</span>')
    for call in step.calls[:SHOWN_CHIPS]:
        state = " refused" if call.refused_by else " bad" if call.failed else ""
        mark = " ✗" if call.failed else ""
        name = "check" if call.by_harness else call.name
        chips.append(f'<span class="chip tool{state}">{escape(name)}{mark}</span>')
    if len(step.calls) > SHOWN_CHIPS:
        chips.append(f'<span class="chip">+{len(step.calls) - SHOWN_CHIPS} calls</span>')
    if not step.calls and step.turns and any(t.text for t in step.turns):
        chips.append('<span class="chip">reply</span>')
    if step.changes:
        chips.append(f'<span class="chip edit">{_plural(len(step.changes), "file change")}</span>')
    for kind, count in _kinds(n for n in step.notes if n.kind != "phase"):
        label = kind if count == 1 else f"{kind} ×{count}"
        chips.append(f'<span class="chip n-{escape(kind)}">{escape(label)}</span>')
    meta = []
    if step.duration_s is not None:
        meta.append(_duration(step.duration_s))
    if step.model_calls:
        u = step.usage
        meta.append(
            f"{_compact(u.input_tokens + u.cache_write_tokens)} in"
            + (f" + {_compact(u.cache_read_tokens)} cached" if u.cache_read_tokens else "")
            + f" · {_compact(u.output_tokens)} out"
        )
        meta.append(_usd(step.cost_usd, local=local))
    body = [_note(n) for n in step.notes]
    run_here = {c.call_id for c in step.calls}
    for turn in step.turns:
        later = [n for n in turn.requested if n not in {c.name for c in step.calls}]
        text = turn.text.strip()
        if text or later:
            asked = (
                f'<span class="who">asked for {escape(", ".join(later))} (run in the next step)'
                "</span>"
                if later and run_here.isdisjoint(later)
                else ""
            )
            body.append(
                f'<div class="say"><span class="who">model</span>{escape(text)}{asked}</div>'
            )
    body.extend(_call(c) for c in step.calls)
    for change_id in step.changes:
        change = changes.get(change_id)
        if change is not None:
            body.append(
                f'<div class="note"><b>{escape(change.kind)}</b> '
                f'<a href="#change-{change.id}">{escape(change.path)}</a> '
                f"({escape(change.tool)}, {_change_state(change)[1]})</div>"
            )
    return (
        f'<details class="{" ".join(classes)}" id="step-{step.number}"'
        f"{' open' if open_all else ''}><summary>"
        f'<span class="no">#{step.number}</span>{"".join(chips)}'
        f'<span class="step-meta">{escape(" · ".join(meta))}</span></summary>'
        f'<div class="step-body">{"".join(body) or _EMPTY_STEP}</div></details>'
    )


def _conversation(messages: Sequence[Message]) -> str:
    """The stored history, message by message (a session without events: an imported run)."""
    parts = [
        '<p class="empty">This session has no stored events (an imported run?): here is its '
        "conversation as the model saw it.</p>"
    ]
    for message in messages:
        if message.role is Role.TOOL and message.tool_result is not None:
            result = message.tool_result
            view = CallView(result.call_id, result.name, {}, result.content, result.is_error)
            parts.append(
                f'<details class="call"><summary><b>{escape(result.name)}</b> result'
                f'{_call_status(view)}</summary><div class="io"><pre>'
                f"{escape(result.content)}</pre></div></details>"
            )
            continue
        calls = "".join(
            f'<div class="note"><b>{escape(c.name)}</b> '
            f"<code>{escape(_argument_summary(c.arguments))}</code></div>"
            for c in message.tool_calls
        )
        parts.append(
            f'<div class="say msg"><span class="who">{escape(message.role.value)}</span>'
            f"{escape(message.content.strip())}{calls}</div>"
        )
    return "".join(parts)


_EMPTY_STEP = '<p class="empty">Nothing recorded in this step but its checkpoint.</p>'


def _kinds(notes: Iterable[Note]) -> list[tuple[str, int]]:
    counts: dict[str, int] = {}
    for note in notes:
        counts[note.kind] = counts.get(note.kind, 0) + 1
    return list(counts.items())


def _note(note: Note) -> str:
    detail = f'<span class="d">{escape(note.detail)}</span>' if note.detail else ""
    return f'<div class="note n-{escape(note.kind)}"><b>{escape(note.title)}</b>{detail}</div>'


def _call_status(call: CallView) -> str:
    if call.refused_by:
        status = f'<span class="res warn">refused ({escape(call.refused_by)})</span>'
    elif call.result is None:
        status = '<span class="res warn">no result stored</span>'
    elif call.is_error:
        status = f'<span class="res bad">error{_secs(call.duration_s)}</span>'
    elif call.exit_code:
        status = f'<span class="res bad">exit code {call.exit_code}{_secs(call.duration_s)}</span>'
    else:
        status = f'<span class="res ok">ok{_secs(call.duration_s)}</span>'
    return status


def _call(call: CallView) -> str:
    status = _call_status(call)
    if call.approval:
        status += f'<span class="res">{escape(call.approval)}</span>'
    child = ""
    if call.child_session_id:
        child = (
            f'<div><span class="lbl">subagent session</span> '
            f"<code>{escape(call.child_session_id)}</code> — "
            f"<code>journeyman inspect {escape(call.child_session_id)}</code></div>"
        )
    harness = '<span class="chip">check run by journeyman</span>' if call.by_harness else ""
    outcome = (
        f'<a class="chip" href="#sub-{escape(call.child_session_id)}">subagent: '
        f"{escape(call.child_outcome)}</a>"
        if call.child_session_id
        else ""
    )
    arguments = json.dumps(call.arguments, indent=2, ensure_ascii=False, default=str)
    result = (
        f'<div><span class="lbl">result</span><pre>{escape(call.result)}</pre></div>'
        if call.result is not None
        else ""
    )
    return (
        f'<details class="call"><summary><b>{escape(call.name)}</b>{harness}'
        f"<code>{escape(_argument_summary(call.arguments))}</code>{outcome}{status}</summary>"
        f'<div class="io"><div><span class="lbl">arguments</span><pre>{escape(arguments)}</pre>'
        f"</div>{result}{child}</div></details>"
    )


SUMMARY_KEYS = ("path", "command", "pattern", "query", "task", "summary", "url", "text")


def _argument_summary(arguments: dict[str, Any]) -> str:
    for key in SUMMARY_KEYS:
        if isinstance(arguments.get(key), str):
            return clip(" ".join(arguments[key].split()), 120)
    if not arguments:
        return ""
    key, value = next(iter(arguments.items()))
    return clip(f"{key}={json.dumps(value, ensure_ascii=False, default=str)}", 120)


# --- files ----------------------------------------------------------------------------------


def _files(report: Report) -> str:
    if not report.changes:
        return (
            '<section class="panel" id="files"><h2>File changes</h2>'
            '<p class="empty">This session changed no file (as far as the undo journal '
            "knows).</p></section>"
        )
    diffs = {c.id: _diff_lines(c) for c in report.changes}
    per_file: dict[str, list[FileChange]] = {}
    for change in report.changes:
        per_file.setdefault(change.path, []).append(change)
    rows = []
    for path, changes in per_file.items():
        added = sum(_counts(diffs[c.id])[0] for c in changes)
        removed = sum(_counts(diffs[c.id])[1] for c in changes)
        pending = sum(1 for c in changes if not c.undone)
        state = f"{pending} pending" if pending else "all undone"
        steps = ", ".join(f'<a href="#step-{c.step}">{c.step}</a>' for c in changes[:12]) + (
            " …" if len(changes) > 12 else ""
        )
        rows.append(
            f'<tr><td><a href="#change-{changes[0].id}"><code>{escape(path)}</code></a></td>'
            f'<td>{len(changes)}</td><td><span class="plus">+{added}</span> '
            f'<span class="minus">−{removed}</span></td><td>{escape(state)}</td>'
            f"<td>{steps}</td></tr>"
        )
    open_all = len(report.changes) <= OPEN_CHANGES_UP_TO
    details = "".join(_change(c, diffs[c.id], open_all) for c in report.changes)
    return (
        '<section class="panel" id="files"><h2>File changes <span class="count">('
        f"{len(report.changes)} changes to {len(per_file)} files; undo with "
        "<code>journeyman undo</code>)</span></h2>"
        '<table class="files"><tr><th>file</th><th>changes</th><th>lines</th><th>state</th>'
        f"<th>steps</th></tr>{''.join(rows)}</table>{details}</section>"
    )


def _change_state(change: FileChange) -> tuple[str, str]:
    if change.undone:
        return "undone", "undone"
    if change.unrecoverable:
        return "sealed", "pending, cannot be undone (its exact text is gone)"
    return "pending", "pending"


def _change(change: FileChange, lines: list[str], open_all: bool) -> str:
    css, label = _change_state(change)
    added, removed = _counts(lines)
    shown = lines[:MAX_DIFF_LINES]
    spans = "".join(_diff_span(line) for line in shown)
    if len(lines) > MAX_DIFF_LINES:
        spans += (
            f'<span class="m">… {len(lines) - MAX_DIFF_LINES:,} more lines: '
            "journeyman diff shows them all</span>"
        )
    if not lines:
        spans = '<span class="m">(no difference in text)</span>'
    return (
        f'<details class="change" id="change-{change.id}"{" open" if open_all else ""}>'
        f'<summary><span class="kind {escape(change.kind)}">{escape(change.kind)}</span>'
        f"<code>{escape(change.path)}</code>"
        f'<span>step <a href="#step-{change.step}">{change.step}</a> · {escape(change.tool)}'
        f"</span>"
        f'<span class="plus">+{added}</span><span class="minus">−{removed}</span>'
        f'<span class="state {css}">{escape(label)}</span></summary>'
        f'<pre class="diff">{spans}</pre></details>'
    )


def text_lines(text: str) -> list[str]:
    """The lines of a file as editors and the tools count them: broken at "\n" only (with a
    "\r" before it dropped), never at the other breaks `str.splitlines` knows (U+2028, form
    feed, ...), so a diff's +/- counts agree with the line counts shown elsewhere."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # the break at the end of the last line starts no new line
    return [line.removesuffix("\r") for line in lines]


def _diff_lines(change: FileChange) -> list[str]:
    before = text_lines(change.before or "")
    after = text_lines(change.after or "")
    return list(
        difflib.unified_diff(
            before, after, f"a/{change.path}", f"b/{change.path}", n=3, lineterm=""
        )
    )[2:]  # the two file-name lines: the summary already names the file


def _counts(lines: list[str]) -> tuple[int, int]:
    added = sum(1 for line in lines if line.startswith("+"))
    removed = sum(1 for line in lines if line.startswith("-"))
    return added, removed


def _diff_span(line: str) -> str:
    css = {"+": "a", "-": "d", "@": "h"}.get(line[:1], "")
    attr = f' class="{css}"' if css else ""
    return f"<span{attr}>{escape(line) or ' '}</span>"


# --- subagents ------------------------------------------------------------------------------


def _subagents(tree: SessionNode) -> str:
    rows = []
    for depth, node in tree.walk():
        record = node.summary.record
        reason = node.summary.finish_reason or "unfinished"
        css = _badge(reason)
        indent = f"padding-left:{8 + 20 * depth}px"
        rows.append(
            f'<tr id="sub-{escape(record.id)}"><td style="{indent}">{"└ " if depth else ""}'
            f"<code>{escape(record.id)}</code>"
            f'</td><td><span class="badge {css}">{escape(reason)}</span></td>'
            f'<td class="num">{node.summary.steps:,}</td><td class="num">{node.tokens:,}</td>'
            f'<td class="num">{escape(_usd(node.cost_usd))}</td>'
            f'<td class="num">{escape(_usd(node.tree_cost_usd))}</td>'
            f"<td>{escape(clip(record.task, 90))}</td></tr>"
        )
    return (
        '<section class="panel" id="subagents"><h2>Session tree <span class="count">'
        f"(cost with subagents {escape(_usd(tree.tree_cost_usd))})</span></h2>"
        '<table class="tree"><tr><th>session</th><th>status</th><th class="num">steps</th>'
        '<th class="num">tokens</th><th class="num">cost</th><th class="num">with children'
        f"</th><th>task</th></tr>{''.join(rows)}</table></section>"
    )


def _badge(reason: str) -> str:
    if reason == "unfinished":
        return "unfinished"
    category = _category_of(reason)
    return {"success": "success", "capacity": "capacity"}.get(category, "failure")


# --- numbers --------------------------------------------------------------------------------


def _usd(value: float | None, *, local: bool = False) -> str:
    """Dollars; "unknown" for an unpriced model, "$0 (local)" for the embedded model's."""
    if value is None:
        return "unknown"
    if local and value == 0:
        return "$0 (local)"
    return f"${value:,.4f}" if value < 1 else f"${value:,.2f}"


def _usd_axis(value: float) -> str:
    if value == 0:
        return "$0"
    return f"${value:.4g}"


def _compact(value: float) -> str:
    value = float(value)
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= limit:
            return f"{value / limit:.3g}{suffix}"
    return f"{value:.3g}" if value != int(value) else f"{int(value)}"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "unknown"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def _secs(seconds: float | None) -> str:
    return "" if seconds is None else f" · {_duration(seconds)}"


def _running(values: Sequence[float]) -> list[float]:
    total = 0.0
    out = []
    for value in values:
        total += value
        out.append(total)
    return out


def _plural(count: int, noun: str) -> str:
    return f"{count:,} {noun}" + ("" if count == 1 else "s")
