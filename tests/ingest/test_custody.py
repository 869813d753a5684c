"""Chain of custody: file hashes as files are read, the hash chain over the store, and
`manage.py verify_evidence` finding every kind of tampering (ingest.custody, ingest.verify)."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from ingest.custody import Sha256State
from ingest.follow import ingest_source
from ingest.models import CustodyLink, Event, Source, SourceFile
from ingest.pipeline import ingest_file, source_for_path
from tests.conftest import FIXTURES
from tests.logwriter import GeneralLogWriter, rotate_copytruncate, rotate_rename

pytestmark = pytest.mark.django_db

SCENARIO = FIXTURES / "genlog" / "mariadb-10.11.19-scenario.log"
CRIME_SCENE = FIXTURES / "crime_scene" / "mariadb-10.11.19-general.log"


def verify(*args: str) -> tuple[int, str]:
    """Run verify_evidence; its exit status and what it printed."""
    out = io.StringIO()
    try:
        call_command("verify_evidence", *args, stdout=out)
    except CommandError as e:
        return e.returncode, out.getvalue()
    return 0, out.getvalue()


def ingest_copy(tmp_path: Path, fixture: Path, name: str = "general.log", server: str = "db1") -> Path:
    path = tmp_path / name
    path.write_bytes(fixture.read_bytes())
    ingest_file(
        path, source=source_for_path(path, server=server, fmt="general-log", tz="UTC"), fmt="general-log"
    )
    return path


FORGED = (
    "occurred_at, server, command, statement_type, tables, destructive, flags, sql, fingerprint, raw, line,"
    " byte_offset, record_hash, session_id, source_file_id"
)


def sql(statement: str, params: list[object]) -> int:
    with connection.cursor() as cur:
        cur.execute(statement, params)
        return cur.rowcount


def follow(path: str) -> Source:
    return Source.objects.create(name=f"followed {path}", kind=Source.Kind.FILE, path=path, server="db1")


# -- file hashes -----------------------------------------------------------------------------------


def test_a_saved_sha256_goes_on_where_it_stopped() -> None:
    data = os.urandom(200_003)
    first = Sha256State()
    first.update(data[:70_001])
    resumed = Sha256State(first.saved())
    resumed.update(data[70_001:])
    assert resumed.length == len(data)
    assert resumed.hexdigest() == hashlib.sha256(data).hexdigest()
    assert first.hexdigest() == hashlib.sha256(data[:70_001]).hexdigest()  # and it goes on after a digest


def test_a_growing_file_has_the_sha256_of_the_bytes_read_so_far_after_every_poll(tmp_path: Path) -> None:
    log = tmp_path / "general.log"
    writer = GeneralLogWriter(log)
    source = follow(str(log))
    for count in (300, 7, 1200, 40):
        writer.write(count)
        ingest_source(source.pk)
        f = SourceFile.objects.get(source=source)
        content = log.read_bytes()
        assert 0 < f.hashed_bytes == f.bytes_read < len(content)  # the last record waits for the next line
        assert f.sha256 == hashlib.sha256(content[: f.hashed_bytes]).hexdigest()
    links = CustodyLink.objects.filter(source=source, kind=CustodyLink.Kind.FILE).order_by("seq")
    assert [link.file_bytes for link in links] == sorted({link.file_bytes for link in links})
    assert len(links) == 4  # one per poll that read something
    for link in links:  # every hash so far is the hash of that many first bytes
        assert link.file_sha256 == hashlib.sha256(log.read_bytes()[: link.file_bytes]).hexdigest()
    assert verify("--all-events")[0] == 0


def test_a_gzipped_file_has_the_sha256_of_its_content(tmp_path: Path) -> None:
    path = tmp_path / "general.log.gz"
    path.write_bytes(gzip.compress(SCENARIO.read_bytes()))
    ingest_file(path, source=source_for_path(path, server="db1", fmt="auto", tz="UTC"))
    f = SourceFile.objects.get()
    assert f.sha256 == hashlib.sha256(SCENARIO.read_bytes()).hexdigest()  # what `zcat | sha256sum` prints
    assert f.hashed_bytes == len(SCENARIO.read_bytes())
    assert verify("--all-events")[0] == 0


# -- an untouched store --------------------------------------------------------------------------------


def test_it_passes_an_untouched_store_and_its_files(tmp_path: Path) -> None:
    ingest_copy(tmp_path, CRIME_SCENE)  # with rolled-back statements: flags added after insert
    assert CustodyLink.objects.filter(kind=CustodyLink.Kind.FLAGS).exists()
    status, out = verify("--all-events")
    assert status == 0
    assert "ALTERED" not in out and "NOT CHECKED" not in out
    assert f"{Event.objects.count()} event bytes re-read" in out
    assert out.rstrip().endswith("Result: intact.")


def test_events_read_again_are_chained_once_and_new_ones_on_the_slow_path(tmp_path: Path) -> None:
    path = ingest_copy(tmp_path, SCENARIO)
    with path.open("ab") as f:  # the same file, grown: the first events are stored already
        f.write(b"251123 10:00:00\t    9 Connect\tzed@localhost on shop\n")
        f.write(b"251123 10:00:01\t    9 Query\tDELETE FROM t\n")
    ingest_file(path, source=Source.objects.get(), fmt="general-log")
    batches = CustodyLink.objects.filter(kind=CustodyLink.Kind.EVENTS).order_by("seq")
    assert [b.event_count for b in batches] == [75, 2]
    assert verify("--all-events")[0] == 0


def test_batches_written_before_issue_22_still_verify_and_their_edits_are_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ingest import rows

    # Written as before issue 22: raw bytes with a tab or a line end as hex (other COPY lines,
    # other digests, the same bytes).
    monkeypatch.setattr(rows, "_copy_bytea", rows._legacy_copy_bytea)
    ingest_copy(tmp_path, SCENARIO)
    monkeypatch.undo()
    assert "Result: intact." in verify("--all-events")[1]
    victim = Event.objects.filter(destructive=True).order_by("id").first()
    assert victim is not None
    sql("UPDATE ingest_event SET raw = %s WHERE id = %s", [bytes(victim.raw)[:-2] + b"\n", victim.pk])
    status, out = verify()
    assert status == 1
    assert "1 stored event(s) differ from how they were written" in out
    assert f"(event ids {victim.pk})" in out


# -- tampering with the store --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("column", "value"),
    [("sql", "SELECT 1"), ("user", "mallory"), ("raw", b"harmless"), ("statement_type", "SELECT")],
)
def test_it_finds_an_event_edited_in_the_store(tmp_path: Path, column: str, value: object) -> None:
    ingest_copy(tmp_path, SCENARIO)
    victim = Event.objects.filter(destructive=True).order_by("id").first()
    assert victim is not None
    sql(f'UPDATE ingest_event SET "{column}" = %s WHERE id = %s', [value, victim.pk])
    status, out = verify()
    assert status == 1
    assert "1 stored event(s) differ from how they were written" in out
    assert f"(event ids {victim.pk})" in out


def test_it_finds_a_forged_event_inserted_into_the_store(tmp_path: Path) -> None:
    ingest_copy(tmp_path, SCENARIO)
    sql(
        f"INSERT INTO ingest_event ({FORGED}) SELECT occurred_at, server, command, 'DROP TABLE',"
        " '{shop.orders}', true, flags, 'DROP TABLE orders', fingerprint, raw, line, byte_offset + 1,"
        " '\\x01', session_id, source_file_id FROM ingest_event ORDER BY id LIMIT 1",
        [],
    )
    forged = Event.objects.get(sql="DROP TABLE orders")
    status, out = verify()
    assert status == 1
    assert "1 stored event(s) of this source are in no batch of its chain (inserted into the store" in out
    assert f"existed) (event ids {forged.pk})" in out


def test_it_finds_a_forged_event_given_an_id_inside_a_batch(tmp_path: Path) -> None:
    ingest_copy(tmp_path, SCENARIO)
    first = Event.objects.order_by("id").first()
    assert first is not None
    sql("DELETE FROM ingest_event WHERE id = %s", [first.pk + 3])
    sql(  # in the gap that the deletion left: the same id range and file as the batch
        f"INSERT INTO ingest_event (id, {FORGED}) SELECT id + 3, occurred_at, server, command,"
        " statement_type, tables, destructive, flags, 'forged', fingerprint, raw, line, byte_offset, '\\x02',"
        " session_id, source_file_id FROM ingest_event WHERE id = %s",
        [first.pk],
    )
    status, out = verify()
    assert status == 1
    assert f"(event ids {first.pk + 3})" in out


def test_it_finds_an_event_deleted_from_the_store(tmp_path: Path) -> None:
    ingest_copy(tmp_path, SCENARIO)
    ids = list(Event.objects.order_by("id").values_list("id", flat=True))
    sql("DELETE FROM ingest_event WHERE id = %s", [ids[10]])
    status, out = verify()
    assert status == 1
    assert "1 event(s) missing from the batch of link 1" in out
    assert f"event number 11 of 75, between event ids {ids[9]} and {ids[11]}" in out


def test_it_finds_a_flag_removed_after_it_was_added(tmp_path: Path) -> None:
    ingest_copy(tmp_path, CRIME_SCENE)
    rolled_back = Event.objects.filter(flags__contains=["rolled_back"]).order_by("id").first()
    assert rolled_back is not None
    sql("UPDATE ingest_event SET flags = array_remove(flags, 'rolled_back') WHERE id = %s", [rolled_back.pk])
    status, out = verify()
    assert status == 1
    assert f"event {rolled_back.pk} lost the flag 'rolled_back'" in out


def test_it_finds_a_link_of_the_chain_changed_or_removed(tmp_path: Path) -> None:
    ingest_copy(tmp_path, SCENARIO)
    link = CustodyLink.objects.get(kind=CustodyLink.Kind.EVENTS)
    CustodyLink.objects.filter(pk=link.pk).update(event_count=74)
    status, out = verify()
    assert status == 1 and "this events stored link was changed after it was written" in out
    CustodyLink.objects.filter(pk=link.pk).delete()
    status, out = verify()
    assert status == 1
    assert "this link does not follow the one before it" in out  # the file link after it
    assert "in no batch of its chain" in out  # and its 75 events belong to nothing now


def test_it_finds_a_file_hash_changed_in_the_store(tmp_path: Path) -> None:
    ingest_copy(tmp_path, SCENARIO)
    SourceFile.objects.update(sha256="0" * 64)
    status, out = verify()
    assert status == 1
    assert "is not the one the chain recorded" in out


# -- tampering with the original files -----------------------------------------------------------------


def test_it_finds_a_byte_changed_in_the_original_file(tmp_path: Path) -> None:
    path = ingest_copy(tmp_path, SCENARIO)
    victim = Event.objects.filter(destructive=True).order_by("id").first()
    assert victim is not None
    with path.open("r+b") as f:
        f.seek(victim.byte_offset + len(victim.raw) - 3)
        f.write(b"X")
    status, out = verify("--all-events")
    assert status == 1
    assert "bytes no longer hash to what was read" in out
    assert f"1 event(s) whose bytes in {path} differ from what was read (event ids {victim.pk})" in out


def test_it_reports_a_truncated_file_as_changed_and_a_removed_one_as_not_checked(tmp_path: Path) -> None:
    path = ingest_copy(tmp_path, SCENARIO)
    size = path.stat().st_size
    os.truncate(path, size - 100)
    status, out = verify("--all-events")
    assert status == 1
    assert f"has {size - 100} bytes, but {size} were read (link 2): truncated" in out
    path.unlink()
    status, out = verify("--all-events")
    assert status == 0  # nothing altered that could be seen...
    assert f"NOT CHECKED [file] source '{Source.objects.get().name}': the original file is gone" in out
    assert "75 event(s) not re-read: the original file is gone" in out
    assert out.rstrip().endswith("Result: intact, 2 thing(s) could not be checked.")
    assert verify("--strict")[0] == 2  # ...but nothing to check it against


def test_json_output_lists_every_finding(tmp_path: Path) -> None:
    path = ingest_copy(tmp_path, SCENARIO)
    path.unlink()
    out = io.StringIO()
    call_command("verify_evidence", "--json", "--source", Source.objects.get().name, stdout=out)
    result = json.loads(out.getvalue())
    assert result["intact"] is True
    assert {(f["status"], f["what"]) for f in result["findings"]} == {
        ("ok", "chain"),
        ("unchecked", "file"),
        ("unchecked", "event"),
    }
    head = result["chain_heads"][Source.objects.get().name]
    assert head["link"] == 2 and head["hash"] == bytes(CustodyLink.objects.get(seq=2).hash).hex()


# -- files that rotate ----------------------------------------------------------------------------------


def test_rename_rotations_and_their_gzip_still_verify(tmp_path: Path) -> None:
    log = tmp_path / "general.log"
    writer = GeneralLogWriter(log)
    source = follow(str(log) + "*")
    for _ in range(2):
        writer.write(300)
        ingest_source(source.pk)
        writer.write(50)
        rotate_rename(log)
        writer.reopen()
    writer.write(30)
    ingest_source(source.pk)
    ingest_source(source.pk)
    # the oldest rotation is compressed later, as logrotate's delaycompress does
    old = tmp_path / "general.log.2"
    (tmp_path / "general.log.2.gz").write_bytes(gzip.compress(old.read_bytes()))
    old.unlink()
    status, out = verify("--all-events")
    assert status == 0, out
    assert "NOT CHECKED" not in out
    assert f"{tmp_path / 'general.log.2.gz'}: its first" in out  # found under its new name


def test_copytruncate_rotations_still_verify_and_a_changed_copy_is_found(tmp_path: Path) -> None:
    log = tmp_path / "general.log"
    writer = GeneralLogWriter(log)
    source = follow(str(log) + "*")
    for _ in range(2):
        writer.write(300)
        ingest_source(source.pk)
        writer.write(40)
        rotate_copytruncate(log)
        writer.write(30)
        ingest_source(source.pk)
    status, out = verify("--all-events")
    assert status == 0, out
    assert "NOT CHECKED" not in out
    copy = tmp_path / "general.log.1"
    data = bytearray(copy.read_bytes())
    data[5000] ^= 0x20  # past the first KiB, which names the file
    copy.write_bytes(bytes(data))
    status, out = verify("--all-events")
    assert status == 1
    assert f"{copy}: its first" in out and "no longer hash to what was read" in out
    data[100] ^= 0x20  # in the first KiB, by which a followed file is recognised under a new name
    copy.write_bytes(bytes(data))
    status, out = verify("--all-events")
    assert "NOT CHECKED [file]" in out
    assert "no file begins with the recorded first bytes (another file now, or this one altered" in out


@pytest.mark.django_db(transaction=True)
def test_a_backlog_read_in_ranges_by_several_workers_verifies(tmp_path: Path) -> None:
    """Ranges of one file read backwards (ingest.split): batches of one file committed out of
    order, a rolled-back correction crossing ranges; the file's hash is made when the split ends."""
    import shutil

    from django.test import override_settings

    from ingest.split import read_chunk

    log = tmp_path / "general.log.1"
    shutil.copyfile(CRIME_SCENE, log)
    os.utime(log, (1_700_000_000, 1_700_000_000))
    (tmp_path / "general.log").write_bytes(log.read_bytes().splitlines(keepends=True)[-1])
    source = follow(str(tmp_path / "general.log*"))
    queued: list[int] = []
    with override_settings(INGEST_SPLIT_BYTES=1, INGEST_CHUNK_BYTES=256):
        ingest_source(source.pk, dispatch=queued.append)
        assert len(queued) > 10
        for chunk_id in reversed(queued):
            assert read_chunk(chunk_id)
    rotated = SourceFile.objects.get(source=source, path=str(log))
    assert rotated.finished and rotated.hashed_bytes == log.stat().st_size
    assert rotated.sha256 == hashlib.sha256(log.read_bytes()).hexdigest()
    assert CustodyLink.objects.filter(source=source, kind=CustodyLink.Kind.FLAGS).exists()
    status, out = verify("--all-events")
    assert status == 0, out
    assert "NOT CHECKED" not in out


