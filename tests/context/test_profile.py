"""Project profile detection: real source distributions and generated fixtures per ecosystem."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from journeyman.context.profile import (
    ProfileConfig,
    detect_profile,
    make_targets,
    runnable_test,
)
from tests.support.checks import offline_which, run_check
from tests.support.sdists import (
    MAKEFILE_DRIVEN,
    PYTEST_BASED,
    SRC_LAYOUT,
    UNITTEST_IN_PACKAGE,
    download_sdist,
    sdist_cache_dir,
    write,
)


@pytest.fixture(scope="module")
def sdist_cache(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return sdist_cache_dir(request, tmp_path_factory)


def test_pytest_based_sdist(sdist_cache: Path) -> None:
    profile = detect_profile(download_sdist(sdist_cache, PYTEST_BASED))
    assert profile.language == "python"
    assert profile.package_manager == "uv"  # uv.lock and [tool.uv]
    assert profile.test_frameworks == ("pytest",)
    assert profile.test_command == "uv run pytest"
    assert [c.command for c in profile.test_commands] == ["uv run pytest", "tox"]
    assert {"pyproject.toml", "tox.ini", "uv.lock"} <= set(profile.markers)
    assert profile.source_files["python"] > 10


def test_makefile_driven_sdist(sdist_cache: Path) -> None:
    profile = detect_profile(download_sdist(sdist_cache, MAKEFILE_DRIVEN))
    assert profile.language == "python"
    assert profile.package_manager == "pip"
    first = profile.test_commands[0]
    assert (first.command, first.runner, first.language) == ("make test", "make", None)
    assert first.source == "Makefile target 'test'"
    assert "Makefile" in profile.markers
    assert "make test" in profile.to_text()


def test_src_layout_sdist_with_uv(sdist_cache: Path) -> None:
    profile = detect_profile(download_sdist(sdist_cache, SRC_LAYOUT))
    assert (profile.package_manager, profile.test_frameworks) == ("uv", ("pytest",))
    assert [c.command for c in profile.test_commands] == ["uv run pytest", "tox"]
    assert profile.test_commands[0].source == "pyproject.toml [tool.pytest]; uv project"
    # without uv the plain runner takes over, as `python -m pytest` (the root on sys.path),
    # with src/ on PYTHONPATH since nothing installed the project: the tree's attrs is tested,
    # not one installed elsewhere
    test = runnable_test(profile, which=offline_which)
    assert test is not None and test.runner == "pytest"
    assert test.command == "PYTHONPATH=src python -m pytest"


def test_unittest_suites_inside_the_package_sdist(sdist_cache: Path) -> None:
    root = download_sdist(sdist_cache, UNITTEST_IN_PACKAGE)
    profile = detect_profile(root)
    assert profile.test_frameworks == ("unittest",)
    test = runnable_test(profile, which=offline_which)
    assert test is not None
    assert (test.command, test.runner) == ("python -m unittest discover", "unittest")
    assert test.source == "unittest TestCase suites, no pytest-style tests"
    ran = run_check(root, test.command)  # the real suite, pure Python: well under a second
    assert ran.exit_code == 0, ran.output[-2000:]
    assert ran.ran > 100 and ran.failed == 0


# --------------------------------------------------------------------------------------------
# Python variants


def test_poetry_project_with_pytest_in_dev_group(tmp_path: Path) -> None:
    write(tmp_path, {
        "pyproject.toml": '[tool.poetry]\nname = "x"\n\n'
        '[tool.poetry.group.dev.dependencies]\npytest = "^8"\n',
        "poetry.lock": "",
        "x/__init__.py": "",
    })  # fmt: skip
    profile = detect_profile(tmp_path)
    assert profile.package_manager == "poetry"
    assert profile.test_command == "poetry run pytest"
    assert "dev dependencies" in profile.test_commands[0].source


def test_hatch_env_script_named_test(tmp_path: Path) -> None:
    write(tmp_path, {
        "pyproject.toml": '[project]\nname = "x"\n[tool.hatch.envs.default.scripts]\n'
        'test = "pytest {args}"\n',
        "src/x/__init__.py": "",
    })  # fmt: skip
    profile = detect_profile(tmp_path)
    assert profile.package_manager == "hatch"
    assert profile.test_command == "hatch run test"


def test_hatch_without_a_script_uses_hatch_test(tmp_path: Path) -> None:
    write(tmp_path, {
        "hatch.toml": "[envs.default]\ndependencies = ['pytest']\n",
        "pyproject.toml": '[project]\nname = "x"\n',
    })  # fmt: skip
    assert detect_profile(tmp_path).test_command == "hatch test"


def test_unittest_only_project(tmp_path: Path) -> None:
    write(tmp_path, {
        "setup.py": "from setuptools import setup\nsetup()\n",
        "pkg/__init__.py": "",
        "tests/test_pkg.py": "import unittest\n",
    })  # fmt: skip
    profile = detect_profile(tmp_path)
    assert profile.test_frameworks == ("unittest",)
    # tests/ is not a package: `-t .` would fail with "Start directory is not importable"
    assert profile.test_command == "python -m unittest discover -s tests"
    (tmp_path / "tests" / "__init__.py").write_text("")
    assert detect_profile(tmp_path).test_command == "python -m unittest discover -s tests -t ."


def test_pytest_signals_from_config_files(tmp_path: Path) -> None:
    write(tmp_path, {"setup.cfg": "[tool:pytest]\naddopts = -q\n", "Pipfile": ""})
    profile = detect_profile(tmp_path)
    assert profile.package_manager == "pipenv"
    assert profile.test_command == "pipenv run pytest"
    assert profile.test_commands[0].source.startswith("setup.cfg [tool:pytest]")


def test_pdm_project_with_tox_and_nox(tmp_path: Path) -> None:
    write(tmp_path, {
        "pyproject.toml": "[tool.pdm]\n[tool.pytest.ini_options]\naddopts = '-q'\n",
        "tox.ini": "[tox]\nenvlist = py311\n[testenv]\ncommands = pytest\n",
        "noxfile.py": "import nox\n",
    })  # fmt: skip
    commands = [c.command for c in detect_profile(tmp_path).test_commands]
    assert commands == ["pdm run pytest", "tox", "nox"]


def test_broken_config_files_are_ignored(tmp_path: Path) -> None:
    write(tmp_path, {"pyproject.toml": "this is [ not toml", "tox.ini": "no section header\n"})
    profile = detect_profile(tmp_path)
    assert profile.language == "python"
    assert profile.package_manager == "pip"


# --------------------------------------------------------------------------------------------
# Makefile


def test_make_targets_parsing() -> None:
    text = (
        ".PHONY: test lint\n"
        "VAR := 1\n"
        "OTHER = x:y\n"
        "build:\n\tcc -o x x.c\n"
        "test: build  ## run the tests\n\t./x\n"
        "lint check:: \n\ttrue\n"
        "%.o: %.c\n\tcc $<\n"
    )
    assert make_targets(text) == ["build", "test", "lint", "check"]


def test_makefile_check_target_when_no_test_target(tmp_path: Path) -> None:
    write(tmp_path, {"Makefile": "all:\n\ttrue\ncheck:\n\tgo vet\n", "go.mod": "module x\n"})
    commands = [c.command for c in detect_profile(tmp_path).test_commands]
    assert commands == ["make check", "go test ./..."]


def test_makefile_without_test_target_adds_nothing(tmp_path: Path) -> None:
    write(tmp_path, {"Makefile": "all:\n\ttrue\n"})
    profile = detect_profile(tmp_path)
    assert profile.test_commands == ()
    assert profile.to_text() == "Project: no known language or test command detected."


# --------------------------------------------------------------------------------------------
# Node


def _package(**fields: object) -> str:
    return json.dumps({"name": "x", "version": "1.0.0", **fields})


def test_npm_test_script_and_jest(tmp_path: Path) -> None:
    write(tmp_path, {
        "package.json": _package(scripts={"test": "jest --ci"}, devDependencies={"jest": "^29"}),
        "package-lock.json": "{}",
        "index.js": "module.exports = 1\n",
    })  # fmt: skip
    profile = detect_profile(tmp_path)
    assert profile.languages == ("javascript",)
    assert profile.package_manager == "npm"
    assert profile.test_frameworks == ("jest",)
    assert profile.test_command == "npm test"
    assert profile.test_commands[0].source == "package.json scripts.test"


def test_pnpm_typescript_vitest(tmp_path: Path) -> None:
    write(tmp_path, {
        "package.json": _package(scripts={"test": "vitest run"}),
        "pnpm-lock.yaml": "lockfileVersion: '9.0'\n",
        "tsconfig.json": "{}",
        "src/a.ts": "export const a = 1\n",
    })  # fmt: skip
    profile = detect_profile(tmp_path)
    assert profile.language == "typescript"
    assert profile.package_manager == "pnpm"
    assert profile.test_frameworks == ("vitest",)
    assert profile.test_command == "pnpm test"


def test_package_manager_field_wins_over_lock_files(tmp_path: Path) -> None:
    write(tmp_path, {
        "package.json": _package(packageManager="yarn@4.1.0", scripts={"test": "mocha"}),
        "package-lock.json": "{}",
    })  # fmt: skip
    profile = detect_profile(tmp_path)
    assert profile.package_manager == "yarn"
    assert profile.test_command == "yarn test"
    assert profile.test_frameworks == ("mocha",)


def test_npm_placeholder_script_falls_back_to_the_framework(tmp_path: Path) -> None:
    write(tmp_path, {
        "package.json": _package(
            scripts={"test": 'echo "Error: no test specified" && exit 1'},
            devDependencies={"vitest": "^1"},
        ),
        "bun.lockb": "",
    })  # fmt: skip
    profile = detect_profile(tmp_path)
    assert profile.package_manager == "bun"
    assert profile.test_command == "bunx vitest run"


def test_node_builtin_test_runner(tmp_path: Path) -> None:
    write(tmp_path, {"package.json": _package(scripts={"test": "node --test"})})
    profile = detect_profile(tmp_path)
    assert profile.test_frameworks == ("node:test",)
    assert profile.test_command == "npm test"


# --------------------------------------------------------------------------------------------
# Go, Rust, JVM


def test_go_module(tmp_path: Path) -> None:
    write(tmp_path, {"go.mod": "module example.com/x\n\ngo 1.22\n", "main.go": "package main\n"})
    profile = detect_profile(tmp_path)
    assert (profile.language, profile.package_manager) == ("go", "go")
    assert profile.test_command == "go test ./..."


def test_rust_crate_and_workspace(tmp_path: Path) -> None:
    crate = write(tmp_path / "crate", {"Cargo.toml": '[package]\nname = "x"\n', "src/lib.rs": ""})
    assert detect_profile(crate).test_command == "cargo test"
    ws = write(tmp_path / "ws", {"Cargo.toml": '[workspace]\nmembers = ["a"]\n'})
    profile = detect_profile(ws)
    assert (profile.language, profile.package_manager) == ("rust", "cargo")
    assert profile.test_command == "cargo test --workspace"


def test_maven_with_wrapper(tmp_path: Path) -> None:
    write(tmp_path, {
        "pom.xml": "<project/>",
        "mvnw": "#!/bin/sh\n",
        "src/main/java/App.java": "class App {}\n",
    })  # fmt: skip
    profile = detect_profile(tmp_path)
    assert (profile.language, profile.package_manager) == ("java", "maven")
    assert profile.test_frameworks == ("junit",)
    assert profile.test_command == "./mvnw test"


def test_gradle_kotlin_without_wrapper(tmp_path: Path) -> None:
    write(tmp_path, {
        "settings.gradle.kts": 'rootProject.name = "x"\n',
        "build.gradle.kts": "plugins { kotlin(\"jvm\") }\n",
        "src/main/kotlin/App.kt": "fun main() {}\n",
    })  # fmt: skip
    profile = detect_profile(tmp_path)
    assert (profile.language, profile.package_manager) == ("kotlin", "gradle")
    assert profile.test_command == "gradle test"


# --------------------------------------------------------------------------------------------
# Mixed projects and the scan


def test_languages_ordered_by_source_files(tmp_path: Path) -> None:
    files = {f"app/m{i}.py": "" for i in range(5)}
    files |= {"pyproject.toml": "[tool.pytest.ini_options]\n", "uv.lock": ""}
    files |= {"web/package.json": "{}", "web/a.js": "", "package.json": _package(
        scripts={"test": "jest"})}  # fmt: skip
    write(tmp_path, files)
    profile = detect_profile(tmp_path)
    assert profile.languages == ("python", "javascript")
    assert profile.package_managers == ("uv", "npm")
    assert [c.command for c in profile.test_commands] == ["uv run pytest", "npm test"]


def test_scan_skips_gitignored_and_dependency_dirs(tmp_path: Path) -> None:
    files = {".gitignore": "generated/\n", "main.go": "", "go.mod": "module x\n"}
    files |= {f"generated/g{i}.py": "" for i in range(5)}
    files |= {f"node_modules/p/i{i}.js": "" for i in range(5)}
    write(tmp_path, files)
    profile = detect_profile(tmp_path)
    assert profile.languages == ("go",)
    assert dict(profile.source_files) == {"go": 1}


def test_markers_only_when_scan_disabled(tmp_path: Path) -> None:
    write(tmp_path, {"a.py": "", "b.py": "", "go.mod": "module x\n"})
    profile = detect_profile(tmp_path, config=ProfileConfig(scan_files=0))
    assert profile.languages == ("go",)


def test_not_a_directory(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("")
    with pytest.raises(NotADirectoryError, match="not a directory"):
        detect_profile(tmp_path / "f")
