"""The investigations app's modules import each other without a loop; an import hidden inside a
function says why on the line before it, and a `type: ignore` on its own line."""

from __future__ import annotations

import ast
from pathlib import Path

APP = Path(__file__).resolve().parents[2] / "investigations"


def modules() -> dict[str, ast.Module]:
    found = {}
    for path in APP.rglob("*.py"):
        if "migrations" in path.parts:
            continue
        parts = path.relative_to(APP.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = ast.parse(path.read_text(), str(path))
    return found


def imported(tree: ast.Module, known: dict[str, ast.Module]) -> set[str]:
    """The app's modules this one imports (`from pkg import module` names the module)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                names.add(full if full in known else node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return {n for n in names if n in known}


def test_no_module_of_the_app_imports_itself_back() -> None:
    known = modules()
    graph = {name: imported(tree, known) - {name} for name, tree in known.items()}
    loops = []
    state: dict[str, int] = {}  # 1: being walked, 2: done

    def walk(name: str, path: list[str]) -> None:
        state[name] = 1
        for other in sorted(graph[name]):
            if state.get(other) == 1:
                loops.append(" -> ".join([*path[path.index(other) :], other]))
            elif other not in state:
                walk(other, [*path, other])
        state[name] = 2

    for name in sorted(graph):
        if name not in state:
            walk(name, [name])
    assert "investigations.models" in graph, "the walk found the app's modules"
    assert not loops, "import loops: " + "; ".join(loops)


def test_an_import_inside_a_function_says_why() -> None:
    silent = []
    for name, tree in modules().items():
        path = APP.parent / (name.replace(".", "/") + ".py")
        lines = (path if path.exists() else path.with_suffix("") / "__init__.py").read_text().splitlines()
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for inner in ast.walk(node):
                if isinstance(inner, ast.Import | ast.ImportFrom):
                    above = lines[inner.lineno - 2].strip()
                    if not (
                        above.startswith("#") or above.startswith("from ") or above.startswith("import ")
                    ):
                        silent.append(f"{name}:{inner.lineno}")
    assert not silent, "imports inside a function without a comment above them: " + ", ".join(silent)


def test_a_type_ignore_says_why_on_its_line() -> None:
    bare = []
    for path in APP.rglob("*.py"):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            _, found, after = line.partition("# type: ignore")
            if found and "#" not in after:
                bare.append(f"{path.relative_to(APP.parent)}:{number}")
    assert not bare, "`# type: ignore` without a reason after it: " + ", ".join(bare)
