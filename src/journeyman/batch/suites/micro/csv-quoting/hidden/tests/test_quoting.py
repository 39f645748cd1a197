import csv
import io

from csvline import format_row


def test_quotes_are_doubled():
    assert format_row(['say "hi"', "ok"]) == '"say ""hi""",ok'


def test_newlines_are_quoted():
    assert format_row(["two\nlines", "cr\rhere"]) == '"two\nlines","cr\rhere"'


def test_round_trip_with_the_csv_module():
    row = ['a "b", c', "plain", "line\nbreak", '""', ""]
    parsed = next(csv.reader(io.StringIO(format_row(row))))
    assert parsed == row
