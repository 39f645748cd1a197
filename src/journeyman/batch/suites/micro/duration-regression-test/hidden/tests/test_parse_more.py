import importlib.util
import pathlib
import re

import pytest

import durations
import durations.parse as parse_module
from durations import parse_duration

_PART = re.compile(r"(\d+)([hms])")


def _last_part_only(text):
    total = 0
    for number, unit in _PART.findall(text.strip().lower()):
        total = int(number) * {"h": 3600, "m": 60, "s": 1}[unit]
    return total


def test_several_units_add_up():
    assert parse_duration("1h30m") == 5400
    assert parse_duration("2m5s") == 125
    assert parse_duration("1h1m1s") == 3661


def test_regression_test_catches_the_bug(monkeypatch):
    path = pathlib.Path(__file__).with_name("test_regression.py")
    assert path.is_file(), "tests/test_regression.py was not written"
    spec = importlib.util.spec_from_file_location("regression_under_check", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    check = module.test_parse_hours_and_minutes
    for owner in (parse_module, durations, module):
        if hasattr(owner, "parse_duration"):
            monkeypatch.setattr(owner, "parse_duration", _last_part_only)
    with pytest.raises(AssertionError):
        check()
