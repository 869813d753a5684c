"""PostgreSQL rules (ingest/dialects/postgres.py) on the real pgAudit scene and on hostile text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ingest.dialects.postgres import classify, clear_cache, config_change, shape
from ingest.parsers import pgaudit_csv
from ingest.parsers.records import LogRecord

SCENE = Path(__file__).resolve().parents[1] / "fixtures" / "pgaudit_scene"
TRUTH = json.loads((SCENE / "truth.json").read_text())


def _queries() -> list[LogRecord]:
    records: list[LogRecord] = []
    for name in TRUTH["files"]["csv"]:
        with (SCENE / name).open("rb") as f:
            records += [i for i in pgaudit_csv.parse(f) if isinstance(i, LogRecord)]
    return records


def _verdict(record: LogRecord):  # type: ignore[no-untyped-def]  # (a test helper)
    commands = [c[2] for c in json.loads(record.extra.get("commands", "[]"))]
    return classify(record.argument.decode(), commands)


def test_the_scene_s_destroyers_and_blinders() -> None:
    queries = [r for r in _queries() if r.command == "Query"]
    destructive = {r.argument.decode() for r in queries if _verdict(r).destructive}
    anti = {r.argument.decode() for r in queries if "anti_forensic" in _verdict(r).flags}
    driven = {s["sql"]: s for s in TRUTH["statements"]}
    for text in (
        "DELETE FROM shop.orders WHERE total < 20",
        "UPDATE shop.orders SET total = total * $1 WHERE id = $1".replace("total * $1", "total * 2"),
        "TRUNCATE shop.archive",
        "DROP TABLE shop.payroll_backup",
        "ALTER TABLE shop.customers DROP COLUMN email",
        "DELETE FROM shop.orders WHERE customer = $1",
        "DELETE FROM shop.payroll WHERE name = 'bob'",  # refused: destructive all the same
    ):
        assert text in driven and text in destructive, text
    merge = next(t for t in driven if t.startswith("MERGE"))
    assert merge in destructive  # pgAudit 1.7 logs MERGE with the command INSERT: the text decides
    purge = next(r for r in queries if "substatements" in r.extra and r.status == "ok")
    assert _verdict(purge).destructive  # its DELETE is a sub-statement
    assert anti == {
        "RESET pgaudit.log",
        "SET log_statement = 'none'",
        "ALTER SYSTEM SET pgaudit.log = 'none'",
        "DROP EXTENSION pgaudit",
    }
    assert not any(
        _verdict(r).destructive
        for r in queries
        if "substatements" not in r.extra and r.argument.startswith((b"CREATE", b"GRANT", b"INSERT"))
    )
    configs = [r for r in _queries() if r.command == "Config"]
    assert configs and all(config_change(r.argument.decode()) for r in configs)


@pytest.mark.parametrize(
    ("sql", "destructive", "anti"),
    [
        ("SELECT pg_rotate_logfile()", False, True),
        ("select 'pg_rotate_logfile()'", False, False),
        ("/* pg_rotate_logfile() */ SELECT 1", False, False),
        ("SET pgaudit.log = 'none'", False, True),
        ("SET pgaudit.log TO 'read'", False, True),
        ("SET search_path = shop", False, False),
        ("ALTER ROLE mallory SET pgaudit.log = 'none'", False, True),
        ("ALTER DATABASE shop SET log_statement = 'none'", False, True),
        ("DROP EXTENSION IF EXISTS pgaudit CASCADE", False, True),
        ("DROP EXTENSION pg_trgm", False, False),
        ("ALTER TABLE t ALTER COLUMN c DROP DEFAULT", False, False),
        ("ALTER TABLE t DROP CONSTRAINT c", True, False),
        ("WITH gone AS (DELETE FROM t RETURNING *) SELECT count(*) FROM gone", True, False),
        ("DROP SCHEMA shop CASCADE", True, False),
        ("DROP ROLE bob", False, False),
        ("CREATE FUNCTION f() RETURNS void AS $$ DELETE FROM t $$ LANGUAGE sql", False, False),
        ("DO $x$ BEGIN EXECUTE 'SELECT pg_rotate_logfile()'; END $x$", False, False),
    ],
)
def test_rules(sql: str, destructive: bool, anti: bool) -> None:
    verdict = classify(sql)
    assert verdict.destructive is destructive
    assert ("anti_forensic" in verdict.flags) is anti


def test_hostile_text_is_linear_and_never_raises() -> None:
    for sql in (
        "(" * 100_000,
        "'" * 100_001,
        "$a$" + "x" * 200_000,
        "\x00" * 10,
        "--" * 50_000,
        "/*" * 50_000,
    ):
        classify(sql)


def test_a_cached_verdict_is_the_one_worked_out_afresh() -> None:
    """sqlglot runs once a statement shape: every scene statement, and each with other literals,
    is answered from the cache exactly as it is worked out with the cache empty."""
    statements = []
    for r in _queries():
        if r.command == "Query":
            commands = [c[2] for c in json.loads(r.extra.get("commands", "[]"))]
            statements.append((r.argument.decode(), commands, _verdict(r)))
    variants = [
        ("DELETE FROM shop.orders WHERE total < 20", "DELETE FROM shop.orders WHERE total < 7"),
        ("SET pgaudit.log = 'none'", "SET pgaudit.log = 'write'"),
        ('SELECT "a--b" FROM t1', 'SELECT "a--c" FROM t2'),  # (no comment inside a quoted name)
        ('DELETE FROM "t 1"', 'DELETE FROM "t 2"'),  # (numbers in quoted names are names)
    ]
    for first, second in variants:
        classify(first)
        statements.append((second, [], classify(second)))
    for sql, commands, cached in statements:
        clear_cache()
        assert classify(sql, commands) == cached, sql
    assert classify('SELECT "a--c" FROM t2').tables == ("t2",)
    assert shape('SELECT "a--b" FROM t1') != shape('SELECT "a--c" FROM t2')
    assert (
        shape("DELETE FROM t WHERE id = 42 -- x\n AND n = 'o''k'") == "DELETE FROM t WHERE id = ? AND n = ''"
    )
