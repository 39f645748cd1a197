"""Reading what a test runner says it ran, from its own summary lines."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from journeyman.context.test_results import TestTally, parse_test_output


def test_pytest_quiet_and_framed_summaries() -> None:
    quiet = parse_test_output(
        "..F\nFAILED tests/test_a.py::test_x - assert 1 == 2\n1 failed, 2 passed in 0.12s\n"
    )
    assert quiet == TestTally(passed=2, failed=1, failing=("tests/test_a.py::test_x",))
    framed = parse_test_output(
        "===== 5 passed, 2 skipped, 1 xfailed, 3 warnings in 1.00s (0:00:01) =====\n"
    )
    assert framed is not None
    assert (framed.passed, framed.skipped, framed.xfailed, framed.ran) == (5, 2, 1, 6)
    errors = parse_test_output("ERROR tests/test_b.py\n1 error in 0.2s\n")
    assert errors is not None and errors.errors == 1 and errors.ran == 1


def test_no_tests_ran_is_a_summary_of_nothing() -> None:
    assert parse_test_output("no tests ran in 0.01s") == TestTally()
    assert parse_test_output("\nRan 0 tests in 0.000s\n\nOK\n") == TestTally()
    assert parse_test_output("\nRan 0 tests in 0.000s\n\nNO TESTS RAN\n") == TestTally()


def test_unittest_summaries_count_what_ran() -> None:
    out = (
        "FAIL: test_add (tests.test_calc.CalcTest.test_add)\n----\n"
        "Ran 4 tests in 0.010s\n\nFAILED (failures=1, errors=1, skipped=1)\n"
    )
    tally = parse_test_output(out)
    assert tally is not None
    assert (tally.passed, tally.failed, tally.errors, tally.skipped) == (1, 1, 1, 1)
    assert tally.failing == ("tests.test_calc.CalcTest.test_add",)
    ok = parse_test_output("Ran 3 tests in 0.001s\n\nOK (skipped=1)\n")
    assert ok is not None and ok.passed == 2 and ok.ran == 2


def test_wrappers_add_up_every_runner_they_ran() -> None:
    tox = "py311: 3 passed in 0.1s\n3 passed in 0.1s\npy312: ...\n2 passed, 1 failed in 0.2s\n"
    tally = parse_test_output(tox)
    assert tally is not None and tally.passed == 5 and tally.failed == 1


def test_output_without_a_summary_is_none() -> None:
    for text in ("", "hello", "built 3 targets in 0.2s", "Ran the linter\nOK"):
        assert parse_test_output(text) is None


def test_colour_codes_do_not_hide_the_summary() -> None:
    tally = parse_test_output("\x1b[32m2 passed\x1b[0m\x1b[32m in 0.01s\x1b[0m")
    assert tally is not None and tally.passed == 2


@given(st.text())
def test_any_text_parses_without_error(text: str) -> None:
    tally = parse_test_output(text)
    assert tally is None or tally.ran >= 0


def test_a_tally_round_trips_through_its_dict() -> None:
    tally = TestTally(3, 1, 0, 2, 0, 0, ("a::b",))
    assert TestTally.from_dict(tally.to_dict()) == tally
    assert TestTally.from_dict({"passed": -4, "failing": "x"}) == TestTally()
    assert tally.describe() == "1 failed, 3 passed, 2 skipped"
