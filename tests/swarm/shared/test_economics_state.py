"""SharedEconomicsState: global doom loops across workers."""

from __future__ import annotations

import threading

import pytest

from journeyman.swarm.shared import GlobalDoomLoop, SharedEconomicsState


def test_default_threshold_is_the_seeds() -> None:
    assert SharedEconomicsState().global_doom_threshold == 10


def test_a_fingerprint_seen_more_than_the_threshold_across_workers_is_flagged() -> None:
    state = SharedEconomicsState()
    verdicts = [state.record(f"w{i % 4}", "fp", label="curl api") for i in range(11)]
    assert [v.is_global_doom_loop for v in verdicts] == [False] * 10 + [True]
    assert verdicts[-1].newly_flagged and verdicts[-1].count == 11
    assert state.is_global_doom_loop("fp")
    assert not state.record("w1", "fp").newly_flagged  # flagged once
    (loop,) = state.global_doom_loops()
    assert loop.workers == ("w0", "w1", "w2", "w3")
    assert "`curl api` was repeated 12 times with the same result by 4 workers" in state.notice()


def test_one_worker_alone_is_not_a_global_loop() -> None:
    state = SharedEconomicsState()
    for _ in range(30):
        state.record("w1", "fp")
    assert not state.is_global_doom_loop("fp")
    assert state.notice() == ""
    lone = SharedEconomicsState(min_workers=1)
    for _ in range(11):
        lone.record("w1", "fp")
    assert lone.is_global_doom_loop("fp")


def test_listeners_are_told_once_per_new_loop() -> None:
    state = SharedEconomicsState(global_doom_threshold=2)
    told: list[GlobalDoomLoop] = []
    remove = state.on_global_doom_loop(told.append)
    for worker in ("a", "b", "a", "b"):
        state.record(worker, "fp")
    assert [loop.fingerprint for loop in told] == ["fp"]
    remove()
    for worker in ("a", "b", "a"):
        state.record(worker, "other")
    assert len(told) == 1


def test_should_skip_a_flagged_fingerprint_and_the_tasks_that_fed_it() -> None:
    state = SharedEconomicsState(global_doom_threshold=3)
    state.record("a", "fp", task="fix parser")
    state.record("b", "fp", task="fix lexer")
    state.record("b", "fine", task="write docs")
    assert not state.should_skip("fix parser")
    state.record("a", "fp", task="fix parser")
    state.record("b", "fp", task="fix lexer")
    assert state.should_skip("fp")
    assert state.should_skip("fix parser") and state.should_skip("fix lexer")
    assert not state.should_skip("write docs") and not state.should_skip("fine")


def test_threads_counting_the_same_fingerprint_get_exact_counts() -> None:
    state = SharedEconomicsState(global_doom_threshold=1_000_000)

    def work(worker: int) -> None:
        for i in range(500):
            state.record(f"w{worker}", "shared")
            state.record(f"w{worker}", f"own-{worker}-{i % 5}")

    threads = [threading.Thread(target=work, args=(n,)) for n in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert state.count("shared") == 12 * 500
    assert state.counts_by_worker("shared") == {f"w{n}": 500 for n in range(12)}
    assert state.count("own-3-4") == 100


def test_only_one_thread_sees_the_loop_flagged() -> None:
    state = SharedEconomicsState(global_doom_threshold=50)
    flagged: list[bool] = []
    lock = threading.Lock()

    def work(worker: int) -> None:
        for _ in range(20):
            verdict = state.record(f"w{worker}", "fp")
            if verdict.newly_flagged:
                with lock:
                    flagged.append(True)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert flagged == [True]


def test_merging_keeps_the_larger_count_per_worker_and_is_idempotent() -> None:
    here, there = SharedEconomicsState(global_doom_threshold=5), SharedEconomicsState()
    for _ in range(3):
        here.record("a", "fp")
        there.record("b", "fp")
    new = here.merge(there.snapshot())
    assert [loop.fingerprint for loop in new] == ["fp"]
    assert here.merge(there.snapshot()) == []
    assert here.counts_by_worker("fp") == {"a": 3, "b": 3}
    copy = SharedEconomicsState()
    copy.restore(here.snapshot())
    assert copy.is_global_doom_loop("fp") and copy.count("fp") == 6


@pytest.mark.parametrize("snapshot", [{"version": 2}, {"version": 1, "counts": {"fp": 3}}])
def test_a_damaged_snapshot_is_a_clear_value_error(snapshot: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="shared economics snapshot"):
        SharedEconomicsState().merge(snapshot)


def test_a_threshold_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        SharedEconomicsState(0)
