import pytest

from agenda import build_agenda, parse_time, render


def test_parse_time():
    assert parse_time("9:05") == (9, 5)
    assert parse_time(" 21:30") == (21, 30)


def test_bad_times_are_refused():
    for text in ["9", "9:5", "24:00", "12:60", "noon"]:
        with pytest.raises(ValueError):
            parse_time(text)


def test_same_start_keeps_input_order():
    events = build_agenda([("11:00", "b"), ("11:00", "a")])
    assert [event.title for event in events] == ["b", "a"]


def test_render_lines():
    assert render(build_agenda([("11:15", "coffee")])) == ["11:15  coffee"]
