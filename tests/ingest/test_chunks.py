"""A log's bytes kept as zstd chunks of its content, each event's raw bytes its slice (ingest.chunks),
custody over the chunks, and migration 0024 moving the raw bytes of a store made before."""

from __future__ import annotations

import gzip
import hashlib
import io
from pathlib import Path

import pytest
import zstandard
from django.core.management import CommandError, call_command
from django.db import connection, transaction
from django.db.migrations.executor import MigrationExecutor

from ingest import chunks, raw_migration
from ingest.chunks import ContentWindow, unpack
from ingest.custody import adopt_stored_events
from ingest.follow import ingest_source
from ingest.models import Event, RawChunk, Source, SourceFile
from ingest.pipeline import ingest_file, source_for_path
from investigations.templatetags.auditweb import raw_bytes
from tests.conftest import FIXTURES
from tests.logwriter import GeneralLogWriter

SCENARIO = FIXTURES / "genlog" / "mariadb-10.11.19-scenario.log"

# A statement with a NUL and bytes that are no UTF-8, between ordinary ones.
HOSTILE = (
    b"2024-05-01T10:00:00.000000Z\t    7 Connect\talice@10.0.0.7 on shop using TCP/IP\n"
    b"2024-05-01T10:00:01.000000Z\t    7 Query\tSELECT 'a\x00b' FROM t WHERE c = '\xff\xfe\xc3('\n"
    b"2024-05-01T10:00:02.000000Z\t    7 Query\tDELETE FROM shop.orders WHERE id = 1\n"
    b"2024-05-01T10:00:03.000000Z\t    7 Quit\t\n"
)


def verify(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    try:
        call_command("verify_evidence", *args, stdout=out)
    except CommandError as e:
        return e.returncode, out.getvalue()
    return 0, out.getvalue()


def ingest(tmp_path: Path, data: bytes, name: str = "general.log") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    ingest_file(
        path, source=source_for_path(path, server="db1", fmt="general-log", tz="UTC"), fmt="general-log"
    )
    return path


def content_of_chunks(file_id: int) -> bytes:
    kept, position = b"", 0
    for chunk in RawChunk.objects.filter(source_file_id=file_id).order_by("start"):
        assert chunk.start == position  # in order, without holes or overlaps
        data = unpack(chunk.data)
        assert len(data) == chunk.length and hashlib.sha256(data).digest() == bytes(chunk.sha256)
        kept += data
        position += len(data)
    return kept


# -- the window of content a read keeps -------------------------------------------------------------


def test_a_window_holds_exactly_the_bytes_at_their_offsets() -> None:
    window = ContentWindow()
    window.add(100, b"first line\n")
    window.add(111, b"second\n")
    assert window.holds(100, b"first line\nsec")
    assert window.holds(111, b"second\n")
    assert not window.holds(111, b"secone\n")
    assert not window.holds(99, b"xfirst")
    assert not window.holds(115, b"nd\nmore")  # past what it holds


def test_a_hole_starts_another_run_and_take_cuts_chunks_at_most_chunk_bytes(monkeypatch) -> None:
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 4)
    window = ContentWindow()
    window.add(0, b"abcdefghij")
    window.add(20, b"KLMNOP")  # bytes 10-19 were a cut line: not handed over
    assert not window.holds(8, b"ij" + bytes(10))
    taken = window.take(23)
    assert taken == [(0, b"abcd"), (4, b"efgh"), (8, b"ij"), (20, b"KLM")]
    assert window.holds(23, b"NOP") and not window.holds(20, b"KLM")
    assert window.take(100) == [(23, b"NOP")]


def test_what_a_read_adds_after_a_take_continues_the_run_the_take_left(monkeypatch) -> None:
    window = ContentWindow()
    window.add(0, b"abc\n")
    window.add(4, b"def\n")
    assert window.take(6) == [(0, b"abc\nde")]
    window.add(8, b"ghi\n")  # where the run left by the take ends: the same run
    assert window.runs() == [(6, b"f\nghi\n")]
    assert window.take(100) == [(6, b"f\nghi\n")]
    window.add(12, b"jkl\n")  # after everything was taken: a run of its own
    assert window.runs() == [(12, b"jkl\n")]
    # Held past its bound (a read that makes no batch): what it held is dropped, the read goes on.
    monkeypatch.setattr(chunks, "WINDOW_MAX_BYTES", 10)
    window.add(16, b"mnopqr\n")
    assert window.runs() == [(16, b"mnopqr\n")]
    window.add(23, b"s\n")
    assert window.runs() == [(16, b"mnopqr\ns\n")]


# -- ingesting: events point into the chunks ----------------------------------------------------------


