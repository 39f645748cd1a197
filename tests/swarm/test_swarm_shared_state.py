"""A swarm's shared state in a store: a later swarm on the same project starts with what an
earlier one learned; call counts of finished swarms do not stop new ones; a failing store is
reported and the swarm goes on; no view in the store, live or not, adds to this swarm's
call counts."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from journeyman.core.errors import ConfigurationError
from journeyman.loop.config import AgentConfig
from journeyman.swarm.orchestrator import Swarm, SwarmConfig, SwarmResult
from journeyman.swarm.progress import SwarmEvent, SwarmStage, SwarmUpdate, WorkerState
from journeyman.swarm.shared import (
    JSONFilePersistenceAdapter,
    PersistenceAdapter,
    PersistenceError,
    RedisPersistenceAdapter,
    SharedContextState,
    SharedEconomicsState,
    SQLitePersistenceAdapter,
    call_fingerprint,
    load_shared_state,
    save_shared_state,
)
from journeyman.swarm.shared.stores import open_shared_state
from journeyman.tools.sandbox import SandboxKind
from tests.fakes.swarm import RoutedProvider, SwarmModel, git, git_repo, write_then_finish
from tests.support.shared_state import free_port

NO_BROKEN = "! grep -rn BROKEN --include='*.txt' ."


def subtask(name: str, files: list[str]) -> dict[str, Any]:
    return {"title": name, "task": f"Update {name}.", "files": files}


def run(
    repo: Path,
    tmp_path: Path,
    model: SwarmModel,
    store: PersistenceAdapter | None,
    events: list[SwarmEvent] | None = None,
    **options: Any,
) -> tuple[SwarmResult, RoutedProvider]:
    provider = RoutedProvider(model)
    swarm = Swarm(
        provider,
        workspace=repo,
        config=SwarmConfig(verify_command=NO_BROKEN, gate_retries=0, **options),
        agent_config=AgentConfig(session_dir=tmp_path / "sessions", sandbox=SandboxKind.LOCAL),
        shared_state=store,
        on_event=None if events is None else events.append,
    )
    return asyncio.run(swarm.run("the goal")), provider


BREAKS_A = SwarmModel([subtask("a", ["a.txt"])], {"w1": write_then_finish("a.txt", "BROKEN\n")})
FIXES_A = SwarmModel([subtask("a", ["a.txt"])], {"w1": write_then_finish("a.txt", "fine\n")})


def first_prompt(provider: RoutedProvider) -> str:
    return next(r.system for r in provider.requests if "Subtask id: w1" in r.system)


def second_swarm_learns_from_the_first(
    tmp_path: Path, open_store: Any, *, clone: bool = False
) -> None:
    repo = git_repo(tmp_path / "repo", {"a.txt": "a\n"})
    with open_store() as store:
        first, _ = run(repo, tmp_path, BREAKS_A, store)
    assert first.workers[0].state is WorkerState.FAILED
    if clone:  # another checkout of the project (another machine): same first commit
        repo = tmp_path / "clone"
        git(tmp_path, "clone", "-q", str(tmp_path / "repo"), str(repo))
    events: list[SwarmEvent] = []
    with open_store() as store:  # a new connection: nothing kept in memory between the two
        second, provider = run(repo, tmp_path, FIXES_A, store, events)
    assert second.success
    prompt = first_prompt(provider)
    assert "1:BROKEN" in prompt and f"worker {first.session_id}/w1 tried" in prompt
    loaded = [
        e for e in events if isinstance(e, SwarmUpdate) and e.stage is SwarmStage.SHARED_STATE
    ]
    assert loaded and loaded[0].detail.startswith("1 failure recorded by earlier swarms")


def test_a_second_swarm_starts_with_the_first_ones_failures_through_sqlite(
    tmp_path: Path,
) -> None:
    second_swarm_learns_from_the_first(
        tmp_path, lambda: SQLitePersistenceAdapter(tmp_path / "state.db"), clone=True
    )


def test_a_second_swarm_starts_with_the_first_ones_failures_through_redis(
    tmp_path: Path, redis_url: str
) -> None:
    second_swarm_learns_from_the_first(
        tmp_path, lambda: RedisPersistenceAdapter(redis_url, "swarm-e2e")
    )


def test_without_a_store_nothing_is_carried_over(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo", {"a.txt": "a\n"})
    run(repo, tmp_path, BREAKS_A, None)
    _, provider = run(repo, tmp_path, FIXES_A, None)
    assert "1:BROKEN" not in first_prompt(provider)


def test_other_projects_in_the_same_store_are_kept_apart(tmp_path: Path) -> None:
    with SQLitePersistenceAdapter(tmp_path / "state.db") as store:
        run(git_repo(tmp_path / "one", {"a.txt": "a\n"}), tmp_path, BREAKS_A, store)
        other = git_repo(tmp_path / "two", {"a.txt": "another project\n"})
        _, provider = run(other, tmp_path, FIXES_A, store)
    assert "1:BROKEN" not in first_prompt(provider)


def test_call_counts_are_read_only_from_swarms_still_running(tmp_path: Path) -> None:
    loop = SharedEconomicsState(global_doom_threshold=2)
    for worker in ("x/w1", "x/w2", "x/w3"):
        loop.record(worker, "fp", label="curl http://down")
    store = JSONFilePersistenceAdapter(tmp_path / "s")
    save_shared_state(store, "running", "n", SharedContextState(), loop)
    save_shared_state(store, "finished", "n", SharedContextState(), loop, finished=True)
    killed = store.load("swarm/running/n")
    assert killed is not None
    killed["saved_at"] -= 3_600  # saved an hour ago and never finished: killed
    store.save("swarm/killed/n", killed)

    def counted(scope: str, max_age_s: float | None = 600) -> int:
        economics = SharedEconomicsState(global_doom_threshold=2)
        load_shared_state(
            store, scope, SharedContextState(), economics, economics_max_age_s=max_age_s
        )
        return economics.count("fp")

    assert [counted(scope) for scope in ("running", "finished", "killed")] == [3, 0, 0]
    assert counted("finished", max_age_s=None) == 3  # no filter: every view's counts


class BrokenStore(JSONFilePersistenceAdapter):
    def save(self, key: str, value: Any) -> None:
        raise PersistenceError("disk full")


def test_a_store_that_fails_is_reported_once_and_the_swarm_goes_on(tmp_path: Path) -> None:
    events: list[SwarmEvent] = []
    repo = git_repo(tmp_path / "repo", {"a.txt": "a\n"})
    result, _ = run(repo, tmp_path, FIXES_A, BrokenStore(tmp_path / "s"), events)
    assert result.success
    failed = [e for e in events if isinstance(e, SwarmUpdate) and e.passed is False]
    assert [e.detail for e in failed] == [
        "the store failed, the swarm goes on without it: disk full"
    ]


def test_store_specs_are_opened_or_refused_clearly(tmp_path: Path) -> None:
    assert open_shared_state("none") is None
    store = open_shared_state(f"sqlite:{tmp_path / 'deep' / 's.db'}")
    assert isinstance(store, SQLitePersistenceAdapter) and store.list_keys() == []
    store.close()
    assert isinstance(open_shared_state(f"json:{tmp_path / 'j'}"), JSONFilePersistenceAdapter)
    (tmp_path / "file").write_text("x")
    for spec, expected in (
        ("ftp://host/x", "unknown kind of store; give sqlite:PATH"),
        ("state.db", "unknown kind of store"),
        ("sqlite:", "needs a path"),
        (f"sqlite:{tmp_path / 'file' / 's.db'}", "cannot be used"),
        (f"json:{tmp_path / 'file' / 'dir'}", "cannot be used"),
        (f"redis://127.0.0.1:{free_port()}/0", "cannot be used"),
    ):
        with pytest.raises(ConfigurationError, match=expected):
            open_shared_state(spec)


def test_swarms_running_at_once_learn_from_each_other(tmp_path: Path) -> None:
    """Two swarms in two threads (each with its own event loop and connection, as two processes
    would be) on one SQLite file: B's second worker starts after A's worker failed its gate
    and finds that failure in its prompt, synced from the store when it started."""
    import threading

    path = tmp_path / "state.db"
    scope = {"shared_state_scope": "demo"}

    def a_failure_is_stored() -> bool:
        with SQLitePersistenceAdapter(path) as store:
            context = SharedContextState()
            load_shared_state(store, "demo", context)
        return context.failure_count > 0

    def wait_for_a(attempt: int, turn: int) -> Any:
        if turn == 0:
            deadline = 300
            while not a_failure_is_stored() and deadline:
                deadline -= 1
                threading.Event().wait(0.1)
        return write_then_finish("b.txt", "B\n")(attempt, turn)

    model_b = SwarmModel(
        [subtask("b", ["b.txt"]), subtask("c", ["c.txt"])],
        {"w1": wait_for_a, "w2": write_then_finish("c.txt", "C\n")},
    )
    results: dict[str, tuple[SwarmResult, RoutedProvider]] = {}

    def swarm(name: str, model: SwarmModel, files: dict[str, str], **options: Any) -> None:
        repo = git_repo(tmp_path / name, files)
        with SQLitePersistenceAdapter(path) as store:
            results[name] = run(repo, tmp_path / f"s-{name}", model, store, **scope, **options)

    b = threading.Thread(
        target=swarm, args=("b", model_b, {"b.txt": "b\n", "c.txt": "c\n"}), kwargs={"workers": 1}
    )
    b.start()
    swarm("a", BREAKS_A, {"a.txt": "a\n"})
    b.join(60)
    assert not b.is_alive()
    result_b, provider_b = results["b"]
    assert result_b.success
    first_w1 = first_prompt(provider_b)
    first_w2 = next(r.system for r in provider_b.requests if "Subtask id: w2" in r.system)
    assert "1:BROKEN" not in first_w1  # built before A's worker failed
    assert "1:BROKEN" in first_w2 and f"{results['a'][0].session_id}/w1" in first_w2


def test_a_crafted_live_view_in_the_store_cannot_force_a_global_doom_loop(
    tmp_path: Path,
) -> None:
    repo = git_repo(tmp_path / "repo", {"a.txt": "a\n"})
    store = JSONFilePersistenceAdapter(tmp_path / "s")
    # someone who can write the store plants a "running" swarm that flagged the very calls
    # this swarm's worker makes, with counts far past the threshold from many workers
    forged = SharedEconomicsState(global_doom_threshold=1)
    for call_args in ({"path": "a.txt", "content": "fine\n"}, {"summary": "done"}):
        name = "write_file" if "path" in call_args else "finish"
        fingerprint = call_fingerprint(name, call_args)
        for worker in ("evil/w1", "evil/w2", "evil/w3"):
            for _ in range(50):
                forged.record(worker, fingerprint, label=name, task="w1")
    assert len(forged.global_doom_loops()) == 2
    save_shared_state(store, "proj", "swarm-evil", SharedContextState(), forged)
    events: list[SwarmEvent] = []
    result, provider = run(repo, tmp_path, FIXES_A, store, events, shared_state_scope="proj")
    assert result.success, result.summary()
    assert result.global_doom_loops == []
    assert not any(
        e.stage is SwarmStage.GLOBAL_DOOM_LOOP for e in events if isinstance(e, SwarmUpdate)
    )
    assert "global doom loop" not in first_prompt(provider)
    assert (repo / "a.txt").read_text() == "fine\n"


class CountingStore(JSONFilePersistenceAdapter):
    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        self.unfinished_saves = 0

    def save(self, key: str, value: Any) -> None:
        self.unfinished_saves += not value.get("finished")
        super().save(key, value)


def test_a_running_swarm_saves_its_view_as_a_heartbeat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from journeyman.swarm import orchestrator

    monkeypatch.setattr(orchestrator, "HEARTBEAT_S", 0.05)
    slow = SwarmModel([subtask("a", ["a.txt"])], {"w1": write_then_finish("a.txt", "fine\n")})
    repo = git_repo(tmp_path / "repo", {"a.txt": "a\n"})
    quiet = CountingStore(tmp_path / "quiet")
    run(repo, tmp_path, FIXES_A, quiet)
    beating = CountingStore(tmp_path / "beating")
    provider = RoutedProvider(slow, delay_s=0.4)
    swarm = Swarm(
        provider,
        workspace=repo,
        config=SwarmConfig(verify_command=NO_BROKEN, gate_retries=0),
        agent_config=AgentConfig(session_dir=tmp_path / "sessions", sandbox=SandboxKind.LOCAL),
        shared_state=beating,
    )
    assert asyncio.run(swarm.run("the goal")).success
    # the same swarm's own saves, plus one every 0.05 s over its ~1.2 s of model calls
    assert beating.unfinished_saves >= quiet.unfinished_saves + 5
