import copy

from reportcfg import load_config, render
from reportcfg.defaults import DEFAULTS


def test_defaults_survive_an_override():
    before = copy.deepcopy(DEFAULTS)
    load_config({"report": {"columns": ["share"], "footer": None}, "width": 10})
    assert DEFAULTS == before


def test_second_report_uses_the_default_columns():
    wide = load_config({"report": {"columns": ["name", "total", "share"]}})
    assert render(wide, [{"name": "a", "total": 1, "share": "50%"}]).splitlines()[2] == (
        "a | 1 | 50%"
    )
    text = render(load_config(), [{"name": "b", "total": 2}])
    assert text.splitlines()[2] == "b | 2"
    assert text.endswith("END OF REPORT")


def test_nested_lists_are_not_shared():
    config = load_config()
    config["report"]["columns"].append("extra")
    assert load_config()["report"]["columns"] == ["name", "total"]
