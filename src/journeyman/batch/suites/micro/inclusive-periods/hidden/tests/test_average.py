from datetime import date

import pytest

from periods import daily_average, days_in_range


def test_single_day():
    assert daily_average(12, date(2024, 5, 1), date(2024, 5, 1)) == 12


def test_full_week():
    assert daily_average(70, date(2024, 3, 4), date(2024, 3, 10)) == pytest.approx(10.0)


def test_days_in_range_counts_both_ends():
    assert days_in_range(date(2024, 2, 1), date(2024, 2, 29)) == 29
    assert days_in_range(date(2023, 12, 31), date(2024, 1, 1)) == 2
