"""What a test runner says it ran: the counts in pytest's and unittest's own summaries.

A check that exits 0 proves nothing unless it ran tests, so the verdict reads the runner's own
summary lines out of the check's output:

* pytest: the closing line, ``1 failed, 2 passed, 1 skipped in 0.12s`` (framed by ``=`` or
  not, as ``-q`` prints it), ``no tests ran in 0.01s``, and ``FAILED``/``ERROR`` lines that
  name the failing tests;
* unittest: ``Ran 3 tests in 0.001s`` followed by ``OK``, ``OK (skipped=1)``,
  ``FAILED (failures=1, errors=1)`` or ``NO TESTS RAN``, and ``FAIL:``/``ERROR:`` headers.

Wrappers (make, tox, nox, hatch, uv run ...) print the underlying runner's lines, so every
summary found in the output is added up (tox running two environments gives two). Output that
holds no summary at all gives None: the caller decides what an unreadable check means.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_PYTEST_ITEM = re.compile(
    r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected|warnings?|rerun)"
)
_PYTEST_SUMMARY = re.compile(
    r"^=*\s*(?P<body>(?:\d+ [a-z]+(?:, )?)+|no tests ran)\s+in\s+[\d.]+\s*s"
    r"(?:\s*\([^)]*\))?\s*=*\s*$"
)
_PYTEST_FAILING = re.compile(r"^(?:FAILED|ERROR) (\S+)")
_UNITTEST_RAN = re.compile(r"^Ran (\d+) tests? in [\d.]+s\s*$")
_UNITTEST_END = re.compile(r"^(OK|FAILED|NO TESTS RAN)(?: \((?P<items>[^)]*)\))?\s*$")
_UNITTEST_FAILING = re.compile(r"^(?:FAIL|ERROR): (\S+) \(([^)]*)\)")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
MAX_NAMES = 50
"""Failing test names kept on a tally (a receipt lists them; a huge suite must not flood it)."""


@dataclass(frozen=True)
class TestTally:
    """Tests counted in a runner's summary."""

    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    xfailed: int = 0
    xpassed: int = 0
    failing: tuple[str, ...] = ()
    """Names of the failing tests as the runner printed them (pytest node ids, unittest ids)."""

    __test__ = False  # not a pytest test class

    @property
    def ran(self) -> int:
        """Tests that ran to an outcome (skipped ones did not)."""
        return self.passed + self.failed + self.errors + self.xfailed + self.xpassed

    def __add__(self, other: TestTally) -> TestTally:
        names = (*self.failing, *other.failing)[:MAX_NAMES]
        return TestTally(
            self.passed + other.passed,
            self.failed + other.failed,
            self.errors + other.errors,
            self.skipped + other.skipped,
            self.xfailed + other.xfailed,
            self.xpassed + other.xpassed,
            tuple(dict.fromkeys(names)),
        )

    def describe(self) -> str:
        """"1 failed, 2 passed" style, the non-zero counts only ("no tests" when none ran)."""
        parts = [
            f"{count} {word}"
            for count, word in (
                (self.failed, "failed"),
                (self.errors, "errors" if self.errors != 1 else "error"),
                (self.passed, "passed"),
                (self.skipped, "skipped"),
                (self.xfailed, "xfailed"),
                (self.xpassed, "xpassed"),
            )
            if count
        ]
        return ", ".join(parts) or "no tests"

    def to_dict(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "failed": self.failed,
            "errors": self.errors,
            "skipped": self.skipped,
            "xfailed": self.xfailed,
            "xpassed": self.xpassed,
            "ran": self.ran,
            "failing": list(self.failing),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TestTally:
        def count(key: str) -> int:
            value = data.get(key)
            return value if isinstance(value, int) and value >= 0 else 0

        failing = data.get("failing")
        names = [str(n) for n in failing] if isinstance(failing, list) else []
        return cls(
            count("passed"),
            count("failed"),
            count("errors"),
            count("skipped"),
            count("xfailed"),
            count("xpassed"),
            tuple(names[:MAX_NAMES]),
        )


def parse_test_output(output: str) -> TestTally | None:
    """The tests the runners in `output` report, summed; None when no summary is found."""
    lines = [_ANSI.sub("", line).rstrip() for line in output.splitlines()]
    total: TestTally | None = None
    for summary in (*_pytest_summaries(lines), *_unittest_summaries(lines)):
        total = summary if total is None else total + summary
    return total


def _pytest_summaries(lines: list[str]) -> list[TestTally]:
    names = [m.group(1) for m in map(_PYTEST_FAILING.match, lines) if m]
    tallies: list[TestTally] = []
    for line in lines:
        match = _PYTEST_SUMMARY.match(line)
        if match is None:
            continue
        counts: dict[str, int] = {}
        for number, word in _PYTEST_ITEM.findall(match.group("body")):
            key = {"error": "errors", "warning": "warnings"}.get(word, word)
            counts[key] = counts.get(key, 0) + int(number)
        tallies.append(
            TestTally(
                passed=counts.get("passed", 0),
                failed=counts.get("failed", 0),
                errors=counts.get("errors", 0),
                skipped=counts.get("skipped", 0),
                xfailed=counts.get("xfailed", 0),
                xpassed=counts.get("xpassed", 0),
            )
        )
    if tallies and names:
        tallies[0] = tallies[0] + TestTally(failing=tuple(names[:MAX_NAMES]))
    return tallies


def _unittest_summaries(lines: list[str]) -> list[TestTally]:
    names = [
        f"{m.group(2)}" if "." in m.group(2) else m.group(1)
        for m in map(_UNITTEST_FAILING.match, lines)
        if m
    ]
    tallies: list[TestTally] = []
    for index, line in enumerate(lines):
        ran = _UNITTEST_RAN.match(line)
        if ran is None:
            continue
        end = next(
            (m for m in map(_UNITTEST_END.match, lines[index + 1 : index + 4]) if m), None
        )
        if end is None:
            continue
        counts = _unittest_items(end.group("items") or "")
        total = int(ran.group(1))
        failed, errors = counts.get("failures", 0), counts.get("errors", 0)
        skipped = counts.get("skipped", 0)
        xfailed = counts.get("expected failures", 0)
        xpassed = counts.get("unexpected successes", 0)
        passed = max(total - failed - errors - skipped - xfailed - xpassed, 0)
        tallies.append(TestTally(passed, failed, errors, skipped, xfailed, xpassed))
    if tallies and names:
        tallies[0] = tallies[0] + TestTally(failing=tuple(names[:MAX_NAMES]))
    return tallies


def _unittest_items(text: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for item in text.split(","):
        key, _, value = item.strip().partition("=")
        if value.strip().isdigit():
            counts[key.strip()] = int(value)
    return counts
