import pytest

from patience import delays, retry


def test_first_success_does_not_sleep():
    slept = []
    assert retry(lambda: 42, attempts=3, sleep=slept.append) == 42
    assert slept == []


def test_delays_double():
    waits = delays(0.5)
    assert [next(waits) for _ in range(4)] == [0.5, 1.0, 2.0, 4.0]


def test_attempts_must_be_positive():
    with pytest.raises(ValueError):
        retry(lambda: 1, attempts=0)
