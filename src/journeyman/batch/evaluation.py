"""The eval's view of a batch: which tasks were resolved, at what rate, for what cost.

Reads the batch's `results.jsonl` (the last row of each task wins, as in the batch) and writes
`eval.md` and `eval.json` next to it: the resolved rate with its Wilson 95 % interval, and the
US dollars and tokens spent per resolved task (everything spent, divided by the tasks resolved).
Figures are rounded where they are written (`rounded`): rates to 6 places, dollars to 6,
tokens per resolved task to 1. A run whose commands ran unsandboxed (`mark_unsandboxed`, kept
over resumes) says so in every report and in its summary line.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from journeyman.batch.results import TaskResult, read_results
from journeyman.batch.stats import wilson_interval

RESULTS_FILE = "results.jsonl"
EVAL_MD = "eval.md"
EVAL_JSON = "eval.json"
NOT_RUN = "not_run"
"""A batch row's status for a task never started (see `journeyman.batch.results`)."""
UNSANDBOXED_FILE = "unsandboxed"
"""Marker in an eval's --out: some run of it let the agent's commands run unsandboxed."""
RATE_PLACES = 6
"""Decimal places of a rate (0-1) as written."""
USD_PLACES = 6
"""Decimal places of a US dollar figure as written."""


class EvalInputError(ValueError):
    """A run folder cannot be read as an eval's output."""


@dataclass(frozen=True)
class GradedTask:
    """One task of an eval run, as the report needs it."""

    id: str
    status: str
    resolved: bool
    cost_usd: float
    tokens: int
    graded: bool
    """False when the task never reached grading (not run, or grading failed)."""
    tampering: list[dict[str, str]] = field(default_factory=list)
    """The agent's changes to test infrastructure, left out of the graded tree (`path`, `why`)."""


@dataclass(frozen=True)
class EvalSummary:
    """The figures of one eval run."""

    tasks: int
    """Every task of the run."""
    resolved: int
    graded: int
    rate: float
    """Resolved among the tasks that ran (those never started are left out)."""
    low: float
    high: float
    cost_usd: float
    tokens: int
    usd_per_resolved: float | None
    tokens_per_resolved: float | None
    ran: int = 0
    """Tasks that ran: the rate's and the interval's denominator."""
    not_run: int = 0
    """Tasks never started (the global budget ran out first)."""
    flagged: int = 0
    """Tasks whose agent changed test infrastructure (left out of what was graded)."""
    unsandboxed: bool = False
    """The agent's commands ran without a sandbox (`--allow-unsandboxed`) in some run of the
    eval: they could read the hidden tests, so the figures prove nothing."""

    def rate_text(self) -> str:
        """ "7/12 (58.3 %, 95 % CI 32.0-80.7 %)", or "0/0 (no task ran)"."""
        if not self.ran:
            return "0/0 (no task ran)"
        return (
            f"{self.resolved}/{self.ran} ({self.rate * 100:.1f} %, 95 % CI "
            f"{self.low * 100:.1f}-{self.high * 100:.1f} %)"
        )

    def not_run_text(self) -> str:
        """ "; 3 not run (...)" when some tasks never started, else ""."""
        if not self.not_run:
            return ""
        return f"; {self.not_run} not run (budget exhausted; left out of the rate)"

    def flagged_text(self) -> str:
        """ "; 11 flagged for tampering (...)" when some tasks were, else ""."""
        if not self.flagged:
            return ""
        return f"; {self.flagged} flagged for tampering (see eval.md)"

    def per_resolved_text(self) -> str:
        if self.usd_per_resolved is None or self.tokens_per_resolved is None:
            return "nothing resolved"
        return f"${self.usd_per_resolved:.4f} and {self.tokens_per_resolved:,.0f} tokens"

    def line(self) -> str:
        """One line: "resolved 7/12 (58.3 %, 95 % CI 32.0-80.7 %), $0.84, $0.12 per resolved"."""
        per = self.per_resolved_text()
        if self.usd_per_resolved is not None:
            per += " per resolved"
        return (
            f"resolved {self.rate_text()}{self.not_run_text()}{self.flagged_text()}; "
            f"spent ${self.cost_usd:.4f} and {self.tokens:,} tokens; {per}"
            f"{self.unsandboxed_text()}"
        )

    def unsandboxed_text(self) -> str:
        """ "; UNSANDBOXED: ..." when the agent's commands ran without a sandbox, else ""."""
        if not self.unsandboxed:
            return ""
        return "; UNSANDBOXED: the agent's commands could read the hidden tests"


