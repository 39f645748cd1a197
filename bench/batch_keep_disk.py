"""Disk used by a batch's `--out` under each `--keep`.

Scope
    Disk, not time: what `--out` holds after a local batch on the fake OpenAI server (no SDK
    latency, no real model), for each `--keep`; the wall time is printed for scale only.

What runs
    20 tasks over one folder of ``--size-mb`` MB (50 files of random bytes), each task one file
    write then `finish` against the fake OpenAI server, through the batch scheduler (threads, 4
    at a time). ``--failing`` of them fail their check (so `--keep failed` keeps theirs). For
    each of `all`, `failed` (the default) and `none`, printed: the disk `--out` takes once the
    batch has ended (allocated blocks, as `du` counts them), the workspace copies kept, and the
    batch's wall time.

Usage (from the repository root)
    .venv/bin/python bench/batch_keep_disk.py                 # 20 tasks, 5 MB, 3 failing
    .venv/bin/python bench/batch_keep_disk.py --json

Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.batch.support import model, settings_for, task_text  # noqa: E402
from tests.fakes.openai_server import FakeOpenAIServer  # noqa: E402

from journeyman.batch.executor import LocalExecutor  # noqa: E402
from journeyman.batch.scheduler import Scheduler  # noqa: E402
from journeyman.batch.task_file import BatchTask  # noqa: E402


def disk_used(folder: Path) -> int:
    """Bytes allocated to everything under `folder` (512-byte blocks, as `du` counts)."""
    total = 0
    for parent, dirs, files in os.walk(folder):
        for name in dirs + files:
            total += os.lstat(os.path.join(parent, name)).st_blocks * 512
    return total


def source_folder(root: Path, size_mb: float) -> Path:
    source = root / "project"
    source.mkdir()
    per_file = int(size_mb * 1024 * 1024 / 50)
    for index in range(50):
        (source / f"data{index:02d}.bin").write_bytes(os.urandom(per_file))
    return source


def one_run(root: Path, keep: str, tasks: int, failing: int, size_mb: float) -> dict[str, Any]:
    source = source_folder(root, size_mb)
    never = root / "never-made"
    batch = [
        BatchTask(
            id=f"task-{i}",
            task=task_text(1, name=f"t{i}"),
            workspace=str(source),
            verify=f"test -f {never}" if i < failing else "test -f data00.bin",
        )
        for i in range(tasks)
    ]
    with FakeOpenAIServer(default=model) as server:
        settings = settings_for(
            root, server, keep=keep, config={"verify": True, "max_verify_rounds": 1}
        )
        started = time.perf_counter()
        summary = asyncio.run(Scheduler(batch, settings, LocalExecutor(4, processes=False)).run())
        wall = time.perf_counter() - started
    return {
        "keep": keep,
        "tasks": tasks,
        "succeeded": summary.count("succeeded"),
        "failed": summary.count("failed"),
        "out_mb": round(disk_used(settings.out) / 1024 / 1024, 1),
        "source_mb": round(disk_used(source) / 1024 / 1024, 1),
        "copies_kept": len(summary.kept_workspaces),
        "wall_s": round(wall, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--failing", type=int, default=3)
    parser.add_argument("--size-mb", type=float, default=5.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    os.environ.setdefault("OPENAI_API_KEY", "sk-bench")
    os.environ.setdefault("JOURNEYMAN_EDIT_TOOL", "edit_file")
    os.environ.pop("OPENAI_BASE_URL", None)
    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        for keep in ("all", "failed", "none"):
            root = Path(workdir) / keep
            root.mkdir()
            rows.append(one_run(root, keep, args.tasks, args.failing, args.size_mb))
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'--keep':<8} {'ok/failed':>10} {'--out MB':>9} {'copies kept':>12} {'wall s':>7}")
    for row in rows:
        print(
            f"{row['keep']:<8} {row['succeeded']:>5}/{row['failed']:<4} {row['out_mb']:>9} "
            f"{row['copies_kept']:>12} {row['wall_s']:>7}"
        )
    print(f"(each copy: a {rows[0]['source_mb']} MB folder)")


if __name__ == "__main__":
    main()
