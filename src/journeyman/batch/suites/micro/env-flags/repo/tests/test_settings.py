import pytest

from appconf import Settings, load_settings


def test_defaults():
    assert load_settings({}) == Settings()


def test_port_is_an_int():
    assert load_settings({"APP_PORT": " 9000 "}).port == 9000


def test_bad_port_names_the_variable():
    with pytest.raises(ValueError, match="APP_PORT"):
        load_settings({"APP_PORT": "eighty"})
