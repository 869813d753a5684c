"""The development tooling stays out of what the server image runs: no module of the application
imports `devtools`, and the image's build context leaves the folder out."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# What the Dockerfile's image runs: gunicorn (auditweb.wsgi), celery (auditweb.celery) and
# manage.py, and every module they can reach in the application's packages.
APPLICATION = ("auditweb", "ingest", "investigations")


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_bytes(), filename=str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def test_no_application_module_imports_the_dev_tooling() -> None:
    files = [REPO / "manage.py", *(f for package in APPLICATION for f in (REPO / package).rglob("*.py"))]
    assert len(files) > 50
    offenders = {
        str(f.relative_to(REPO)): sorted(m for m in imported_modules(f) if m.split(".")[0] == "devtools")
        for f in files
    }
    assert {f: m for f, m in offenders.items() if m} == {}


def test_the_server_image_is_built_without_the_dev_tooling() -> None:
    ignored = [line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()]
    assert "devtools" in ignored
    assert "devtools" not in (REPO / "Dockerfile").read_text()


def test_the_walk_sees_an_import_of_the_dev_tooling(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("import os\nfrom devtools.services import Stack\nif True:\n    import devtools.demo\n")
    assert imported_modules(module) == {"os", "devtools.services", "devtools.demo"}
