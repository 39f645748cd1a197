"""The PersistenceAdapter contract for every adapter, and each adapter's own guarantees."""

from __future__ import annotations

import itertools
import multiprocessing
import sqlite3
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from journeyman.swarm.shared import (
    CorruptRecordError,
    InvalidKeyError,
    JSONFilePersistenceAdapter,
    PersistenceAdapter,
    PersistenceError,
    RedisPersistenceAdapter,
    SQLitePersistenceAdapter,
)
from tests.support.shared_state import json_writer, sqlite_reader, sqlite_writer, tree_files

_namespaces = itertools.count()


@pytest.fixture(params=["json", "sqlite", "redis"])
def adapter(request: pytest.FixtureRequest, tmp_path: Path) -> PersistenceAdapter:
    if request.param == "json":
        return JSONFilePersistenceAdapter(tmp_path / "state")
    if request.param == "sqlite":
        store = SQLitePersistenceAdapter(tmp_path / "state.db")
        request.addfinalizer(store.close)
        return store
    url = request.getfixturevalue("redis_url")
    redis_store = RedisPersistenceAdapter(url, f"test{next(_namespaces)}")
    request.addfinalizer(redis_store.close)
    return redis_store


def test_every_adapter_speaks_the_protocol(adapter: PersistenceAdapter) -> None:
    assert isinstance(adapter, PersistenceAdapter)
    assert adapter.load("swarm/a") is None and not adapter.exists("swarm/a")
    adapter.save("swarm/a", {"n": 1, "nested": {"list": [1, "two", None, True]}, "é": "ü"})
    adapter.save("swarm/b", {"n": 2})
    adapter.save("other", {"n": 3})
    assert adapter.load("swarm/a") == {"n": 1, "nested": {"list": [1, "two", None, True]}, "é": "ü"}
    assert adapter.exists("swarm/b")
    adapter.save("swarm/b", {"n": 22})
    assert adapter.load("swarm/b") == {"n": 22}
    assert adapter.list_keys() == ["other", "swarm/a", "swarm/b"]
    assert adapter.list_keys("swarm/") == ["swarm/a", "swarm/b"]
    assert adapter.list_keys("nothing") == []
    assert adapter.delete("swarm/a") is True
    assert adapter.delete("swarm/a") is False
    assert adapter.list_keys("swarm") == ["swarm/b"]


@pytest.mark.parametrize(
    "key",
    ["../escape", "a/../../b", "/etc/passwd", "", "a//b", ".hidden", "a/./b", "sp ace", "x" * 201,
     "a\\b", "a\x00b", "ключ"],
)  # fmt: skip
def test_keys_that_could_escape_or_confuse_are_refused(
    adapter: PersistenceAdapter, key: str
) -> None:
    with pytest.raises(InvalidKeyError):
        adapter.save(key, {"x": 1})
    for read in (adapter.load, adapter.exists, adapter.delete):
        with pytest.raises(InvalidKeyError):
            read(key)


def test_values_must_be_plain_json_objects(adapter: PersistenceAdapter) -> None:
    with pytest.raises(PersistenceError, match="must be a dict"):
        adapter.save("k", [1, 2])  # type: ignore[arg-type]
    with pytest.raises(PersistenceError, match="not plain JSON"):
        adapter.save("k", {"when": object()})
    with pytest.raises(PersistenceError, match="not plain JSON"):
        adapter.save("k", {"x": float("nan")})
    assert not adapter.exists("k")


# --- JSON files ---------------------------------------------------------------------------


def test_json_files_live_inside_the_directory_and_leave_no_temporaries(tmp_path: Path) -> None:
    store = JSONFilePersistenceAdapter(tmp_path / "state")
    store.save("swarm/run1/node-a", {"x": 1})
    assert tree_files(tmp_path) == ["state/swarm/run1/node-a.json"]


def test_a_symlinked_folder_pointing_outside_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    store = JSONFilePersistenceAdapter(tmp_path / "state")
    (tmp_path / "state" / "link").symlink_to(outside)
    with pytest.raises(InvalidKeyError, match="outside"):
        store.save("link/x", {"x": 1})
    assert list(outside.iterdir()) == []


def test_a_damaged_json_file_is_a_clear_error(tmp_path: Path) -> None:
    store = JSONFilePersistenceAdapter(tmp_path / "state")
    store.save("good", {"x": 1})
    (tmp_path / "state" / "good.json").write_text('{"x": 1', encoding="utf-8")
    (tmp_path / "state" / "list.json").write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(CorruptRecordError, match=r"'good' in .*good\.json is damaged"):
        store.load("good")
    with pytest.raises(CorruptRecordError, match="a JSON object was expected"):
        store.load("list")


