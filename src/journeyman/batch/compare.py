"""`journeyman eval compare RUN_A RUN_B`: two eval runs side by side, task by task.

A win is a task B resolved and A did not; a loss the reverse. Tasks only one run holds are
listed apart and left out of the rates' comparison of shared tasks.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from journeyman.batch.evaluation import (
    EVAL_JSON,
    EvalInputError,
    EvalSummary,
    GradedTask,
    read_graded,
    summarize,
)


@dataclass(frozen=True)
class Comparison:
    """What changed from run A to run B."""

    a: EvalSummary
    b: EvalSummary
    wins: list[str]
    """Resolved by B, not by A."""
    losses: list[str]
    """Resolved by A, not by B."""
    both: list[str]
    neither: list[str]
    only_a: list[str]
    only_b: list[str]

    @property
    def cost_difference(self) -> float:
        """B's spend minus A's, in US dollars."""
        return self.b.cost_usd - self.a.cost_usd


def compare_runs(run_a: Path, run_b: Path) -> Comparison:
    """Compare the eval runs in two --out folders (`EvalInputError` if one is not a run)."""
    graded = []
    for run in (run_a, run_b):
        tasks = read_graded(run)
        if not (run / EVAL_JSON).is_file():
            raise EvalInputError(
                f"{run} is not an eval run: it holds a batch's results but no {EVAL_JSON} (its "
                "tasks were never graded); compare the --out folders of two `journeyman eval` "
                "runs"
            )
        graded.append(tasks)
    return compare_tasks(graded[0], graded[1])


def compare_tasks(a: dict[str, GradedTask], b: dict[str, GradedTask]) -> Comparison:
    shared = sorted(set(a) & set(b))
    return Comparison(
        a=summarize(a),
        b=summarize(b),
        wins=[t for t in shared if b[t].resolved and not a[t].resolved],
        losses=[t for t in shared if a[t].resolved and not b[t].resolved],
        both=[t for t in shared if a[t].resolved and b[t].resolved],
        neither=[t for t in shared if not a[t].resolved and not b[t].resolved],
        only_a=sorted(set(a) - set(b)),
        only_b=sorted(set(b) - set(a)),
    )


def render_comparison(comparison: Comparison, name_a: str, name_b: str) -> str:
    """The comparison as plain text for the terminal."""
    a, b = comparison.a, comparison.b

    def rate(summary: EvalSummary) -> str:
        if not summary.ran:
            figures = "0/0 resolved (no task ran)"
        else:
            figures = (
                f"{summary.resolved}/{summary.ran} resolved ({summary.rate * 100:.1f} %, "
                f"95 % CI {summary.low * 100:.1f}-{summary.high * 100:.1f} %)"
            )
        return f"{figures}{summary.not_run_text()}{summary.flagged_text()}, ${summary.cost_usd:.4f}"

    lines = [
        f"A {name_a}: {rate(a)}",
        f"B {name_b}: {rate(b)}",
        f"B - A: {len(comparison.wins)} won, {len(comparison.losses)} lost, "
        f"{len(comparison.both)} resolved by both, {len(comparison.neither)} by neither; "
        f"cost {comparison.cost_difference:+.4f} $",
    ]
    for label, ids in (
        ("won by B", comparison.wins),
        ("lost by B", comparison.losses),
        ("only in A", comparison.only_a),
        ("only in B", comparison.only_b),
    ):
        if ids:
            lines.append(f"{label}: {', '.join(ids)}")
    return "\n".join(lines)
