"""Grading on real pytest runs: hidden tests installed after the agent, FAIL/PASS_TO_PASS."""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest

from journeyman.batch.grading import (
    GradingError,
    GradingSpec,
    check_patch_paths,
    copy_hidden_tests,
    grade,
    parse_pytest_results,
)

PYTEST = "{python} -m pytest -q tests"


def _project(root: Path, *, fixed: bool) -> Path:
    (root / "tests").mkdir(parents=True)
    body = "return a + b" if fixed else "return a - b"
    (root / "calc.py").write_text(f"def add(a, b):\n    {body}\n\n\ndef neg(a):\n    return -a\n")
    (root / "tests" / "test_neg.py").write_text(
        "from calc import neg\n\n\ndef test_neg():\n    assert neg(2) == -2\n"
    )
    return root


def _hidden(root: Path) -> Path:
    (root / "tests").mkdir(parents=True, exist_ok=True)
    (root / "tests" / "test_add.py").write_text(
        textwrap.dedent(
            """
            import pytest
            from calc import add


            def test_add():
                assert add(2, 3) == 5


            @pytest.mark.parametrize("a, b", [(1, 1), (0, 4)])
            def test_add_many(a, b):
                assert add(a, b) == a + b
            """
        )
    )
    return root


def _spec(hidden: Path) -> GradingSpec:
    return GradingSpec(
        kind="micro",
        test_cmd=PYTEST,
        hidden_tests_dir=str(hidden),
        fail_to_pass=[
            "tests/test_add.py::test_add",
            "tests/test_add.py::test_add_many[1-1]",
            "tests/test_add.py::test_add_many[0-4]",
        ],
        pass_to_pass=["tests/test_neg.py::test_neg"],
        timeout_s=60,
    )


def test_fixed_workspace_is_resolved(tmp_path: Path) -> None:
    workspace = _project(tmp_path / "ws", fixed=True)
    result = grade(_spec(_hidden(tmp_path / "hidden")), workspace)
    assert result.resolved, result.output_tail
    assert all(result.fail_to_pass.values()) and result.pass_to_pass == {
        "tests/test_neg.py::test_neg": True
    }
    assert result.exit_code == 0


def test_unfixed_workspace_fails_its_fail_to_pass(tmp_path: Path) -> None:
    workspace = _project(tmp_path / "ws", fixed=False)
    result = grade(_spec(_hidden(tmp_path / "hidden")), workspace)
    assert not result.resolved
    assert result.fail_to_pass["tests/test_add.py::test_add"] is False
    assert result.fail_to_pass["tests/test_add.py::test_add_many[0-4]"] is False
    # add(0, 4) with a - b gives -4: still wrong; add(1, 1) gives 0: wrong.
    assert result.pass_to_pass["tests/test_neg.py::test_neg"] is True


def test_broken_pass_to_pass_is_not_resolved(tmp_path: Path) -> None:
    workspace = _project(tmp_path / "ws", fixed=True)
    (workspace / "calc.py").write_text(
        "def add(a, b):\n    return a + b\n\n\ndef neg(a):\n    return a\n"
    )
    result = grade(_spec(_hidden(tmp_path / "hidden")), workspace)
    assert not result.resolved
    assert all(result.fail_to_pass.values())
    assert result.pass_to_pass["tests/test_neg.py::test_neg"] is False


def test_hidden_tests_replace_what_the_agent_wrote(tmp_path: Path) -> None:
    workspace = _project(tmp_path / "ws", fixed=False)
    # An agent that "fixes" the task by writing a trivially passing test of the same name.
    (workspace / "tests" / "test_add.py").write_text("def test_add():\n    pass\n")
    result = grade(_spec(_hidden(tmp_path / "hidden")), workspace)
    assert not result.resolved
    assert result.fail_to_pass["tests/test_add.py::test_add"] is False


