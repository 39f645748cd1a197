"""`make demo`: run journeyman on a fresh copy of examples/demo with the configured provider.

Usage: python examples/run_demo.py [--keep DIR] [--local] [extra `journeyman run` options...]
Exits 2 with configuration instructions when no provider is configured. `--local` (`make demo
MODEL=local`) runs the embedded SmolLM2-135M instead: no key, no server, no network.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
LOCAL_RUN = ("--provider", "local", "--model", "smollm2-135m", "--max-iterations", "8")
TINY_MODEL_NOTE = (
    "The embedded model is SmolLM2-135M, a tiny model: it shows the machinery (tool calls "
    "constrained by a grammar, budgets, verification, undo) on this machine's CPU, and is not "
    "expected to fix the code. Reliable fixes need a capable model."
)
OFFER_LOCAL = (
    "Or, with no key and no server: make demo MODEL=local  (runs a tiny embedded model; it "
    "demonstrates the machinery and is not expected to fix code reliably)"
)


def main(argv: list[str]) -> int:
    keep = None
    if argv[:1] == ["--keep"] and len(argv) > 1:
        keep, argv = Path(argv[1]), argv[2:]
    local = argv[:1] == ["--local"]
    if local:
        argv = [*LOCAL_RUN, *argv[1:]]
        print(TINY_MODEL_NOTE)
    target = keep or Path(tempfile.mkdtemp(prefix="journeyman-demo-"))
    shutil.copytree(HERE / "demo", target, dirs_exist_ok=True)
    task = (target / "TASK.md").read_text(encoding="utf-8").strip()
    print(f"demo workspace: {target} (a throwaway copy, so every call is approved: --yes)")
    sys.stdout.flush()
    command = [
        *(sys.executable, "-m", "journeyman", "run", task, "--workspace", str(target)),
        *("--yes", *argv),
    ]
    code = subprocess.call(command)
    if code == 2 and not local:
        print(OFFER_LOCAL, file=sys.stderr)
    if code == 0:
        check = subprocess.run(
            [sys.executable, "-m", "unittest", "-q"], cwd=target, capture_output=True, text=True
        )
        verdict = "pass" if check.returncode == 0 else "still FAIL"
        print(f"demo tests after the run: {verdict}")
        return 0 if check.returncode == 0 else 1
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
