"""bench/reliability.py runs a scenario end to end and reports it (one provider-fault run), run
as its README says: a script started from the repository root."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench" / "reliability.py"


def reliability(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_one_fault_run_is_reported() -> None:
    done = reliability("--only", "faults", "--faults", "1", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    (row,) = report["rows"]
    assert row["trials"] == 1
    assert (row["completed"], row["data_lost"], row["crashes"]) == (1, 0, 0)
    assert "duplicated tool executions: 0" in row["notes"]


def test_the_table_has_the_issue_columns() -> None:
    # the table's renderer on a row whose note holds the column separator
    program = (
        "import sys; sys.argv = ['reliability']; "
        f"sys.path.insert(0, {str(REPO / 'bench')!r}); "
        "import reliability; "
        "print(reliability.render([reliability.Row('x', 2, 2, 0, 0, 0, ['a | b'])]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    table = done.stdout
    assert table.splitlines()[0] == (
        "| scenario | trials | completed | data lost | crashes | escapes | notes |"
    )
    assert "a \\| b" in table


def test_the_script_explains_itself() -> None:
    helped = reliability("--help")
    assert helped.returncode == 0 and "--only" in helped.stdout
