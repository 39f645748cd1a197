"""Shared fixtures: the fake model servers live in tests/fakes/.

The suite never sees the user's own home: before anything is collected, HOME and the XDG
folders (config, cache, data, state) point at an empty temporary home made for this test
process, and the user's JOURNEYMAN_* settings are dropped. It is done in the environment, so
every `journeyman` subprocess a test starts inherits it; with pytest-xdist each worker has a
home of its own."""

import functools
import os
import re
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.fakes.fixtures import fake_anthropic, fake_openai

__all__ = ["fake_anthropic", "fake_openai"]

# Where a private home lives for the duration of the run, removed at its end.
_HOME_ROOT_KEY = pytest.StashKey[Path]()
_SAVED_ENV_KEY = pytest.StashKey[dict[str, str]]()

# Folders of the private home, by the variable that names them.
PRIVATE_FOLDERS = {
    "HOME": "home",
    "XDG_CONFIG_HOME": "home/.config",
    "XDG_CACHE_HOME": "home/.cache",
    "XDG_DATA_HOME": "home/.local/share",
    "XDG_STATE_HOME": "home/.local/state",
    # the suite's own config and snapshot folders, beside the home (where a user's would not be)
    "JOURNEYMAN_CONFIG_DIR": "suite-config",
    "JOURNEYMAN_CACHE_DIR": "suite-cache",
}

# Git commits made by tests get an identity that does not depend on the machine's.
GITCONFIG = "[user]\n\tname = journeyman tests\n\temail = tests@journeyman.invalid\n"


def pytest_configure(config: pytest.Config) -> None:
    """Point HOME, the XDG folders and journeyman's own folders at a fresh private home."""
    config.stash[_SAVED_ENV_KEY] = dict(os.environ)
    root = Path(tempfile.mkdtemp(prefix="jm-tests-home-"))
    config.stash[_HOME_ROOT_KEY] = root
    for name in list(os.environ):
        if name.startswith("JOURNEYMAN_"):
            del os.environ[name]
    for name, relative in PRIVATE_FOLDERS.items():
        folder = root / relative
        folder.mkdir(parents=True, exist_ok=True)
        os.environ[name] = str(folder)
    (root / "home" / ".gitconfig").write_text(GITCONFIG)


def pytest_unconfigure(config: pytest.Config) -> None:
    """Put the environment back and remove the private home."""
    saved = config.stash.get(_SAVED_ENV_KEY, None)
    if saved is not None:
        os.environ.clear()
        os.environ.update(saved)
    root = config.stash.get(_HOME_ROOT_KEY, None)
    if root is not None:
        shutil.rmtree(root, ignore_errors=True)


# Test files that start a Ray cluster: with pytest-xdist (`--dist loadgroup`) they all run on one
# worker, one after the other, so two clusters never compete for the machine's CPUs and ports,
# and a file's cluster (module-scoped) is started once.
RAY_TEST_FILES = ("test_ray_",)
# Tests that build or share one folder outside tmp_path (a virtualenv made once): one worker.
SHARED_FOLDER_TESTS = {"tests/session/test_import.py": "mini-swe-agent-venv"}

# `make test-fast` leaves out the tests marked slow, and with them every test of a file that runs
# the `journeyman` command in subprocesses (a CLI start costs a second or more, a batch several):
# found by what the file calls, so a new end-to-end test file is left out without a list to keep.
CLI_SUBPROCESS = re.compile(
    r'"-m",\s*"journeyman"|-m journeyman\b'
    r"|from tests\.support\.cli import (?:\([^)]*|[^\n]*)\b(?:jm|journeyman)\b"
)
# Files (or folders, ending in /) that run real projects' test suites, real checks or a bench's
# trials: slow without the CLI.
SLOW_PATHS = (
    "tests/bench/",
    "tests/batch/test_eval_grading.py",
    "tests/batch/test_eval_micro.py",
    "tests/context/test_profile.py",
    "tests/context/test_profile_shapes.py",
)


@functools.cache
def _runs_the_cli(path: Path) -> bool:
    try:
        return CLI_SUBPROCESS.search(path.read_text(encoding="utf-8")) is not None
    except OSError:
        return False


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The Ray tests in one xdist group; end-to-end test files marked slow (before `-m`
    selects)."""
    for item in items:
        if item.path.name.startswith(RAY_TEST_FILES):
            item.add_marker(pytest.mark.xdist_group("ray"))
        relative = item.path.as_posix().removeprefix(f"{config.rootpath.as_posix()}/")
        if relative in SHARED_FOLDER_TESTS and "mini_swe_agent" in item.name:
            item.add_marker(pytest.mark.xdist_group(SHARED_FOLDER_TESTS[relative]))
        if relative.startswith(SLOW_PATHS) or _runs_the_cli(item.path):
            item.add_marker(pytest.mark.slow)
