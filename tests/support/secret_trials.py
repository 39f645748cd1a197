"""Secrets in the environment and in workspace files (reliability scenario 6).

A trial runs `journeyman run --output-format stream-json` (a subprocess, the real CLI) against
the fake OpenAI server with fresh random secrets:

- in the environment: the provider key `OPENAI_API_KEY` and an unrelated `DEPLOY_TOKEN`;
- in the workspace: `.env` holding both values plus a GitHub-shaped token that is in no
  environment variable, and `settings.py` holding the provider key.

The scripted model then does what a careless model might: reads `.env`, greps for keys, runs
`cat .env; env` through `run_command`, repeats a key in its own text, edits `.env` and
`settings.py` (so the undo journal holds their contents), writes a new file containing a key,
and ends with a summary quoting one. Afterwards no secret may appear in the bytes of any file of
the session folder (SQLite database, WAL, ...), in `journeyman sessions export`, in the
stream-json output, or in what the CLI wrote to stderr (its log). The workspace keeps the
secrets (they are the user's files), and `journeyman undo --all` must still restore both files
byte for byte. The undo journal keeps the exact text of a changed file that holds a secret in
`vault/` next to the database (owner-only files, see `journeyman.session.store`); those files
are counted and checked for their mode, not searched.

Used by tests/reliability/test_secrets.py and bench/reliability.py.
"""

from __future__ import annotations

import random
import re
import stat
import string
from dataclasses import dataclass, field
from pathlib import Path

from journeyman.session.store import VAULT_DIR
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import RecordedRequest, Reply, reply, tool_call
from tests.support.cli import clean_env, jm, snapshot


@dataclass(frozen=True)
class Secrets:
    provider_key: str
    deploy_token: str
    github_token: str
    """Only in a workspace file, never in the environment: caught by its shape."""

    @classmethod
    def draw(cls, rng: random.Random) -> Secrets:
        def chars(n: int) -> str:
            return "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(n))

        return cls("sk-proj-" + chars(40), "dpl" + chars(29), "ghp_" + chars(36))

    def values(self) -> dict[str, str]:
        return {
            "OPENAI_API_KEY": self.provider_key,
            "DEPLOY_TOKEN": self.deploy_token,
            "github token in .env": self.github_token,
        }


def workspace_files(s: Secrets) -> dict[str, str]:
    return {
        ".env": (
            f"OPENAI_API_KEY={s.provider_key}\nDEPLOY_TOKEN={s.deploy_token}\n"
            f"GITHUB_TOKEN={s.github_token}\nDEBUG=1\n"
        ),
        "settings.py": f'API_KEY = "{s.provider_key}"\nTIMEOUT = 10\n',
        "README.md": "a project with secrets\n",
    }


def script(s: Secrets) -> list[Reply]:
    steps = [
        tool_call("read_file", {"path": ".env"}),
        tool_call("grep", {"pattern": "KEY|TOKEN"}),
        tool_call("run_command", {"command": "cat .env settings.py; env | sort"}),
        tool_call("edit_file", {"path": ".env", "old_string": "DEBUG=1", "new_string": "DEBUG=0"}),
        tool_call(
            "edit_file",
            {"path": "settings.py", "old_string": "TIMEOUT = 10", "new_string": "T = 5"},
        ),
        tool_call("write_file", {"path": "copy.txt", "content": f"key={s.deploy_token}\n"}),
        tool_call("finish", {"summary": f"Done; the key was {s.provider_key}."}),
    ]
    chatter = [
        "Reading the configuration.",
        f"I found OPENAI_API_KEY={s.provider_key} in .env.",
        f"The deploy token is {s.deploy_token} and GitHub's is {s.github_token}.",
        "Turning debug off.",
        "Shorter timeout.",
        "Copying the token.",
        "Finished.",
    ]
    return [reply(text, tool_calls=[call]) for text, call in zip(chatter, steps, strict=True)]


@dataclass
class SecretOutcome:
    trial: int
    completed: bool = False
    crashed: bool = False
    leaks: list[str] = field(default_factory=list)
    """`where: which secret` for every place a secret was found."""
    undo_restored: bool = False
    vault_files: int = 0
    """Exact copies of changed files that hold secrets, kept for undo (not counted as leaks)."""
    vault_private: bool = True
    """Every vault file is readable by its owner only."""


def find_leaks(secrets: Secrets, places: dict[str, bytes]) -> list[str]:
    return [
        f"{where}: {name}"
        for where, data in places.items()
        for name, value in secrets.values().items()
        if value.encode() in data
    ]


def secret_trial(root: Path, trial: int, seed: int) -> SecretOutcome:
    """One CLI run that meets secrets everywhere; `root` is an empty scratch folder."""
    rng = random.Random(seed * 1_000 + trial)
    secrets = Secrets.draw(rng)
    outcome = SecretOutcome(trial)
    workspace, sessions = root / "ws", root / "sessions"
    workspace.mkdir(parents=True)
    for name, text in workspace_files(secrets).items():
        (workspace / name).write_text(text)
    before = snapshot(workspace)
    replies = script(secrets)

    def by_step(request: RecordedRequest) -> Reply:
        step = sum(1 for m in request.json["messages"] if m["role"] == "assistant")
        return replies[min(step, len(replies) - 1)]

    with FakeOpenAIServer(default=by_step) as server:
        env = clean_env(
            OPENAI_API_KEY=secrets.provider_key,
            OPENAI_BASE_URL=server.base_url,
            DEPLOY_TOKEN=secrets.deploy_token,
        )
        where = ("-w", str(workspace), "--session-dir", str(sessions))
        run = jm(
            *(
                "run",
                "--yes",
                "--no-verify",
                "tidy the configuration",
                *where,
                "--sandbox",
                "local",
            ),
            *("--model", "gpt-4.1-mini", "-o", "stream-json"),
            env=env,
        )
        outcome.completed = run.returncode == 0
        outcome.crashed = run.returncode not in (0, 1) or "Traceback" in run.stderr
        ids = re.findall(r'"session_id":\s*"([^"]+)"', run.stdout)
        session = ids[-1] if ids else "missing"
        export = jm("sessions", "export", session, "--session-dir", str(sessions), env=env)
        if export.returncode != 0:
            outcome.crashed = True
        undo = jm("undo", "--all", *where, env=env)
    outcome.undo_restored = undo.returncode == 0 and snapshot(workspace) == before
    places = {
        "stream-json output": run.stdout.encode(),
        "stderr (log)": (run.stderr + export.stderr + undo.stderr).encode(),
        "sessions export": export.stdout.encode(),
    }
    for path in sorted(sessions.rglob("*")):
        if not path.is_file():
            continue
        if path.parent.name == VAULT_DIR:
            outcome.vault_files += 1
            outcome.vault_private &= stat.S_IMODE(path.stat().st_mode) == 0o600
        else:
            places[f"session store {path.relative_to(sessions)}"] = path.read_bytes()
    outcome.leaks = find_leaks(secrets, places)
    return outcome
