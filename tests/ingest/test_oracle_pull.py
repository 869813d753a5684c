"""The Oracle pull (ingest/oracle_table.py) against a fake DB-API cursor: a real object with
execute, fetchmany and description over rows in UNIFIED_AUDIT_TRAIL's documented layout (no
Oracle server can run here; nothing is checked past the query the pull sends). The SQL and the
binds it sends, the overlap window and the de-duplication, the cap per pull, and the same events
from the pull as from the exports of the same rows."""

from __future__ import annotations

import io
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.core.management import call_command

from ingest.events import EventRecord
from ingest.models import Event, Gap, Source
from ingest.normalize import GapFinder, SessionTracker, classifier_for
from ingest.oracle_table import QUERY, OraclePuller
from ingest.parsers import by_name
from ingest.parsers.oracle_audit import COLUMNS
from ingest.pipeline import ingest_oracle_table

from ..fixtures.oracle_scene.scene import ROWS, to_csv, to_json

TABLE_ORDER = ("EVENT_TIMESTAMP_UTC", "DBID", "INSTANCE_ID", "SESSIONID", "ENTRY_ID", "STATEMENT_ID")


class FakeTrail:
    """The rows of UNIFIED_AUDIT_TRAIL, and the connection and cursors a puller asks for."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.rows = list(rows)
        self.sent: list[tuple[str, dict[str, Any]]] = []
        self.closed = 0

    def cursor(self) -> FakeCursor:
        return FakeCursor(self)


class FakeCursor:
    """What the driver's cursor does with QUERY: the rows at or after :since, in the query's
    order, at most :max_rows, each a tuple in the SELECT's column order."""

    def __init__(self, trail: FakeTrail) -> None:
        self.trail = trail
        self.description: list[tuple[Any, ...]] | None = None
        self._rows: list[tuple[Any, ...]] = []

    def execute(self, sql: str, binds: dict[str, Any]) -> None:
        self.trail.sent.append((sql, dict(binds)))
        assert sql == QUERY
        since = binds["since"]
        assert isinstance(since, datetime) and since.tzinfo is None  # the view's TIMESTAMP: naive UTC
        chosen = sorted(
            (r for r in self.trail.rows if r["EVENT_TIMESTAMP_UTC"] >= since),
            key=lambda r: tuple(r.get(k) or 0 for k in TABLE_ORDER),
        )[: binds["max_rows"]]
        self.description = [(c, None, None, None, None, None, None) for c in COLUMNS]
        self._rows = [tuple(r.get(c) for c in COLUMNS) for r in chosen]

    def fetchmany(self, size: int) -> list[tuple[Any, ...]]:
        taken, self._rows = self._rows[:size], self._rows[size:]
        return taken

    def close(self) -> None:
        self.trail.closed += 1


def pull(trail: FakeTrail, watermark: dict[str, Any] | None, **kw: Any) -> tuple[list[Any], dict[str, Any]]:
    puller = OraclePuller(trail, watermark, **kw)
    got = list(puller.records())
    return got, puller.watermark


def test_it_sends_the_documented_columns_since_the_start_then_since_the_overlap() -> None:
    trail = FakeTrail(ROWS)
    first, mark = pull(trail, None, chunk=4)
    assert trail.sent[0] == (QUERY, {"since": datetime(1970, 1, 1), "max_rows": 50_000})
    assert "FROM UNIFIED_AUDIT_TRAIL WHERE EVENT_TIMESTAMP_UTC >= :since" in QUERY
    assert QUERY.startswith("SELECT " + ", ".join(COLUMNS) + " FROM")
    assert len(first) == len(ROWS) and trail.closed == 1
    newest = max(r["EVENT_TIMESTAMP_UTC"] for r in ROWS)
    second, _ = pull(trail, mark, overlap=30)
    assert trail.sent[1][1] == {"since": newest - timedelta(seconds=30), "max_rows": 50_000}
    assert second == []  # the overlap re-read, nothing twice


