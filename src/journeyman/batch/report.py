"""`report.md` and `report.html` of a batch: pass rate, spend against the cap, cost, token and
duration distributions, finish reasons and the most expensive tasks.

The HTML page is one self-contained file: charts are inline SVG, no script, no stylesheet or
font from the network, and every text that came from a task or a model is escaped.
"""

from __future__ import annotations

import html
import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from journeyman.batch.evaluation import EvalSummary, summary_rows
from journeyman.batch.results import TaskResult
from journeyman.batch.scheduler import describe_duration, tasks_count
from journeyman.economics.ledger import Amount

TOP_EXPENSIVE = 10
"""How many of the most expensive tasks the reports list."""
BINS = 10


@dataclass(frozen=True)
class ReportInput:
    """What a report shows besides the rows."""

    batch_id: str
    model: str | None
    spent: Amount
    cap: Amount
    budget_exhausted: bool
    started_tasks: int
    evaluation: EvalSummary | None = None
    """An eval's figures (resolved rate, interval, cost per resolved task); None for a batch."""
    wall_s: float | None = None
    """How long the run that wrote the report took (None: not known)."""
    finished_in_run: int = 0
    """Tasks that run finished (those an earlier run of the batch finished not counted)."""
    workspaces: Path | None = None
    """The folder of the tasks' workspaces."""
    keep: str | None = None
    """Which workspaces the run kept (`--keep`)."""


@dataclass(frozen=True)
class Figures:
    total: int
    counts: Counter[str]
    pass_rate: float
    """Succeeded among the tasks that ran (those never started are left out)."""
    ran: int
    cost: list[float]
    tokens: list[int]
    durations: list[float]
    reasons: Counter[str]

    @classmethod
    def of(cls, rows: Sequence[TaskResult]) -> Figures:
        counts: Counter[str] = Counter(str(r.status) for r in rows)
        total = len(rows)
        ran = [r for r in rows if r.status != "not_run"]
        return cls(
            total=total,
            counts=counts,
            pass_rate=counts["succeeded"] / len(ran) if ran else 0.0,
            ran=len(ran),
            cost=[r.cost_usd for r in ran],
            tokens=[r.tokens for r in ran],
            durations=[r.duration_s for r in ran],
            reasons=Counter(r.finish_reason or "none" for r in rows),
        )


def _spread(values: Sequence[float], fmt: Callable[[float], str]) -> str:
    if not values:
        return "—"
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    return (
        f"total {fmt(sum(ordered))}, mean {fmt(statistics.fmean(ordered))}, "
        f"median {fmt(statistics.median(ordered))}, p90 {fmt(p90)}, max {fmt(ordered[-1])}"
    )


def _usd(value: float) -> str:
    return f"${value:.4f}"


def _int(value: float) -> str:
    return f"{round(value):,}"


def _secs(value: float) -> str:
    return f"{value:.1f} s"


def _pass_rate(figures: Figures) -> str:
    """ "75.0 % (6 of 8 that ran; 2 not run, left out)"."""
    if not figures.ran:
        return "— (no task ran)"
    text = f"{figures.pass_rate:.1%} ({figures.counts['succeeded']} of {figures.ran} that ran"
    not_run = figures.counts["not_run"]
    return text + (f"; {not_run} not run, left out)" if not_run else ")")


def _wall_line(info: ReportInput) -> str | None:
    """ "3m07s for 12 tasks, 3.9 tasks/min", or None when the time is not known."""
    if info.wall_s is None:
        return None
    text = f"{describe_duration(info.wall_s)} for {tasks_count(info.finished_in_run)}"
    if info.wall_s > 0 and info.finished_in_run:
        text += f", {info.finished_in_run * 60 / info.wall_s:.1f} tasks/min"
    return text


def _kept(rows: Sequence[TaskResult], info: ReportInput) -> tuple[str, list[TaskResult]]:
    """Where the kept workspaces are, and the rows that name one."""
    kept = [r for r in rows if r.workspace]
    where = f" in {info.workspaces}" if info.workspaces is not None else ""
    policy = f" (--keep {info.keep})" if info.keep else ""
    return f"{tasks_count(len(kept))}{where}{policy}", kept


