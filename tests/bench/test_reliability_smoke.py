"""bench/reliability.py runs a scenario end to end and reports it (one provider-fault run)."""

from __future__ import annotations

import json

import pytest

from bench import reliability


def test_one_fault_run_is_reported(capsys: pytest.CaptureFixture[str]) -> None:
    assert reliability.main(["--only", "faults", "--faults", "1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    (row,) = report["rows"]
    assert row["trials"] == 1
    assert (row["completed"], row["data_lost"], row["crashes"]) == (1, 0, 0)
    assert "duplicated tool executions: 0" in row["notes"]


def test_the_table_has_the_issue_columns() -> None:
    table = reliability.render([reliability.Row("x", 2, 2, 0, 0, 0, ["a | b"])])
    assert table.splitlines()[0] == (
        "| scenario | trials | completed | data lost | crashes | escapes | notes |"
    )
    assert "a \\| b" in table