def test_a_row_queued_late_inside_the_overlap_is_pulled_once() -> None:
    trail = FakeTrail(ROWS[:5])
    _, mark = pull(trail, None)
    late = dict(ROWS[3], ENTRY_ID=99, STATEMENT_ID=99, SQL_TEXT="DELETE FROM shop.orders WHERE id = 7")
    late["EVENT_TIMESTAMP_UTC"] = ROWS[4]["EVENT_TIMESTAMP_UTC"] - timedelta(
        seconds=2
    )  # older than the newest
    trail.rows.append(late)
    second, mark = pull(trail, mark)
    assert [r.argument for r in second] == [b"DELETE FROM shop.orders WHERE id = 7"]
    third, _ = pull(trail, mark)
    assert third == []


def test_a_row_later_than_the_overlap_window_is_missed_and_that_is_the_documented_limit() -> None:
    trail = FakeTrail(ROWS[:5])
    _, mark = pull(trail, None, overlap=3)
    late = dict(ROWS[3], ENTRY_ID=98, STATEMENT_ID=98)
    late["EVENT_TIMESTAMP_UTC"] = ROWS[4]["EVENT_TIMESTAMP_UTC"] - timedelta(seconds=60)
    trail.rows.append(late)
    second, _ = pull(trail, mark, overlap=3)
    assert second == []  # queued longer than the overlap: docs/architecture.md says to widen it


def test_a_pull_reads_at_most_max_rows_and_the_next_goes_on() -> None:
    trail = FakeTrail(ROWS)
    seen: list[bytes] = []
    mark = None
    for _ in range(len(ROWS)):
        got, mark = pull(trail, mark, max_rows=5)
        seen += [bytes(getattr(i, "raw", b"")) for i in got]
        if not got:
            break
    assert all(binds["max_rows"] == 5 for _, binds in trail.sent)
    assert len(seen) == len(set(seen)) == len(ROWS)


def test_a_huge_row_is_a_problem_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from ingest import oracle_table
    from ingest.parsers.records import Problem

    monkeypatch.setattr(oracle_table, "MAX_RECORD_BYTES", 4096)
    trail = FakeTrail([dict(ROWS[3], SQL_TEXT="DELETE FROM t WHERE x IN (" + "1," * 5000 + "1)"), ROWS[4]])
    got, mark = pull(trail, None)
    assert isinstance(got[0], Problem) and len(got[0].raw) == 2048 and "row longer than 4096" in got[0].reason
    assert got[1].extra["action_name"] == "UPDATE"
    assert pull(trail, mark)[0] == []


def test_the_watermark_after_a_pull_stopped_half_way_keeps_the_old_window() -> None:
    trail = FakeTrail(ROWS)
    _, mark = pull(trail, None)
    puller = OraclePuller(trail, mark)
    records = puller.records()
    next(records, None)
    assert set(mark["seen"]) <= set(puller.watermark["seen"])


def test_the_password_comes_from_an_auditweb_source_variable_only() -> None:
    from ingest.mysql_table import source_password

    assert (
        source_password("AUDITWEB_SOURCE_ORACLE_PASSWORD", {"AUDITWEB_SOURCE_ORACLE_PASSWORD": "pw"}) == "pw"
    )
    with pytest.raises(ValueError, match="refused"):
        source_password("DATABASE_URL", {"DATABASE_URL": "postgres://x"})


def test_the_dsn_is_checked_before_the_driver_is_asked() -> None:
    from ingest.oracle_table import connect

    with pytest.raises(ValueError, match="not an oracle:// DSN"):
        connect("mysql://a@b/c")
    with pytest.raises(ValueError, match="names no service"):
        connect("oracle://auditweb@db1:1521")
    with pytest.raises(ValueError, match="the only value is verify"):
        connect("oracle://auditweb@db1:1521/ORCL?tls=yes")


def test_a_refused_connection_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from ingest.oracle_table import connect

    with pytest.raises(Exception, match=r"DPY-\d+"):  # nothing listens there: the driver says so
        connect("oracle://auditweb@127.0.0.1:9/ORCL", "pw", timeout=2)


# -- the same events from the exports and from the pull --------------------------------------------


def _shown(e: EventRecord) -> tuple[Any, ...]:
    return (
        e.occurred_at,
        e.connection_id,
        e.user,
        e.host,
        e.ip,
        e.command,
        e.statement_type,
        e.tables,
        e.destructive,
        frozenset(e.flags),
        e.sql,
        e.status,
        e.session.program,
        e.session.os_user,
    )


