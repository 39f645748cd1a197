import copy

import pytest

from reportcfg import defaults


@pytest.fixture(autouse=True)
def _fresh_defaults():
    saved = copy.deepcopy(defaults.DEFAULTS)
    yield
    defaults.DEFAULTS.clear()
    defaults.DEFAULTS.update(saved)
