"""Shared fixtures: the fake model servers live in tests/fakes/."""

import os
from collections.abc import Iterator

import pytest

from tests.fakes.fixtures import fake_anthropic, fake_openai

__all__ = ["fake_anthropic", "fake_openai"]


@pytest.fixture(autouse=True, scope="session")
def private_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Shadow repositories of command snapshots go to a temporary folder, not the user's cache
    (set in the environment, so `journeyman` subprocesses started by tests use it too)."""
    previous = os.environ.get("JOURNEYMAN_CACHE_DIR")
    os.environ["JOURNEYMAN_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))
    yield
    if previous is None:
        os.environ.pop("JOURNEYMAN_CACHE_DIR", None)
    else:
        os.environ["JOURNEYMAN_CACHE_DIR"] = previous


@pytest.fixture(autouse=True, scope="session")
def private_user_folders(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The user's own config (config.toml, mcp.json, tool_modes.json) and data (sessions) are
    never read or written by the suite: an empty temporary config folder and data folder for the
    whole session, and none of the user's own JOURNEYMAN_* settings. Set in the environment, so
    `journeyman` subprocesses started by tests use them too; a test that needs its own config
    folder still sets JOURNEYMAN_CONFIG_DIR itself."""
    saved = dict(os.environ)
    for name in list(os.environ):
        if name.startswith("JOURNEYMAN_") and name != "JOURNEYMAN_CACHE_DIR":
            del os.environ[name]
    os.environ["JOURNEYMAN_CONFIG_DIR"] = str(tmp_path_factory.mktemp("user-config"))
    os.environ["XDG_DATA_HOME"] = str(tmp_path_factory.mktemp("user-data"))
    yield
    for name in ("JOURNEYMAN_CONFIG_DIR", "XDG_DATA_HOME"):
        os.environ.pop(name, None)
    for name, value in saved.items():
        if name.startswith("JOURNEYMAN_") or name == "XDG_DATA_HOME":
            os.environ.setdefault(name, value)
