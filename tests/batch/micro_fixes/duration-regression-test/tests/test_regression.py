from durations import parse_duration


def test_parse_hours_and_minutes():
    assert parse_duration("1h30m") == 5400
