"""The event store in PostgreSQL: partitions, idempotency, and what a row keeps of hostile input."""

from __future__ import annotations

import pytest
from django.db import connection

from ingest.models import Event, IngestRun
from ingest.partitions import create_partitions_ahead

from ..conftest import FIXTURES

SLAP = FIXTURES / "genlog" / "mariadb-10.11.19-slap.log"

pytestmark = pytest.mark.django_db(transaction=True)


def partition_of_each_event() -> dict[str, int]:
    with connection.cursor() as cur:
        cur.execute("SELECT tableoid::regclass::text, count(*) FROM ingest_event_row GROUP BY 1")
        return dict(cur.fetchall())


def partitions() -> set[str]:
    with connection.cursor() as cur:
        cur.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
            " WHERE i.inhparent = 'ingest_event_row'::regclass"
        )
        return {row[0] for row in cur.fetchall()}


def test_events_land_in_the_partition_of_their_month(ingest_bytes) -> None:
    ingest_bytes(
        b"2025-12-31T23:59:59.900000Z\t    3 Query\tDELETE FROM shop.orders\n"
        b"2026-01-01T00:00:00.100000Z\t    3 Query\tDROP TABLE shop.orders\n"
        b"2026-03-15T12:00:00.000000Z\t    3 Quit\t\n"
    )
    assert partition_of_each_event() == {
        "ingest_event_y2025m12": 1,
        "ingest_event_y2026m01": 1,
        "ingest_event_y2026m03": 1,
    }
    # Months with no events in between get no partition of their own.
    assert "ingest_event_y2026m02" not in partitions()


def test_events_with_no_time_go_to_the_default_partition_and_are_stored_once(ingest_bytes) -> None:
    # The old layout prints no time before the first change of second: those times are unknown.
    log = b"\t\t    8 Query\tDELETE FROM orders\n\t\t    8 Quit\t\n"
    ingest_bytes(log)
    ingest_bytes(log)
    assert partition_of_each_event() == {"ingest_event_default": 2}
    assert all("time_unknown" in e.flags for e in Event.objects.all())


def test_partitions_are_created_ahead_for_the_coming_months() -> None:
    from datetime import date

    from ingest.partitions import forget_known_partitions

    forget_known_partitions()
    created = create_partitions_ahead(2, today=date(2031, 11, 5))
    assert created == ["ingest_event_y2031m11", "ingest_event_y2031m12", "ingest_event_y2032m01"]
    assert create_partitions_ahead(2, today=date(2031, 11, 5)) == []


def test_a_file_that_grew_stores_only_its_new_records(ingest_bytes, settings) -> None:
    settings.INGEST_BATCH_SIZE = 100  # several batches, so the overlap and the new part mix in one
    data = SLAP.read_bytes()
    half = data.index(b"\n", len(data) // 2) + 1
    first = ingest_bytes(data[:half], name="general.log")
    whole = ingest_bytes(data, name="general.log")
    once = Event.objects.count()
    assert first.events_stored + whole.events_stored == once
    assert whole.events_seen > whole.events_stored > 0

    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM (SELECT DISTINCT record_hash FROM ingest_event) h")
        assert cur.fetchone()[0] == once


def test_raw_keeps_nul_bytes_while_the_searchable_sql_has_none(ingest_bytes) -> None:
    run = ingest_bytes(SLAP.read_bytes())
    assert run.status == IngestRun.Status.DONE
    with_nul = [e for e in Event.objects.filter(command="Query") if b"\x00" in bytes(e.raw)]
    assert len(with_nul) > 100  # mariadb-slap ends most of its statements with a NUL
    for event in with_nul:
        assert "\x00" not in event.sql
        assert bytes(event.raw).split(b" Query\t", 1)[1].rstrip(b"\n").replace(b"\x00", b"") == (
            event.sql.encode()
        )


def test_an_enormous_statement_is_bounded_in_sql_but_whole_in_raw(ingest_bytes) -> None:
    from ingest.rows import MAX_SQL_CHARS

    statement = b"DELETE FROM orders WHERE id IN (" + b"1," * MAX_SQL_CHARS + b"1)"
    ingest_bytes(b"2026-01-05T09:00:00.000000Z\t    7 Query\t" + statement + b"\n")
    event = Event.objects.get()
    assert len(event.sql) == MAX_SQL_CHARS
    assert "sql_truncated" in event.flags
    assert bytes(event.raw).endswith(statement + b"\n")
    assert event.destructive


def test_values_with_copy_and_array_syntax_are_stored_exactly(ingest_bytes) -> None:
    # Tabs, newlines, backslashes, quotes, braces and commas: COPY and array literal syntax.
    user = "o\\'\"{x,y}\\N"
    statement = 'DELETE FROM `we"ird\\,{t}` WHERE a = \'x\\ty\'\n  AND b = "\\\\N"'
    ingest_bytes(
        f"2026-01-05T09:00:00.000000Z\t    7 Connect\t{user}@h\\N on shop using TCP/IP\n"
        f"2026-01-05T09:00:01.000000Z\t    7 Query\t{statement}\n".encode()
    )
    event = Event.objects.get(statement_type="DELETE")
    assert event.sql == statement
    assert event.user == user
    assert event.host == "h\\N"
    assert event.tables == ['shop.we"ird\\,{t}']
    assert bytes(event.raw).endswith(statement.encode() + b"\n")


@pytest.mark.parametrize(
    "record",
    [
        # Printable ASCII, written as it is (with its backslashes doubled twice) ...
        b'{"class":"general","connection_id":3,"general_data":{"query":"a\\\\b \\"c\\" \\\\x41"}}',
        b'{"class":"general","connection_id":3,"general_data":{"query":"\\\\\\\\x00 \\\\N"}}',
        # Tabs, line ends and backslashes that look like bytea's own escapes, as octal escapes.
        b"2026-01-05T09:00:00.000000Z\t    7 Query\tSELECT '\\\\x41\t\\\\012 \\011\\'\r",
        b"2026-01-05T09:00:00.000000Z\t    7 Query\tSELECT 1,\n  2,\r\n  3",
        b"2026-01-05T09:00:00.000000Z\t    7 Query\tSELECT 'a\\0' /* mariadb-slap ends with a NUL */\x00",
        # ... and anything else as hex: UTF-8, control bytes, invalid UTF-8.
        b'{"class":"general","connection_id":3,"general_data":{"query":"caf\xc3\xa9 \x7f"}}',
        b"2026-01-05T09:00:00.000000Z\t    7 Query\tSELECT '\xff\xfe\x01\\x'",
    ],
)
def test_raw_bytes_come_back_exactly_as_the_log_had_them(ingest_bytes, record: bytes) -> None:
    ingest_bytes(record + b"\n", name="any.log")
    event = Event.objects.get()
    assert bytes(event.raw).rstrip(b"\n") == record