def read_graded(out: Path) -> dict[str, GradedTask]:
    """The tasks of the run in `out`, by id; `EvalInputError` when it holds no results."""
    path = out / RESULTS_FILE
    if not out.is_dir():
        raise EvalInputError(f"{out} is not a folder; give the --out folder of an eval run")
    if not path.is_file():
        raise EvalInputError(f"{out} holds no {RESULTS_FILE}; is it the --out of a run?")
    # typed rows: one that is not a row (cut by a kill, a field of the wrong kind) is skipped
    tasks = {task_id: _graded(row) for task_id, row in read_results(out).items()}
    if not tasks:
        raise EvalInputError(f"{path} holds no task row")
    return tasks


def _graded(row: TaskResult) -> GradedTask:
    grade = row.grade
    return GradedTask(
        id=row.id,
        status=row.status,
        resolved=grade is not None and bool(grade.get("resolved")),
        cost_usd=row.cost_usd,
        tokens=row.tokens,
        graded=grade is not None and "resolved" in grade,
        tampering=_tampering(grade),
    )


def _tampering(grade: dict[str, Any] | None) -> list[dict[str, str]]:
    """The grade's flags, each a `path` and a `why` (anything else in a row is left out)."""
    flags = grade.get("tampering") if grade else None
    if not isinstance(flags, list):
        return []
    return [
        {"path": str(flag.get("path", "")), "why": str(flag.get("why", ""))}
        for flag in flags
        if isinstance(flag, dict)
    ]


def summarize(tasks: dict[str, GradedTask]) -> EvalSummary:
    """Resolved rate, its interval and the cost per resolved task."""
    total = len(tasks)
    not_run = sum(task.status == NOT_RUN for task in tasks.values())
    ran = total - not_run
    resolved = sum(task.resolved for task in tasks.values())
    cost = sum(task.cost_usd for task in tasks.values())
    tokens = sum(task.tokens for task in tasks.values())
    low, high = wilson_interval(resolved, ran)
    return EvalSummary(
        tasks=total,
        resolved=resolved,
        graded=sum(task.graded for task in tasks.values()),
        rate=resolved / ran if ran else 0.0,
        low=low,
        high=high,
        cost_usd=cost,
        tokens=tokens,
        usd_per_resolved=cost / resolved if resolved else None,
        tokens_per_resolved=tokens / resolved if resolved else None,
        ran=ran,
        not_run=not_run,
        flagged=sum(bool(task.tampering) for task in tasks.values()),
    )


def summarize_rows(rows: Iterable[TaskResult]) -> EvalSummary:
    """`summarize` of a batch's result rows (as the scheduler holds them)."""
    return summarize({row.id: _graded(row) for row in rows})


def mark_unsandboxed(out: Path, why: str) -> None:
    """Record in `out` that this eval's commands run unsandboxed (kept by every later run)."""
    out.mkdir(parents=True, exist_ok=True)
    _write(out / UNSANDBOXED_FILE, why.rstrip("\n") + "\n")


def was_unsandboxed(out: Path) -> bool:
    """Whether some run of the eval in `out` ran the agent's commands unsandboxed."""
    return (out / UNSANDBOXED_FILE).exists()


def rounded(summary: EvalSummary) -> dict[str, Any]:
    """`summary` as written to eval.json: rates and dollars rounded, no float noise."""
    data = asdict(summary)
    for key in ("rate", "low", "high"):
        data[key] = round(data[key], RATE_PLACES)
    for key in ("cost_usd", "usd_per_resolved"):
        if data[key] is not None:
            data[key] = round(data[key], USD_PLACES)
    if data["tokens_per_resolved"] is not None:
        data["tokens_per_resolved"] = round(data["tokens_per_resolved"], 1)
    return data


