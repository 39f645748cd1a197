"""Exercise folders (polyglot-style): one folder per exercise, its tests are the grader.

Each exercise folder holds instructions (`.docs/instructions.md`, plus
`.docs/instructions.append.md` when present, else `README.md` or `instructions.md`), a stub,
and tests. The tests are the files named `.meta/config.json`'s `files.test` when that file
exists, else every `test_*.py` / `*_test.py` file. They are removed from the agent's copy and
laid back over it, unchanged, when the agent stops; the exercise is solved when every test they
hold passes.

The hidden copy is made once per load under a cache folder, so the agent never sees the tests
even through the original exercise folder's path.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from journeyman.batch.grading import GradingSpec
from journeyman.batch.suites.errors import SuiteError
from journeyman.batch.task_file import TASK_ID, BatchTask

INSTRUCTION_FILES = (".docs/instructions.md", "README.md", "instructions.md")
TEST_COMMAND = "python -m pytest -q"


def is_exercise_folder(folder: Path) -> bool:
    """True when `folder` has instructions and at least one test file."""
    has_instructions = any((folder / name).is_file() for name in INSTRUCTION_FILES)
    return has_instructions and bool(_test_files(folder))


def load_exercises(root: Path, staging: Path) -> list[BatchTask]:
    """Every exercise under `root` (the folder itself, or its sub-folders) as a batch task.

    `staging` receives, per exercise, the agent's starting copy (`<name>/start`) and the hidden
    tests (`<name>/hidden`)."""
    root = root.resolve()
    folders = [root] if is_exercise_folder(root) else _exercise_folders(root)
    if not folders:
        raise SuiteError(
            f"{root} holds no exercise: expected folders with instructions "
            f"({', '.join(INSTRUCTION_FILES)}) and test files (test_*.py or *_test.py)"
        )
    tasks = []
    for folder in folders:
        tasks.append(_exercise(folder, root, staging))
    return tasks


def _exercise_folders(root: Path) -> list[Path]:
    found: list[Path] = []
    for child in sorted(root.iterdir()):
        if not child.is_dir() or child.name.startswith("."):
            continue
        if child.is_symlink():
            raise SuiteError(f"{child} is a symlink; an exercise must be a real folder in {root}")
        if is_exercise_folder(child):
            found.append(child)
        else:
            found.extend(_exercise_folders(child))
    return found


def _exercise(folder: Path, root: Path, staging: Path) -> BatchTask:
    name = folder.name if folder == root else folder.relative_to(root).as_posix().replace("/", ".")
    if not TASK_ID.match(name):
        raise SuiteError(f"{folder}: the exercise name {name!r} cannot name a task")
    tests = _test_files(folder)
    for test in tests:
        _inside(test, folder)
    start = staging / name / "start"
    hidden = staging / name / "hidden"
    for target in (start, hidden):
        if target.exists():
            shutil.rmtree(target)
    shutil.copytree(folder, start, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    for link in start.rglob("*"):
        if link.is_symlink():
            raise SuiteError(f"{folder}: {link.relative_to(start)} is a symlink; copy it as a file")
    for test in tests:
        relative = test.relative_to(folder)
        (hidden / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(test, hidden / relative)
        (start / relative).unlink()
    shutil.rmtree(start / ".meta", ignore_errors=True)
    return BatchTask(
        id=name,
        task=_instructions(folder, tests),
        workspace=str(start),
        grading=GradingSpec(
            kind="exercise",
            test_cmd=TEST_COMMAND,
            hidden_tests_dir=str(hidden),
        ),
    )


def _inside(path: Path, folder: Path) -> None:
    resolved = path.resolve()
    if folder.resolve() not in resolved.parents:
        raise SuiteError(f"{folder}: test file {path} lies outside the exercise folder")


def _instructions(folder: Path, tests: list[Path]) -> str:
    parts: list[str] = []
    for name in INSTRUCTION_FILES:
        file = folder / name
        if file.is_file():
            parts.append(file.read_text(encoding="utf-8", errors="replace").strip())
            append = folder / ".docs" / "instructions.append.md"
            if name.startswith(".docs") and append.is_file():
                parts.append(append.read_text(encoding="utf-8", errors="replace").strip())
            break
    names = ", ".join(test.relative_to(folder).as_posix() for test in tests)
    parts.append(
        f"Work in this folder. Your solution will be checked by tests ({names}) that are not "
        "in the folder now; write your own checks as you go."
    )
    return "\n\n".join(parts)


def _test_files(folder: Path) -> list[Path]:
    config = folder / ".meta" / "config.json"
    if config.is_file():
        named = _configured_tests(config, folder)
        if named:
            return named
    found = [
        path
        for pattern in ("test_*.py", "*_test.py")
        for path in folder.rglob(pattern)
        if "__pycache__" not in path.parts and ".meta" not in path.parts
    ]
    return sorted(set(found))


def _configured_tests(config: Path, folder: Path) -> list[Path]:
    try:
        data: Any = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise SuiteError(f"{config}: not valid JSON ({error})") from None
    names = data.get("files", {}).get("test", []) if isinstance(data, dict) else []
    if not isinstance(names, list):
        raise SuiteError(f"{config}: files.test must be a list of paths")
    tests = []
    for name in names:
        unsafe = not isinstance(name, str) or not name or Path(name).is_absolute()
        if unsafe or ".." in Path(name).parts:
            raise SuiteError(f"{config}: test file {name!r} leaves the exercise folder")
        path = folder / name
        if not path.is_file():
            raise SuiteError(f"{config}: test file {name} does not exist")
        tests.append(path)
    return tests
