from agenda import build_agenda


def test_morning_before_ten():
    events = build_agenda([("10:00", "keynote"), ("9:30", "welcome"), ("08:45", "doors")])
    assert [event.title for event in events] == ["doors", "welcome", "keynote"]


def test_afternoon_order():
    pairs = [("14:00", "c"), ("9:00", "a"), ("12:30", "b"), ("9:00", "a2")]
    events = build_agenda(pairs)
    assert [event.title for event in events] == ["a", "a2", "b", "c"]
