from datetime import date

import pytest

from periods import parse_day, weekdays, days_in_range


def test_parse_day():
    assert parse_day(" 2024-02-29") == date(2024, 2, 29)


def test_end_before_start_is_refused():
    with pytest.raises(ValueError):
        days_in_range(date(2024, 1, 2), date(2024, 1, 1))


def test_weekdays():
    assert len(weekdays(date(2024, 3, 4), date(2024, 3, 10))) == 5
