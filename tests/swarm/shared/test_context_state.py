"""SharedContextState: the seed's defaults, failures, insights, references, threads, snapshots."""

from __future__ import annotations

import asyncio
import threading

import pytest

from journeyman.swarm.shared import SharedContextConfig, SharedContextState


def test_defaults_are_the_seeds() -> None:
    config = SharedContextConfig()
    assert config.max_references == 200
    assert config.max_failures_per_worker == 50
    assert SharedContextState().config == config


def test_failures_are_kept_per_worker_up_to_the_cap() -> None:
    state = SharedContextState(SharedContextConfig(max_failures_per_worker=3))
    for i in range(5):
        state.record_failure("w1", f"step {i}", f"error {i}")
    state.record_failure("w2", "other", "boom")
    assert [f.input for f in state.failures("w1")] == ["step 2", "step 3", "step 4"]
    assert state.failure_count == 4
    assert [f.worker_id for f in state.failures()] == ["w1", "w1", "w1", "w2"]


def test_failure_context_is_the_most_recent_failures_as_text() -> None:
    state = SharedContextState()
    assert state.get_failure_context(10) == ""
    state.record_failure("w1", "run_command pytest", "E   AssertionError: 1 != 2")
    state.record_failure("w2", "edit_file src/a.py", "old_string matched 2 times")
    state.record_failure("w3", "read_file b.py", "No such file: b.py")
    text = state.get_failure_context(2)
    assert "w1" not in text
    assert "worker w2 tried: edit_file src/a.py" in text
    assert "No such file: b.py" in text
    assert text.index("w2") < text.index("w3")
    assert "w2" not in state.get_failure_context(10, exclude_worker="w2")
    assert state.get_failure_context(0) == ""


def test_huge_errors_and_inputs_are_clipped() -> None:
    state = SharedContextState()
    failure = state.record_failure("w1", "x" * 100_000, "Traceback\n" + "y" * 1_000_000)
    assert len(failure.error) <= state.config.max_error_chars
    assert len(failure.input) <= state.config.max_input_chars
    assert len(state.get_failure_context(10)) < 5_000


def test_insights_find_an_error_shared_by_several_workers() -> None:
    state = SharedContextState()
    missing = "ModuleNotFoundError: No module named 'app'"
    state.record_failure("w1", "run_command pytest -x", missing)
    state.record_failure("w2", "run_command pytest", missing)
    state.record_failure("w3", "read_file a.py", "line 12: bad")
    state.record_failure("w3", "read_file b.py", "line 40: bad")
    insights = state.get_failure_insights()
    assert any("2 workers (w1, w2) hit the same error" in line for line in insights)
    # the numbers differ, the error is the same kind, but one worker alone is no pattern
    assert not any("(w3)" in line for line in insights)
    assert any(line.startswith("Imports failed") for line in insights)
    assert insights == state.get_failure_insights()


def test_insights_name_an_input_that_kept_failing() -> None:
    state = SharedContextState()
    for worker in ("w1", "w2", "w3"):
        state.record_failure(worker, "run_command make build", f"exit 2 on {worker}")
    insights = state.get_failure_insights()
    assert "`run_command make build` failed 3 times; do not run it again unchanged." in insights


def test_no_failures_no_insights() -> None:
    assert SharedContextState().get_failure_insights() == []


def test_references_are_deduplicated_and_capped_oldest_first() -> None:
    state = SharedContextState(SharedContextConfig(max_references=3))
    assert state.add_references(["a.py", "b.py", "a.py", "  ", "c.py"]) == 3
    assert state.add_references(["a.py"]) == 0  # known: moves to the newest end
    assert state.add_references(["d.py"]) == 1
    assert state.references() == ["c.py", "a.py", "d.py"]


def test_search_references_is_a_case_insensitive_substring_search() -> None:
    state = SharedContextState()
    state.add_references(["src/App.py: the entry point", "docs/guide.md", "src/app_test.py"])
    assert state.search_references("APP") == ["src/app_test.py", "src/App.py: the entry point"]
    assert state.search_references("app", limit=1) == ["src/app_test.py"]
    assert state.search_references("nothing") == []


def test_many_threads_recording_at_once_lose_nothing() -> None:
    state = SharedContextState(SharedContextConfig(max_failures_per_worker=1_000))
    threads_n, each = 16, 200

    def work(worker: int) -> None:
        for i in range(each):
            state.record_failure(f"w{worker}", f"call {i}", "boom")
            state.add_references([f"ref-{worker}-{i % 10}"])

    threads = [threading.Thread(target=work, args=(n,)) for n in range(threads_n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert state.failure_count == threads_n * each
    assert len({f.sequence for f in state.failures()}) == threads_n * each
    assert len(state.references()) == min(200, threads_n * 10)


def test_snapshot_round_trips_and_merging_twice_adds_nothing() -> None:
    state = SharedContextState()
    state.record_failure("w1", "a", "b")
    state.add_references(["r1", "r2"])
    copy = SharedContextState.from_snapshot(state.snapshot())
    assert [(f.worker_id, f.input, f.error) for f in copy.failures()] == [("w1", "a", "b")]
    assert copy.references() == ["r1", "r2"]
    other = SharedContextState()
    other.record_failure("w2", "c", "d")
    other.merge(state.snapshot())
    other.merge(state.snapshot())
    assert [f.worker_id for f in other.failures()] == ["w2", "w1"]


@pytest.mark.parametrize(
    "snapshot",
    [
        [],
        {"version": 99},
        {"version": 1, "failures": "nope"},
        {"version": 1, "failures": [{"worker_id": "w"}]},
    ],
)
def test_a_damaged_snapshot_is_a_clear_value_error(snapshot: object) -> None:
    with pytest.raises(ValueError, match="shared context snapshot"):
        SharedContextState().restore(snapshot)  # type: ignore[arg-type]


async def test_tasks_and_threads_recording_together_lose_nothing() -> None:
    state = SharedContextState(SharedContextConfig(max_failures_per_worker=1_000))

    async def task_worker(worker: int) -> None:
        for i in range(100):
            state.record_failure(f"task{worker}", f"call {i}", "boom")
            await asyncio.sleep(0)  # let the other tasks in between records

    def thread_worker(worker: int) -> None:
        for i in range(100):
            state.record_failure(f"thread{worker}", f"call {i}", "boom")

    await asyncio.gather(
        *(task_worker(n) for n in range(8)),
        *(asyncio.to_thread(thread_worker, n) for n in range(4)),
    )
    assert state.failure_count == 12 * 100
    assert len(state.failures("task3")) == len(state.failures("thread2")) == 100