@pytest.mark.django_db
def test_every_event_of_a_file_is_its_slice_of_the_kept_content(tmp_path: Path, monkeypatch) -> None:
    """Small chunks, so that records span two (and more) of them; the content kept is the file."""
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 97)
    data = SCENARIO.read_bytes() + HOSTILE
    path = ingest(tmp_path, data)
    sf = SourceFile.objects.get(path=str(path))
    assert content_of_chunks(sf.pk) == data
    assert hashlib.sha256(data).hexdigest() == sf.sha256  # the whole log: verifiable against its hash
    events = list(Event.objects.filter(source_file=sf).order_by("id"))
    assert len(events) > 20 and all(e.raw_inline is None for e in events)
    spanning = [e for e in events if e.byte_offset // 97 != (e.byte_offset + e.raw_length - 1) // 97]
    assert spanning
    for e in events:
        assert e.raw == data[e.byte_offset : e.byte_offset + e.raw_length] and len(e.raw) == e.raw_length
    hostile = Event.objects.get(source_file=sf, sql__startswith="SELECT 'a")
    assert b"\x00b' FROM t WHERE c = '\xff\xfe\xc3('\n" in hostile.raw


@pytest.mark.django_db
def test_a_bulk_reader_decompresses_each_chunk_once(tmp_path: Path, monkeypatch) -> None:
    path = ingest(tmp_path, SCENARIO.read_bytes())
    sf = SourceFile.objects.get(path=str(path))
    calls = []
    original = chunks.unpack
    monkeypatch.setattr(chunks, "unpack", lambda data: calls.append(1) or original(data))
    events = list(Event.objects.filter(source_file=sf))
    chunks.fill_raw(events)
    assert len(calls) == RawChunk.objects.filter(source_file=sf).count()
    assert all(e.raw == SCENARIO.read_bytes()[e.byte_offset : e.byte_offset + e.raw_length] for e in events)


@pytest.mark.django_db
def test_the_event_page_and_the_api_show_the_bytes_from_the_chunks(tmp_path: Path, client, viewer) -> None:
    path = ingest(tmp_path, HOSTILE)
    event = Event.objects.get(source_file__path=str(path), sql__startswith="SELECT 'a")
    assert event.raw_inline is None
    client.force_login(viewer)
    page = client.get(f"/events/{event.pk}/").content.decode()
    shown = str(raw_bytes(HOSTILE.splitlines(keepends=True)[1]))
    assert "\\x00" in shown and "\\xff" in shown and shown in page
    download = client.get(f"/events/{event.pk}/raw/")
    assert b"".join(download.streaming_content) == HOSTILE.splitlines(keepends=True)[1]
    assert download["Content-Length"] == str(event.raw_length)


@pytest.mark.django_db
def test_a_followed_file_read_poll_by_poll_is_kept_whole_and_in_order(tmp_path: Path) -> None:
    """Each poll's chunks start where the last one's read stopped (its resume point): together
    they are the file's bytes so far, which its SHA-256 so far covers."""
    log = tmp_path / "general.log"
    writer = GeneralLogWriter(log)
    source = Source.objects.create(name="followed", kind=Source.Kind.FILE, path=str(log), server="db1")
    for count in (300, 7, 1200, 40):
        writer.write(count)
        ingest_source(source.pk)
        sf = SourceFile.objects.get(source=source)
        kept = content_of_chunks(sf.pk)
        assert kept == log.read_bytes()[: sf.hashed_bytes]
    events = list(Event.objects.filter(source_file=sf))
    assert len(events) > 1000 and all(e.raw_inline is None for e in events)
    content = log.read_bytes()
    assert all(e.raw == content[e.byte_offset : e.byte_offset + e.raw_length] for e in events)
    assert verify("--all-events")[0] == 0


@pytest.mark.django_db
def test_a_gzipped_file_is_kept_as_its_content(tmp_path: Path) -> None:
    path = tmp_path / "general.log.gz"
    path.write_bytes(gzip.compress(SCENARIO.read_bytes()))
    ingest_file(path, source=source_for_path(path, server="db1", fmt="auto", tz="UTC"))
    assert content_of_chunks(SourceFile.objects.get().pk) == SCENARIO.read_bytes()
    assert verify("--all-events")[0] == 0


# -- custody -----------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_verify_finds_a_changed_byte_of_the_kept_log_and_names_its_events(tmp_path: Path) -> None:
    path = ingest(tmp_path, SCENARIO.read_bytes())
    assert verify()[0] == 0
    sf = SourceFile.objects.get(path=str(path))
    victim = Event.objects.filter(source_file=sf, command="Query").order_by("id")[3]
    chunk = RawChunk.objects.get(
        source_file=sf, start__lte=victim.byte_offset, start__gt=victim.byte_offset - chunks.CHUNK_BYTES
    )
    content = bytearray(unpack(chunk.data))
    content[victim.byte_offset - chunk.start + victim.raw_length - 3] ^= 0x20
    RawChunk.objects.filter(pk=chunk.pk).update(data=zstandard.ZstdCompressor().compress(bytes(content)))
    status, out = verify()
    assert status == 1
    assert "no longer holds the bytes that were read (its SHA-256 differs)" in out
    assert str(victim.pk) in out
    # and the record hash no longer matches the bytes it is read from
    assert f"event {victim.pk}: its server, time, offset or raw bytes were changed in the store" in out


@pytest.mark.django_db
def test_verify_finds_a_deleted_chunk(tmp_path: Path) -> None:
    path = ingest(tmp_path, SCENARIO.read_bytes())
    sf = SourceFile.objects.get(path=str(path))
    RawChunk.objects.filter(source_file=sf).order_by("start").first().delete()
    status, out = verify()
    assert status == 1 and "is missing from the store" in out
    assert "its raw bytes are gone from the store" in out


@pytest.mark.django_db
def test_the_event_page_says_when_the_store_lost_an_events_bytes(tmp_path: Path, client, viewer) -> None:
    path = ingest(tmp_path, HOSTILE)
    event = Event.objects.get(source_file__path=str(path), sql__startswith="SELECT 'a")
    RawChunk.objects.filter(source_file=event.source_file).delete()
    client.force_login(viewer)
    response = client.get(f"/events/{event.pk}/")
    assert response.status_code == 200
    page = response.content.decode()
    assert 'id="raw-missing"' in page and f"no chunk of source file #{event.source_file_id} holds" in page
    assert 'id="h-statement"' in page and "SELECT &#x27;a" in page  # the rest of the page is there


# -- migration 0024 on a store made before it ----------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_migration_moves_an_old_stores_raw_bytes_into_chunks_and_it_still_verifies(tmp_path: Path) -> None:
    """Events stored with their raw bytes inline and sealed by links of version 1 (as migration
    0012 seals them: the old row's line), in the schema before 0023; then migrated forward."""
    data = SCENARIO.read_bytes()
    path = ingest(tmp_path, data)
    columns = (
        'occurred_at, server, connection_id, "user", host, ip, database, command, statement_type, tables,'
        " destructive, flags, sql, fingerprint, rows_affected, status, line, byte_offset, record_hash,"
        " ingest_run_id, session_id, source_file_id, attribution, definer"
    )
    with connection.cursor() as cur:
        cur.execute(f"SELECT id, {columns} FROM ingest_event ORDER BY id")
        rows = cur.fetchall()
    raws = {e.pk: e.raw for e in Event.objects.all()}
    executor = MigrationExecutor(connection)
    executor.migrate([("ingest", "0022_binlog_statement_time_index")])
    try:
        with connection.cursor() as cur:
            cur.execute("TRUNCATE ingest_event, ingest_custodylink, ingest_custodyhead")
            for row in rows:
                cur.execute(
                    f"INSERT INTO ingest_event (id, {columns}, raw) VALUES ({', '.join(['%s'] * 26)})",
                    [*row, raws[row[0]]],
                )
        with transaction.atomic():  # the old chain: a digest per event, of the old line (as 0012)
            assert adopt_stored_events() == len(rows)
    finally:
        MigrationExecutor(connection).migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
    events = {e.pk: e for e in Event.objects.all()}
    assert len(events) == len(rows)
    for pk, raw in raws.items():
        assert events[pk].raw == raw and events[pk].raw_length == len(raw)
        assert events[pk].raw_inline is None
    sf = SourceFile.objects.get(path=str(path))
    for chunk in RawChunk.objects.filter(source_file=sf):  # the events' bytes, at their offsets
        assert unpack(chunk.data) == data[chunk.start : chunk.start + chunk.length]
    status, out = verify()
    assert status == 0, out
    assert "sealed when it began" in out


def test_the_migration_keeps_inline_the_bytes_it_cannot_place() -> None:
    runs = raw_migration._Runs()
    assert runs.place(10, b"abc\n") and runs.place(14, b"def\n")
    assert runs.place(14, b"def")  # the same bytes again (a record's second statement): in place
    assert not runs.place(14, b"xyz")  # other bytes over them: kept inline
    assert not runs.place(30, b"after a hole\n")  # the caller flushes first
    assert runs.flush() == [(10, b"abc\ndef\n")]
    assert runs.place(30, b"after a hole\n")
    assert not runs.place(12, b"c\n")  # over bytes flushed already: kept inline
