"""Exactly once without a unique index on every event (issue 22): a file that comes back, under
any name and in any shape, stores nothing twice, because its content is recognised and each
read's checkpoint says how far the store holds it; alerts and flag corrections find their
events without that index."""

from __future__ import annotations

import gzip
from collections import Counter
from pathlib import Path

import pytest
from django.db import connection
from django.test import override_settings

from ingest.checkpoints import find_candidates
from ingest.follow import ingest_source
from ingest.models import Alert, Chunk, CustodyLink, Event, IngestRun, Source, SourceFile, Split
from ingest.pipeline import ingest_file, source_for_path
from ingest.split import read_chunk
from tests.logwriter import GeneralLogWriter

from ..conftest import FIXTURES

pytestmark = pytest.mark.django_db(transaction=True)

CRIME_SCENE = FIXTURES / "crime_scene" / "mariadb-10.11.19-general.log"


def ingest(path: Path, server: str = "db1") -> IngestRun:
    return ingest_file(path, source=source_for_path(path, server=server, fmt="auto", tz="UTC"))


def stored(server: str = "db1") -> Counter[tuple[object, ...]]:
    """Each stored event of a server by what it is (time, record hash, statement), with how often
    it is stored: exactly once means every count is 1."""
    rows = Event.objects.filter(server=server).values_list("occurred_at", "record_hash", "sql")
    return Counter((when, bytes(digest), sql) for when, digest, sql in rows)


def reference(path: Path) -> Counter[tuple[object, ...]]:
    """What one clean read of `path` stores (under the label "ref", made equal to db1's)."""
    ingest(path, server="ref")
    rows = Event.objects.filter(server="ref").values_list("occurred_at", "sql", "byte_offset")
    return Counter((when, sql, offset) for when, sql, offset in rows)


def as_db1() -> Counter[tuple[object, ...]]:
    """db1's events as `reference` counts them."""
    rows = Event.objects.filter(server="db1").values_list("occurred_at", "sql", "byte_offset")
    return Counter((when, sql, offset) for when, sql, offset in rows)


@pytest.fixture
def log(tmp_path: Path, settings) -> Path:
    settings.INGEST_BATCH_SIZE = 50  # many batches, so checkpoints fall all over the file
    path = tmp_path / "general.log"
    path.write_bytes(CRIME_SCENE.read_bytes())
    return path


def test_the_same_file_again_stores_nothing(log: Path) -> None:
    first = ingest(log)
    again = ingest(log)
    assert first.events_stored > 100
    assert again.events_seen == first.events_seen and again.events_stored == 0
    assert set(stored().values()) == {1}


def test_a_renamed_copy_stores_nothing(log: Path, tmp_path: Path) -> None:
    first = ingest(log)
    copy = tmp_path / "elsewhere" / "general.log.1"
    copy.parent.mkdir()
    copy.write_bytes(log.read_bytes())
    again = ingest(copy)
    assert again.events_seen == first.events_seen and again.events_stored == 0
    assert set(stored().values()) == {1}
    assert Source.objects.filter(server="db1").count() == 2  # another source: found by content


def test_a_gzipped_copy_stores_nothing(log: Path, tmp_path: Path) -> None:
    first = ingest(log)
    packed = tmp_path / "general.log.2.gz"
    packed.write_bytes(gzip.compress(log.read_bytes()))
    again = ingest(packed)
    assert again.events_seen == first.events_seen and again.events_stored == 0
    assert set(stored().values()) == {1}


