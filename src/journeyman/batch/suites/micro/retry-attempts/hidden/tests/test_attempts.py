import pytest

from patience import RetryError, retry


class Flaky:
    def __init__(self, failures):
        self.failures = failures
        self.calls = 0

    def __call__(self):
        self.calls += 1
        if self.calls <= self.failures:
            raise ConnectionError(f"failure {self.calls}")
        return "ok"


def test_calls_exactly_attempts_times():
    slept = []
    flaky = Flaky(failures=2)
    assert retry(flaky, attempts=3, base_delay=0.1, sleep=slept.append) == "ok"
    assert flaky.calls == 3
    assert slept == pytest.approx([0.1, 0.2])


def test_one_attempt_calls_once():
    flaky = Flaky(failures=0)
    assert retry(flaky, attempts=1, sleep=lambda _: None) == "ok"
    assert flaky.calls == 1


def test_last_error_is_the_cause():
    slept = []
    flaky = Flaky(failures=10)
    with pytest.raises(RetryError) as raised:
        retry(flaky, attempts=4, base_delay=1, sleep=slept.append)
    assert flaky.calls == 4
    assert str(raised.value.__cause__) == "failure 4"
    assert slept == [1, 2, 4]
