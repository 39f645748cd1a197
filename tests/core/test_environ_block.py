"""The agent's environment block as /proc shows it to other processes of the same user."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="no /proc")

PROGRAM = """
import os, subprocess
from journeyman.core.environ_block import wipe_from_environ_block
wiped = wipe_from_environ_block(["GH_PAT", "ABSENT"])
shown = open("/proc/self/environ", "rb").read()
from_child = subprocess.run(
    ["sh", "-c", "cat /proc/$PPID/environ; echo; echo child-got=$GH_PAT"],
    capture_output=True,
).stdout
parent_block, child_got = from_child.split(b"child-got=")
print(wiped, b"s3cret-pat" in shown, os.environ["GH_PAT"])
print(b"s3cret-pat" in parent_block, child_got.strip().decode())
"""


def test_a_wiped_variable_leaves_proc_environ_but_not_the_process() -> None:
    env = {**os.environ, "GH_PAT": "s3cret-pat"}
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM], env=env, capture_output=True, text=True, check=True
    )
    # wiped from what /proc shows (to the process itself and to its children), kept in
    # os.environ, and still inherited by the programs it starts
    assert done.stdout.split() == ["['GH_PAT']", "False", "s3cret-pat", "False", "s3cret-pat"]
