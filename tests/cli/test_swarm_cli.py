"""`journeyman swarm` end to end: the CLI in a subprocess, a small git repository, and the fake
OpenAI server answering the planner and every worker by the content of its request."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from journeyman.cli.app import app
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.swarm import (
    Step,
    SwarmModel,
    by_attempt,
    git,
    git_repo,
    openai_reply,
    repeat_forever,
    system_of,
    write_then_finish,
)
from tests.support.cli import clean_env, jm
from tests.support.shared_state import REDIS_MISSING, free_port, redis_server
from tests.tools.sandboxes import needs_bwrap

NO_BROKEN = "if grep -rn BROKEN --include='*.txt' .; then exit 1; fi"
"""The check: no text file may say BROKEN."""


def swarm(
    fake: FakeOpenAIServer, tmp_path: Path, repo: Path, *args: str, output: str = "text"
) -> tuple[int, str, str]:
    env = clean_env(OPENAI_API_KEY="sk-test-swarm", OPENAI_BASE_URL=fake.base_url)
    done = jm(
        "swarm", "make the change", "-w", str(repo), "--model", "gpt-4.1-mini", "--yes",
        "--sandbox", "local", "--session-dir", str(tmp_path / "sessions"),
        "--output-format", output, *args,
        env=env, timeout=120,
    )  # fmt: skip
    return done.returncode, done.stdout, done.stderr


def subtask(name: str, files: list[str]) -> dict[str, object]:
    return {"title": f"update {name}", "task": f"Update {name}.", "files": files}


def worker_requests(fake: FakeOpenAIServer, worker: str) -> list[str]:
    """System prompts of the requests of one attempt's worker (`w2`, `w2-2`)."""
    return [
        system
        for request in fake.requests
        if re.search(rf"^Worker: {re.escape(worker)}$", system := system_of(request), re.M)
    ]


