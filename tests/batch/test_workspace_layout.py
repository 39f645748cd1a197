"""The batch's own folders never collide with a task's: where each task's workspace lives, the
`--out` folder against the workspaces, and which copies `--keep` leaves."""

from __future__ import annotations

import asyncio
import json
import random
import unicodedata
from pathlib import Path

import pytest

from journeyman.batch.results import TaskResult, read_results
from journeyman.batch.runner import batch_identity
from journeyman.batch.scheduler import WorkspaceLayoutError, keeps_workspace
from journeyman.batch.task_file import BatchTask
from journeyman.batch.workspaces import (
    STAGING,
    OutFolderError,
    Workspaces,
    check_out_folder,
    folder_name,
    legacy_collisions,
)
from tests.batch.support import model, scheduler, settings_for, task_text
from tests.fakes.openai_server import FakeOpenAIServer

COLLIDING = ["foo", "foo.partial", "x", "x.attempt2", "X", "Foo"]
"""Ids the earlier layout mixed up: a task's id ending in the batch's own suffixes, and ids
that differ only in case (one folder on a case-insensitive filesystem)."""
HOSTILE = [
    "", ".", "..", "../up", "a/b", "a\\b", "/abs", ".staging", STAGING + "x", "~41", "^a", "A",
    "a~", "nul", "NUL", "con.txt", "com1", "a.", " a", "a\x00b", "tab\there", "\u00e9",
    unicodedata.normalize("NFD", "\u00e9"), "\u0130", "\u0131", "ß", "SS", "ss", "日本語",
    "x" * 300, "x" * 299 + "y", "\ud800", "~~", "a" * 86 + "~~",
]  # fmt: skip


@pytest.fixture(autouse=True)
def provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-batch")
    monkeypatch.setenv("JOURNEYMAN_EDIT_TOOL", "edit_file")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def assert_safe_and_distinct(ids: list[str]) -> None:
    names = [folder_name(i) for i in ids]
    folded = {unicodedata.normalize("NFC", n).casefold() for n in names}
    assert len(folded) == len(set(ids)), "two ids share a folder (case or Unicode folded)"
    for task_id, name in zip(ids, names, strict=True):
        assert name.isascii() and name == name.lower(), (task_id, name)
        assert not name.startswith(".") and not name.endswith("."), (task_id, name)
        assert not set(name) & {"/", "\\", "\x00", " ", "\t", ":"}, (task_id, name)
        assert 0 < len(name.encode()) <= 120, (task_id, name)
        assert name.split(".")[0] not in {"con", "prn", "aux", "nul", "com1"}, (task_id, name)


def test_every_id_gets_its_own_safe_folder_name() -> None:
    assert_safe_and_distinct(COLLIDING + HOSTILE)
    assert folder_name("django__django-11099") == "django__django-11099"  # readable as it was
    assert folder_name("Foo.partial") == "^foo.partial"


def test_random_ids_never_share_a_folder() -> None:
    rng = random.Random(26)
    alphabet = "aAbB.~^_-/:%\\ é\u0301日\x00"
    ids = {"".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))) for _ in range(5000)}
    ids |= {"p" * rng.randint(100, 140) + rng.choice(alphabet) for _ in range(300)}
    assert_safe_and_distinct(sorted(ids))


def test_attempts_and_copies_in_the_making_live_apart_from_every_task(tmp_path: Path) -> None:
    layout = Workspaces(tmp_path)
    folders = {layout.attempt_folder(i, n) for i in COLLIDING + HOSTILE for n in (1, 2, 3)} | {
        layout.staging_folder(i, n) for i in COLLIDING + HOSTILE for n in (1, 2)
    }
    assert len(folders) == len(COLLIDING + HOSTILE) * 5
    for folder in folders:  # all inside the root, two levels down (three while staged)
        assert folder.resolve().is_relative_to(tmp_path.resolve())
    assert layout.staging_folder("foo").is_relative_to(tmp_path / STAGING)
    assert not any(f.is_relative_to(tmp_path / STAGING) for f in map(layout.task_folder, HOSTILE))


