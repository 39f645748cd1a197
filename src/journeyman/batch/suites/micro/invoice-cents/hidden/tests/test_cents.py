import pytest

from billing import Invoice, to_cents


def test_exact_cents():
    assert to_cents("0.29") == 29
    assert to_cents("4.35") == 435
    assert to_cents("1.1") == 110
    assert to_cents("-0.57") == -57


def test_invoice_total_is_exact():
    invoice = Invoice()
    invoice.add("pen", "0.29")
    invoice.add("paper", "19.99", 3)
    assert invoice.total() == "60.26"


def test_too_many_decimals_are_refused():
    with pytest.raises(ValueError):
        to_cents("1.005")