def _stages(items: Any) -> list[Any]:
    tracker = SessionTracker("ora", dialect="oracle")
    finder = GapFinder(dialect="oracle")
    return list(finder.process(classifier_for("oracle")(tracker.process(items), tracker.routines)))


def _events_and_gaps(out: list[Any]) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    events = [_shown(e) for e in out if isinstance(e, EventRecord)]
    gaps = [(g.reason, g.started_at, g.ended_at) for g in out if type(g).__name__ == "GapRecord"]
    return events, gaps


def test_the_exports_and_the_pull_give_the_same_events_for_the_same_rows() -> None:
    pulled = _events_and_gaps(_stages(OraclePuller(FakeTrail(ROWS), None).records()))
    for fmt, data in (("oracle-csv", to_csv(ROWS)), ("oracle-json", to_json(ROWS))):
        exported = _events_and_gaps(_stages(by_name(fmt).parse(data.splitlines(keepends=True))))
        assert exported == pulled, fmt
    assert len(pulled[0]) == len(ROWS)  # (the two STARTUPs are the server start events)


# -- into the store ---------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_pull_into_the_store_twice_stores_each_row_once() -> None:
    source = Source.objects.create(
        name="ora1: trail", kind=Source.Kind.ORACLE_TABLE, dsn="oracle://auditweb@db1/ORCL", server="ora1"
    )
    trail = FakeTrail(ROWS[:10])
    run = ingest_oracle_table(source, trail)
    assert run.events_stored == 10
    trail.rows += ROWS[10:]
    source.refresh_from_db()
    run = ingest_oracle_table(source, trail)
    assert Event.objects.filter(server="ora1").count() == len(ROWS)
    assert run.events_stored == len(ROWS) - 10
    source.refresh_from_db()
    assert ingest_oracle_table(source, trail).events_stored == 0
    destructive = Event.objects.filter(server="ora1", destructive=True).order_by("occurred_at")
    assert [(e.user, e.statement_type, e.tables) for e in destructive][:4] == [
        ("SCOTT", "DELETE", ["SHOP.ORDERS"]),
        ("SCOTT", "UPDATE", ["SHOP.CUSTOMERS"]),
        ("SCOTT", "TRUNCATE TABLE", ["SHOP.ORDER_LINES"]),
        ("MALLORY", "DROP TABLE", ["Shop.Audit Copy"]),
    ]
    gaps = Gap.objects.filter(server="ora1").order_by("byte_offset")
    found = sorted(
        (g.reason, g.started_at.minute if g.started_at else None, g.ended_at and g.ended_at.minute)
        for g in gaps
    )
    # NOAUDIT's gap, stored open by the first pull, closed by the second's AUDIT POLICY; the
    # purge; DROP AUDIT POLICY's, open; the restart (SHUTDOWN ABORT at :30, STARTUP, LOGON at :40).
    assert found == [
        ("logging_off", 11, 12),
        ("logging_off", 45, None),
        ("purged", None, 12),
        ("restart", 30, 40),
    ]


@pytest.mark.django_db
def test_the_csv_export_through_manage_py_ingest_matches_the_pull(tmp_path: Any) -> None:
    path = tmp_path / "trail.csv"
    path.write_bytes(to_csv(ROWS))
    out = io.StringIO()
    call_command("ingest", str(path), "--server", "ora-file", stdout=out)
    source = Source.objects.create(
        name="ora-pull", kind=Source.Kind.ORACLE_TABLE, dsn="oracle://a@b/C", server="ora-pull"
    )
    ingest_oracle_table(source, FakeTrail(ROWS))

    def stored(server: str) -> list[tuple[Any, ...]]:
        rows = Event.objects.filter(server=server).values_list(
            "occurred_at", "user", "host", "statement_type", "tables", "destructive", "flags", "sql", "status"
        )
        # (a STARTUP takes the time of the record after it: ordered by content too)
        return sorted(rows, key=lambda row: (row[0], repr(row[1:])))

    assert stored("ora-file") == stored("ora-pull")
    assert len(stored("ora-file")) == len(ROWS)
