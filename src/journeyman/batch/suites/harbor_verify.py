"""Harbor's verifier, run without a container: this file is copied into the grading tree as
`.harbor/verify.py` with the task's `tests/` beside it, and run there (through the agent's own
check runner and sandbox) once the agent has stopped.

A Harbor test script expects a container: its tests at `/tests`, its reward to be written to
`/logs/verifier/reward.txt` (or `reward.json`), the task's files in the image's working folder
(`/app`, say). Here those are folders of the grading tree, so the script and every text file
beside it get those absolute paths rewritten (whole path components only: `/tests/x` is,
`/testsuite` and `a/tests` are not), then `tests/test.sh` runs with the tree as its working
folder. The last
line printed is the reward, as Harbor's verifier reads it: `reward.json` (an object of named
rewards, or one number) wins over `reward.txt` (one number); a missing, empty, non-numeric or
non-finite reward is an error.

Standalone on purpose: it runs with whatever Python the grading command names and imports
nothing from journeyman. `journeyman.batch.reward` reads the line it prints.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

REWARD_LINE = "HARBOR_REWARD "
"""Starts the last line: the reward as a JSON object, or `{"error": why}`."""
HERE = ".harbor"
MANIFEST = "tests.json"
"""Beside this script: the relative paths of the files the task's `tests/` holds."""
MAX_REWARD_BYTES = 64 * 1024


def main(argv: list[str]) -> int:
    """`verify.py WORKDIR`: WORKDIR is the container folder the tree stands for ("" for none)."""
    root = Path.cwd().resolve()
    harbor = root / HERE
    tests, verifier = harbor / "tests", harbor / "logs" / "verifier"
    keep_only_shipped(tests, json.loads((harbor / MANIFEST).read_text(encoding="utf-8")))
    remove(harbor / "logs")  # nothing the agent left there (a reward, a symlink) stays
    verifier.mkdir(parents=True)
    (harbor / "logs" / "agent").mkdir(parents=True)
    mapping = {
        "/logs/verifier": str(verifier),
        "/logs/agent": str(harbor / "logs" / "agent"),
        "/tests": str(tests),
    }
    workdir = argv[1] if len(argv) > 1 else ""
    if workdir and workdir != "/":
        mapping[workdir.rstrip("/")] = str(root)
    rewrite_tree(tests, mapping)
    sys.stdout.flush()
    done = subprocess.run(["bash", str(tests / "test.sh")], cwd=root, check=False)
    print(f"\n[tests/test.sh exited {done.returncode}]", flush=True)
    print(REWARD_LINE + json.dumps(read_reward(verifier)), flush=True)
    return 0


def keep_only_shipped(tests: Path, shipped: list[str]) -> None:
    """Remove from `tests` every file and folder the task did not ship (a `conftest.py` the
    agent planted beside them, say): only the shipped files were laid over the tree."""
    keep = set(shipped)
    folders = {str(Path(name).parent) for name in keep}
    folders |= {str(parent) for name in keep for parent in Path(name).parents}
    for path in sorted(tests.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        relative = path.relative_to(tests).as_posix()
        if path.is_dir() and not path.is_symlink():
            if relative not in folders:
                remove(path)
        elif relative not in keep:
            remove(path)


def remove(path: Path) -> None:
    """`path` gone, whatever it is (a symlink is removed, never followed)."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        for child in path.iterdir():
            remove(child)
        path.rmdir()


def rewrite_tree(folder: Path, mapping: dict[str, str]) -> None:
    """Rewrite the container paths of `mapping` in every UTF-8 text file under `folder`."""
    pattern = path_pattern(list(mapping))
    for file in sorted(folder.rglob("*")):
        if file.is_symlink() or not file.is_file():
            continue
        try:
            text = file.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        changed = pattern.sub(lambda match: mapping[match.group(1)], text)
        if changed != text:
            file.write_text(changed, encoding="utf-8")


def path_pattern(prefixes: list[str]) -> re.Pattern[str]:
    """Matches any of `prefixes` as whole leading path components (longest first)."""
    choices = "|".join(re.escape(p) for p in sorted(prefixes, key=len, reverse=True))
    return re.compile(rf"(?<![\w.$}}/-])({choices})(?![\w.-])")


def read_reward(verifier: Path) -> dict[str, object]:
    """The reward as Harbor's verifier reads it, or `{"error": why}`."""
    json_path, text_path = verifier / "reward.json", verifier / "reward.txt"
    path = json_path if os.path.lexists(json_path) else text_path
    if not os.path.lexists(path):
        return {"error": "the tests wrote no reward file (reward.txt or reward.json)"}
    try:
        text = read_plain_file(path)
    except OSError as error:
        return {"error": f"cannot read {path.name}: {error}"}
    if not text.strip():
        return {"error": f"{path.name} is empty"}
    try:
        value = json.loads(text) if path is json_path else float(text)
    except ValueError:
        return {"error": f"{path.name} does not hold a number: {text.strip()[:80]!r}"}
    rewards = value if isinstance(value, dict) else {"reward": value}
    for key, number in rewards.items():
        if isinstance(number, bool) or not isinstance(number, int | float):
            return {"error": f"{path.name}: reward {key!r} is not a number"}
        if not math.isfinite(number):
            return {"error": f"{path.name}: reward {key!r} is not finite"}
    return {"rewards": rewards}


def read_plain_file(path: Path) -> str:
    """A regular file's text, refusing a symlink or anything but a plain file."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError("not a regular file")
        return os.read(fd, MAX_REWARD_BYTES).decode("utf-8", errors="replace")
    finally:
        os.close(fd)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