def test_three_workers_and_one_learns_from_a_recorded_failure(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    repo = git_repo(tmp_path / "repo", {"a.txt": "old\n", "b.txt": "old\n", "c.txt": "old\n"})
    model = SwarmModel(
        [subtask("a", ["a.txt"]), subtask("b", ["b.txt"]), subtask("c", ["c.txt"])],
        {
            "w1": write_then_finish("a.txt", "new a\n"),
            "w2": by_attempt(
                write_then_finish("b.txt", "BROKEN b\n"), write_then_finish("b.txt", "new b\n")
            ),
            "w3": write_then_finish("c.txt", "new c\n"),
        },
    )
    fake_openai.default = openai_reply(model)
    code, out, err = swarm(fake_openai, tmp_path, repo, "--workers", "3", "--verify", NO_BROKEN)
    assert code == 0, out + err
    for line in (
        "[w1] planned — update a — files: a.txt",
        "[w2] gate failed — exited with status 1: ./b.txt:1:BROKEN b",
        "[w2] gate passed (attempt 2)",
        "[w1] merged",
        "[w2] merged (attempt 2)",
        "[w3] merged",
        "swarm: final check passed",
    ):
        assert line in out, out
    # the second attempt's prompt carries the failure the first one recorded
    (retried, *_) = worker_requests(fake_openai, "w2-2")
    assert "./b.txt:1:BROKEN b" in retried
    assert "./b.txt:1:BROKEN b" not in worker_requests(fake_openai, "w1")[0]
    assert [(repo / f"{n}.txt").read_text() for n in "abc"] == ["new a\n", "new b\n", "new c\n"]
    # merged in plan order, then worktrees and branches cleaned up
    merges = git(repo, "log", "--merges", "--format=%s").splitlines()
    assert [m.split()[2] for m in reversed(merges)] == ["w1", "w2", "w3"]
    assert git(repo, "branch", "--format=%(refname:short)").split() == ["main"]
    assert len(git(repo, "worktree", "list").splitlines()) == 1


def test_a_worker_repeating_one_call_is_stopped_by_its_own_loop(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    repo = git_repo(tmp_path / "repo", {"a.txt": "old\n"})
    model = SwarmModel(
        [subtask("a", ["a.txt"])], {"w1": repeat_forever(("read_file", {"path": "a.txt"}))}
    )
    fake_openai.default = openai_reply(model)
    code, out, err = swarm(fake_openai, tmp_path, repo, "--verify", "true", output="stream-json")
    assert code == 1, out + err
    events = [json.loads(line) for line in out.splitlines()]
    assert all("worker_id" in event for event in events)
    assert {e["worker_id"] for e in events if e["type"] == "model_response"} == {"planner", "w1"}
    # the loop's own detector warns the model, then its no-progress guard ends the run, as it
    # would end `journeyman run`: no second tracker halts the worker from outside
    assert any(e["type"] == "nudge" and e["worker_id"] == "w1" for e in events), out
    (failed,) = [e for e in events if e.get("state") == "failed"]
    assert "(no_progress)" in failed["detail"]
    assert failed["branch"] == failed["detail"].rsplit("branch ", 1)[1]
    assert len(worker_requests(fake_openai, "w1")) == 4  # one read, then three repeats
    result = events[-1]
    assert result["type"] == "swarm_result" and result["success"] is False
    assert result["kept_branches"] == [failed["branch"]]
    assert failed["branch"] in git(repo, "branch", "--format=%(refname:short)").split()


def test_four_workers_repeating_the_same_call_trip_the_global_doom_loop(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    repo = git_repo(tmp_path / "repo", {"a.txt": "line\n" * 1000})
    scripts = {f"w{n}": repeat_forever(("read_file", {"path": "a.txt"})) for n in range(1, 5)}
    model = SwarmModel([subtask(f"part {n}", []) for n in range(1, 5)], scripts)
    fake_openai.default = openai_reply(model)
    code, out, err = swarm(fake_openai, tmp_path, repo, "--workers", "4", "--verify", "true")
    assert code == 1, out + err
    assert 'swarm: global doom loop: `read_file {"path": "a.txt"}` was repeated 11 times' in out
    failed = [line for line in out.splitlines() if re.match(r"\[w\d\] failed", line)]
    assert len(failed) == 4, out


def test_a_merge_conflict_is_reported_with_its_files_and_retried_on_the_merged_result(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    repo = git_repo(tmp_path / "repo", {"shared.txt": "start\n"})
    model = SwarmModel(
        [subtask("first", ["shared.txt"]), subtask("second", ["shared.txt"])],
        {
            "w1": write_then_finish("shared.txt", "first\n"),
            "w2": by_attempt(
                write_then_finish("shared.txt", "second\n"),
                write_then_finish("shared.txt", "first\nsecond\n"),
            ),
        },
    )
    fake_openai.default = openai_reply(model)
    code, out, err = swarm(fake_openai, tmp_path, repo, "--verify", "true")
    assert code == 0, out + err
    assert "[w2] conflict — files: shared.txt — conflict in shared.txt" in out
    assert "[w2] merged (attempt 2)" in out
    (retried, *_) = worker_requests(fake_openai, "w2-2")
    assert "conflict in shared.txt" in retried
    assert (repo / "shared.txt").read_text() == "first\nsecond\n"


def test_bad_input_exits_2_before_any_model_call(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    env = {"OPENAI_API_KEY": "sk-test-swarm", "OPENAI_BASE_URL": fake_openai.base_url}

    def bad(repo: Path, *args: str) -> str:
        """The error message of a swarm that must exit 2 (run in this process: it is quick)."""
        done = CliRunner().invoke(
            app, ["swarm", "goal", "-w", str(repo), "--session-dir", str(tmp_path / "s"), *args],
            env=env,
        )  # fmt: skip
        assert done.exit_code == 2, done.output
        assert done.exception is None or isinstance(done.exception, SystemExit)
        return " ".join(done.output.split())

    plain = tmp_path / "plain"
    plain.mkdir()
    assert "git init" in bad(plain, "--verify", "true")
    dirty = git_repo(tmp_path / "dirty", {"a.txt": "old\n"})
    (dirty / "a.txt").write_text("changed\n")
    assert "uncommitted changes (a.txt)" in bad(dirty, "--verify", "true")
    clean = git_repo(tmp_path / "clean", {"a.txt": "old\n"})
    assert "give one with --verify CMD" in bad(clean)
    assert "--mode ask" in bad(clean, "--verify", "true", "--mode", "ask")
    no_budget = bad(clean, "--verify", "true", "--max-budget-usd", "0")
    assert "--max-budget-usd must be more than 0, not 0" in no_budget
    assert not (tmp_path / "s").exists()  # refused before anything was stored
    assert fake_openai.requests == []
    # and through the real command line, without a traceback
    code, _, err = swarm(fake_openai, tmp_path, plain, "--verify", "true")
    assert code == 2 and err.startswith("journeyman: workspace") and "Traceback" not in err


def test_json_output_is_the_result_alone(fake_openai: FakeOpenAIServer, tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo", {"a.txt": "old\n"})
    model = SwarmModel([subtask("a", ["a.txt"])], {"w1": write_then_finish("a.txt", "new\n")})
    fake_openai.default = openai_reply(model)
    code, out, err = swarm(fake_openai, tmp_path, repo, "--verify", "true", output="json")
    assert code == 0, out + err
    result = json.loads(out)
    assert result["success"] is True and result["final_check"]["passed"] is True
    (worker,) = result["workers"]
    assert (worker["state"], worker["changed_files"]) == ("merged", ["a.txt"])
    assert worker["session_ids"] == [f"{result['session_id']}-w1"]


def test_a_reader_that_goes_away_stops_the_swarm_quietly(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    repo = git_repo(tmp_path / "repo", {"a.txt": "line\n" * 1000})

    def keep_reading(attempt: int, turn: int) -> Step:  # never finishes on its own
        return Step(calls=[("read_file", {"path": "a.txt", "offset": turn + 1, "limit": 1})])

    fake_openai.default = openai_reply(SwarmModel([subtask("a", [])], {"w1": keep_reading}))
    env = clean_env(OPENAI_API_KEY="sk-test-swarm", OPENAI_BASE_URL=fake_openai.base_url)
    command = [
        sys.executable, "-m", "journeyman", "swarm", "goal", "-w", str(repo), "--yes",
        "--verify", "true", "--sandbox", "local", "--session-dir", str(tmp_path / "s"),
        "-o", "stream-json",
    ]  # fmt: skip
    process = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert process.stdout is not None and process.stderr is not None
    for line in process.stdout:  # like `| head`: read until the worker is busy, then leave
        if '"tool_result"' in line:
            break
    process.stdout.close()
    assert process.wait(timeout=60) == 141
    assert "Traceback" not in process.stderr.read()
    assert len(git(repo, "worktree", "list").splitlines()) == 1


def test_a_second_swarm_starts_with_the_first_ones_failures(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    """By default the shared state is a SQLite file in the session folder; --shared-state
    names another store, shared by swarms whatever their session folders."""
    repo = git_repo(tmp_path / "repo", {"a.txt": "old\n"})
    breaks = SwarmModel([subtask("a", ["a.txt"])], {"w1": write_then_finish("a.txt", "BROKEN\n")})
    fixes = SwarmModel([subtask("a", ["a.txt"])], {"w1": write_then_finish("a.txt", "new\n")})
    no_retry = ("--verify", NO_BROKEN)

    def second_prompt(*args: str) -> str:
        fake_openai.default = openai_reply(breaks)
        code, out, err = swarm(fake_openai, tmp_path, repo, *no_retry, *args)
        assert code == 1 and "[w1] gate failed" in out, out + err
        seen = len(worker_requests(fake_openai, "w1"))
        fake_openai.default = openai_reply(fixes)
        code, out, err = swarm(fake_openai, tmp_path, repo, *no_retry, *args)
        assert code == 0, out + err
        assert "swarm: shared state: " in out
        return worker_requests(fake_openai, "w1")[seen]

    prompt = second_prompt()
    # both attempts of the first swarm's w1 failed the gate; the second swarm's w1 reads them
    assert "./a.txt:1:BROKEN" in prompt and prompt.count("/w1") >= 2
    assert prompt.count("tried: Update a.") == 2
    assert (tmp_path / "sessions" / "swarm-shared-state.db").is_file()
    git(repo, "reset", "-q", "--hard", "HEAD~1")  # the first pair's merge
    store = tmp_path / "elsewhere.db"
    prompt = second_prompt("--shared-state", f"sqlite:{store}", "--session-dir", str(tmp_path))
    assert prompt.count("tried: Update a.") == 2  # this store holds this pair's failures alone
    assert store.is_file()


def test_bad_shared_state_stores_exit_2(fake_openai: FakeOpenAIServer, tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo", {"a.txt": "old\n"})
    (tmp_path / "a-file").write_text("not a folder\n")
    env = {"OPENAI_API_KEY": "sk-test-swarm", "OPENAI_BASE_URL": fake_openai.base_url}
    for store, expected in (
        ("ftp://host/x", "unknown kind of store; give sqlite:PATH, json:DIR, redis://"),
        (f"sqlite:{tmp_path / 'a-file' / 's.db'}", "cannot open the state database"),
        (f"json:{tmp_path / 'a-file' / 'd'}", "cannot create the state directory"),
        (f"redis://127.0.0.1:{free_port()}/0", "check that the server runs"),
    ):
        done = CliRunner().invoke(
            app, ["swarm", "goal", "-w", str(repo), "--verify", "true", "--session-dir",
                  str(tmp_path / "s"), "--shared-state", store],
            env=env,
        )  # fmt: skip
        assert done.exit_code == 2, done.output
        assert done.exception is None or isinstance(done.exception, SystemExit)
        assert expected in " ".join(done.output.split()), done.output
    assert fake_openai.requests == []


def test_help_says_which_limits_cap_the_whole_swarm() -> None:
    done = CliRunner().invoke(app, ["swarm", "--help"], env={"COLUMNS": "200"})
    text = " ".join(re.sub(r"[│╭╮╰╯─]", " ", done.output).split())
    assert "--max-duration is a time limit for the whole swarm too" in text
    assert "no worker starts once it has passed" in text
    assert "sqlite:PATH, json:DIR, redis://HOST:PORT/DB, or none" in text


def test_swarms_share_their_state_through_a_redis_server(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    if shutil.which("redis-server") is None:
        pytest.skip(REDIS_MISSING)
    repo = git_repo(tmp_path / "repo", {"a.txt": "old\n"})
    with redis_server() as url:
        store = ("--shared-state", url, "--verify", NO_BROKEN)
        fake_openai.default = openai_reply(
            SwarmModel([subtask("a", ["a.txt"])], {"w1": write_then_finish("a.txt", "BROKEN\n")})
        )
        code, out, err = swarm(fake_openai, tmp_path, repo, *store)
        assert code == 1 and "[w1] gate failed" in out, out + err
        seen = len(worker_requests(fake_openai, "w1"))
        fake_openai.default = openai_reply(
            SwarmModel([subtask("a", ["a.txt"])], {"w1": write_then_finish("a.txt", "new\n")})
        )
        # another machine: its own clone and session folder, the same server
        clone = tmp_path / "clone"
        git(tmp_path, "clone", "-q", str(repo), str(clone))
        code, out, err = swarm(
            fake_openai, tmp_path, clone, *store, "--session-dir", str(tmp_path / "other")
        )
        assert code == 0, out + err
    assert "./a.txt:1:BROKEN" in worker_requests(fake_openai, "w1")[seen]


@needs_bwrap
def test_the_gate_and_final_check_run_model_code_inside_the_sandbox(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    repo = git_repo(
        tmp_path / "repo",
        {"calc.py": "def add(a, b):\n    return a - b\n",
         "test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"},
    )  # fmt: skip
    outside = tmp_path / "outside"
    outside.mkdir()
    marker = outside / "written-by-conftest"
    planted = f"open({str(marker)!r}, 'w').write('the host ran model code')\n"
    model = SwarmModel(
        [subtask("calc", ["calc.py", "conftest.py"])],
        {"w1": write_then_finish("conftest.py", planted)},
    )
    fake_openai.default = openai_reply(model)
    env = clean_env(OPENAI_API_KEY="sk-test-swarm", OPENAI_BASE_URL=fake_openai.base_url)
    done = jm(
        "swarm", "make the change", "-w", str(repo), "--model", "gpt-4.1-mini", "--yes",
        "--sandbox", "bubblewrap", "--session-dir", str(tmp_path / "sessions"),
        "--verify", f"{sys.executable} -m pytest -q -p no:cacheprovider",
        env=env, timeout=180,
    )  # fmt: skip

    # with --sandbox local the marker is written: this is the sandbox's doing, not luck
    assert not marker.exists(), "the gate or the final check ran the worker's code on the host"
    assert done.returncode != 0  # the bug is still there, and a conftest.py was added
    assert "Traceback" not in done.stderr