@pytest.mark.django_db(transaction=True)
def test_links_appended_at_once_by_several_workers_chain_in_commit_order() -> None:
    """Four workers (threads with their own connections) append to one source's chain at once,
    each link in a transaction that lingers after appending: the head's lock orders them."""
    import threading
    import time

    from django.db import transaction

    from ingest.custody import append_link
    from ingest.verify import Verification, verify_chain

    source = Source.objects.create(name="busy", kind=Source.Kind.FILE, path="/nowhere", server="db1")
    start = threading.Barrier(4)
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            start.wait()
            for i in range(10):
                with transaction.atomic():
                    append_link(source_id=source.pk, kind="file", file_bytes=n * 100 + i, file_sha256="-")
                    time.sleep(0.002)  # others try to append meanwhile
        except BaseException as e:
            errors.append(e)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    links = list(CustodyLink.objects.filter(source=source).order_by("seq"))
    assert [link.seq for link in links] == list(range(1, 41))
    v = Verification()
    verify_chain(v, source)
    assert [(f.status, f.message) for f in v.findings] == [("ok", "40 links, each following the one before")]
    order = [link.committed_at for link in links]
    assert order == sorted(order)


def test_events_stored_before_the_chain_are_sealed_by_its_migration(tmp_path: Path) -> None:
    """Migration 0012 runs adopt_stored_events on a store that has events and no chain."""
    from django.db import transaction

    from ingest.custody import adopt_stored_events

    ingest_copy(tmp_path, CRIME_SCENE)
    sql("DELETE FROM ingest_custodylink", [])  # the store as it was before the chain
    sql("DELETE FROM ingest_custodyhead", [])
    assert "in no batch of its chain" in verify()[1]
    with transaction.atomic():
        assert adopt_stored_events(batch=50) == Event.objects.count()
    status, out = verify("--all-events")
    assert status == 0, out
    assert (
        f"{Event.objects.count()} event(s) stored before the chain existed were sealed when it began" in out
    )
    victim = Event.objects.order_by("id")[60]
    sql("UPDATE ingest_event SET sql = 'SELECT 1' WHERE id = %s", [victim.pk])
    status, out = verify()
    assert status == 1 and f"(event ids {victim.pk})" in out
