"""What a batch's tasks must not see: the host paths every task's sandbox hides.

A task's commands see its own workspace, never the other tasks' (they all lie under `--out`,
which is hidden whole; the task's own workspace shows through it), nor the tasks file or the
eval suite, nor the hidden tests of a graded task wherever they lie (the micro-suite's inside
the installed package included). bubblewrap hides them (`AgentConfig.sandbox_hidden`: an empty
folder over each folder, an unreadable file over each file); docker mounts nothing of the host
but the workspace; local cannot hide anything, which is why `journeyman eval` refuses to start
under it unless told to (`--allow-unsandboxed`).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from journeyman.batch.task_file import BatchTask


def batch_hidden_paths(
    tasks: Iterable[BatchTask], out: Path, sources: Iterable[Path] = ()
) -> list[str]:
    """The paths the tasks' sandboxes hide: `out`, the `sources` (the tasks file, the suite,
    what the user hides) and every graded task's hidden tests folder, as absolute paths; one
    inside another is left out (hiding the outer one hides it, and its mount point would show
    its name).

    A path holding the repository of a task with `base_commit` is left visible: the task's
    workspace is a clone that reads its objects from there."""
    tasks = list(tasks)
    candidates = [out, *sources]
    for task in tasks:
        if task.grading is not None and task.grading.hidden_tests_dir:
            candidates.append(Path(task.grading.hidden_tests_dir))
    shared = [_absolute(Path(task.workspace)) for task in tasks if task.base_commit]
    usable = [
        real
        for real in dict.fromkeys(_absolute(path) for path in candidates)
        if not any(source.is_relative_to(real) for source in shared)
    ]
    return [
        str(path)
        for path in usable
        if not any(path != other and path.is_relative_to(other) for other in usable)
    ]


def _absolute(path: Path) -> Path:
    return path.expanduser().resolve()


__all__ = ["batch_hidden_paths"]
