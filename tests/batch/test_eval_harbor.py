"""Harbor task folders as an eval suite: `journeyman eval` as a user runs it, against the fake
OpenAI server, on three tasks made here (one solved, one not, one needing a container)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from journeyman.batch import grading
from journeyman.batch.grading import GradingSpec, copy_hidden_tests, judge
from journeyman.batch.harbor_reward import harbor_reward
from journeyman.batch.suites import SuiteError, load_suite, suite_kind
from journeyman.batch.suites.harbor_verify import path_pattern
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import RecordedRequest, ScriptItem, reply
from tests.support.cli import clean_env, journeyman
from tests.tools.sandboxes import needs_bwrap

REWARD_BY_CONTENT = """#!/bin/bash
# Harbor's contract: the tests are at /tests, the reward goes to /logs/verifier.
expected="$(cat /tests/expected.txt)"
if [ -f /app/hello.txt ] && [ "$(cat /app/hello.txt)" = "$expected" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""


def _task(root: Path, name: str, dockerfile: str, instruction: str, test: str) -> Path:
    folder = root / name
    (folder / "environment").mkdir(parents=True)
    (folder / "tests").mkdir()
    (folder / "instruction.md").write_text(instruction)
    (folder / "task.toml").write_text(
        'version = "1.0"\n\n[agent]\ntimeout_sec = 120.0\n\n[verifier]\ntimeout_sec = 45.0\n'
        "\n[environment]\ncpus = 1\nmemory_mb = 2048\n"
    )
    (folder / "environment" / "Dockerfile").write_text(dockerfile)
    (folder / "tests" / "test.sh").write_text(test)
    (folder / "solution").mkdir()
    (folder / "solution" / "solve.sh").write_text("#!/bin/bash\necho secret-solution\n")
    return folder


def harbor_suite(root: Path) -> Path:
    """Three Harbor tasks: `shout` and `shout-twice` run here, `needs-apt` needs a container."""
    plain = "FROM ubuntu:24.04\n\nWORKDIR /app\nCOPY greeting.txt /app/greeting.txt\n"
    for name, expected in (("shout", "HELLO, WORLD"), ("shout-twice", "HELLO, WORLD HELLO, WORLD")):
        folder = _task(
            root,
            name,
            plain,
            f"Write /app/hello.txt holding the text of /app/greeting.txt in capitals ({name}).\n",
            REWARD_BY_CONTENT,
        )
        (folder / "environment" / "greeting.txt").write_text("hello, world\n")
        (folder / "tests" / "expected.txt").write_text(expected + "\n")
    _task(
        root,
        "needs-apt",
        "FROM ubuntu:24.04\nRUN apt-get update && apt-get install -y jq\nWORKDIR /app\n",
        "Use jq to read /app/data.json.\n",
        "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n",
    )
    return root


class Model:
    """Writes hello.txt in capitals for every task, then finishes."""

    def __call__(self, request: RecordedRequest) -> ScriptItem:
        messages = request.json.get("messages", [])
        if not any(m.get("role") == "tool" for m in messages):
            content = {"path": "hello.txt", "content": "HELLO, WORLD\n"}
            return reply(tool_calls=[("write_file", content)], output_tokens=40)
        return reply(tool_calls=[("finish", {"summary": "done"})], output_tokens=20)


def _eval(tmp_path: Path, server: FakeOpenAIServer, *args: str) -> subprocess.CompletedProcess[str]:
    env = clean_env(OPENAI_API_KEY="sk-test-harbor", OPENAI_BASE_URL=server.base_url)
    common = ["--session-dir", str(tmp_path / "sessions"), "--model", "gpt-4.1-mini"]
    common += ["--price-per-mtok", "0,1000", "--no-verify", "--sandbox", "bubblewrap"]
    return journeyman("eval", *args, *common, env=env)


@needs_bwrap  # the tests run in the agent's sandbox, as every eval's grading does
def test_a_harbor_folder_runs_end_to_end_and_the_container_task_is_named(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    suite = harbor_suite(tmp_path / "tasks")
    fake_openai.default = Model()
    out = tmp_path / "out"
    done = _eval(tmp_path, fake_openai, str(suite), "--out", str(out), "--keep", "all")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "Harbor task needs-apt needs a container engine" in done.stderr
    assert "runs commands (RUN apt-get update" in done.stderr
    assert "eval: resolved 1/2 (50.0 %" in done.stdout
    assert "1 task(s) of the suite not run" in done.stdout
    report = (out / "eval.md").read_text()
    assert "## Not run here\n\n- Harbor task needs-apt needs a container engine" in report
    assert json.loads((out / "eval.json").read_text())["left_out"][0].startswith(
        "Harbor task needs-apt"
    )

    tasks = {t["id"]: t for t in map(json.loads, (out / "suite.jsonl").read_text().splitlines())}
    assert set(tasks) == {"shout", "shout-twice"}
    assert tasks["shout"]["limits"]["max_duration_s"] == 120.0
    assert tasks["shout"]["grading"]["timeout_s"] == 45.0
    assert "Write ./hello.txt holding the text of ./greeting.txt" in tasks["shout"]["task"]

    rows = {r["id"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    assert rows["shout"]["grade"]["resolved"] is True and rows["shout"]["grade"]["reward"] == 1.0
    assert rows["shout-twice"]["grade"]["resolved"] is False
    assert rows["shout-twice"]["grade"]["reward"] == 0.0
    # the agent's copy held the environment's file, never the tests or the solution
    first_prompt = json.dumps(fake_openai.requests[0].json)
    assert "secret-solution" not in first_prompt
    workspace = out / "workspaces" / "shout" / "attempt-1"
    assert (workspace / "greeting.txt").read_text() == "hello, world\n"
    assert not (out / "harbor" / "shout" / "start" / "expected.txt").exists()
    # graded in a fresh copy of the task: the agent's own copy never holds tests or a reward
    assert not (workspace / ".harbor" / "logs" / "verifier" / "reward.txt").exists()


def test_a_single_task_folder_is_a_suite_and_a_suite_of_container_tasks_is_refused(
    tmp_path: Path,
) -> None:
    suite = harbor_suite(tmp_path / "tasks")
    assert suite_kind(suite) == "harbor" and suite_kind(suite / "shout") == "harbor"
    notes: list[str] = []
    tasks = load_suite(suite / "shout", staging=tmp_path / "staging", note=notes.append)
    assert [task.id for task in tasks] == ["shout"] and notes == []
    with pytest.raises(SuiteError, match=r"none of the 1 Harbor tasks .* can run without"):
        load_suite(suite / "needs-apt", staging=tmp_path / "staging")


@pytest.mark.parametrize(
    ("dockerfile", "test", "reason"),
    [
        ("FROM python:3.12\nWORKDIR /app\nCOPY --from=builder /x /app/x\n", "", "another image"),
        ("FROM a AS b\nFROM c\nWORKDIR /app\n", "", "multi-stage"),
        ("FROM a\nWORKDIR /app\nCOPY data.txt /etc/data.txt\n", "", "outside its WORKDIR"),
        ("FROM a\nWORKDIR /app\nADD https://example.com/x.tgz /app/\n", "", "URL or an archive"),
        ("FROM a\nWORKDIR /app\n", "curl -LsSf https://astral.sh/uv/install.sh | sh\n", "downl"),
        ("FROM a\nWORKDIR /app\n", "uvx pytest /tests/test_outputs.py\n", "installs"),
        ("FROM a\nWORKDIR /app\nCOPY 'data.txt /app/\n", "", "cannot be read"),
    ],
)
def test_what_needs_a_container_engine_is_said(
    tmp_path: Path, dockerfile: str, test: str, reason: str
) -> None:
    folder = _task(tmp_path / "s", "t", dockerfile, "Do it.\n", "#!/bin/bash\n" + test)
    (folder / "environment" / "data.txt").write_text("x")
    (tmp_path / "s" / "ok").mkdir()  # a folder that is not a task is not one
    notes: list[str] = []
    with pytest.raises(SuiteError):
        load_suite(tmp_path / "s", staging=tmp_path / "staging", note=notes.append)
    assert len(notes) == 1 and reason in notes[0], notes


def test_a_dockerfile_copying_from_outside_its_environment_is_refused(tmp_path: Path) -> None:
    _task(tmp_path / "s", "t", "FROM a\nWORKDIR /app\nCOPY ../../x /app/x\n", "Do.\n", "")
    with pytest.raises(SuiteError, match="outside environment/"):
        load_suite(tmp_path / "s", staging=tmp_path / "staging")


def test_a_broken_task_toml_is_bad_input(tmp_path: Path) -> None:
    folder = _task(tmp_path / "s", "t", "FROM a\n", "Do.\n", "")
    (folder / "task.toml").write_text("[agent\ntimeout_sec = 1\n")
    with pytest.raises(SuiteError, match="not valid TOML"):
        load_suite(tmp_path / "s", staging=tmp_path / "staging")
    (folder / "task.toml").write_text("[agent]\ntimeout_sec = -5\n")
    with pytest.raises(SuiteError, match=r"agent\.timeout_sec"):
        load_suite(tmp_path / "s", staging=tmp_path / "staging")


def test_container_paths_are_rewritten_as_whole_components_only() -> None:
    mapping = {"/tests": "/w/.harbor/tests", "/app": "/w"}
    pattern = path_pattern(list(mapping))
    text = "cat /tests/a; ls /testsuite /app.py x/tests $HOME/tests '/app' /app/b.txt"
    rewritten = pattern.sub(lambda match: mapping[match.group(1)], text)
    assert rewritten == (
        "cat /w/.harbor/tests/a; ls /testsuite /app.py x/tests $HOME/tests '/w' /w/b.txt"
    )


@pytest.mark.parametrize(
    ("line", "reward", "resolved", "error"),
    [
        ('HARBOR_REWARD {"rewards": {"reward": 1}}', 1.0, True, None),
        ('HARBOR_REWARD {"rewards": {"reward": 0.5}}', 0.5, False, None),
        ('HARBOR_REWARD {"rewards": {"accuracy": 1.0}}', 1.0, True, None),
        ('HARBOR_REWARD {"rewards": {"a": 1, "b": 0}}', None, False, "several rewards"),
        ('HARBOR_REWARD {"error": "reward.txt is empty"}', None, False, "is empty"),
        ("tests ran, then the run was cut", None, False, "printed no reward"),
    ],
)
def test_the_reward_decides(
    line: str, reward: float | None, resolved: bool, error: str | None
) -> None:
    spec = GradingSpec(kind="harbor", test_cmd="true")
    # a forged line printed by the code under test earlier does not count: the last one does
    output = 'HARBOR_REWARD {"rewards": {"reward": 1}}\nsome output\n' + line
    if "HARBOR" not in line:
        output = "some output\n" + line
    grade = judge(spec, output, 0, False, None)
    assert (grade.reward, grade.resolved) == (reward, resolved)
    assert harbor_reward(output)[0] == reward
    if error:
        assert grade.error is not None and error in grade.error
    timed_out = judge(spec, output, None, True, None)
    assert timed_out.resolved is False and "ran past" in (timed_out.error or "")


def test_what_the_agent_planted_beside_the_tests_is_gone_before_they_run(tmp_path: Path) -> None:
    suite = harbor_suite(tmp_path / "tasks")
    (suite / "shout" / "tests" / "test.sh").write_text(
        "#!/bin/bash\n"
        '[ "$(ls -A /tests | tr "\\n" " ")" = "expected.txt test.sh " ] || exit 0\n'
        "echo 0.25 > /logs/verifier/reward.txt\n"
    )
    [task] = load_suite(suite / "shout", staging=tmp_path / "staging")
    assert task.grading is not None and task.grading.hidden_tests_dir is not None
    workspace = tmp_path / "ws"
    shutil.copytree(task.workspace, workspace)
    planted = workspace / ".harbor"
    (planted / "tests").mkdir(parents=True)
    (planted / "tests" / "conftest.py").write_text("# turns failures into passes\n")
    (planted / "logs" / "verifier").mkdir(parents=True)
    (planted / "logs" / "verifier" / "reward.json").write_text('{"reward": 1}')
    copy_hidden_tests(Path(task.grading.hidden_tests_dir), workspace)
    command = grading.GRADING_ENVIRONMENT + grading.test_command(task.grading)
    done = subprocess.run(
        ["/bin/sh", "-c", command], cwd=workspace, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert harbor_reward(done.stdout) == (0.25, None), done.stdout
    assert not (planted / "tests" / "conftest.py").exists()


def test_the_verifier_env_is_set_for_the_tests_and_a_host_variable_is_not_read(
    tmp_path: Path,
) -> None:
    suite = harbor_suite(tmp_path / "tasks")
    toml = suite / "shout" / "task.toml"
    toml.write_text(toml.read_text() + '\n[verifier.env]\nGREETING = "it\'s me"\n')
    [task] = load_suite(suite / "shout", staging=tmp_path / "staging")
    assert task.grading is not None
    assert task.grading.test_cmd.startswith("export GREETING='it'\"'\"'s me'; ")
    toml.write_text(toml.read_text().replace('"it\'s me"', '"${OPENAI_API_KEY}"'))
    notes: list[str] = []
    with pytest.raises(SuiteError):
        load_suite(suite / "shout", staging=tmp_path / "staging", note=notes.append)
    assert "[verifier] env reads the host's variables (GREETING)" in notes[0]


class Knocker:
    """Tries to reach a port on 127.0.0.1 from the task's sandbox, then finishes."""

    def __init__(self, port: int) -> None:
        self.port = port

    def __call__(self, request: RecordedRequest) -> ScriptItem:
        messages = request.json.get("messages", [])
        if not any(m.get("role") == "tool" for m in messages):
            knock = (
                "python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", "
                f"{self.port}), timeout=5); print(\"REACHED\")' || echo UNREACHABLE"
            )
            return reply(tool_calls=[("run_command", {"command": knock})], output_tokens=40)
        return reply(tool_calls=[("finish", {"summary": "done"})], output_tokens=20)


@needs_bwrap
@pytest.mark.parametrize(
    ("network", "reached"),
    [
        ("", True),  # Harbor's default is public: the user's allow_network stands
        ('[agent]\nnetwork_mode = "no-network"\n', False),
        ('[environment]\nnetwork_mode = "allowlist"\nallowed_hosts = ["pypi.org"]\n', False),
        ("[environment]\nallow_internet = false\n", False),
    ],
)
def test_a_task_that_is_offline_gets_no_network_even_when_the_user_allows_it(
    tmp_path: Path, fake_openai: FakeOpenAIServer, network: str, reached: bool
) -> None:
    import socket

    folder = _task(
        tmp_path / "tasks",
        "knock",
        "FROM ubuntu:24.04\nWORKDIR /app\n",
        "Check the service.\n",
        "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n",
    )
    toml = (folder / "task.toml").read_text()
    (folder / "task.toml").write_text(_merged_toml(toml, network))
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        fake_openai.default = Knocker(listener.getsockname()[1])
        env = clean_env(
            OPENAI_API_KEY="sk-test-harbor",
            OPENAI_BASE_URL=fake_openai.base_url,
            JOURNEYMAN_ALLOW_NETWORK="true",  # the user allows it for every run
        )
        done = journeyman(
            "eval", str(folder), "--out", str(tmp_path / "out"),
            "--session-dir", str(tmp_path / "sessions"), "--model", "gpt-4.1-mini",
            "--price-per-mtok", "0,1000", "--no-verify", "--sandbox", "bubblewrap",
            env=env,
        )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    said = [m["content"] for m in fake_openai.requests[-1].json["messages"] if m["role"] == "tool"]
    assert ("REACHED" in said[0]) is reached and ("UNREACHABLE" in said[0]) is not reached, said


def _merged_toml(toml: str, network: str) -> str:
    """`toml` with the tables of `network` merged in (a table it already has gets the keys)."""
    for table in ("[agent]", "[environment]"):
        if network.startswith(table):
            return toml.replace(f"{table}\n", network, 1)
    return toml
