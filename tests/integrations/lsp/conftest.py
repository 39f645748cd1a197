"""A small Python project for the language servers, and managers pinned to one server."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from journeyman.integrations.lsp import BUILTIN_SERVERS, LspConfig, LspManager, ServerConfig
from journeyman.integrations.lsp.servers import find_executable

FAKE_SERVER = Path(__file__).parents[2] / "fakes" / "lsp_server.py"

SHAPES = textwrap.dedent(
    '''\
    """Shapes for the fixture project."""


    def area(width: int, height: int) -> int:
        """Area of a rectangle."""
        return width * height


    class Square:
        def __init__(self, side: int) -> None:
            self.side = side

        def size(self) -> int:
            return area(self.side, self.side)
    '''
)
MAIN = textwrap.dedent(
    """\
    from pkg.shapes import Square, area


    def total() -> int:
        return area(2, 3) + Square(4).size()
    """
)

needs_pylsp = pytest.mark.skipif(
    find_executable("pylsp") is None,
    reason="python-lsp-server (pylsp) is not installed; `pip install -e .[dev]` brings it",
)


def make_project(root: Path) -> Path:
    """pyproject.toml, pkg/__init__.py, pkg/shapes.py (area, Square) and pkg/main.py."""
    (root / "pkg").mkdir(parents=True)
    (root / "pyproject.toml").write_text('[project]\nname = "fixture"\nversion = "0"\n')
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "shapes.py").write_text(SHAPES)
    (root / "pkg" / "main.py").write_text(MAIN)
    return root


def builtin(name: str) -> ServerConfig:
    return next(server for server in BUILTIN_SERVERS if server.name == name)


def only(server: ServerConfig, root: Path, **config: object) -> LspManager:
    """A manager that knows just `server` (no built-ins), with quick diagnostics waits."""
    settings: dict[str, object] = {"builtin_servers": False, "diagnostics_wait": 5.0}
    settings.update(config)
    return LspManager(root, LspConfig.model_validate(settings), servers=[server])


def fake(mode: str, name: str = "fake") -> ServerConfig:
    """The misbehaving server of tests/fakes/lsp_server.py, covering .py files."""
    return ServerConfig(
        name=name,
        language="python",
        command=[sys.executable, str(FAKE_SERVER), mode],
        extensions=[".py"],
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path / "proj")


@pytest.fixture(autouse=True)
def user_config_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty user config directory, so the developer's own lsp.toml plays no part."""
    directory = tmp_path / "user-config"
    directory.mkdir()
    monkeypatch.setenv("JOURNEYMAN_CONFIG_DIR", str(directory))
    monkeypatch.delenv("JOURNEYMAN_LSP", raising=False)
    return directory