def own_tasks(tmp_path: Path, ids: list[str], verify: dict[str, str]) -> list[BatchTask]:
    """One task per id, each on a folder of its own whose `who.txt` names it."""
    tasks = []
    for index, task_id in enumerate(ids):
        source = tmp_path / f"source{index}"
        source.mkdir()
        (source / "who.txt").write_text(task_id)
        text = task_text(1, name=f"t{index}")
        tasks.append(
            BatchTask(
                id=task_id,
                task=text,
                workspace=str(source),
                verify=verify.get(task_id, "test -f who.txt"),
            )
        )
    return tasks


def test_ids_shaped_like_the_batchs_own_folders_keep_their_work_apart(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    """`foo.partial` was the copy in the making of `foo` (removed when `foo` was prepared),
    and `x.attempt2` the folder of `x`'s second attempt (which then ran in the other task's
    finished workspace)."""
    fake_openai.default = model
    ok = tmp_path / "ok"
    ids = ["foo.partial", "foo", "x.attempt2", "x"]
    tasks = own_tasks(tmp_path, ids, {"x": f"test -f {ok}"})
    settings = settings_for(
        tmp_path,
        fake_openai,
        keep="all",
        config={"verify": True, "max_verify_rounds": 1},
    )
    first = asyncio.run(scheduler(tasks, settings).run())
    assert [r.status for r in first.results] == ["succeeded", "succeeded", "succeeded", "failed"]
    ok.write_text("")
    settings.retry_failed = True  # x gets a fresh second attempt
    again = asyncio.run(scheduler(tasks, settings).run())
    assert again.all_succeeded
    rows = read_results(settings.out)
    assert len({rows[i].workspace for i in ids}) == 4
    for task_id in ids:
        workspace = Path(rows[task_id].workspace or "")
        assert (workspace / "who.txt").read_text() == task_id  # its own copy, nobody else's
        assert (workspace / "step1.txt").exists()  # with its own work in it
    assert rows["x"].attempts == 2 and Path(rows["x"].workspace or "").name == "attempt-2"
    assert (settings.out / "workspaces" / "x" / "attempt-1" / "who.txt").read_text() == "x"


def test_a_batch_of_the_earlier_layout_resumes_in_its_folders_or_is_refused(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.default = model
    out = tmp_path / "out"
    (out / "workspaces" / "a").mkdir(parents=True)
    (out / "batch.json").write_text(json.dumps({"batch_id": "batch-old", "created_at": 1.0}))
    identity = batch_identity(out, "t.jsonl")
    assert identity.workspace_layout == 1  # said once, in the record, for every later run
    assert json.loads((out / "batch.json").read_text())["workspace_layout"] == 1
    legacy = Workspaces(out / "workspaces", legacy=True)
    assert legacy.attempt_folder("a", 2) == out / "workspaces" / "a.attempt2"
    assert legacy_collisions(["x", "x.attempt2", "foo", "foo.partial", "b", "B", "c"]) == [
        ("B", "b"),
        ("foo", "foo.partial"),
        ("x", "x.attempt2"),
    ]
    tasks = own_tasks(tmp_path, ["x", "x.attempt2"], {})
    settings = settings_for(tmp_path, fake_openai, batch_id="batch-old", workspace_layout=1)
    with pytest.raises(WorkspaceLayoutError, match=r"'x' and 'x.attempt2'.*another --out"):
        asyncio.run(scheduler(tasks, settings).run())
    fresh = tmp_path / "fresh"  # a record from before, with no workspace made yet: current
    fresh.mkdir()
    (fresh / "batch.json").write_text(json.dumps({"batch_id": "b2", "created_at": 1.0}))
    assert batch_identity(fresh, "t.jsonl").workspace_layout == 2


def test_an_earlier_layout_batch_runs_on_in_its_own_folders(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.default = model
    tasks = own_tasks(tmp_path, ["a"], {})
    settings = settings_for(tmp_path, fake_openai, workspace_layout=1, keep="all")
    asyncio.run(scheduler(tasks, settings).run())
    assert (settings.out / "workspaces" / "a" / "who.txt").read_text() == "a"


def test_out_and_a_workspace_inside_one_another_are_refused(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    link = tmp_path / "link"
    link.symlink_to(repo)
    task = BatchTask(id="t1", task="x", workspace=str(link))
    for out in (link, link / "out", repo / "deep" / "out"):
        with pytest.raises(OutFolderError) as refused:
            check_out_folder(out, [task])
        message = refused.value.message
        assert str(out) in message and str(out.resolve()) in message and str(link) in message
        assert f"(resolved: {repo.resolve()})" in message and "task t1" in message
    out = tmp_path / "out"
    inside = BatchTask(id="t2", task="x", workspace=str(out / "workspaces" / "t1" / "attempt-1"))
    with pytest.raises(OutFolderError, match="inside the batch's own workspaces folder"):
        check_out_folder(out, [inside])
    staged = BatchTask(id="t3", task="x", workspace=str(out / "exercises" / "e1" / "start"))
    check_out_folder(out, [staged])  # an eval's own staging is no copy of the batch's
    check_out_folder(tmp_path / "elsewhere", [task])


def test_the_cli_refuses_out_inside_a_workspace_before_writing_anything(tmp_path: Path) -> None:
    from tests.support.cli import clean_env, journeyman

    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "f.txt").write_text("x")
    (tmp_path / "link").symlink_to(repo)
    tasks = tmp_path / "t.jsonl"
    tasks.write_text(json.dumps({"id": "a", "task": "x", "workspace": str(repo)}) + "\n")
    out = tmp_path / "link" / "runs" / "b1"
    env = {**clean_env(), "OPENAI_API_KEY": "sk-test"}
    done = journeyman("batch", str(tasks), "--out", str(out), "--model", "gpt-4.1-mini", env=env)
    assert done.returncode == 2, done.stderr
    assert f"--out {out} (resolved: {repo.resolve() / 'runs' / 'b1'})" in done.stderr
    assert f"task a, {repo}" in done.stderr and "Traceback" not in done.stderr
    assert sorted(p.name for p in repo.iterdir()) == ["f.txt"]  # nothing written in it


def test_keep_leaves_the_workspaces_it_says_and_the_rows_say_where(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.default = model
    ok = tmp_path / "ok"  # never made: task "bad" fails its check
    ids = ["good", "bad"]
    found: dict[str, tuple[bool, bool]] = {}
    for keep in ("failed", "none", "all"):
        root = tmp_path / keep
        root.mkdir()
        tasks = own_tasks(root, ids, {"bad": f"test -f {ok}"})
        config = {"verify": True, "max_verify_rounds": 1}
        settings = settings_for(root, fake_openai, keep=keep, config=config)
        summary = asyncio.run(scheduler(tasks, settings).run())
        assert [r.status for r in summary.results] == ["succeeded", "failed"]
        rows = read_results(settings.out)
        for task_id in ids:
            folder = settings.out / "workspaces" / task_id
            assert (rows[task_id].workspace is not None) == folder.exists()
        found[keep] = (rows["good"].workspace is not None, rows["bad"].workspace is not None)
        assert not (settings.out / "workspaces" / STAGING).exists()
        assert len(summary.kept_workspaces) == sum(found[keep])
    assert found == {"failed": (False, True), "none": (False, False), "all": (True, True)}


def row(status: str, grade: dict[str, object] | None = None) -> TaskResult:
    return TaskResult("t", status, None, 0.0, 0, 0.0, 0, None, None, 1, grade=grade)  # type: ignore[arg-type]


def test_what_each_keep_keeps() -> None:
    assert keeps_workspace(row("infra_error"), "none")  # a later run resumes it in place
    assert not keeps_workspace(row("failed"), "none")
    assert keeps_workspace(row("failed"), "failed")
    assert not keeps_workspace(row("succeeded"), "failed")
    assert keeps_workspace(row("succeeded", {"resolved": False}), "failed")  # unresolved
    assert not keeps_workspace(row("succeeded", {"resolved": True}), "failed")
    assert keeps_workspace(row("succeeded"), "all")
