from billing import Invoice, format_cents, to_cents


def test_whole_amounts():
    assert to_cents("3") == 300
    assert to_cents("12.50") == 1250


def test_format_cents():
    assert format_cents(1234) == "12.34"
    assert format_cents(-5) == "-0.05"


def test_empty_invoice():
    assert Invoice().total() == "0.00"
