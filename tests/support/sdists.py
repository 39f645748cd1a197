"""Real projects for the profile and index tests: source distributions downloaded once into
pytest's cache, and small trees written from a dict."""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

PYTEST_BASED = "pluggy==1.7.0"
"""A pytest-based library managed with uv, with a tox.ini."""
MAKEFILE_DRIVEN = "pyyaml==6.0.3"
"""A library whose Makefile has a `test` target."""
SRC_LAYOUT = "attrs==25.4.0"
"""A src-layout library managed with uv: a tests package with conftest.py, pytest settings in
pyproject.toml, a tox.ini."""
UNITTEST_IN_PACKAGE = "simplejson==3.20.1"
"""unittest TestCase suites inside the package (simplejson/tests), no pytest configuration."""


def download_sdist(cache: Path, spec: str) -> Path:
    """Download the source distribution `spec` (NAME==VERSION) once and unpack it; its folder.

    Uses `pip download --no-binary NAME --no-deps` into `cache` (kept between runs); skips the
    calling test when the package index cannot be reached. Only NAME is forced to its source
    archive: with `:all:` pip would also compile the build backend's own dependencies (Cython
    for pyyaml) from source just to read the metadata, which takes minutes.
    """
    name, version = spec.split("==")
    done = cache / f"{name}-{version}.unpacked"
    if done.is_file():
        return cache / done.read_text().strip()
    downloads = cache / "downloads"
    downloads.mkdir(parents=True, exist_ok=True)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-binary", name, "--no-deps",
             "--disable-pip-version-check", "--quiet", spec, "-d", str(downloads)],
            capture_output=True,
            text=True,
            timeout=180,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.skip(f"pip download {spec} timed out: the package index is unreachable")
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        pytest.skip(f"pip download {spec} failed (package index unreachable?): {tail}")
    archives = [
        p for p in downloads.iterdir()
        if p.name.lower().replace("_", "-").startswith(f"{name.lower()}-{version}")
    ]  # fmt: skip
    assert archives, f"pip download {spec} saved nothing recognisable in {downloads}"
    with tarfile.open(archives[0]) as archive:
        top = archive.getnames()[0].split("/")[0]
        archive.extractall(cache, filter="data")
    done.write_text(top)
    return cache / top


def sdist_cache_dir(request: pytest.FixtureRequest, factory: pytest.TempPathFactory) -> Path:
    """pytest's cache folder (kept between runs), or a temporary one without the cache plugin."""
    cache = getattr(request.config, "cache", None)
    if cache is None:
        return factory.mktemp("sdists")
    return Path(cache.mkdir("journeyman-sdists"))


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


# --------------------------------------------------------------------------------------------
# Real projects
