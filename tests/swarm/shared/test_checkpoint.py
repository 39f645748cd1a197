"""Saving and loading a swarm's shared state through the adapters, across processes."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from journeyman.swarm.shared import (
    CorruptRecordError,
    JSONFilePersistenceAdapter,
    PersistenceAdapter,
    RedisPersistenceAdapter,
    SharedContextState,
    SharedEconomicsState,
    SQLitePersistenceAdapter,
    load_shared_state,
    save_shared_state,
    sync_shared_state,
)
from tests.support.shared_state import node_learns


def learned(node: str, n: int) -> tuple[SharedContextState, SharedEconomicsState]:
    context, economics = SharedContextState(), SharedEconomicsState(global_doom_threshold=4)
    for i in range(n):
        context.record_failure(f"{node}-w{i}", f"call {i}", f"failed on {node}")
        economics.record(f"{node}-w{i}", "fp", label="curl http://down")
    context.add_references([f"{node}.py"])
    return context, economics


def round_trip(store: PersistenceAdapter) -> None:
    a_context, a_economics = learned("a", 3)
    b_context, b_economics = learned("b", 2)
    assert save_shared_state(store, "run1", "a", a_context, a_economics) == "swarm/run1/a"
    sync_shared_state(store, "run1", "b", b_context, b_economics)
    assert len(b_context.failures()) == 5
    assert b_economics.is_global_doom_loop("fp")  # 3 + 2 calls > 4, seen by 5 workers
    assert set(b_context.references()) == {"a.py", "b.py"}
    fresh_context, fresh_economics = SharedContextState(), SharedEconomicsState()
    assert load_shared_state(store, "run1", fresh_context, fresh_economics) == 2
    assert len(fresh_context.failures()) == 5
    assert fresh_economics.count("fp") == 5
    assert load_shared_state(store, "other-run", SharedContextState()) == 0


def test_nodes_share_what_they_learned_through_json_files(tmp_path: Path) -> None:
    round_trip(JSONFilePersistenceAdapter(tmp_path / "state"))


def test_nodes_share_what_they_learned_through_sqlite(tmp_path: Path) -> None:
    with SQLitePersistenceAdapter(tmp_path / "s.db") as store:
        round_trip(store)


def test_nodes_share_what_they_learned_through_redis(redis_url: str) -> None:
    with RedisPersistenceAdapter(redis_url, "checkpoint-test") as store:
        round_trip(store)


def test_processes_syncing_through_one_sqlite_file_learn_everything(tmp_path: Path) -> None:
    path = str(tmp_path / "swarm.db")
    nodes, failures = 3, 12
    context = multiprocessing.get_context("forkserver")  # no threads of the suite inherited
    processes = [
        context.Process(target=node_learns, args=(path, n, failures)) for n in range(nodes)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(120)
        assert process.exitcode == 0
    merged, economics = SharedContextState(), SharedEconomicsState()
    with SQLitePersistenceAdapter(path) as store:
        load_shared_state(store, "demo", merged, economics)
    assert len(merged.failures()) == nodes * failures
    assert economics.count("shared-fp") == nodes * failures
    assert economics.is_global_doom_loop("shared-fp")


def test_a_damaged_saved_view_names_its_key(tmp_path: Path) -> None:
    store = JSONFilePersistenceAdapter(tmp_path / "state")
    store.save("swarm/run1/bad", {"version": 1, "context": {"version": 1, "failures": "x"}})
    with pytest.raises(CorruptRecordError, match="'swarm/run1/bad' is damaged"):
        load_shared_state(store, "run1", SharedContextState())
    store.save("swarm/run1/bad", {"version": 7})
    with pytest.raises(CorruptRecordError, match="version 7"):
        load_shared_state(store, "run1", SharedContextState())
