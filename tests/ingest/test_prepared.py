"""SQL-level prepared statements: an `EXECUTE name` does what the session's `PREPARE name FROM '...'`
said, so formats that log only the EXECUTE (the audit logs) still show what it destroyed."""

from __future__ import annotations

from ingest.events import EventRecord
from ingest.normalize import SessionTracker, classify_events
from ingest.parsers import server_audit
from ingest.sql.prepared import deallocated_name, executed_name, prepared_text


def audit_log(*statements: str, conn: int = 7, database: str = "shop") -> bytes:
    lines = [f"20260105 09:00:00,db1,bob,10.0.0.8,{conn},0,CONNECT,{database},,0\n"]
    for n, sql in enumerate(statements, 1):
        quoted = sql.replace("\\", "\\\\").replace("'", "\\'")
        lines.append(f"20260105 09:00:{n:02d},db1,bob,10.0.0.8,{conn},{n},QUERY,{database},'{quoted}',0\n")
    return "".join(lines).encode()


def events(data: bytes) -> list[EventRecord]:
    items = classify_events(SessionTracker("s").process(server_audit.parse(data.splitlines(keepends=True))))
    return [i for i in items if isinstance(i, EventRecord) and i.command == "Query"]


def test_an_execute_does_what_its_prepare_said() -> None:
    found = events(
        audit_log(
            "PREPARE del FROM 'DELETE FROM orders WHERE id = ?'",
            "SET @id = 5",
            "EXECUTE del USING @id",
            "DEALLOCATE PREPARE del",
            "EXECUTE del USING @id",  # deallocated: the server refuses it; nothing is known
        )
    )
    prepare, _, execute, deallocate, again = found
    assert (prepare.statement_type, prepare.destructive, "prepared" in prepare.flags) == (
        "PREPARE",
        False,
        True,
    )
    assert prepare.tables == ("shop.orders",)
    assert (execute.statement_type, execute.destructive, execute.tables) == (
        "EXECUTE",
        True,
        ("shop.orders",),
    )
    assert "prepared" in execute.flags
    assert "prepared" not in deallocate.flags
    assert (again.destructive, again.tables, "prepared" in again.flags) == (False, (), True)


def test_the_prepared_statements_flags_follow_it() -> None:
    *_, execute = events(audit_log('PREPARE wipe FROM "DELETE FROM orders"', "EXECUTE WIPE"))
    assert execute.destructive
    assert {"prepared", "no_where"} <= execute.flags  # names are case-insensitive


def test_a_harmless_prepare_or_an_unknown_one_destroys_nothing() -> None:
    harmless = events(
        audit_log("PREPARE q FROM 'SELECT total FROM orders WHERE id = ?'", "EXECUTE q USING @id")
    )
    assert [(e.destructive, e.tables) for e in harmless] == [
        (False, ("shop.orders",)),
        (False, ("shop.orders",)),
    ]
    # PREPARE FROM a variable: the log does not show the text; a later EXECUTE is not guessed.
    unknown = events(audit_log("PREPARE d FROM 'DELETE FROM orders'", "PREPARE d FROM @text", "EXECUTE d"))
    assert (unknown[-1].destructive, unknown[-1].tables) == (False, ())


def test_prepared_statements_belong_to_their_session() -> None:
    data = audit_log("PREPARE del FROM 'DELETE FROM orders'", conn=7) + audit_log("EXECUTE del", conn=8)
    *_, other_session = events(data)
    assert other_session.connection_id == 8
    assert not other_session.destructive


def test_the_tracker_state_keeps_prepared_statements() -> None:
    tracker = SessionTracker("s")
    first = audit_log("PREPARE del FROM 'DELETE FROM orders'")
    list(classify_events(tracker.process(server_audit.parse(first.splitlines(keepends=True)))))
    resumed = SessionTracker.from_state("s", tracker.tz, tracker.to_state())
    later = b"20260105 09:01:00,db1,bob,10.0.0.8,7,9,QUERY,shop,'EXECUTE del',0\n"
    [execute] = [
        e
        for e in classify_events(resumed.process(server_audit.parse([later])))
        if isinstance(e, EventRecord) and e.command == "Query"
    ]
    assert execute.destructive and execute.tables == ("shop.orders",)


def test_names_and_texts_are_read_from_the_statements() -> None:
    assert prepared_text("PREPARE `My Stmt` FROM 'DELETE FROM t WHERE a = ''x'''") == (
        "my stmt",
        "DELETE FROM t WHERE a = 'x'",
    )
    assert prepared_text("prepare s from @sql") == ("s", None)
    assert prepared_text("SELECT 1") is None
    assert executed_name("EXECUTE s USING @a, @b") == "s"
    assert executed_name("EXECUTE IMMEDIATE 'DELETE FROM t'") is None
    assert deallocated_name("DROP PREPARE S") == "s"
