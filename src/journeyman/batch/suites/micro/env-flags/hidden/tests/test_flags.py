import pytest

from appconf import load_settings


def test_false_words():
    for word in ["0", "false", "FALSE", " no ", "off", ""]:
        assert load_settings({"APP_DEBUG": word}).debug is False, word
        assert load_settings({"APP_RELOAD": word}).reload is False, word


def test_true_words():
    for word in ["1", "true", "Yes", "ON "]:
        assert load_settings({"APP_DEBUG": word}).debug is True, word


def test_unknown_word_is_an_error():
    with pytest.raises(ValueError, match="APP_DEBUG"):
        load_settings({"APP_DEBUG": "maybe"})
