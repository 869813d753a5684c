"""The house's rules that a reader relies on: no two modules import each other (directly or
through others, imports inside functions included), an import inside a function says why, and a
`type: ignore` says why on its line."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("auditweb", "devtools", "ingest", "investigations")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" not in path.parts:
                found[_module_name(path)] = path
    return found


def _imported(node: ast.AST, module: str, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        if node.level:
            base = module.split(".")
            base = base[: len(base) - node.level + (1 if is_package else 0)]
            prefix = ".".join(base + ([node.module] if node.module else []))
        else:
            prefix = node.module or ""
        # `from pkg import name` imports pkg.name when that is a module, else pkg itself.
        return [f"{prefix}.{alias.name}" for alias in node.names] + [prefix]
    return []


def import_graph() -> dict[str, dict[str, int]]:
    """module -> {module it imports: line of the first such import}."""
    modules = _modules()
    graph: dict[str, dict[str, int]] = {}
    for module, path in modules.items():
        edges: dict[str, int] = {}
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and not node.level and node.module is None:
                continue
            names = _imported(node, module, path.name == "__init__.py")
            # the most precise name that is one of ours (pkg.mod.name -> pkg.mod)
            for name in names:
                while name and name not in modules:
                    name = name.rpartition(".")[0]
                if name and name != module and not module.startswith(name + "."):
                    edges.setdefault(name, node.lineno)
                    break
        graph[module] = edges
    return graph


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(graph.get(child, {}))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_walker_sees_a_loop() -> None:
    graph = {"a": {"b": 3}, "b": {"c": 5}, "c": {"a": 7}, "d": {"a": 1}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b": 1}, "b": {}}) == []


def test_the_walker_reads_imports_inside_functions() -> None:
    graph = import_graph()
    # ingest.tasks imports the pipeline's entry points; the walker must see project imports at all
    assert any(target.startswith("ingest.") for target in graph["ingest.tasks"])
    assert len(graph) > 50


def test_no_import_cycle() -> None:
    graph = import_graph()
    loops = cycles(graph)
    described = []
    for loop in loops:
        members = set(loop)
        ties = [
            f"{a} -> {b} (line {line})" for a in loop for b, line in sorted(graph[a].items()) if b in members
        ]
        described.append("; ".join(ties))
    assert not loops, "import cycles:\n" + "\n".join(described)


def _says_why(lines: list[str], lineno: int) -> bool:
    """A comment on the import's line, or above it (over a block of imports)."""
    for number in range(lineno, 0, -1):
        line = lines[number - 1].strip()
        if "#" in line:
            return True
        if number < lineno and not line.startswith(("from ", "import ", ")")) and "," not in line:
            return False
    return False


def test_imports_inside_functions_say_why() -> None:
    silent = []
    for path in _modules().values():
        lines = path.read_text(encoding="utf-8").splitlines()
        tree = ast.parse("\n".join(lines), str(path))
        for function in ast.walk(tree):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(function):
                if isinstance(node, (ast.Import, ast.ImportFrom)) and not _says_why(lines, node.lineno):
                    silent.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not silent, "imports inside functions without a comment saying why:\n" + "\n".join(
        sorted(set(silent))
    )


def test_a_type_ignore_says_why_on_its_line() -> None:
    bare = []
    paths = [p for package in (*PACKAGES, "bench") for p in (ROOT / package).rglob("*.py")]
    for path in [*paths, ROOT / "manage.py"]:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            _, found, after = line.partition("# type: ignore")
            if found and "#" not in after:
                bare.append(f"{path.relative_to(ROOT)}:{number}")
    assert not bare, "`# type: ignore` without a reason after it:\n" + "\n".join(bare)
