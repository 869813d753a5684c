"""Migration 0026 (issue 22) moves a store of wide event rows to narrow rows and the statement
dictionary, and every event reads back through the model as it was."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from ingest.events import EventRecord, SessionInfo, session_id_of
from ingest.models import Event, Statement
from ingest.partitions import forget_known_partitions
from ingest.rows import EVENT_COLUMNS, stored_copy_line

from ..conftest import FIXTURES

pytestmark = pytest.mark.django_db(transaction=True)

CRIME_SCENE = FIXTURES / "crime_scene" / "mariadb-10.11.19-general.log"
BEFORE_NARROW = [("ingest", "0025_binlog_statement_server")]
READ = "SELECT id, {} FROM ingest_event ORDER BY id".format(", ".join(f'"{c}"' for c in EVENT_COLUMNS))


def migrate(targets: list[tuple[str, str]] | None = None) -> None:
    executor = MigrationExecutor(connection)
    executor.migrate(targets or executor.loader.graph.leaf_nodes())
    forget_known_partitions()


def every_event() -> list[tuple[object, ...]]:
    """Every column of every event, as one query reads them from the wide table or the view."""
    with connection.cursor() as cur:
        cur.execute(READ)
        return [tuple(bytes(v) if isinstance(v, memoryview) else v for v in row) for row in cur.fetchall()]


def old_writer_rows(source_file_id: int) -> bytes:
    """COPY lines as the writer of before issue 22 wrote them into the wide table (the wide line is
    that line), for statements the store does not hold yet and one it does."""
    session = SessionInfo(key="legacy/boot/9", server="legacy", boot="boot", connection_id=9)

    def event(sql: str, offset: int, when: datetime | None, database: str | None) -> EventRecord:
        return EventRecord(
            occurred_at=when,
            server="legacy",
            session=session,
            connection_id=9,
            user="app",
            host="10.0.0.9",
            ip="10.0.0.9",
            database=database,
            command="Query",
            sql=sql,
            raw=b"\t9 Query\t" + sql.encode() + b"\x00\xff\n",  # (a NUL and invalid UTF-8 too)
            line=offset,
            offset=offset,
            statement_type=sql.split()[0].upper(),
            tables=("shop.orders",) if "orders" in sql else (),
            destructive=sql.startswith("DELETE"),
            flags={"no_where"} if sql.startswith("DELETE") else set(),
        )

    events = [
        event("DELETE FROM orders", 10, datetime(2024, 2, 29, 23, 59, 59, 999999, tzinfo=UTC), "shop"),
        event("DELETE FROM orders", 20, datetime(2024, 3, 1, tzinfo=UTC), "shop"),
        event("DELETE FROM orders", 30, datetime(2024, 3, 1, 0, 0, 1, tzinfo=UTC), "other"),
        event("SELECT 'tab\there \\ \u2028'", 40, None, None),
    ]
    # The wide line, as ingest.rows.stored_copy_line makes it again from the columns (the line
    # links of version 2 digest): the old writer wrote its raw bytes inline, and their length.
    rows = [
        {
            **{c: getattr(e, c, None) for c in EVENT_COLUMNS},
            "byte_offset": e.offset,
            "record_hash": e.record_hash(),
            "ingest_run_id": None,
            "session_id": session_id_of(e.session.key),
            "source_file_id": source_file_id,
            "raw_length": len(e.raw),
        }
        for e in events
    ]
    return "".join(stored_copy_line(row, sorted(row["flags"])) for row in rows).encode()


def test_a_populated_store_reads_back_identically_after_the_migration(ingest_bytes) -> None:
    log = CRIME_SCENE.read_bytes()
    first = ingest_bytes(log, server="db1")
    assert first.events_stored > 100
    stored = every_event()
    source_file_id = stored[0][EVENT_COLUMNS.index("source_file_id") + 1]

    migrate(BEFORE_NARROW)
    try:
        # Back to the wide table, every event as the view read it.
        assert every_event() == stored
        # And events the old writer stores there: in a partition of their own month, and in none.
        with connection.cursor() as cur:
            cur.execute(
                "CREATE TABLE ingest_event_y2024m02 PARTITION OF ingest_event"
                " FOR VALUES FROM ('2024-02-01 00:00+00') TO ('2024-03-01 00:00+00')"
            )
            columns = ", ".join(f'"{c}"' for c in EVENT_COLUMNS)
            with connection.connection.cursor().copy(f"COPY ingest_event ({columns}) FROM STDIN") as copy:
                copy.write(old_writer_rows(source_file_id))
        wide = every_event()
        assert len(wide) == len(stored) + 4
    finally:
        migrate()

    assert every_event() == wide
    # Through the model too, field by field.
    legacy = Event.objects.filter(server="legacy").order_by("id")
    assert [(e.sql, e.database, e.tables, e.destructive, e.flags) for e in legacy] == [
        ("DELETE FROM orders", "shop", ["shop.orders"], True, ["no_where"]),
        ("DELETE FROM orders", "shop", ["shop.orders"], True, ["no_where"]),
        ("DELETE FROM orders", "other", ["shop.orders"], True, ["no_where"]),
        ("SELECT 'tab\there \\ \u2028'", None, [], False, []),
    ]
    assert bytes(legacy[3].raw).endswith(b"\x00\xff\n")
    # The same statement in the same database is stored once; in another database it is another.
    assert len({e.statement_id for e in legacy}) == 3
    assert Statement.objects.count() < len(wide)
    with connection.cursor() as cur:
        cur.execute(
            "SELECT tableoid::regclass::text, count(*) FROM ingest_event_row"
            " WHERE server = 'legacy' GROUP BY 1"
        )
        assert dict(cur.fetchall()) == {
            "ingest_event_y2024m02": 1,
            "ingest_event_default": 3,  # (no partition for March 2024 existed: the default one)
        }

    # The moved store goes on as before: the same log again stores nothing new, new events get
    # ids after the moved ones.
    assert ingest_bytes(log, server="db1").events_stored == 0
    grown = ingest_bytes(log + b"261123 13:00:00\t   999 Query\tDROP TABLE shop.x\n", server="db1")
    assert grown.events_stored == 1
    assert Event.objects.get(sql="DROP TABLE shop.x").id > max(row[0] for row in wide)