def test_concurrent_json_writers_leave_one_whole_file(tmp_path: Path) -> None:
    directory = tmp_path / "state"
    context = multiprocessing.get_context("forkserver")  # no threads of the suite inherited
    processes = [
        context.Process(target=json_writer, args=(str(directory), n, 40)) for n in range(3)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(60)
        assert process.exitcode == 0
    store = JSONFilePersistenceAdapter(directory)
    same = store.load("same")
    assert same is not None and same["i"] == 39 and len(same["pad"]) == 5_000
    assert store.list_keys() == ["own/0", "own/1", "own/2", "same"]
    assert not [p for p in directory.rglob("*") if p.name.endswith(".tmp")]


# --- SQLite -------------------------------------------------------------------------------


def test_sqlite_uses_wal_and_a_busy_timeout(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with SQLitePersistenceAdapter(path) as store:
        store.save("k", {"x": 1})
        mode = store._db.execute("PRAGMA journal_mode").fetchone()[0]
        timeout = store._db.execute("PRAGMA busy_timeout").fetchone()[0]
    assert (mode, timeout) == ("wal", 30_000)


def test_sqlite_update_reads_changes_and_writes_one_key(tmp_path: Path) -> None:
    with SQLitePersistenceAdapter(tmp_path / "s.db") as store:
        assert store.update("c", lambda v: {"n": (v or {"n": 0})["n"] + 1}) == {"n": 1}
        assert store.update("c", lambda v: {"n": (v or {"n": 0})["n"] + 1}) == {"n": 2}

        def fail(_value: object) -> dict[str, int]:
            raise RuntimeError("no")

        with pytest.raises(RuntimeError):
            store.update("c", fail)
        assert store.load("c") == {"n": 2}  # rolled back, and the connection still works
        store.save("d", {"ok": True})


def test_several_processes_writing_one_sqlite_file_lose_nothing(tmp_path: Path) -> None:
    path = str(tmp_path / "shared.db")
    writers, keys, increments = 4, 200, 50
    context = multiprocessing.get_context("forkserver")  # no threads of the suite inherited
    processes = [
        context.Process(target=sqlite_writer, args=(path, n, keys, increments))
        for n in range(writers)
    ]
    with context.Pool(1) as readers:
        reading = readers.apply_async(sqlite_reader, (path, 30))
        for process in processes:
            process.start()
        for process in processes:
            process.join(120)
            assert process.exitcode == 0
        reading.get(120)  # every object it read was whole (it asserts)
    with SQLitePersistenceAdapter(path) as store:
        assert len(store.list_keys("p")) == writers * keys
        assert store.load("counter") == {"n": writers * increments}
        last = store.load("last")
        assert last is not None and last["i"] == keys - 1


def test_a_damaged_sqlite_row_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with SQLitePersistenceAdapter(path) as store:
        store.save("k", {"x": 1})
    with sqlite3.connect(path) as db:
        db.execute("UPDATE shared_state SET value = 'not json{' WHERE key = 'k'")
    with SQLitePersistenceAdapter(path) as store:
        with pytest.raises(CorruptRecordError, match=r"'k' in .*s\.db is damaged"):
            store.load("k")
        store.delete("k")
        assert store.load("k") is None


def test_a_file_that_is_not_a_database_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(PersistenceError, match="not a usable SQLite database"):
        SQLitePersistenceAdapter(path)


# --- Redis --------------------------------------------------------------------------------


def test_redis_namespaces_keep_swarms_apart(redis_url: str) -> None:
    with (
        RedisPersistenceAdapter(redis_url, "ns-one") as one,
        RedisPersistenceAdapter(redis_url, "ns-two") as two,
    ):
        one.save("k", {"who": 1})
        two.save("k", {"who": 2})
        assert one.load("k") == {"who": 1} and two.load("k") == {"who": 2}
        assert one.list_keys() == ["k"]
        one.delete("k")
        assert two.exists("k")


def test_a_damaged_redis_value_is_a_clear_error(redis_url: str) -> None:
    import redis

    with RedisPersistenceAdapter(redis_url, "damaged") as store:
        raw = redis.Redis.from_url(redis_url)
        raw.set("damaged:k", b"\xff\xfe not json")
        raw.close()
        with pytest.raises(CorruptRecordError, match="'k' in redis"):
            store.load("k")


def test_an_unreachable_redis_is_a_clear_error() -> None:
    from tests.support.shared_state import free_port

    store = RedisPersistenceAdapter(f"redis://127.0.0.1:{free_port()}/0", socket_timeout_s=1.0)
    with pytest.raises(PersistenceError, match="check that the server runs"):
        store.save("k", {"x": 1})


@pytest.mark.parametrize("namespace", ["", "a*b", "with space"])
def test_bad_redis_namespaces_are_refused(namespace: str) -> None:
    with pytest.raises(PersistenceError, match="namespace"):
        RedisPersistenceAdapter("redis://127.0.0.1:1/0", namespace)


def test_a_bad_redis_url_is_a_clear_error() -> None:
    with pytest.raises(PersistenceError, match="bad redis url"):
        RedisPersistenceAdapter("http://nope")


@settings(max_examples=300, deadline=None)
@given(key=st.text(alphabet=st.sampled_from("ab./\\-_ \x00~%é"), max_size=30))
def test_any_accepted_key_names_a_file_inside_the_directory(key: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = JSONFilePersistenceAdapter(Path(tmp) / "state")
        try:
            path = store.path_of(key)
        except InvalidKeyError:
            return
        assert path.is_relative_to(store.directory)
        assert ".." not in Path(key).parts and not key.startswith("/")
        store.save(key, {"k": key})
        assert store.list_keys() == [key] and store.load(key) == {"k": key}
