"""`make demo`: run journeyman on a fresh copy of examples/demo with the configured provider.

Usage: python examples/run_demo.py [--keep DIR] [extra `journeyman run` options...]
Exits 2 with configuration instructions when no provider is configured.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    keep = None
    if argv[:1] == ["--keep"] and len(argv) > 1:
        keep, argv = Path(argv[1]), argv[2:]
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