def _spend_line(info: ReportInput) -> str:
    parts = []
    if info.spent.usd is not None:
        cap = f" of a ${info.cap.usd:.4f} cap" if info.cap.usd is not None else " (no USD cap)"
        parts.append(f"${info.spent.usd:.4f}{cap}")
    if info.spent.tokens is not None:
        cap = f" of a {info.cap.tokens:,} cap" if info.cap.tokens is not None else ""
        parts.append(f"{info.spent.tokens:,} tokens{cap}")
    return "; ".join(parts)


def render_markdown(rows: Sequence[TaskResult], info: ReportInput) -> str:
    figures = Figures.of(rows)
    counts = figures.counts
    lines = [
        f"# Batch {info.batch_id}",
        "",
        f"- Model: {info.model or 'auto-detected'}",
        f"- Tasks: {figures.total} — {counts['succeeded']} succeeded, {counts['failed']} failed, "
        f"{counts['infra_error']} infrastructure errors, {counts['not_run']} not run",
        f"- Pass rate: {_pass_rate(figures)}",
        f"- Spend: {_spend_line(info)}",
    ]
    wall = _wall_line(info)
    if wall is not None:
        lines.append(f"- Wall time: {wall}")
    kept_line, kept = _kept(rows, info)
    lines.append(f"- Workspaces kept: {kept_line}")
    if info.budget_exhausted:
        lines.append(
            f"- Budget exhausted after {info.started_tasks} of {tasks_count(figures.total)}"
        )
    if info.evaluation is not None:
        lines += [f"- {label}: {value}" for label, value in summary_rows(info.evaluation)]
    lines += [
        f"- Cost per task: {_spread(figures.cost, _usd)}",
        f"- Tokens per task: {_spread(figures.tokens, _int)}",
        f"- Duration per task: {_spread(figures.durations, _secs)}",
        "",
        "## Finish reasons",
        "",
        "| finish reason | tasks |",
        "|---|---:|",
        *(f"| {_md(reason)} | {n} |" for reason, n in figures.reasons.most_common()),
        "",
        "## Most expensive tasks",
        "",
        "| task | status | cost | tokens | duration | session |",
        "|---|---|---:|---:|---:|---|",
        *(
            f"| {_md(r.id)} | {r.status} | {_usd(r.cost_usd)} | {r.tokens:,} | "
            f"{_secs(r.duration_s)} | {_md(r.session_id or '—')} |"
            for r in _most_expensive(rows)
        ),
        "",
        "## All tasks",
        "",
        "| task | status | finish reason | verify | cost | tokens | iterations |",
        "|---|---|---|---|---:|---:|---:|",
        *(
            f"| {_md(r.id)} | {r.status} | {_md(r.finish_reason or '—')} | "
            f"{_verify(r.verify_passed)} | {_usd(r.cost_usd)} | {r.tokens:,} | {r.iterations} |"
            for r in rows
        ),
        "",
    ]
    if kept:
        lines += [
            "## Kept workspaces",
            "",
            "| task | status | workspace |",
            "|---|---|---|",
            *(f"| {_md(r.id)} | {r.status} | {_md(r.workspace or '')} |" for r in kept),
            "",
        ]
    return "\n".join(lines)


