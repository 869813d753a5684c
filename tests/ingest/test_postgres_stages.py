"""PostgreSQL's stages after the tracker (ingest/postgres.py): transactions where pgAudit logs
them (`pgaudit.log` with `misc`), and the dialect chosen by the format.

The lines are the scene's own layout (tests/fixtures/pgaudit_scene, stderr with its
log_line_prefix), with the MISC entries a server logging `misc` writes for BEGIN, COMMIT and
ROLLBACK: the scene itself does not log that class.
"""

from __future__ import annotations

from ingest.events import EventRecord, FlagCorrection, GapRecord
from ingest.normalize import GapFinder, SessionTracker, classifier_for, classify_events
from ingest.parsers import by_name, dialect_of
from ingest.postgres import classify_postgres_events

PREFIX = (
    "2026-11-25 01:23:{s:02d}.{ms:03d} UTC [30920] alice@shop 127.0.0.1 6b063894.78c8 {n} 3/{v} shop-web "
)
CONNECT = "connection authorized: user=alice database=shop application_name=shop-web"


def log(*messages: str) -> list[bytes]:
    """Lines of alice's session; a message without a severity is a LOG."""
    return [
        (
            PREFIX.format(s=10 + n // 100, ms=n % 100 * 10, n=n + 1, v=30 + n)
            + (m if m.split(":", 1)[0] in ("ERROR", "STATEMENT") else "LOG:  " + m)
            + "\n"
        ).encode()
        for n, m in enumerate(messages)
    ]


def audit(statement_id: int, cls: str, command: str, sql: str, obj: str = "", rows: str = "") -> str:
    kind = "TABLE" if obj else ""
    return f"AUDIT: SESSION,{statement_id},1,{cls},{command},{kind},{obj},{sql},<none>,{rows}"


def events(lines: list[bytes]) -> tuple[list[EventRecord], list[FlagCorrection]]:
    fmt = "pgaudit-stderr"
    tracker = SessionTracker("pg", dialect=dialect_of(fmt))
    out = list(classifier_for(tracker.dialect)(tracker.process(by_name(fmt).parse(lines)), tracker.routines))
    return [o for o in out if isinstance(o, EventRecord)], [o for o in out if isinstance(o, FlagCorrection)]


def rolled_back(lines: list[bytes]) -> list[str]:
    found, corrections = events(lines)
    by_hash = {e.record_hash(): e.sql for e in found}
    return [by_hash[h] for c in corrections if c.flag == "rolled_back" for h, _ in c.keys]


def test_the_format_decides_the_dialect_and_the_stages() -> None:
    assert (
        dialect_of("pgaudit-csv") == dialect_of("pgaudit-json") == dialect_of("pgaudit-stderr") == "postgres"
    )
    assert dialect_of("general-log") == dialect_of("mariadb-audit") == "mysql"
    assert classifier_for("postgres") is classify_postgres_events
    assert classifier_for("mysql") is classify_events
    assert GapFinder().dialect == SessionTracker("x").dialect == "mysql"


def test_a_rollback_flags_the_deletes_of_its_transaction() -> None:
    lines = log(
        CONNECT,
        audit(1, "MISC", "BEGIN", "BEGIN"),
        audit(2, "WRITE", "DELETE", "DELETE FROM shop.orders WHERE total < 20", "shop.orders", "2"),
        audit(3, "MISC", "ROLLBACK", "ROLLBACK"),
        audit(4, "WRITE", "DELETE", "DELETE FROM shop.orders WHERE id = 9", "shop.orders", "1"),
    )
    assert rolled_back(lines) == ["DELETE FROM shop.orders WHERE total < 20"]


def test_a_commit_keeps_them_unless_a_statement_of_it_failed() -> None:
    begin = [
        CONNECT,
        audit(1, "MISC", "BEGIN", "BEGIN"),
        audit(2, "WRITE", "DELETE", "DELETE FROM shop.orders WHERE total < 20", "shop.orders", "2"),
    ]
    assert rolled_back(log(*begin, audit(3, "MISC", "COMMIT", "COMMIT"))) == []
    # An error aborts PostgreSQL's transaction: its COMMIT is a ROLLBACK.
    failed = ["ERROR:  division by zero", "STATEMENT:  UPDATE shop.orders SET total = 1 / 0"]
    assert rolled_back(log(*begin, *failed, audit(3, "MISC", "COMMIT", "COMMIT"))) == [
        "DELETE FROM shop.orders WHERE total < 20"
    ]


def test_a_savepoint_rollback_and_a_disconnect() -> None:
    partial = log(
        CONNECT,
        audit(1, "MISC", "BEGIN", "BEGIN"),
        audit(2, "WRITE", "DELETE", "DELETE FROM shop.orders WHERE total < 20", "shop.orders", "2"),
        audit(3, "MISC", "ROLLBACK", "ROLLBACK TO SAVEPOINT a"),
    )
    assert rolled_back(partial) == []  # an unknown part of it was undone: nothing is claimed
    gone = log(
        CONNECT,
        audit(1, "MISC", "BEGIN", "BEGIN"),
        audit(2, "WRITE", "UPDATE", "UPDATE shop.orders SET total = 0", "shop.orders", "4"),
        "disconnection: session time: 0:00:00.027 user=alice database=shop host=127.0.0.1 port=53372",
    )
    assert rolled_back(gone) == ["UPDATE shop.orders SET total = 0"]


def test_statements_and_tables_as_postgres_names_them() -> None:
    found, _ = events(
        log(
            CONNECT,
            audit(1, "WRITE", "TRUNCATE TABLE", "TRUNCATE shop.archive"),
            audit(2, "DDL", "ALTER TABLE", "ALTER TABLE shop.customers DROP COLUMN email", "shop.customers"),
            audit(3, "MISC", "SET", "SET pgaudit.log = 'write'"),
        )
    )
    queries = [(e.statement_type, e.tables, e.destructive, "anti_forensic" in e.flags) for e in found[1:]]
    assert queries == [
        ("TRUNCATE", ("shop.archive",), True, False),
        ("ALTER TABLE", ("shop.customers",), True, False),
        ("SET", (), False, True),
    ]
    assert found[0].session.program == "shop-web"


def _gaps(lines: list[bytes]) -> list[tuple[str, str, str]]:
    """(start, end, detail) of each logging_off gap of alice's session, times as printed."""
    fmt = "pgaudit-stderr"
    tracker = SessionTracker("pg", dialect=dialect_of(fmt))
    finder = GapFinder()
    finder.dialect = tracker.dialect
    stream = classifier_for(tracker.dialect)(tracker.process(by_name(fmt).parse(lines)), tracker.routines)
    return [
        (g.started_at.strftime("%S.%f")[:6], g.ended_at.strftime("%S.%f")[:6] if g.ended_at else "", g.detail)
        for g in finder.process(stream)
        if isinstance(g, GapRecord) and g.reason == "logging_off"
    ]


def test_a_session_s_blind_spot_ends_at_its_set_back_its_reset_or_its_end() -> None:
    delete = audit(1, "WRITE", "DELETE", "DELETE FROM shop.orders WHERE id = 1", "shop.orders", "1")
    # SET TO DEFAULT is a RESET: what the session ran since its record before may be missing.
    (back,) = _gaps(log(CONNECT, delete, audit(2, "MISC", "SET", "SET pgaudit.log TO DEFAULT")))
    assert back[:2] == ("10.010", "10.020") and "may be missing" in back[2]
    # A bare word that logs no writes opens one, that the session's end closes.
    (ended,) = _gaps(
        log(
            CONNECT,
            audit(1, "MISC", "SET", "SET pgaudit.log = misc_set"),
            "disconnection: session time: 0:00:01",
        )
    )
    assert ended[:2] == ("10.010", "10.020") and ended[2].endswith("until it ended")
    # A value without writes then one with them: from the one to the other, nothing "may".
    quiet = audit(1, "MISC", "SET", "\"SET pgaudit.log = 'ddl, misc_set'\"")  # (quoted: CSV)
    (closed,) = _gaps(log(CONNECT, quiet, audit(2, "MISC", "SET", "\"SET pgaudit.log = 'all, -read'\"")))
    assert closed[:2] == ("10.010", "10.020") and "'ddl, misc_set' (no writes)" in closed[2]
    # `all, -write` logs no writes: still open where the lines end (stored when the session ends).
    assert _gaps(log(CONNECT, audit(1, "MISC", "SET", "\"SET pgaudit.log = 'all, -write'\""))) == []