def test_missing_test_counts_as_failed(tmp_path: Path) -> None:
    workspace = _project(tmp_path / "ws", fixed=True)
    spec = _spec(_hidden(tmp_path / "hidden"))
    spec.fail_to_pass.append("tests/test_add.py::test_that_does_not_exist")
    result = grade(spec, workspace)
    assert not result.resolved
    assert result.fail_to_pass["tests/test_add.py::test_that_does_not_exist"] is False


def test_timeout_kills_the_process_group(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    marker = tmp_path / "child-survived"
    command = f"(sleep 1; touch {marker}) & sleep 30"
    result = grade(GradingSpec(test_cmd=command, timeout_s=0.3), workspace)
    assert result.timed_out and not result.resolved
    assert result.error is not None and "stopped" in result.error
    subprocess.run(["sleep", "1.5"], check=True)
    assert not marker.exists(), "a process of the timed-out test command outlived it"


def test_no_test_ids_means_every_reported_test_must_pass(tmp_path: Path) -> None:
    workspace = _project(tmp_path / "ws", fixed=False)
    _hidden(workspace)
    spec = GradingSpec(kind="exercise", test_cmd=PYTEST, timeout_s=60)
    assert not grade(spec, workspace).resolved
    (workspace / "calc.py").write_text(
        "def add(a, b):\n    return a + b\n\n\ndef neg(a):\n    return -a\n"
    )
    fixed = grade(spec, workspace)
    assert fixed.resolved and len(fixed.tests_seen) == 4


def test_no_tests_at_all_is_not_resolved(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    assert not grade(GradingSpec(kind="exercise", test_cmd="true"), workspace).resolved


def test_test_patch_is_applied_before_the_run(tmp_path: Path) -> None:
    workspace = _project(tmp_path / "ws", fixed=True)
    patch = textwrap.dedent(
        """\
        diff --git a/tests/test_extra.py b/tests/test_extra.py
        new file mode 100644
        --- /dev/null
        +++ b/tests/test_extra.py
        @@ -0,0 +1,4 @@
        +from calc import add
        +
        +def test_extra():
        +    assert add(1, 2) == 3
        """
    )
    spec = GradingSpec(
        kind="swebench",
        test_cmd=PYTEST,
        test_patch=patch,
        fail_to_pass=["tests/test_extra.py::test_extra"],
        pass_to_pass=["tests/test_neg.py::test_neg"],
        timeout_s=60,
    )
    result = grade(spec, workspace)
    assert result.resolved, result.output_tail


def test_test_patch_wins_over_an_agent_file_of_the_same_name(tmp_path: Path) -> None:
    workspace = _project(tmp_path / "ws", fixed=False)
    (workspace / "tests" / "test_extra.py").write_text("def test_extra():\n    pass\n")
    patch = (
        "diff --git a/tests/test_extra.py b/tests/test_extra.py\nnew file mode 100644\n"
        "--- /dev/null\n+++ b/tests/test_extra.py\n@@ -0,0 +1,3 @@\n+from calc import add\n"
        "+def test_extra():\n+    assert add(1, 2) == 3\n"
    )
    spec = GradingSpec(
        test_cmd=PYTEST, test_patch=patch, fail_to_pass=["tests/test_extra.py::test_extra"]
    )
    result = grade(spec, workspace)
    assert result.fail_to_pass == {"tests/test_extra.py::test_extra": False}


@pytest.mark.parametrize(
    "path", ["../outside.py", "/etc/passwd", "tests/../../x.py"], ids=["dotdot", "abs", "nested"]
)
def test_patch_paths_outside_the_workspace_are_refused(path: str) -> None:
    patch = f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n-a\n+b\n"
    with pytest.raises(GradingError, match="leaves the workspace"):
        check_patch_paths(patch)


def test_hidden_tests_do_not_follow_a_symlink_the_agent_planted(tmp_path: Path) -> None:
    workspace = _project(tmp_path / "ws", fixed=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (workspace / "tests" / "test_neg.py").unlink()
    (workspace / "tests").rmdir()
    (workspace / "tests").symlink_to(outside)
    with pytest.raises(GradingError, match="outside the workspace"):
        copy_hidden_tests(_hidden(tmp_path / "hidden"), workspace.resolve())
    assert list(outside.iterdir()) == []
    result = grade(_spec(tmp_path / "hidden"), workspace)
    assert not result.resolved and result.error and "not installed" in result.error


def test_parse_rA_summary() -> None:
    output = textwrap.dedent(
        """\
        ==== short test summary info ====
        PASSED tests/test_a.py::test_one
        PASSED tests/test_a.py::TestK::test_two[x - y]
        FAILED tests/test_a.py::test_three - AssertionError: assert 1 == 2
        ERROR tests/test_a.py::test_four - RuntimeError: fixture broke
        ERROR tests/test_b.py - ImportError: no module
        XFAIL tests/test_a.py::test_five - known
        SKIPPED [1] tests/test_a.py:40: not today
        PASSED tests/test_a.py::test_one
        """
    )
    seen = parse_pytest_results(output)
    assert seen == {
        "tests/test_a.py::test_one": True,
        "tests/test_a.py::TestK::test_two[x - y]": True,
        "tests/test_a.py::test_three": False,
        "tests/test_a.py::test_four": False,
        "tests/test_b.py": False,
        "tests/test_a.py::test_five": True,
    }


def test_a_missing_workspace_is_not_resolved_and_says_why(tmp_path: Path) -> None:
    result = grade(GradingSpec(test_cmd="true", fail_to_pass=["t.py::x"]), tmp_path / "gone")
    assert not result.resolved and result.error and "does not exist" in result.error
    assert result.fail_to_pass == {"t.py::x": False}


def test_listed_ids_do_not_keep_every_test_outcome(tmp_path: Path) -> None:
    workspace = _project(tmp_path / "ws", fixed=True)
    result = grade(_spec(_hidden(tmp_path / "hidden")), workspace)
    assert result.resolved and result.tests_seen == {}


def test_a_test_patch_over_files_the_agent_changed_and_committed(tmp_path: Path) -> None:
    workspace = _project(tmp_path / "ws", fixed=True)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], cwd=workspace, check=True)
    subprocess.run([*git, "add", "."], cwd=workspace, check=True)
    subprocess.run([*git, "commit", "-qm", "base"], cwd=workspace, check=True)
    base = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=workspace, capture_output=True, text=True, check=True
    ).stdout.strip()
    # The agent rewrites the visible test (committing it) and writes a file the patch creates.
    (workspace / "tests" / "test_neg.py").write_text("def test_neg():\n    pass\n")
    subprocess.run([*git, "commit", "-qam", "agent"], cwd=workspace, check=True)
    (workspace / "tests" / "test_extra.py").write_text("def test_extra():\n    pass\n")
    patch = (
        "diff --git a/tests/test_neg.py b/tests/test_neg.py\n"
        "--- a/tests/test_neg.py\n+++ b/tests/test_neg.py\n"
        "@@ -3,3 +3,7 @@\n \n def test_neg():\n     assert neg(2) == -2\n+\n+\n"
        "+def test_neg_zero():\n+    assert neg(0) == 0\n"
        "diff --git a/tests/test_extra.py b/tests/test_extra.py\nnew file mode 100644\n"
        "--- /dev/null\n+++ b/tests/test_extra.py\n@@ -0,0 +1,4 @@\n+from calc import add\n"
        "+\n+def test_extra():\n+    assert add(1, 2) == 3\n"
    )
    spec = GradingSpec(
        kind="swebench",
        test_cmd=PYTEST,
        test_patch=patch,
        base_commit=base,
        fail_to_pass=["tests/test_extra.py::test_extra", "tests/test_neg.py::test_neg_zero"],
        pass_to_pass=["tests/test_neg.py::test_neg"],
    )
    result = grade(spec, workspace)
    assert result.resolved, (result.error, result.output_tail)
    assert "assert neg(2) == -2" in (workspace / "tests" / "test_neg.py").read_text()
    assert result.model_patch is not None and "tests/test_neg.py" in result.model_patch
