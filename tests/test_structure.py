"""The shape of the source: no import cycles between modules (lazy and type-only imports count),
no function longer than a screen and a half, and one launcher that builds every agent."""

from __future__ import annotations

import ast
from pathlib import Path

import journeyman

PACKAGE = Path(journeyman.__file__).parent
MAX_FUNCTION_LINES = 80




def _is_bundled_task(path: Path, package: Path) -> bool:
    """A file of a task folder bundled with a suite (batch/suites/<suite>/...): task data, which
    the model under evaluation works on, not journeyman's own code."""
    parts = path.relative_to(package).parts
    return parts[:2] == ("batch", "suites") and len(parts) > 3


def source_modules(package: Path = PACKAGE) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package (a package is its __init__)."""
    modules: dict[str, Path] = {}
    for path in sorted(package.rglob("*.py")):
        if _is_bundled_task(path, package):
            continue
        parts = path.relative_to(package.parent).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def _nearest_module(target: str, modules: dict[str, Path]) -> str | None:
    while target and target not in modules:
        target = target.rpartition(".")[0]
    return target or None


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - node.level + 1]
    return ".".join([*base, *([node.module] if node.module else [])])


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules `module` imports, wherever the import stands (in a function, under
    TYPE_CHECKING). `from pkg import name` goes to the submodule `pkg.name` when there is one,
    otherwise to `pkg` itself (its __init__)."""
    targets: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, module, path.name == "__init__.py")
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                targets.append(submodule if submodule in modules else base)
    found = {_nearest_module(target, modules) for target in targets}
    return {other for other in found if other is not None and other != module}


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return groups


def import_graph() -> dict[str, set[str]]:
    modules = source_modules()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def long_functions(max_lines: int = MAX_FUNCTION_LINES) -> list[tuple[str, str, int]]:
    """(file under the package, function name, lines) of every function over `max_lines`."""
    found = []
    for path in source_modules().values():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                assert node.end_lineno is not None
                lines = node.end_lineno - node.lineno + 1
                if lines > max_lines:
                    found.append((path.relative_to(PACKAGE).as_posix(), node.name, lines))
    return found


def test_no_import_cycles() -> None:
    groups = import_cycles(import_graph())
    assert groups == [], "modules that import each other:\n" + "\n".join(map(str, groups))


def test_no_long_functions() -> None:
    offenders = [f"{file} {name}: {lines} lines" for file, name, lines in long_functions()]
    assert offenders == [], f"functions over {MAX_FUNCTION_LINES} lines:\n" + "\n".join(offenders)


def test_the_checks_see_what_they_look_for(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("from pkg.sub import thing\n")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "thing.py").write_text(
        "def later():\n    from pkg import helper\nif TYPE_CHECKING:\n    from .. import sub\n"
    )
    (package / "helper.py").write_text("from .sub import thing\nimport pkg.sub\n")
    modules = source_modules(package)
    graph = {name: imports_of(name, path, modules) for name, path in modules.items()}
    assert graph == {
        "pkg": {"pkg.sub.thing"},
        "pkg.sub": set(),
        "pkg.sub.thing": {"pkg.helper", "pkg.sub"},
        "pkg.helper": {"pkg.sub.thing", "pkg.sub"},
    }
    assert import_cycles(graph) == [["pkg.helper", "pkg.sub.thing"]]
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


ONE_PLACE = {
    "Agent": {"loop/launch.py", "loop/agent.py"},
    "create_provider": {"loop/launch.py", "loop/agent.py"},
    "load_config": {"loop/launch.py"},
}
"""Who may call what: every surface gets its agent, provider and settings from `loop.launch`
(the agent itself builds a provider from a spec string, for the library)."""


def callers(name: str) -> dict[str, int]:
    """Source file (relative to the package) -> number of calls of `name` in it."""
    found: dict[str, int] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if _is_bundled_task(path, PACKAGE):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                func = node.func
                called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
                if called == name:
                    file = path.relative_to(PACKAGE).as_posix()
                    found[file] = found.get(file, 0) + 1
    return found


def test_one_launcher_builds_every_agent() -> None:
    for name, allowed in ONE_PLACE.items():
        elsewhere = {file: n for file, n in callers(name).items() if file not in allowed}
        assert elsewhere == {}, f"{name} is called outside {sorted(allowed)}: {elsewhere}"
    assert sum(callers("Agent").values()) <= 3
    assert sum(callers("create_provider").values()) <= 2
    assert sum(callers("load_config").values()) == 1
