from reportcfg import load_config, render


def test_default_report():
    text = render(load_config(), [{"name": "a", "total": 3}])
    assert text.splitlines()[2] == "a | 3"
    assert text.endswith("END OF REPORT")


def test_custom_title():
    text = render(load_config({"report": {"title": "Weekly"}}))
    assert text.splitlines()[0].strip() == "Weekly"


def test_no_footer_when_asked():
    assert "END" not in render(load_config({"report": {"footer": None}}))
