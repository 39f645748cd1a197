"""What the live status line of `journeyman run` costs on a terminal.

Scope: the line's own drawing and erasing in this process, on a real pseudo-terminal whose
other end is drained by a `cat` process (so reading the screen is not counted); no model, no
run. It prints:

- the CPU the redraw thread uses per second of wall time, as it runs during a run (ten redraws
  a second of a typical line: spinner, a command, seconds, turn, tokens, cost), read from the
  thread's own CPU clock over `--seconds`;
- the CPU of one redraw (composing the text, cutting it to the width, one write and flush);
- what the erase-before-write costs each line the output writes (stdout wrapped vs not,
  interleaved in rounds).

Run `.venv/bin/python bench/status_line.py` (options: `--seconds`, `--writes`, `--rounds`,
`--json`). Figures print next to the load average: this machine is shared.
"""

from __future__ import annotations

import argparse
import json
import os
import pty
import statistics
import subprocess
import sys
import time

from journeyman.cli.live_status import RunProgress, StatusLine
from journeyman.core import events as ev
from journeyman.core.messages import ToolCall, Usage


def busy_progress() -> RunProgress:
    """A run in its third turn, running a command, with tokens and a cost."""
    progress = RunProgress()
    progress.follow(ev.ModelRequestSent(3, 12, 9))
    usage = Usage(input_tokens=11_873, output_tokens=412)
    progress.follow(ev.ModelResponseReceived(3, "", (), usage, 0.0132, "tool_calls", 2.1))
    call = ToolCall("c1", "run_command", {"command": "python -m pytest -q tests/test_parser.py"})
    progress.follow(ev.ToolCallStarted(3, call))
    return progress


def open_terminal() -> tuple[object, subprocess.Popen[bytes]]:
    """A text stream on a pseudo-terminal, and the `cat` that drains the other end."""
    master, slave = pty.openpty()
    drain = subprocess.Popen(
        ["cat"], stdin=master, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    os.close(master)
    return os.fdopen(slave, "w", encoding="utf-8"), drain


def thread_cpu_per_second(terminal: object, seconds: float) -> float:
    """CPU seconds the redraw thread used per wall second."""
    progress = busy_progress()
    line = StatusLine(terminal, progress.text, columns=lambda: 120)  # type: ignore[arg-type]
    line.start()
    thread = line._thread
    assert thread is not None and thread.ident is not None
    clock = time.pthread_getcpuclockid(thread.ident)
    began_cpu, began = time.clock_gettime(clock), time.monotonic()
    time.sleep(seconds)
    used = time.clock_gettime(clock) - began_cpu
    wall = time.monotonic() - began
    line.close()
    return used / wall


def cpu_per_redraw(terminal: object, count: int) -> float:
    progress = busy_progress()
    line = StatusLine(terminal, progress.text, columns=lambda: 120)  # type: ignore[arg-type]
    began = time.process_time()
    for _ in range(count):
        line.redraw()
    used = time.process_time() - began
    line.close()
    return used / count


def cpu_per_write(terminal: object, count: int, wrapped: bool) -> float:
    """CPU of one `sys.stdout.write` of a line, with the status line's wrapper or without."""
    saved = sys.stdout
    sys.stdout = terminal  # type: ignore[assignment]
    line = StatusLine(terminal, busy_progress().text, columns=lambda: 120)  # type: ignore[arg-type]
    if wrapped:
        line.start(redraw_thread=False)
    try:
        began = time.process_time()
        for _ in range(count):
            sys.stdout.write("  ✓ 12 passed in 0.31s\n")
            line.redraw()  # drawn again after each line, as the renderer does
        return (time.process_time() - began) / count
    finally:
        line.close()
        sys.stdout = saved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--writes", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    terminal, drain = open_terminal()
    try:
        thread = [thread_cpu_per_second(terminal, args.seconds) for _ in range(args.rounds)]
        redraw = [cpu_per_redraw(terminal, args.writes) for _ in range(args.rounds)]
        plain, wrapped = [], []
        for _ in range(args.rounds):  # interleaved: the machine's load changes under us
            plain.append(cpu_per_write(terminal, args.writes, wrapped=False))
            wrapped.append(cpu_per_write(terminal, args.writes, wrapped=True))
    finally:
        terminal.close()  # type: ignore[attr-defined]
        drain.wait(timeout=10)
    figures = {
        "load_average": os.getloadavg(),
        "thread_cpu_ms_per_s": statistics.median(thread) * 1e3,
        "redraw_cpu_us": statistics.median(redraw) * 1e6,
        "line_and_redraw_cpu_us_plain": statistics.median(plain) * 1e6,
        "line_and_redraw_cpu_us_wrapped": statistics.median(wrapped) * 1e6,
    }
    if args.json:
        print(json.dumps(figures))
        return
    load = ", ".join(f"{x:.1f}" for x in figures["load_average"])
    print(f"load average {load}")
    print(
        f"redraw thread: {figures['thread_cpu_ms_per_s']:.2f} ms CPU per second "
        f"({figures['thread_cpu_ms_per_s'] / 10:.3f} % of a core)"
    )
    print(f"one redraw: {figures['redraw_cpu_us']:.1f} µs CPU")
    print(
        f"a line written then the status redrawn: {figures['line_and_redraw_cpu_us_plain']:.1f} "
        f"µs unwrapped, {figures['line_and_redraw_cpu_us_wrapped']:.1f} µs through the wrapper "
        "that erases first"
    )


if __name__ == "__main__":
    main()
