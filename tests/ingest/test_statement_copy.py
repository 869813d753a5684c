"""The statements of a batch as COPY lines (issue 22, the writer's cost per new statement).

The parsing process sends a batch's statements as the COPY lines of the dictionary and their
(id, key) records; the writer copies the new ones as they are, and falls back to adding them
round by round when another writer adds the same ones at once, an id is taken, or the
formatter named a later id. Each way must store what the other stores.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, date, datetime

import pytest
from django.db import connection, transaction

from ingest.custody import batch_digest, statement_lines
from ingest.events import EventRecord, SessionInfo
from ingest.models import CustodyLink, Event, Source, SourceFile, Statement
from ingest.partitions import ensure_event_partitions
from ingest.rows import STATEMENT_RECORD, RowFormatter, statement_id, statement_key
from ingest.store import EventWriter

HOSTILE_SQL = [
    "DELETE FROM t WHERE note = 'a\\b\tc'",
    "UPDATE t SET v = 'é\r\n' WHERE k = '\\N'",
    "SELECT 'ok \u2028 line \x85 \x1c', \"{x,y}\" FROM t",
    'INSERT INTO t VALUES ("quo""te")',
]


def event(
    sql: str,
    offset: int,
    *,
    tables: tuple[str, ...] = ("shop.t",),
    database: str | None = "shop",
    connection_id: int = 3,
) -> EventRecord:
    session = SessionInfo(
        key=f"db1/boot/{connection_id}", server="db1", boot="boot", connection_id=connection_id
    )
    return EventRecord(
        occurred_at=datetime(2026, 11, 25, 4, 0, offset % 60, tzinfo=UTC),
        server="db1",
        session=session,
        connection_id=connection_id,
        user="root",
        host="localhost",
        ip=None,
        database=database,
        command="Query",
        sql=sql,
        raw=b"x\n",
        line=offset,
        offset=offset,
        tables=tables,
        flags={"unattributed"},
    )


def hostile_events(start: int = 1, connection_id: int = 3) -> list[EventRecord]:
    events = [event(sql, start + i, connection_id=connection_id) for i, sql in enumerate(HOSTILE_SQL)]
    odd_tables = ('we"ird\\\\tab\tle', "x,y{z}")
    events.append(
        event("SELECT 1", start + 10, tables=odd_tables, database=None, connection_id=connection_id)
    )
    events.append(event(HOSTILE_SQL[0], start + 11, connection_id=connection_id))  # named twice: one line
    return events


def test_a_batch_carries_each_statement_once_as_a_copy_line_and_its_record_in_id_order() -> None:
    batch = RowFormatter(source_file_id=1, ingest_run_id=None).format(hostile_events())
    rows = batch.statements  # read back from the COPY lines
    assert len(rows) == 5 == len(batch.statement_keys) // STATEMENT_RECORD.size
    assert batch.statement_copy.count(b"\n") == len(rows)
    assert [row[0] for row in rows] == sorted(row[0] for row in rows)
    # Line for line the records, which the custody link digests as they are.
    assert list(STATEMENT_RECORD.iter_unpack(batch.statement_keys)) == [(row[0], row[1]) for row in rows]
    assert batch.statement_keys == statement_lines((row[0], row[1]) for row in rows)
    # Every value comes back exactly: each key is the digest of the values on its line.
    for number, key, database, statement_type, tables, destructive, fingerprint, sql in rows:
        assert statement_key(database, statement_type, tables, destructive, fingerprint, sql) == key
        assert number == statement_id(key)
    assert {row[7] for row in rows} == {*HOSTILE_SQL, "SELECT 1"}
    assert [row[4] for row in rows if row[7] == "SELECT 1"] == [['we"ird\\\\tab\tle', "x,y{z}"]]


@pytest.fixture
def source_file(db) -> SourceFile:
    source = Source.objects.create(name="statements", kind=Source.Kind.FILE, path="/nowhere", server="db1")
    return SourceFile.objects.create(source=source, path="/nowhere/general.log", size=0, head_sha256="0" * 64)


def stored_statements() -> dict[int, tuple[object, ...]]:
    with connection.cursor() as cur:
        columns = "id, key, database, statement_type, tables, destructive, fingerprint, sql"
        cur.execute(f"SELECT {columns} FROM ingest_statement")
        return {row[0]: (row[0], bytes(row[1]), *row[2:]) for row in cur.fetchall()}


@pytest.mark.django_db(transaction=True)
def test_the_copied_statements_are_the_values_the_batch_names(source_file: SourceFile) -> None:
    writer = EventWriter(source_file_id=source_file.pk, ingest_run_id=None)
    batch = writer.formatter.format(hostile_events())
    with transaction.atomic():
        writer.write_formatted(batch)
    assert stored_statements() == {row[0]: tuple(row) for row in batch.statements}
    link = CustodyLink.objects.get(kind="events")
    assert bytes(link.rows_sha256) == batch_digest(batch.narrow, batch.statement_keys)


@pytest.mark.django_db(transaction=True)
def test_a_rolled_back_batch_takes_its_new_statements_with_it_and_the_next_adds_them(
    source_file: SourceFile,
) -> None:
    writer = EventWriter(source_file_id=source_file.pk, ingest_run_id=None)
    with pytest.raises(RuntimeError), transaction.atomic():
        writer.write(hostile_events())
        assert Statement.objects.count() == 5
        raise RuntimeError("the batch fails after its statements were copied")
    assert Statement.objects.count() == 0
    with transaction.atomic():  # the writer knows none of them: they are added again
        writer.write(hostile_events(start=100))
    assert Statement.objects.count() == 5
    assert set(Event.objects.values_list("statement_id", flat=True)) == set(stored_statements())


@pytest.mark.django_db(transaction=True)
def test_a_statement_the_formatter_named_by_a_later_id_is_stored_under_its_first_free_one(
    source_file: SourceFile,
) -> None:
    """The formatter names a key's later id when it gave the first to another key (a 64-bit id
    shared, made to happen here): when the first is free in the store after all, the statement
    goes there, as the id order says, and its rows follow."""
    writer = EventWriter(source_file_id=source_file.pk, ingest_run_id=None)
    events = hostile_events()
    formatter = writer.formatter
    first = formatter.format(events[:2])
    number, key = next((row[0], row[1]) for row in first.statements if row[7] == events[0].sql)
    formatter._named[number] = b"\x00" * 16  # another key holds that id, to the formatter
    del formatter._by_text[events[0].sql]  # (it forgets the statement: it makes it again)
    batch = formatter.format(events)
    named = dict((k, n) for n, k in STATEMENT_RECORD.iter_unpack(batch.statement_keys))
    assert named[key] == statement_id(key, 1)  # the rows name the later id
    with transaction.atomic():
        writer.write_formatted(batch)
    assert Statement.objects.filter(pk=number, key=key).exists()
    assert not Statement.objects.filter(pk=statement_id(key, 1)).exists()
    assert set(Event.objects.filter(sql=events[0].sql).values_list("statement_id", flat=True)) == {number}
    link = CustodyLink.objects.get(kind="events")
    stored = [(row[0], row[1]) for row in stored_statements().values()]
    lines = Event.objects.count()
    assert link.event_count == lines
    assert bytes(link.rows_sha256) != batch_digest(batch.narrow, batch.statement_keys)  # renumbered
    assert bytes(link.rows_sha256) == batch_digest(
        batch.narrow.replace(b"\t%d\n" % statement_id(key, 1), b"\t%d\n" % number), stored
    )


@pytest.mark.django_db(transaction=True)
def test_two_writers_adding_the_same_statements_at_once_store_each_once(source_file: SourceFile) -> None:
    """The second writer's COPY waits for the first's transaction; once that commits, the COPY
    fails, its savepoint takes it back, and the statements are found where the first put them."""
    other = SourceFile.objects.create(
        source=source_file.source, path="/nowhere/other.log", size=0, head_sha256="1" * 64
    )
    with transaction.atomic():  # the month's partition, made beforehand (its lock would hold B up)
        ensure_event_partitions({date(2026, 11, 1)})
    first_wrote, second_done = threading.Event(), threading.Event()
    errors: list[BaseException] = []
    batches = {}

    def first() -> None:
        try:
            writer = EventWriter(source_file_id=source_file.pk, ingest_run_id=None)
            with transaction.atomic():
                writer.write(hostile_events())
                first_wrote.set()
                # Hold the transaction open until the second writer waits on its statements.
                deadline = time.monotonic() + 60
                while not waiting_copy() and time.monotonic() < deadline:
                    time.sleep(0.05)
                batches["waited"] = waiting_copy()
        except BaseException as e:
            errors.append(e)
            first_wrote.set()
        finally:
            connection.close()

    def second() -> None:
        try:
            first_wrote.wait(60)
            writer = EventWriter(source_file_id=other.pk, ingest_run_id=None)
            # (Sessions of its own: the first's session row would hold it up before its statements.)
            batch = batches["second"] = writer.formatter.format(hostile_events(start=100, connection_id=4))
            with transaction.atomic():
                writer.write_formatted(batch)
        except BaseException as e:
            errors.append(e)
        finally:
            second_done.set()
            connection.close()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    assert batches["waited"], "the second writer's COPY never waited for the first's statements"
    assert Statement.objects.count() == 5
    ids = Event.objects.values_list("source_file_id", "statement_id")
    assert (
        {n for f, n in ids if f == source_file.pk}
        == {n for f, n in ids if f == other.pk}
        == set(stored_statements())
    )
    link = CustodyLink.objects.get(kind="events", source_file=other)
    assert bytes(link.rows_sha256) == batch_digest(batches["second"].narrow, batches["second"].statement_keys)


def waiting_copy() -> bool:
    """Whether a backend waits on a lock in a COPY into the statement dictionary."""
    with connection.cursor() as cur:
        cur.execute("SELECT pg_stat_clear_snapshot()")  # (else a transaction sees its first look only)
        cur.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND wait_event_type = 'Lock' AND query LIKE %s",
            ['COPY "ingest_statement"%'],
        )
        return cur.fetchone()[0] > 0
