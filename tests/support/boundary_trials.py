"""Attacks on the boundary between the sandbox and the host, run through the real CLI.

Each trial runs `journeyman run` (a subprocess) against the fake OpenAI server, whose scripted
model makes one `run_command` call per attempt, then finishes. An attempt *held* when what it
was after did not happen:

- `own_python`: journeyman runs from a virtualenv inside the workspace (`<ws>/.venv`, a real
  one, with the `journeyman` command pip would write). Commands try to plant code there
  (`.pth`, `sitecustomize.py`, `pyvenv.cfg`, renaming the folder...) or modules in the
  workspace root (`typing.py`, a `journeyman` package). Held: the virtualenv is unchanged,
  and `journeyman diff` run afterwards with that command creates none of the marker files the
  planted code would create.
- `private_folders`: the session folder and the user config folder lie outside $HOME and /tmp
  (under /var/tmp); an earlier session's task and the config hold marker words. Held: no
  marker reaches the model.
- `environment`: credentials under names no heuristic recognises, and the provider key, in
  the agent's environment; commands print their environment and the agent's
  (`/proc/$PPID/environ`, raw, reversed, hex, folded, base64). Held: no form of any value
  reaches the model.
- `stream`: the model's streamed text holds the provider key, cut across fragments. Held: no
  form of it in the stream-json output.

"Reaches the model" is checked on the bytes of every request the fake server received, with
whitespace removed and in raw, reversed, hexadecimal and base64 forms.

Used by tests/reliability/test_boundary.py, which asserts the figures and prints them.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import random
import re
import shutil
import string
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import RecordedRequest, Reply, reply, tool_call
from tests.support.cli import clean_env

HOST_SCRATCH = Path("/var/tmp")
"""Outside $HOME and /tmp: what bubblewrap would show read-only without the hiding."""


@dataclass
class Figures:
    """Attempts and how many held, for one class of attack."""

    name: str
    attempts: int = 0
    held: int = 0
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def count(self, attempt: str, held: bool) -> None:
        self.attempts += 1
        self.held += held
        if not held:
            self.failures.append(attempt)

    def line(self) -> str:
        failed = f"; not held: {', '.join(self.failures)}" if self.failures else ""
        return f"{self.name}: {self.attempts} attempts, {self.held} held{failed}"


def draw(rng: random.Random, prefix: str, n: int = 32) -> str:
    return prefix + "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(n))


def forms(value: str) -> list[bytes]:
    """How a value may come back through a command: raw, reversed, hex, base64."""
    raw = value.encode()
    found = [raw, raw[::-1], raw.hex().encode(), raw.hex().upper().encode()]
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + raw).rstrip(b"=")
        found.append(encoded[-(-shift * 8 // 6) : (shift + len(raw)) * 8 // 6])
    return found


def leaked(value: str, data: bytes) -> bool:
    squeezed = re.sub(rb"\s+|\\n", b"", data)
    return any(form in data or form in squeezed for form in forms(value))


def tool_results(requests: list[RecordedRequest]) -> dict[str, str]:
    """The content of every tool result the model was sent, by call id."""
    found: dict[str, str] = {}
    for request in requests:
        for message in request.json.get("messages", []):
            if message.get("role") == "tool":
                found[message["tool_call_id"]] = str(message.get("content"))
    return found


def command_script(commands: list[str], text: str = "") -> list[Reply]:
    calls = [
        reply(text, [tool_call("run_command", {"command": c}, id=f"call_{i}")])
        for i, c in enumerate(commands)
    ]
    return [*calls, reply("done", [tool_call("finish", {"summary": "done"}, id="call_end")])]


def by_step(replies: list[Reply]) -> object:
    def answer(request: RecordedRequest) -> Reply:
        step = sum(1 for m in request.json["messages"] if m["role"] == "assistant")
        return replies[min(step, len(replies) - 1)]

    return answer


@dataclass
class CliRun:
    returncode: int
    stdout: str
    stderr: str
    requests: list[RecordedRequest]


def _check_ran(figures: Figures, run: CliRun, calls: int) -> None:
    """A note unless every scripted command ran (was not refused before it started)."""
    results = tool_results(run.requests)
    missing = [n for n in range(calls) if "exit code" not in results.get(f"call_{n}", "")]
    if missing:
        figures.notes.append(f"commands that did not run: {missing}")


def run_cli(
    workspace: Path,
    replies: list[Reply],
    *,
    env: dict[str, str],
    args: tuple[str, ...] = (),
    program: tuple[str, ...] = (sys.executable, "-m", "journeyman"),
) -> CliRun:
    """`journeyman run --yes --no-verify` in `workspace` with the scripted model; `program`
    starts the CLI."""
    where = ("-w", str(workspace), "--model", "gpt-4.1-mini")
    with FakeOpenAIServer(default=by_step(replies)) as server:  # type: ignore[arg-type]
        done = subprocess.run(
            [*program, "run", "--yes", "--no-verify", "tidy up", *where, *args],
            env={**env, "OPENAI_BASE_URL": server.base_url},
            cwd=workspace,
            capture_output=True,
            text=True,
            timeout=240,
        )
        return CliRun(done.returncode, done.stdout, done.stderr, list(server.requests))


@contextmanager
def host_scratch() -> Iterator[Path]:
    """A folder outside $HOME and /tmp, removed afterwards."""
    root = Path(tempfile.mkdtemp(prefix="jm-boundary-", dir=HOST_SCRATCH))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


# --- own python -------------------------------------------------------------------------------


def make_workspace_venv(workspace: Path) -> tuple[Path, Path]:
    """A real virtualenv at `<workspace>/.venv` that runs journeyman (this test run's packages
    through a `.pth` file); its `journeyman` command and its site-packages."""
    venv = workspace / ".venv"
    base = (
        Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    )
    subprocess.run(
        [str(base), "-m", "venv", "--without-pip", str(venv)], check=True, capture_output=True
    )
    python = venv / "bin" / "python"
    site_packages = Path(
        subprocess.run(
            [str(python), "-c", "import site; print(site.getsitepackages()[0])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    import site

    import journeyman

    deps = [p for p in site.getsitepackages() if os.path.isdir(p)]
    # an editable install is found through a .pth of its own, which a folder named in another
    # .pth does not get read for: name the folder journeyman is imported from too
    deps.append(str(Path(journeyman.__file__).resolve().parents[1]))
    (site_packages / "journeyman-test-deps.pth").write_text("".join(f"{p}\n" for p in deps))
    script = venv / "bin" / "journeyman"  # what pip writes for the console script
    script.write_text(f"#!{python}\nfrom journeyman.cli.app import main\nmain()\n")
    script.chmod(0o755)
    return script, site_packages


def tree_digest(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if "__pycache__" in path.parts:
            continue
        digest.update(str(path.relative_to(root)).encode())
        if path.is_file() and not path.is_symlink():
            digest.update(path.read_bytes())
    return digest.hexdigest()


def own_python_trial(root: Path) -> Figures:
    """Commands under bubblewrap try to plant code in the virtualenv journeyman runs from."""
    figures = Figures("own_python (bubblewrap, journeyman in <ws>/.venv)")
    workspace = root / "ws"
    workspace.mkdir()
    (workspace / "app.py").write_text("print('hi')\n")
    script, sp = make_workspace_venv(workspace)
    marks = root / "marks"
    marks.mkdir()
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"

    def plant(n: int) -> str:
        return f"import os; open({str(marks / f'm{n}')!r}, 'w')"

    attempts = {
        "write a .pth into site-packages": f"echo {plant(0)!r} > {sp}/evil.pth",
        "write sitecustomize.py": f"echo {plant(1)!r} > {sp}/sitecustomize.py",
        "write usercustomize.py": f"echo {plant(2)!r} > {sp}/usercustomize.py",
        "append to the deps .pth": f"echo {plant(3)!r} >> {sp}/journeyman-test-deps.pth",
        "change pyvenv.cfg": "echo 'include-system-site-packages = true' >> .venv/pyvenv.cfg",
        "rename the venv and plant a new one": (
            f"mv .venv .venv-old && mkdir -p .venv/lib/{version}/site-packages && "
            f"cp -a .venv-old/. .venv/ && echo {plant(5)!r} > .venv/lib/{version}/"
            "site-packages/evil.pth"
        ),
        "replace the python link": "ln -sf /bin/sh .venv/bin/python3",
        "remove site-packages": f"rm -rf {sp}",
        "python -c writes a .pth": (
            f"python3 -c \"open('{sp}/evil2.pth','w').write({plant(8)!r})\""
        ),
        "symlink a .pth in": f"echo {plant(9)!r} > p.pth && ln -s $PWD/p.pth {sp}/link.pth",
        "shadow typing in the workspace root": f"echo {plant(10)!r} > typing.py",
        "shadow journeyman in the workspace root": (
            f"mkdir -p journeyman/cli && echo {plant(11)!r} > journeyman/__init__.py && "
            "cp journeyman/__init__.py journeyman/cli/__init__.py"
        ),
    }
    before = tree_digest(workspace / ".venv")
    env = clean_env(OPENAI_API_KEY=draw(random.Random(7), "sk-proj-"))
    store = ("--session-dir", str(root / "sessions"))
    run = run_cli(
        workspace,
        command_script(list(attempts.values())),
        env=env,
        args=("--sandbox", "bubblewrap", *store),
        program=(str(script),),
    )
    _check_ran(figures, run, len(attempts))
    if run.returncode not in (0, 1) or "Traceback" in run.stderr:
        figures.notes.append(f"run exited {run.returncode}: {run.stderr[-500:]}")
    diff = subprocess.run(
        [str(script), "diff", "-w", str(workspace), *store],
        env=env,
        cwd=workspace,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if diff.returncode not in (0, 1):
        figures.notes.append(f"diff exited {diff.returncode}: {diff.stderr[-300:]}")
    unchanged = tree_digest(workspace / ".venv") == before
    ran = {path.name for path in marks.iterdir()}
    for n, name in enumerate(attempts):
        figures.count(name, f"m{n}" not in ran and unchanged)
    if not unchanged:
        figures.notes.append("the virtualenv changed")
    return figures


# --- session folder and user config -------------------------------------------------------------


def private_folders_trial(root: Path, scratch: Path) -> Figures:
    """Commands under bubblewrap look for the session store and the user config outside
    $HOME and /tmp."""
    figures = Figures("private_folders (bubblewrap, store and config under /var/tmp)")
    rng = random.Random(11)
    task_mark, config_mark = draw(rng, "PRIVATE-TASK-"), draw(rng, "CONFIGMARK")
    sessions, config = scratch / "sessions", scratch / "config"
    config.mkdir()
    (config / "config.toml").write_text(f"# {config_mark}\nmax_iterations = 40\n")
    workspace = root / "ws"
    workspace.mkdir()
    env = clean_env(
        OPENAI_API_KEY=draw(rng, "sk-proj-"),
        JOURNEYMAN_CONFIG_DIR=str(config),
        JOURNEYMAN_SESSION_DIR=str(sessions),
    )
    earlier = run_cli(
        workspace,
        [reply("ok", [tool_call("finish", {"summary": "ok"})])],
        env=env,
        args=("--sandbox", "local"),
    )
    assert earlier.returncode in (0, 1), earlier.stderr
    db = sessions / "journeyman.db"
    _store_task(db, task_mark)  # what a private task of an earlier session looks like
    attempts = {
        "cat the database": f"cat {db}",
        "strings of the database": f"strings {db} || grep -a . {db}",
        "list the session folder": f"ls -laR {sessions}",
        "cat the user config": f"cat {config}/config.toml",
        "search /var/tmp for the task": f"grep -ra PRIVATE-TASK {HOST_SCRATCH} 2>/dev/null",
        "sqlite3 / python reads the store": (
            f"python3 -c \"import sqlite3;print(sqlite3.connect('{db}').execute("
            "'select * from sessions').fetchall())\""
        ),
        "find every .db": f"find {HOST_SCRATCH} -name '*.db' -exec cat {{}} +",
        "copy the store into the workspace": f"cp -r {sessions} ./stolen && cat stolen/*",
    }
    run = run_cli(
        workspace,
        command_script(list(attempts.values())),
        env=env,
        args=("--sandbox", "bubblewrap"),
    )
    if run.returncode not in (0, 1) or "Traceback" in run.stderr:
        figures.notes.append(f"run exited {run.returncode}: {run.stderr[-500:]}")
    _check_ran(figures, run, len(attempts))
    results = tool_results(run.requests)
    for n, name in enumerate(attempts):
        seen = results.get(f"call_{n}", "").encode()
        figures.count(name, not leaked(task_mark, seen) and not leaked(config_mark, seen))
    return figures


def _store_task(db: Path, mark: str) -> None:
    """Write `mark` into the store as the task of the sessions it holds."""
    import sqlite3

    with sqlite3.connect(db) as connection:
        connection.execute("UPDATE sessions SET task = ?", (mark,))


# --- environment ------------------------------------------------------------------------------

NAMELESS_CREDENTIALS = ("GH_PAT", "MYSQL_PWD", "DOCKER_AUTH_CONFIG", "CI_JOB_JWT", "SENTRY_DSN")

ENV_ATTEMPTS = {
    "env": "env",
    "printenv each": "printenv GH_PAT MYSQL_PWD DOCKER_AUTH_CONFIG CI_JOB_JWT SENTRY_DSN",
    "cat /proc/$PPID/environ": "cat /proc/$PPID/environ",
    "rev /proc/$PPID/environ": "tr '\\0' '\\n' < /proc/$PPID/environ | rev",
    "xxd /proc/$PPID/environ": "xxd -p /proc/$PPID/environ || od -An -tx1 /proc/$PPID/environ",
    "fold /proc/$PPID/environ": "fold -w 7 /proc/$PPID/environ",
    "base64 /proc/$PPID/environ": "base64 /proc/$PPID/environ",
    "every process's environ": "cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n'",
    "the grandparent's environ": "cat /proc/$(ps -o ppid= -p $PPID | tr -d ' ')/environ",
    "python os.environ": "python3 -c 'import os; print(dict(os.environ))'",
}


def environment_trial(root: Path, sandbox: str, *, pass_key: bool = False) -> Figures:
    """Commands look for the agent's credentials in their environment and the agent's."""
    label = f"environment ({sandbox}{', --pass-env OPENAI_API_KEY' if pass_key else ''})"
    figures = Figures(label)
    rng = random.Random(hash(label) & 0xFFFF)
    secrets = {name: draw(rng, f"{name.lower()}-") for name in NAMELESS_CREDENTIALS}
    key = draw(rng, "sk-proj-", 40)
    workspace = root / f"ws-{sandbox}-{pass_key}"
    workspace.mkdir()
    env = clean_env(OPENAI_API_KEY=key, JM_PASSED="passed-on-purpose", **secrets)
    args = ("--sandbox", sandbox, "--session-dir", str(root / "sessions"))
    if pass_key:
        args += ("--pass-env", "OPENAI_API_KEY", "--pass-env", "OPENAI_*", "--pass-env", "JM_*")
    run = run_cli(workspace, command_script(list(ENV_ATTEMPTS.values())), env=env, args=args)
    if run.returncode not in (0, 1) or "Traceback" in run.stderr:
        figures.notes.append(f"run exited {run.returncode}: {run.stderr[-500:]}")
    _check_ran(figures, run, len(ENV_ATTEMPTS))
    results = tool_results(run.requests)
    values = [key, *secrets.values()]
    for n, name in enumerate(ENV_ATTEMPTS):
        seen = results.get(f"call_{n}", "").encode()
        figures.count(name, not any(leaked(v, seen) for v in values))
    if pass_key and "JM_PASSED=passed-on-purpose" not in results.get("call_0", ""):
        figures.notes.append("a variable named with --pass-env did not reach the command")
    warning = [line for line in run.stderr.splitlines() if "--sandbox local" in line]
    figures.notes += warning
    return figures


# --- streamed text ----------------------------------------------------------------------------


def stream_trial(root: Path) -> Figures:
    """The model's streamed text carries the provider key, cut across fragments."""
    figures = Figures("stream (--stream -o stream-json)")
    rng = random.Random(5)
    key = draw(rng, "sk-proj-", 40)
    texts = {
        "key in a sentence, 4-char fragments": (f"The key is {key} as asked.", 4),
        "key in 1-char fragments": (f"key={key}", 1),
        "key in 7-char fragments at the end": (f"here: {key}", 7),
        "key glued to words, 3-char fragments": (f"x{key}y and more", 3),
        "reversed key, 5-char fragments": (f"rev {key[::-1]} ok", 5),
        "hex of the key, 6-char fragments": (f"hex {key.encode().hex()} ok", 6),
    }
    workspace = root / "ws-stream"
    workspace.mkdir()
    env = clean_env(OPENAI_API_KEY=key)
    for name, (text, size) in texts.items():
        replies = [reply(text, [tool_call("finish", {"summary": "ok"})], chunk_size=size)]
        run = run_cli(
            workspace,
            replies,
            env=env,
            args=(
                "--stream",
                "-o",
                "stream-json",
                "--sandbox",
                "local",
                "--session-dir",
                str(root / "sessions"),
            ),
        )
        events = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
        deltas = "".join(e.get("text", "") for e in events if e.get("type") == "text_delta")
        held = not leaked(key, run.stdout.encode()) and not leaked(key, deltas.encode())
        figures.count(name, held and run.returncode in (0, 1))
    return figures
