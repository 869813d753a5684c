"""Session tracking and classification on plain records: no Django, no database."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from ingest.events import EventRecord
from ingest.normalize import SessionTracker, classify_events
from ingest.parsers.records import LogRecord, Problem, ServerStart


def rec(conn: int, command: str, arg: bytes, when: datetime | None = None, **kw) -> LogRecord:
    return LogRecord(
        line=1, offset=0, raw=arg, occurred_at=when, connection_id=conn, command=command, argument=arg, **kw
    )


def run(items, tz=UTC) -> list[EventRecord]:
    return [
        e for e in classify_events(SessionTracker("db1", tz).process(items)) if isinstance(e, EventRecord)
    ]


T0 = datetime(2026, 1, 5, 9, 0, 0)


def test_it_attributes_a_query_to_the_connect_user() -> None:
    events = run([
        rec(5, "Connect", b"alice@10.1.1.1 on shop using TCP/IP", T0, user="alice", host="10.1.1.1",
            ip="10.1.1.1", database="shop"),
        rec(5, "Query", b"DELETE FROM orders", T0),
    ])  # fmt: skip
    delete = events[1]
    assert (delete.user, delete.host, delete.database) == ("alice", "10.1.1.1", "shop")
    assert delete.tables == ("shop.orders",) and delete.destructive
    assert "unattributed" not in delete.flags


def test_it_never_guesses_who_ran_a_query_whose_connect_is_missing() -> None:
    (event,) = run([rec(9, "Query", b"DELETE FROM orders WHERE id = 1", T0)])
    assert event.user is None and event.host is None
    assert "unattributed" in event.flags


def test_init_db_and_use_change_the_current_database_for_later_statements() -> None:
    events = run([
        rec(5, "Connect", b"a@h on  using Socket", T0, user="a", host="h", database=""),
        rec(5, "Init DB", b"shop", T0),
        rec(5, "Query", b"DELETE FROM orders WHERE id = 1", T0),
        rec(5, "Query", b"USE `billing`", T0),
        rec(5, "Query", b"DELETE FROM invoices WHERE id = 1", T0),
    ])  # fmt: skip
    assert events[0].database is None
    assert events[2].tables == ("shop.orders",)
    assert events[3].database == "shop"  # USE itself ran in the old database
    assert events[4].tables == ("billing.invoices",)


BANNER = ServerStart(line=3, offset=100, raw=b"banner\n", version="10.11.19-MariaDB-log")
T1 = datetime(2026, 1, 5, 10, 0, 0)


def test_a_restart_starts_a_new_boot_so_reused_thread_ids_are_new_sessions() -> None:
    events = run([
        rec(5, "Connect", b"alice@h on shop", T0, user="alice", host="h", database="shop"),
        BANNER,
        rec(5, "Connect", b"bob@h on shop", T1, user="bob", host="h", database="shop"),
        rec(5, "Query", b"DELETE FROM orders", T1),
    ])  # fmt: skip
    start, connect, delete = events[1], events[2], events[3]
    assert start.command == "Server start" and start.occurred_at == T1.replace(tzinfo=UTC)
    assert start.note.startswith("restart|") and "connection 5 logged in after it" in start.note
    assert (delete.user, delete.attribution) == ("bob", "connect")
    assert delete.session.key == connect.session.key == "db1/20260105T100000Z/5"
    assert delete.session.key != events[0].session.key


def test_a_statement_after_a_banner_that_nothing_decides_keeps_its_account_marked_inferred() -> None:
    events = run([
        rec(5, "Connect", b"alice@h on shop", T0, user="alice", host="h", database="shop"),
        BANNER,
        rec(5, "Query", b"DELETE FROM orders", T1),
    ])  # fmt: skip
    start, delete = events[1], events[2]
    assert start.note.startswith("undecided|") and "connection 5, open before it" in start.note
    assert (delete.user, delete.attribution) == ("alice", "inferred_reopen")
    assert delete.session.key == events[0].session.key  # the same boot: nothing proved otherwise


def test_ids_that_go_on_after_a_banner_prove_a_reopen() -> None:
    events = run([
        rec(12, "Connect", b"eve@h on shop", T0, user="eve", host="h", database="shop"),
        rec(12, "Query", b"SET GLOBAL general_log = OFF", T0),
        BANNER,
        rec(12, "Query", b"DELETE FROM orders", T1),
        rec(13, "Connect", b"bob@h on shop", T1, user="bob", host="h", database="shop"),
        rec(12, "Query", b"DROP TABLE customers", T1),
    ])  # fmt: skip
    start = events[2]
    assert start.note.startswith("reopen|") and "ids went on" in start.note
    assert "it had switched logging off at line 1" in start.note
    delete, drop = events[3], events[5]
    assert [(e.user, e.attribution) for e in (delete, drop)] == [("eve", "connect")] * 2


def test_a_first_record_without_a_printed_time_proves_a_reopen() -> None:
    untimed = LogRecord(line=5, offset=120, raw=b"\t\t   12 Query\tDELETE FROM orders\n", occurred_at=T0,
                        connection_id=12, command="Query", argument=b"DELETE FROM orders")  # fmt: skip
    events = run(
        [rec(12, "Connect", b"eve@h on shop", T0, user="eve", host="h", database="shop"), BANNER, untimed]
    )
    assert events[1].note.startswith("reopen|") and "prints no time" in events[1].note
    assert (events[2].user, events[2].attribution) == ("eve", "connect")


def test_a_later_login_far_below_an_undecided_banner_starts_a_new_boot() -> None:
    tracker = SessionTracker("db1")
    first = list(tracker.process([
        rec(90, "Connect", b"alice@h on shop", T0, user="alice", host="h", database="shop"), BANNER,
        rec(90, "Query", b"SELECT 1", T1),
    ]))  # fmt: skip
    assert first[2].attribution == "inferred_reopen"
    later = [e for e in tracker.process([
        rec(3, "Connect", b"bob@h on shop", T1, user="bob", host="h", database="shop"),
        rec(90, "Query", b"DELETE FROM orders", T1),
    ]) if isinstance(e, EventRecord)]  # fmt: skip
    # Ids started over: connection 90 is no longer alice's, and nobody knows whose it is.
    assert (later[1].user, later[1].attribution) == (None, "unattributed")


def test_naive_times_are_read_in_the_source_time_zone() -> None:
    (event,) = run([rec(5, "Query", b"SELECT 1", T0)], tz=ZoneInfo("Europe/Berlin"))
    assert event.occurred_at == datetime(2026, 1, 5, 8, 0, 0, tzinfo=UTC)


def test_sql_text_is_searchable_without_nul_while_raw_keeps_it() -> None:
    (event,) = run([rec(5, "Query", b"SELECT 1\x00", T0)])
    assert event.sql == "SELECT 1" and event.raw.endswith(b"\x00")


def test_a_prepare_is_not_destructive_but_its_execute_is() -> None:
    prepare, execute = run([
        rec(5, "Prepare", b"DELETE FROM t WHERE id = ?", T0),
        rec(5, "Execute", b"DELETE FROM t WHERE id = 3", T0),
    ])  # fmt: skip
    assert not prepare.destructive and "prepared" in prepare.flags
    assert execute.destructive and "prepared" in execute.flags


def test_problems_pass_through_in_order() -> None:
    problem = Problem(line=1, offset=0, raw=b"garbage", reason="not a record")
    out = list(SessionTracker("db1").process([problem, rec(5, "Query", b"SELECT 1", T0)]))
    assert out[0] is problem and isinstance(out[1], EventRecord)


def test_tracker_state_survives_a_round_trip() -> None:
    tracker = SessionTracker("db1")
    list(tracker.process([rec(5, "Connect", b"a@h on shop", T0, user="a", host="h", database="shop")]))
    restored = SessionTracker.from_state("db1", UTC, tracker.to_state())
    (event,) = list(restored.process([rec(5, "Query", b"DELETE FROM orders", T0)]))
    assert event.user == "a" and event.database == "shop"
    assert event.session.key == tracker.connections[5].key


def test_ids_starting_over_without_a_banner_start_a_new_boot() -> None:
    # An audit log writes no start banner: the ids going back near 1 tell of the restart.
    log = (
        b"20260105 09:00:00,db1,bob,h,500,1,CONNECT,shop,,0\n"
        b"20260105 09:00:01,db1,bob,h,500,2,QUERY,shop,'SELECT 1',0\n"
        b"20260105 09:00:02,db1,eve,h,466,3,CONNECT,shop,,0\n"  # out of order: not a restart
        b"20260105 09:05:00,db1,carl,h,5,1,CONNECT,shop,,0\n"  # after a restart
        b"20260105 09:05:01,db1,carl,h,500,2,QUERY,shop,'DELETE FROM orders',0\n"  # a new 500
    )
    from ingest.parsers import server_audit

    events = [e for e in SessionTracker("db1").process(server_audit.parse(log.splitlines(keepends=True)))]
    boots = [e.session.boot for e in events]
    assert boots[0] == boots[1] == boots[2] != boots[3]
    assert events[3].session.boot == events[4].session.boot
    assert events[1].session.key != events[4].session.key  # two connections 500, two sessions


# The tracker's short path (SessionTracker._statement) for a statement on a known connection, and
# its full path (_event), must make the same event: a record with a detail (`extra`) takes the full
# path, the same record without one the short path.
_SAME_FIELDS = (
    "occurred_at", "server", "connection_id", "user", "host", "ip", "database", "command", "sql", "raw",
    "line", "offset", "statement_type", "tables", "destructive", "flags", "fingerprint", "rows_affected",
    "status", "attribution", "definer",
)  # fmt: skip


def _session_of(statements: list[LogRecord], connect: bool) -> list[EventRecord]:
    login = rec(7, "Connect", b"bob@db2 on shop using TCP/IP", T0, user="bob", host="db2", database="shop")
    return run([*([login] if connect else []), *statements])


def test_the_short_path_and_the_full_path_make_the_same_events() -> None:
    statements = [
        (b"DELETE FROM orders", "Query"),
        (b"CREATE USER u IDENTIFIED BY 'hunter2'", "Query"),
        (b"USE billing", "Query"),
        (b"DELETE FROM invoices WHERE id = 1", "Query"),
        (b"billing", "Init DB"),
        (b"", "Quit"),
    ]
    for connect in (True, False):
        short = _session_of([rec(7, command, arg, T0) for arg, command in statements], connect)
        full = _session_of(
            [rec(7, command, arg, T0, extra={"note": "x"}) for arg, command in statements], connect
        )
        assert len(short) == len(full) == len(statements) + connect
        for a, b in zip(short, full, strict=True):
            assert [getattr(a, f) for f in _SAME_FIELDS] == [getattr(b, f) for f in _SAME_FIELDS]
            assert a.session.key == b.session.key
        assert short[3 + connect].tables == ("billing.invoices",)  # after USE billing
        assert ("unattributed" in short[connect].flags) is not connect
        assert "secret_masked" in short[1 + connect].flags


def test_a_statement_repeated_byte_for_byte_is_masked_every_time() -> None:
    secret = b"SET PASSWORD FOR bob = PASSWORD('hunter2')"
    events = run([rec(7, "Query", secret, T0), rec(7, "Query", secret, T0), rec(8, "Query", secret, T0)])
    assert len(events) == 3
    for event in events:
        assert "hunter2" not in event.sql and "*****" in event.sql
        assert "secret_masked" in event.flags
        assert event.raw == secret  # the raw bytes keep it, sealed for custody
