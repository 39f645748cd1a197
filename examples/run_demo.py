"""`make demo`: run journeyman on a fresh copy of examples/demo with the configured provider.

Usage: python examples/run_demo.py [--keep DIR] [--local] [extra `journeyman run` options...]
Exits 2 with configuration instructions when no provider is configured. `--local` (`make demo
MODEL=local`) runs the embedded SmolLM2-135M instead: no key, no server, no network. The copy
is made in a temporary folder removed at the end, whatever the outcome (Ctrl-C included);
`--keep DIR` (`make demo KEEP=DIR`) makes it in DIR and leaves it there.
"""

from __future__ import annotations

import shutil
import signal
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
    if keep is not None:
        return run_demo(keep, argv, local)
    target = Path(tempfile.mkdtemp(prefix="journeyman-demo-"))
    # `make` stopped or the terminal closed: leave through the `finally` below
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    try:
        return run_demo(target, argv, local)
    except KeyboardInterrupt:
        print("demo interrupted", file=sys.stderr)
        return 130
    finally:
        shutil.rmtree(target, ignore_errors=True)
        if target.exists():
            print(f"could not remove the demo workspace {target}", file=sys.stderr)
        else:
            print(f"demo workspace {target} removed (`--keep DIR` keeps a copy)")


def run_demo(target: Path, argv: list[str], local: bool) -> int:
    """Copy the demo into `target`, run journeyman on it, then run its tests."""
    shutil.copytree(HERE / "demo", target, dirs_exist_ok=True)
    task = (target / "TASK.md").read_text(encoding="utf-8").strip()
    print(f"demo workspace: {target} (a throwaway copy, so every call is approved: --yes)")
    sys.stdout.flush()
    command = [
        *(sys.executable, "-m", "journeyman", "run", task, "--workspace", str(target)),
        *("--yes", *argv),
    ]
    code = run_to_the_end(command)
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


def run_to_the_end(command: list[str]) -> int:
    """Run `command`; on Ctrl-C (which reaches it too) give it time to stop and save its
    session before the workspace goes, then pass the interruption on."""
    process = subprocess.Popen(command)
    try:
        return process.wait()
    except BaseException as stopped:
        if not isinstance(stopped, KeyboardInterrupt):  # a Ctrl-C reached it already
            process.terminate()
        try:
            process.wait(timeout=30)
        except BaseException:
            process.kill()
            process.wait()
        raise


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
