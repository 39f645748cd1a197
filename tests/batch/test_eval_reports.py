"""preds.json format, the Wilson interval, eval summaries and `compare`."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pytest

from journeyman.batch.compare import compare_runs, render_comparison
from journeyman.batch.evaluation import EvalInputError, read_graded, write_eval_report
from journeyman.batch.results import ResultStatus, TaskResult
from journeyman.batch.stats import wilson_interval
from journeyman.batch.suites.preds import write_preds


@dataclass
class Row:
    id: str
    grade: dict[str, Any] | None


def test_preds_json_is_a_list_in_swebench_format(tmp_path: Path) -> None:
    rows = [
        Row("a__a-1", {"resolved": True, "model_patch": "diff --git a/x b/x\n"}),
        Row("a__a-2", {"resolved": False, "model_patch": ""}),
        Row("a__a-3", None),  # never ran: still listed, with an empty patch
    ]
    path = write_preds(tmp_path, rows, "gpt-fake")
    assert path == tmp_path / "preds.json"
    preds = json.loads(path.read_text())
    assert preds == [
        {
            "instance_id": "a__a-1",
            "model_name_or_path": "gpt-fake",
            "model_patch": "diff --git a/x b/x\n",
        },
        {"instance_id": "a__a-2", "model_name_or_path": "gpt-fake", "model_patch": ""},
        {"instance_id": "a__a-3", "model_name_or_path": "gpt-fake", "model_patch": ""},
    ]
    assert all(set(pred) == {"instance_id", "model_name_or_path", "model_patch"} for pred in preds)


def test_no_preds_json_for_suites_without_patches(tmp_path: Path) -> None:
    rows = [Row("url-join", {"resolved": True, "model_patch": None}), Row("x", None)]
    assert write_preds(tmp_path, rows, "m") is None
    assert not (tmp_path / "preds.json").exists()


@pytest.mark.parametrize(
    ("successes", "trials", "low", "high"),
    [
        (0, 10, 0.0, 0.2775),
        (5, 10, 0.2366, 0.7634),
        (10, 10, 0.7225, 1.0),
        (1, 12, 0.0149, 0.3539),
        (81, 263, 0.2553, 0.3662),
    ],
)
def test_wilson_interval_values(successes: int, trials: int, low: float, high: float) -> None:
    got_low, got_high = wilson_interval(successes, trials)
    assert got_low == pytest.approx(low, abs=5e-4)
    assert got_high == pytest.approx(high, abs=5e-4)


def test_wilson_interval_edges() -> None:
    assert wilson_interval(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError):
        wilson_interval(3, 2)


def _run(folder: Path, rows: list[dict[str, Any]]) -> Path:
    folder.mkdir()
    lines = [json.dumps(row) for row in rows]
    (folder / "results.jsonl").write_text("\n".join(lines) + "\n{cut sho")
    return folder


def _row(task: str, resolved: bool | None, cost: float, tokens: int) -> dict[str, Any]:
    grade = None if resolved is None else {"resolved": resolved, "fail_to_pass": {}}
    status: ResultStatus = "succeeded" if resolved else "failed"
    row = TaskResult(task, status, None, cost, tokens, 1.0, 1, resolved, None, grade=grade)
    return asdict(row)


def test_eval_report_figures(tmp_path: Path) -> None:
    out = _run(
        tmp_path / "a",
        [
            _row("t1", True, 0.10, 1000),
            _row("t2", False, 0.30, 3000),
            _row("t2", True, 0.20, 2000),  # the last row of a task wins (a retried task)
            _row("t3", None, 0.0, 0),
            _row("t4", False, 0.10, 1000),
        ],
    )
    summary = write_eval_report(out, "micro", "gpt-fake")
    assert (summary.tasks, summary.resolved, summary.graded) == (4, 2, 3)
    assert summary.rate == 0.5
    assert summary.usd_per_resolved == pytest.approx(0.2)
    assert summary.tokens_per_resolved == pytest.approx(2000)
    assert (summary.low, summary.high) == wilson_interval(2, 4)
    markdown = (out / "eval.md").read_text()
    assert "| Resolved | 2 of 4 (50.0 %) |" in markdown
    assert "| t3 | not graded |" in markdown
    data = json.loads((out / "eval.json").read_text())
    assert data["summary"]["resolved"] == 2 and data["tasks"]["t1"]["resolved"] is True


def test_nothing_resolved_has_no_cost_per_resolved(tmp_path: Path) -> None:
    out = _run(tmp_path / "a", [_row("t1", False, 0.5, 10)])
    summary = write_eval_report(out, "micro", None)
    assert summary.usd_per_resolved is None and "nothing resolved" in summary.line()


def test_compare_wins_losses_and_cost(tmp_path: Path) -> None:
    a = _run(
        tmp_path / "a",
        [
            _row("t1", True, 0.1, 1),
            _row("t2", False, 0.1, 1),
            _row("t3", True, 0.1, 1),
            _row("t4", False, 0.1, 1),
            _row("only-a", True, 0.1, 1),
        ],
    )
    b = _run(
        tmp_path / "b",
        [
            _row("t1", True, 0.2, 1),
            _row("t2", True, 0.2, 1),
            _row("t3", False, 0.2, 1),
            _row("t4", None, 0.0, 0),
            _row("only-b", False, 0.2, 1),
        ],
    )
    write_eval_report(a, "micro", None)
    write_eval_report(b, "micro", None)
    comparison = compare_runs(a, b)
    assert comparison.wins == ["t2"] and comparison.losses == ["t3"]
    assert comparison.both == ["t1"] and comparison.neither == ["t4"]
    assert comparison.only_a == ["only-a"] and comparison.only_b == ["only-b"]
    assert comparison.cost_difference == pytest.approx(0.8 - 0.5)
    text = render_comparison(comparison, "a", "b")
    assert "1 won, 1 lost" in text and "won by B: t2" in text and "lost by B: t3" in text
    assert "A a: 3/5 resolved (60.0 %" in text and "B b: 2/5 resolved (40.0 %" in text


def test_reading_something_that_is_not_a_run(tmp_path: Path) -> None:
    with pytest.raises(EvalInputError, match="not a folder"):
        read_graded(tmp_path / "missing")
    with pytest.raises(EvalInputError, match=r"holds no results\.jsonl"):
        read_graded(tmp_path)


def test_compare_refuses_batch_runs_that_were_never_graded(tmp_path: Path) -> None:
    a = _run(tmp_path / "a", [_row("t1", True, 0.1, 1)])
    b = _run(tmp_path / "b", [_row("t1", False, 0.1, 1)])
    write_eval_report(a, "micro", None)
    with pytest.raises(EvalInputError, match=r"b is not an eval run.*no eval\.json"):
        compare_runs(a, b)


def _not_run(task: str) -> dict[str, Any]:
    return asdict(TaskResult(task, "not_run", "budget_exhausted", 0.0, 0, 0.0, 0, None, None))


def test_tasks_that_never_ran_are_left_out_of_the_rate(tmp_path: Path) -> None:
    out = _run(
        tmp_path / "a",
        [_row("t1", True, 0.1, 10), _row("t2", False, 0.1, 10), _not_run("t3"), _not_run("t4")],
    )
    summary = write_eval_report(out, "micro", None)
    assert (summary.ran, summary.not_run, summary.rate) == (2, 2, 0.5)
    assert (summary.low, summary.high) == wilson_interval(1, 2)
    assert "resolved 1/2 (50.0 %" in summary.line() and "2 not run" in summary.line()
    markdown = (out / "eval.md").read_text()
    assert "| Resolved | 1 of 2 (50.0 %) |" in markdown
    assert "| Not run | 2 (budget exhausted; left out of the rate) |" in markdown
    nothing = write_eval_report(_run(tmp_path / "b", [_not_run("t1")] * 1), "micro", None)
    assert nothing.line().startswith("resolved 0/0 (no task ran); 1 not run")


def test_an_evals_batch_reports_carry_its_resolved_rate(tmp_path: Path) -> None:
    from journeyman.batch.results import TaskResult
    from journeyman.batch.runner import finish_files
    from journeyman.batch.scheduler import BatchSettings, BatchSummary
    from journeyman.economics.ledger import Amount

    def result(task: str, resolved: bool | None, status: str = "succeeded") -> TaskResult:
        grade = None if resolved is None else {"resolved": resolved}
        return TaskResult(task, status, None, 0.25, 100, 1.0, 1, None, None, grade=grade)  # type: ignore[arg-type]

    rows = [result("t1", True), result("t2", False), result("t3", None, "not_run")]
    out = tmp_path / "out"
    out.mkdir()
    settings = BatchSettings(batch_id="b", out=out, store_path=tmp_path / "s")
    summary = BatchSummary("b", rows, True, Amount(300, 0.75), Amount(None, 1.0), Amount(0, 0), 2)
    finish_files(settings, summary, graded=True)
    markdown = (out / "report.md").read_text()
    assert "- Resolved: 1 of 2 (50.0 %)" in markdown
    assert "- 95 % interval (Wilson):" in markdown and "- Not run: 1" in markdown
    assert "- Per resolved task: $0.7500, 300 tokens" in markdown
    page = (out / "report.html").read_text()
    assert "<th>Resolved</th><td>1 of 2 (50.0 %)</td>" in page and "Per resolved task" in page
    finish_files(settings, summary)  # a plain batch: no eval figures
    assert "Resolved" not in (out / "report.md").read_text()