def _md(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return " ".join(text.split()).replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def _verify(value: bool | None) -> str:
    return "—" if value is None else ("passed" if value else "failed")


def _most_expensive(rows: Sequence[TaskResult]) -> list[TaskResult]:
    ran = [r for r in rows if r.status != "not_run"]
    return sorted(ran, key=lambda r: (-r.cost_usd, -r.tokens, r.id))[:TOP_EXPENSIVE]


# --- HTML -------------------------------------------------------------------------------

STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2rem;color:#222;max-width:70rem}
h1{font-size:1.5rem}h2{font-size:1.15rem;margin-top:2rem}
table{border-collapse:collapse;margin:.5rem 0}td,th{border:1px solid #ccc;padding:.25rem .5rem;
font-size:.9rem;text-align:left}td.n{text-align:right}
.ok{color:#1a7f37}.bad{color:#cf222e}.charts{display:flex;flex-wrap:wrap;gap:1.5rem}
figure{margin:0}figcaption{font-size:.85rem;color:#555}
"""


def render_html(rows: Sequence[TaskResult], info: ReportInput) -> str:
    figures = Figures.of(rows)
    counts = figures.counts
    e = html.escape
    summary = [
        ("Model", e(info.model or "auto-detected")),
        (
            "Tasks",
            f"{figures.total}: {counts['succeeded']} succeeded, {counts['failed']} failed, "
            f"{counts['infra_error']} infrastructure errors, {counts['not_run']} not run",
        ),
        ("Pass rate", e(_pass_rate(figures))),
        ("Spend", e(_spend_line(info))),
        ("Cost per task", e(_spread(figures.cost, _usd))),
        ("Tokens per task", e(_spread(figures.tokens, _int))),
        ("Duration per task", e(_spread(figures.durations, _secs))),
    ]
    wall = _wall_line(info)
    if wall is not None:
        summary.append(("Wall time", e(wall)))
    kept_line, kept = _kept(rows, info)
    summary.append(("Workspaces kept", e(kept_line)))
    if info.budget_exhausted:
        summary.append(
            ("Budget", f"exhausted after {info.started_tasks} of {tasks_count(figures.total)}")
        )
    if info.evaluation is not None:
        summary += [(e(label), e(value)) for label, value in summary_rows(info.evaluation)]
    charts = [
        _figure("Outcomes", _bars([(s, counts[s]) for s in _STATUSES], str)),
        _figure("Spend against the cap", _spend_bar(info)),
        _figure("Cost per task (USD)", _histogram(figures.cost, _usd)),
        _figure("Tokens per task", _histogram([float(t) for t in figures.tokens], _int)),
        _figure("Duration per task", _histogram(figures.durations, _secs)),
        _figure("Finish reasons", _bars(figures.reasons.most_common(), str)),
    ]
    expensive = "".join(
        f"<tr><td>{e(r.id)}</td><td>{e(r.status)}</td><td class=n>{_usd(r.cost_usd)}</td>"
        f"<td class=n>{r.tokens:,}</td><td class=n>{_secs(r.duration_s)}</td>"
        f"<td>{e(r.session_id or '—')}</td><td>{e(r.task)}</td></tr>"
        for r in _most_expensive(rows)
    )
    every = "".join(
        f"<tr><td>{e(r.id)}</td><td class={'ok' if r.status == 'succeeded' else 'bad'}>"
        f"{e(r.status)}</td><td>{e(r.finish_reason or '—')}</td><td>{_verify(r.verify_passed)}"
        f"</td><td class=n>{_usd(r.cost_usd)}</td><td class=n>{r.tokens:,}</td>"
        f"<td class=n>{r.iterations}</td><td>{e(r.session_id or '—')}</td>"
        f"<td>{e(r.error or '')}</td></tr>"
        for r in rows
    )
    return (
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>"
        "<meta http-equiv=Content-Security-Policy content=\"default-src 'none'; "
        "style-src 'unsafe-inline'\">"
        f"<title>Batch {e(info.batch_id)}</title><style>{STYLE}</style></head><body>"
        f"<h1>Batch {e(info.batch_id)}</h1><table>"
        + "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in summary)
        + "</table><h2>Charts</h2><div class=charts>"
        + "".join(charts)
        + "</div><h2>Most expensive tasks</h2><table><tr><th>task</th><th>status</th>"
        "<th>cost</th><th>tokens</th><th>duration</th><th>session</th><th>task text</th></tr>"
        + expensive
        + "</table><h2>All tasks</h2><table><tr><th>task</th><th>status</th>"
        "<th>finish reason</th><th>verify</th><th>cost</th><th>tokens</th><th>iterations</th>"
        "<th>session</th><th>error</th></tr>"
        + every
        + "</table>"
        + _kept_html(kept)
        + "</body></html>\n"
    )


def _kept_html(kept: Sequence[TaskResult]) -> str:
    if not kept:
        return ""
    e = html.escape
    return (
        "<h2>Kept workspaces</h2><table><tr><th>task</th><th>status</th><th>workspace</th></tr>"
        + "".join(
            f"<tr><td>{e(r.id)}</td><td>{e(r.status)}</td><td>{e(r.workspace or '')}</td></tr>"
            for r in kept
        )
        + "</table>"
    )


_STATUSES = ("succeeded", "failed", "infra_error", "not_run")
WIDTH, HEIGHT = 360, 180


def _figure(caption: str, svg: str) -> str:
    return f"<figure>{svg}<figcaption>{html.escape(caption)}</figcaption></figure>"


def _svg(body: str, label: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{html.escape(label)}">'
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="#fafafa" stroke="#ddd"/>{body}</svg>'
    )


def _bars(items: Sequence[tuple[str, int]], fmt: Callable[[int], str]) -> str:
    """Horizontal bars, one per labelled count."""
    items = list(items)
    if not items:
        return _svg('<text x="10" y="20" font-size="12">no data</text>', "no data")
    top = max(n for _, n in items) or 1
    row = min(24, (HEIGHT - 10) // len(items))
    parts = []
    for index, (label, n) in enumerate(items):
        y = 6 + index * row
        width = int((WIDTH - 170) * n / top)
        parts.append(
            f'<text x="6" y="{y + row * 0.7:.0f}" font-size="11">{html.escape(label[:22])}</text>'
            f'<rect x="140" y="{y}" width="{width}" height="{row - 4}" fill="#4c78a8"/>'
            f'<text x="{144 + width}" y="{y + row * 0.7:.0f}" font-size="11">{fmt(n)}</text>'
        )
    return _svg("".join(parts), "bar chart")


def _histogram(values: Sequence[float], fmt: Callable[[float], str]) -> str:
    if not values:
        return _svg('<text x="10" y="20" font-size="12">no data</text>', "no data")
    low, high = min(values), max(values)
    span = (high - low) or 1.0
    counts = [0] * BINS
    for value in values:
        counts[min(BINS - 1, int((value - low) / span * BINS))] += 1
    top = max(counts)
    plot = HEIGHT - 40
    bar = (WIDTH - 20) / BINS
    parts = []
    for index, n in enumerate(counts):
        height = plot * n / top if top else 0
        x = 10 + index * bar
        parts.append(
            f'<rect x="{x:.1f}" y="{10 + plot - height:.1f}" width="{bar - 2:.1f}" '
            f'height="{height:.1f}" fill="#f58518"><title>{n} tasks</title></rect>'
        )
    parts.append(
        f'<text x="10" y="{HEIGHT - 12}" font-size="11">{html.escape(fmt(low))}</text>'
        f'<text x="{WIDTH - 10}" y="{HEIGHT - 12}" font-size="11" text-anchor="end">'
        f"{html.escape(fmt(high))}</text>"
    )
    return _svg("".join(parts), "histogram")


def _spend_bar(info: ReportInput) -> str:
    spent, cap = info.spent.usd, info.cap.usd
    unit = _usd
    if cap is None and info.cap.tokens is not None:
        spent, cap, unit = float(info.spent.tokens or 0), float(info.cap.tokens), _int
    if cap is None or spent is None:
        text = f"spent {html.escape(_spend_line(info))}; no cap"
        return _svg(f'<text x="10" y="40" font-size="12">{text}</text>', "spend")
    share = min(1.0, spent / cap) if cap else 1.0
    width = int((WIDTH - 20) * share)
    body = (
        f'<rect x="10" y="60" width="{WIDTH - 20}" height="30" fill="#eee" stroke="#999"/>'
        f'<rect x="10" y="60" width="{width}" height="30" fill="#54a24b"/>'
        f'<text x="10" y="50" font-size="12">{html.escape(unit(spent))} of '
        f"{html.escape(unit(cap))} ({share:.0%})</text>"
    )
    return _svg(body, "spend against cap")


def write_reports(out: Path, rows: Sequence[TaskResult], info: ReportInput) -> list[Path]:
    """Write report.md and report.html into `out`; returns their paths."""
    written = []
    for name, text in (
        ("report.md", render_markdown(rows, info)),
        ("report.html", render_html(rows, info)),
    ):
        path = out / name
        partial = path.with_name(name + ".partial")
        partial.write_text(text, encoding="utf-8")
        partial.replace(path)
        written.append(path)
    return written


__all__ = ["ReportInput", "render_html", "render_markdown", "write_reports"]
