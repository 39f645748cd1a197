"""The check a session is judged by, fixed before the model's first turn.

The check command is the user's (`verify_command`, `--verify`) or the first runnable test
command the project profile finds in the workspace **as it was before the model acted**; the
test infrastructure it rests on (`context.test_infra`) is recorded at the same moment. Both go
into the session as a `CheckFixed` event, so a resumed or continued session is judged by the
same check and compared against the same tests; nothing the model writes can choose another.
"""

from __future__ import annotations

import asyncio
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from journeyman.context.profile import detect_profile, runnable_test
from journeyman.context.test_infra import TestInfra, take_manifest
from journeyman.core.events import CheckFixed
from journeyman.session.store import SessionStore

USER_SOURCE = "--verify"
CHECK_FIXED_EVENT = "check_fixed"
KNOWN_RUNNERS = ("pytest", "unittest", "tox", "nox", "make", "hatch")
"""Runners whose output must show a test summary for the check to count (see `runner_of`)."""
PROBE_TIMEOUT_S = 10.0
WRAPPERS = frozenset({"uv", "poetry", "pdm", "pipenv", "hatch", "env", "timeout", "nice"})


@dataclass(frozen=True)
class FixedCheck:
    """What a session's success is judged by."""

    command: str | None
    """None when no check was configured or found."""
    source: str
    """"--verify", or where the profile found the command."""
    runner: str | None
    infra: TestInfra
    before: dict[str, Any] | None = None
    """How the check ended before the model's first turn (`CheckRun.summary`)."""

    @property
    def needs_summary(self) -> bool:
        """Whether an output without a test summary fails the check: always for a detected
        check and for a known runner; a command of the user's own that no known runner is
        seen in is taken at its exit code."""
        return self.source != USER_SOURCE or self.runner is not None

    @property
    def tests_before(self) -> int | None:
        tests = (self.before or {}).get("tests")
        ran = tests.get("ran") if isinstance(tests, dict) else None
        return ran if isinstance(ran, int) else None

    def event(self) -> CheckFixed:
        return CheckFixed(
            self.command, self.source, self.runner, self.infra.to_dict(), self.before
        )

    @classmethod
    def from_event(cls, event: dict[str, Any]) -> FixedCheck:
        command = event.get("command")
        before = event.get("before")
        runner = event.get("runner")
        return cls(
            command if isinstance(command, str) and command.strip() else None,
            str(event.get("source") or USER_SOURCE),
            runner if isinstance(runner, str) else None,
            TestInfra.from_dict(event.get("infra")),
            before if isinstance(before, dict) else None,
        )


def runner_of(command: str) -> str | None:
    """The test runner a command line starts, looking through environment wrappers
    (`uv run`, `poetry run`, `python -m`, `env X=1`); None when it is none we know."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    for word in words:
        name = Path(word).name
        if name.startswith("python") or name in WRAPPERS or "=" in word or word.startswith("-"):
            continue
        if name in ("run", "exec", "-m"):
            continue
        if name.startswith("pytest") or name == "py.test":
            return "pytest"
        if name in KNOWN_RUNNERS:
            return name
        return None
    return None


async def fix_check(workspace: Path, configured: str | None) -> FixedCheck:
    """The check of a new session, from the workspace as it is now (see the module doc)."""
    return await asyncio.to_thread(fix_check_now, workspace, configured)


def fix_check_now(workspace: Path, configured: str | None) -> FixedCheck:
    """`fix_check`, blocking (reads files, runs nothing)."""
    infra = take_manifest(workspace)
    command = (configured or "").strip()
    if command:
        return FixedCheck(command, USER_SOURCE, runner_of(command), infra)
    found = runnable_test(detect_profile(workspace))
    if found is None:
        return FixedCheck(None, "no test command found", None, infra)
    command = with_a_python_that_has_it(found.command)
    return FixedCheck(command, found.source, runner_of(command) or found.runner, infra)


PYTHON_MODULE = re.compile(
    r"^(?P<env>(?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)*)(?P<python>python3?)\s+-m\s+(?P<module>[\w.]+)"
)


def with_a_python_that_has_it(command: str) -> str:
    """`command` with its `python -m MODULE` run by journeyman's own interpreter when the
    `python` on PATH cannot import MODULE and journeyman's can (a runner missing from the
    PATH's Python would fail every check, whatever the model did); else unchanged."""
    match = PYTHON_MODULE.match(command)
    if match is None:
        return command
    module = match.group("module")
    on_path = shutil.which(match.group("python"))
    if on_path is None or _imports(on_path, module) or not _imports(sys.executable, module):
        return command
    rest = command[match.end("python") :]
    return f"{match.group('env')}{shlex.quote(sys.executable)}{rest}"


def _imports(python: str, module: str) -> bool:
    probe = f"import importlib.util, sys; sys.exit(importlib.util.find_spec({module!r}) is None)"
    try:
        done = subprocess.run(
            [python, "-c", probe], capture_output=True, timeout=PROBE_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def stored_check(store: SessionStore, session_id: str) -> FixedCheck | None:
    """The check stored with a session, None when it has none (older sessions)."""
    fixed = None
    for event in store.events(session_id):
        if isinstance(event, dict) and event.get("type") == CHECK_FIXED_EVENT:
            fixed = FixedCheck.from_event(event)
    return fixed
