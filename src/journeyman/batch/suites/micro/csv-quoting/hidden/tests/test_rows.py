from csvline import format_row


def test_plain_fields():
    assert format_row(["a", "b", "c"]) == "a,b,c"


def test_comma_is_quoted():
    assert format_row(["x,y", "z"]) == '"x,y",z'


def test_numbers_are_written_as_text():
    assert format_row([1, 2.5, None]) == "1,2.5,None"