def write_eval_report(
    out: Path, suite: str, model: str | None, left_out: Sequence[str] = ()
) -> EvalSummary:
    """Write `eval.md` and `eval.json` for the run in `out`; returns its summary. `left_out`
    says, one line each, which tasks of the suite could not run here (outside the figures)."""
    tasks = read_graded(out)
    summary = replace(summarize(tasks), unsandboxed=was_unsandboxed(out))
    data = {
        "suite": suite,
        "model": model,
        "unsandboxed": summary.unsandboxed,
        "summary": rounded(summary),
        "tasks": {
            task_id: {**asdict(task), "cost_usd": round(task.cost_usd, USD_PLACES)}
            for task_id, task in sorted(tasks.items())
        },
        "left_out": list(left_out),
    }
    _write(out / EVAL_JSON, json.dumps(data, indent=2) + "\n")
    markdown = render_markdown(summary, tasks, suite, model)
    if left_out:
        markdown += "\n## Not run here\n\n" + "".join(f"- {line}\n" for line in left_out)
    _write(out / EVAL_MD, markdown)
    return summary


def render_markdown(
    summary: EvalSummary, tasks: dict[str, GradedTask], suite: str, model: str | None
) -> str:
    """The eval report as Markdown."""
    lines = [
        f"# Eval: {suite}",
        "",
        f"Model: {model or '(default)'}",
        "",
        "| | |",
        "|---|---|",
        *(f"| {label} | {value} |" for label, value in summary_rows(summary)),
        f"| Graded | {summary.graded} of {summary.tasks} |",
        f"| Spent | ${summary.cost_usd:.4f}, {summary.tokens:,} tokens |",
    ]
    lines += ["", "| Task | Resolved | Status | Cost ($) | Tokens |", "|---|---|---|---:|---:|"]
    for task_id, task in sorted(tasks.items()):
        mark = "yes" if task.resolved else ("no" if task.graded else "not graded")
        lines.append(
            f"| {task_id} | {mark} | {task.status} | {task.cost_usd:.4f} | {task.tokens:,} |"
        )
    return "\n".join(lines + flagged_section(tasks)) + "\n"


def flagged_section(tasks: dict[str, GradedTask]) -> list[str]:
    """The tasks whose test infrastructure changes were left out, each with what and why."""
    flagged = {task_id: task for task_id, task in sorted(tasks.items()) if task.tampering}
    if not flagged:
        return []
    lines = [
        "",
        "## Flagged for tampering",
        "",
        "These tasks changed test infrastructure. Those changes were left out of the graded "
        "tree (the task was graded without them), except the ones marked kept, which were "
        "graded and need a reviewer's look.",
        "",
        "| Task | Resolved | Path | Why |",
        "|---|---|---|---|",
    ]
    for task_id, task in flagged.items():
        for flag in task.tampering:
            resolved = "yes" if task.resolved else "no"
            cells = (task_id, resolved, f"`{flag['path']}`", flag["why"])
            lines.append("| " + " | ".join(_cell(cell) for cell in cells) + " |")
    return lines


def _cell(text: str) -> str:
    """`text` safe in a Markdown table cell (no row break, no column break)."""
    return " ".join(text.split()).replace("|", "\\|")


def summary_rows(summary: EvalSummary) -> list[tuple[str, str]]:
    """The resolved rate, its interval, the tasks left out and the cost per resolved task, as
    (label, text) rows for every report that shows an eval's figures."""
    if summary.ran:
        rows = [
            (
                "Resolved",
                f"{summary.resolved} of {summary.ran} ({summary.rate * 100:.1f} %)",
            ),
            (
                "95 % interval (Wilson)",
                f"{summary.low * 100:.1f} % - {summary.high * 100:.1f} %",
            ),
        ]
    else:
        rows = [("Resolved", "0 of 0: no task ran")]
    if summary.unsandboxed:
        rows.append(
            (
                "Sandbox",
                "none: the agent's commands ran unsandboxed (--allow-unsandboxed) and could "
                "read the hidden tests; these figures cannot be published",
            )
        )
    if summary.not_run:
        rows.append(("Not run", f"{summary.not_run} (budget exhausted; left out of the rate)"))
    if summary.ran:
        rows.append(("Flagged for tampering", f"{summary.flagged} of {summary.ran}"))
    per = summary.per_resolved_text().replace(" and ", ", ")
    rows.append(("Per resolved task", per if summary.resolved else "- (nothing resolved)"))
    return rows


def _write(path: Path, text: str) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)
