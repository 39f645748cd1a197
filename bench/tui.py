"""The interactive app: time from `journeyman` to an interactive prompt, and memory over a long
scripted conversation.

Scope
    The app as a user starts it (the real binary in tmux against the fake OpenAI server, to
    its prompt on screen) and its memory over a long scripted conversation in one process;
    no real model, no network.

Start-up: the real `journeyman` binary (this interpreter's `-m journeyman`) starts with no
arguments inside tmux, against the fake OpenAI server; the figure is the wall time until the
prompt's placeholder is on the captured screen (polled every 20 ms), median of `--repeat` runs.

Memory: one `ChatApp` on a scripted agent (real SQLite store, real file tools) receives
`--turns` messages in the same session, each answered by a `write_file` call and a `finish`
(two tool cards, an answer and a closing note per message). After each mark the process's
resident set size (VmRSS) and the Python heap traced by tracemalloc are printed with the count
of mounted transcript widgets: the transcript keeps at most 200, so memory should level off.
(The scripted provider's record of served requests is cleared after each message: it holds
every request's full history and would otherwise dominate the figure.)

    .venv/bin/python bench/tui.py [--turns 200] [--repeat 3] [--skip-startup]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
import uuid
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "src"))
sys.path.insert(0, str(REPO_ROOT))

from tests.fakes.agents import call, finish, turn  # noqa: E402
from tests.fakes.openai_server import FakeOpenAIServer  # noqa: E402
from tests.support.cli import clean_env  # noqa: E402
from tests.tui.harness import finish_turn, scripted_app, submit  # noqa: E402


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def startup_seconds(root: Path) -> float:
    socket = f"jm-bench-{uuid.uuid4().hex[:8]}"
    workspace = root / f"ws-{socket}"
    workspace.mkdir()
    with FakeOpenAIServer([]) as server:
        env = clean_env(
            OPENAI_API_KEY="sk-bench",
            OPENAI_BASE_URL=server.base_url,
            JOURNEYMAN_SESSION_DIR=str(root / "sessions"),
            TERM="xterm-256color",
        )
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        command = (
            f"cd {shlex.quote(str(workspace))} && env -i {exports} "
            f"{shlex.quote(sys.executable)} -m journeyman"
        )
        tmux = ["tmux", "-L", socket]
        started = time.monotonic()
        subprocess.run([*tmux, "new-session", "-d", "-s", "jm", "-x", "100", "-y", "30", command])
        try:
            while time.monotonic() - started < 60:
                screen = subprocess.run(
                    [*tmux, "capture-pane", "-p", "-t", "jm"], capture_output=True, text=True
                ).stdout
                if "Ask journeyman" in screen:
                    return time.monotonic() - started
                time.sleep(0.02)
            raise RuntimeError("the prompt never appeared")
        finally:
            subprocess.run([*tmux, "kill-server"], capture_output=True)


async def long_session(root: Path, turns: int, marks: list[int]) -> None:
    script = []
    for n in range(turns):
        script.append(turn(call("write_file", f"w{n}", path=f"f{n % 10}.txt", content=f"{n}\n")))
        script.append(finish(f"wrote file {n % 10}", cid=f"fin{n}"))
    app, providers = scripted_app(root, script)
    tracemalloc.start()
    async with app.run_test(size=(120, 40)) as pilot:
        for n in range(1, turns + 1):
            await submit(pilot, f"write file number {n}")
            await finish_turn(pilot)
            # the scripted provider records every request it served, each with the whole
            # history loaded afresh from the store: test bookkeeping, not the app's memory
            providers[0].requests.clear()
            if n in marks:
                gc.collect()
                heap = tracemalloc.get_traced_memory()[0] / 2**20
                widgets = len(app.transcript.children)
                print(
                    f"after {n:>4} turns: RSS {rss_mib():6.1f} MiB, traced heap "
                    f"{heap:6.1f} MiB, {widgets} transcript widgets mounted"
                )
    ok = sum(r.success for r in app.results)
    print(f"{ok} of {len(app.results)} turns finished successfully")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip-startup", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        if not args.skip_startup:
            if shutil.which("tmux") is None:
                print("start-up: skipped (tmux is not installed)")
            else:
                times = [startup_seconds(root) for _ in range(args.repeat)]
                print(
                    f"journeyman -> interactive prompt: median {statistics.median(times):.2f} s, "
                    f"min {min(times):.2f} s over {len(times)} runs"
                )
        marks = sorted({m for m in (1, 20, 50, 100, 150, args.turns) if m <= args.turns})
        (root / "long").mkdir()
        asyncio.run(long_session(root / "long", args.turns, marks))


if __name__ == "__main__":
    main()
