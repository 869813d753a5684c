"""No SQL is built from strings in AuditWeb's code: every statement handed to a database is a
literal (or a module constant made of literals) with its values as parameters, or is composed
with psycopg.sql for identifiers. ruff's S608 catches some string-built queries; this catches
the calls themselves, whatever the text looks like."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
APP = ("auditweb", "ingest", "investigations")
# Calls that send their first argument to a database as SQL.
SQL_CALLS = {"execute", "executemany", "copy", "RawSQL", "raw", "extra"}


def built_from_strings(node: ast.expr) -> bool:
    """An f-string, `%` formatting, concatenation or `.format()`: text assembled at run time."""
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mod, ast.Add)):
        return True
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format"


def offences(path: Path, root: Path = REPO) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if name == "extra":  # QuerySet.extra() takes SQL fragments: never
            found.append(f"{path.relative_to(root)}:{node.lineno}: .extra()")
        elif name in SQL_CALLS and node.args and built_from_strings(node.args[0]):
            found.append(f"{path.relative_to(root)}:{node.lineno}: {ast.unparse(node)[:100]}")
    return found


def test_no_statement_is_built_from_strings() -> None:
    files = [p for folder in APP for p in (REPO / folder).rglob("*.py")]
    assert len(files) > 40
    found = [line for path in files for line in offences(path)]
    assert not found, "Pass values as parameters, identifiers with psycopg.sql:\n" + "\n".join(found)


def test_the_check_finds_what_it_looks_for(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "cur.execute(f'SELECT * FROM t WHERE id = {x}')\n"
        "cur.execute('SELECT %s' % x)\n"
        "RawSQL('a = ' + x, [])\n"
        "cur.execute('SELECT {}'.format(x))\n"
        "qs.extra(where=['1=1'])\n"
        "cur.execute('SELECT * FROM t WHERE id = %s', [x])\n"
    )
    assert [line.split(":")[1] for line in offences(sample, tmp_path)] == ["1", "2", "3", "4", "5"]