def test_a_longer_version_stores_only_what_was_added(log: Path, tmp_path: Path) -> None:
    data = log.read_bytes()
    half = data.index(b"\n", len(data) // 2) + 1
    log.write_bytes(data[:half])
    first = ingest(log)
    longer = tmp_path / "general-later.log"
    longer.write_bytes(data)
    more = ingest(longer)
    assert 0 < more.events_stored < more.events_seen
    assert set(stored().values()) == {1}
    whole = reference(longer)
    assert as_db1() == whole  # each event of the whole file, once, none lost
    assert first.events_stored + more.events_stored == sum(whole.values())


def test_a_truncated_copy_stores_nothing_even_cut_inside_a_record(log: Path, tmp_path: Path) -> None:
    ingest(log)
    before = stored()
    data = log.read_bytes()
    cut = data.index(b"DELETE", len(data) // 2) + 3  # half a statement
    short = tmp_path / "general.log.cut"
    short.write_bytes(data[:cut])
    again = ingest(short)
    assert again.events_seen > 0 and again.events_stored == 0
    assert stored() == before


def test_a_read_that_died_half_way_is_completed_under_any_name(log: Path, tmp_path: Path) -> None:
    batches = []

    def die_after_three(run: IngestRun) -> None:
        batches.append(run.events_stored)
        if len(batches) == 3:
            raise KeyboardInterrupt  # (as a SIGKILL would, after the third batch's commit)

    source = source_for_path(log, server="db1", fmt="auto", tz="UTC")
    with pytest.raises(KeyboardInterrupt):
        ingest_file(log, source=source, progress=die_after_three)
    died = stored()
    assert 0 < sum(died.values()) == batches[-1]
    copy = tmp_path / "general.log.copy"
    copy.write_bytes(log.read_bytes())
    rest = ingest(copy)  # another name, so another source: what the first stored is found by content
    assert rest.events_stored == rest.events_seen - sum(died.values())
    assert set(stored().values()) == {1}
    whole = reference(log)
    assert as_db1() == whole
    assert ingest(log).events_stored == 0  # and the first name, read again to its end, adds nothing


def test_an_event_of_another_file_with_the_same_time_and_text_is_not_taken_for_it(tmp_path: Path) -> None:
    # The same statement at the same time in two different logs (two servers' copies share no
    # content): both are stored, since no content says one holds the other.
    line = b"2026-01-05T09:00:00.000000Z\t     5 Query\tDELETE FROM orders\n"
    one, two = tmp_path / "one.log", tmp_path / "two.log"
    one.write_bytes(line)
    two.write_bytes(b"2026-01-05T08:59:59.000000Z\t     5 Query\tSELECT 1\n" + line)
    assert ingest(one).events_stored == 1
    assert ingest(two).events_stored == 2


def test_a_followed_source_of_a_file_read_once_before_stores_only_what_comes_after(
    log: Path, tmp_path: Path
) -> None:
    data = log.read_bytes()
    half = data.index(b"\n", len(data) // 2) + 1
    log.write_bytes(data[:half])
    ingest(log)
    followed_dir = tmp_path / "followed"
    followed_dir.mkdir()
    followed = followed_dir / "general.log"
    followed.write_bytes(data[:half])
    source = Source.objects.create(name="follow", path=str(followed), server="db1", format="general-log")
    run = ingest_source(source.pk)
    assert run is not None and run.events_stored == 0 and run.events_seen > 0
    with followed.open("ab") as f:
        f.write(data[half:])
    ingest_source(source.pk)
    assert set(stored().values()) == {1}
    whole = reference(followed)
    last = max(whole, key=lambda row: (row[0], row[2]))  # pending in a live file: not complete yet
    assert as_db1() + Counter([last]) == whole


def test_an_upload_of_a_file_read_before_stores_nothing(log: Path, tmp_path: Path, settings) -> None:
    settings.UPLOAD_DIR = tmp_path / "uploads"
    first = ingest(log)
    target = tmp_path / "uploads" / "abc" / "evidence.log.gz"
    target.parent.mkdir(parents=True)
    target.write_bytes(gzip.compress(log.read_bytes()))
    (candidate,) = find_candidates(str(target), [])
    source = Source.objects.create(
        name="upload", kind=Source.Kind.UPLOAD, path=str(target), server="db1", enabled=False
    )
    SourceFile.objects.create(
        source=source,
        path=str(target),
        compressed=True,
        size=candidate.size,
        head_sha256=candidate.head_sha256,
        head_length=len(candidate.head),
        content_head=candidate.head_sha256,
        device=candidate.device,
        inode=candidate.inode,
        resume={"offset": 0, "line": 1, "last_time": None},
    )
    run = ingest_source(source.pk)
    assert run is not None and run.status == IngestRun.Status.DONE
    assert run.events_seen == first.events_seen and run.events_stored == 0
    assert set(stored().values()) == {1}


def test_each_alert_names_its_own_event(log: Path) -> None:
    ingest(log)
    alerts = list(Alert.objects.exclude(event_hash=None))
    assert len(alerts) > 10
    events = Event.objects.in_bulk([a.event_id for a in alerts])
    for alert in alerts:
        event = events[alert.event_id]
        assert (event.occurred_at, bytes(event.record_hash)) == (alert.event_time, bytes(alert.event_hash))
        assert event.destructive or {"anti_forensic", "privilege_change"} & set(event.flags)
    assert len({a.event_id for a in alerts}) == len(alerts)
    # Read again, nothing new: no alert either.
    ingest(log)
    assert Alert.objects.exclude(event_hash=None).count() == len(alerts)


def test_a_rollback_batches_later_flags_the_right_event_of_a_same_time_pair(tmp_path: Path, settings) -> None:
    settings.INGEST_BATCH_SIZE = 1  # each statement in its own batch: the flag reaches back
    at = "2026-01-05T09:00:01.000000Z"
    path = tmp_path / "general.log"
    path.write_bytes(
        b"2026-01-05T09:00:00.000000Z\t     5 Connect\tbob@db1 on shop using TCP/IP\n"
        b"2026-01-05T09:00:00.000000Z\t     6 Connect\tann@db1 on shop using TCP/IP\n"
        b"2026-01-05T09:00:00.500000Z\t     5 Query\tBEGIN\n"
        + f"{at}\t     5 Query\tDELETE FROM orders\n".encode()
        + f"{at}\t     6 Query\tDELETE FROM orders\n".encode()  # same time and text, autocommit
        + b"2026-01-05T09:10:00.000000Z\t     5 Query\tROLLBACK\n"
    )
    ingest(path)
    deletes = {e.session.connection_id: e for e in Event.objects.filter(sql="DELETE FROM orders")}
    assert "rolled_back" in deletes[5].flags
    assert "rolled_back" not in deletes[6].flags
    ingest(path)  # read again: flags not added twice
    assert Event.objects.get(pk=deletes[5].pk).flags.count("rolled_back") == 1


def test_the_store_keeps_no_index_on_the_record_hash() -> None:
    with connection.cursor() as cur:
        cur.execute(
            "SELECT indexdef FROM pg_indexes WHERE tablename = 'ingest_event_row' AND indexdef LIKE %s",
            ["%record_hash%"],
        )
        assert cur.fetchall() == []


def test_a_split_given_up_after_some_ranges_were_stored_stores_the_rest_once(tmp_path: Path) -> None:
    log = tmp_path / "general.log"
    writer = GeneralLogWriter(log)
    writer.write(6000)
    source = Source.objects.create(name="split", path=str(log), server="db1", format="general-log")
    queued: list[int] = []
    with override_settings(INGEST_SPLIT_BYTES=1, INGEST_CHUNK_BYTES=64 * 1024, INGEST_BATCH_SIZE=200):
        ingest_source(source.pk, dispatch=queued.append)
        assert len(queued) > 3
        assert read_chunk(queued[1])  # one range stored whole
        assert not read_chunk(queued[2], stop_after=1)  # one killed after its first batch
        assert Chunk.objects.get(pk=queued[2]).resume is not None
        # The planner "died" before its scan ended: the next poll gives the split up.
        Split.objects.filter(source=source).update(planned=False)
        writer.write(300)  # the log goes on
        ingest_source(source.pk)
    assert Split.objects.get(source=source).finished_at is not None
    assert set(stored().values()) == {1}
    whole = reference(log)
    last = max(whole, key=lambda row: (row[0], row[2]))  # pending in a live file: not complete yet
    assert as_db1() + Counter([last]) == whole


@pytest.mark.parametrize("followed", [False, True])
def test_a_small_file_that_grew_past_its_head_stores_only_what_was_added(
    tmp_path: Path, settings, followed: bool
) -> None:
    """A file shorter than the bytes that name content (1 KiB) is named by all of it: written on,
    it has another head. It is still recognised as where the longer one begins, whether the
    longer one is read once under another name or followed by the source that read it once."""
    settings.INGEST_SETTLE_SECONDS = 0  # a quiet file's last record is stored at once
    data = CRIME_SCENE.read_bytes()
    small = data[: data.index(b"\n", 600) + 1]
    assert len(small) < 1024
    path = tmp_path / "general.log"
    path.write_bytes(small)
    first = ingest(path)
    assert first.events_stored > 0
    path.write_bytes(data[: data.index(b"\n", 3000) + 1])
    if followed:
        source = Source.objects.get(server="db1")
        Source.objects.filter(pk=source.pk).update(enabled=True)
        ingest_source(source.pk)
    else:
        longer = tmp_path / "general-later.log"
        longer.write_bytes(path.read_bytes())
        ingest(longer)
    assert set(stored().values()) == {1}
    assert as_db1() == reference(path)  # each event of the longer file, once, none lost


def test_a_one_shot_read_commits_full_batches(log: Path) -> None:
    """A read cuts a batch once it holds INGEST_BATCH_SIZE events (50 here), at the next point
    it may: each batch but the last is full. (A cut asked for again while the one made was not
    yet sent had sent one event alone after each full batch: twice the commits.)"""
    ingest(log)
    counts = list(
        CustodyLink.objects.filter(kind="events", event_count__gt=0)
        .order_by("seq")
        .values_list("event_count", flat=True)
    )
    assert len(counts) > 2
    assert all(n >= 50 for n in counts[:-1]), counts
    assert sum(counts) == Event.objects.filter(server="db1").count()
