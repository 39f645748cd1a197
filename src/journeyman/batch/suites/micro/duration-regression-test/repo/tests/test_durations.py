import pytest

from durations import format_duration, parse_duration


def test_single_units():
    assert parse_duration("45s") == 45
    assert parse_duration("2m") == 120
    assert parse_duration(" 3H ") == 3 * 3600


def test_bad_input_is_refused():
    for text in ["", "5", "h", "5x", "1h 2m"]:
        with pytest.raises(ValueError):
            parse_duration(text)


def test_format_round_trip():
    for text in ["1s", "59s", "1m", "2h"]:
        assert format_duration(parse_duration(text)) == text
