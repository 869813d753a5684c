"""Continuous ingestion with real Celery workers (separate processes, started here) against the
PostgreSQL and Redis this test run uses: a log appended to while the worker polls, rotated by
rename and by copytruncate, a worker killed with SIGKILL mid-file, two workers on one source.
After each, the store holds every event of the files exactly once: the same events as a
straight `ingest` of the files concatenated, the last record of the live file included (it is
stored once the file has been quiet for INGEST_SETTLE_SECONDS)."""

from __future__ import annotations

import time
from pathlib import Path

import psycopg
import pytest

from ingest.checkpoints import LOCK_CLASS
from ingest.follow import SourceBusy, ingest_source
from ingest.models import Chunk, Event, IngestRun, Source, SourceFile, Split
from ingest.tasks import ingest_source_task
from tests.ingest.test_sources import events_of, straight_ingest
from tests.logwriter import GeneralLogWriter, rotate_copytruncate, rotate_rename
from tests.processes import Workers, wait_for, worker_database_url

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]


def follow(path: str, interval: int = 1) -> Source:
    return Source.objects.create(
        name=f"followed {path}",
        kind=Source.Kind.FILE,
        path=path,
        server="db1",
        format="general-log",
        interval_seconds=interval,
    )


def expect_all(tmp_path: Path, content: bytes, workers: Workers) -> None:
    """Wait until the store holds every event of `content` once, the quiet last one included."""
    expected = straight_ingest(tmp_path, content)
    wait_for(lambda: events_of("db1") == expected, workers)


def test_it_follows_a_log_appended_and_rotated_while_the_worker_polls(
    tmp_path: Path, workers: Workers
) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    log = logs / "general.log"
    writer = GeneralLogWriter(log)
    follow(str(log) + "*")
    workers.start()
    content = b""
    for _ in range(3):  # appended in bursts while the worker polls every second
        writer.write(700)
        time.sleep(0.7)
    writer.write(300)
    old = rotate_rename(log)  # logrotate: rename + create, then the server reopens
    writer.write(40)
    writer.reopen()
    content += old.read_bytes()
    for _ in range(2):
        writer.write(500)
        time.sleep(0.8)
    old = rotate_copytruncate(log)  # logrotate copytruncate
    content += old.read_bytes()
    writer.write(600)
    time.sleep(1.5)
    writer.write(300)
    content += log.read_bytes()
    expect_all(tmp_path, content, workers)
    assert SourceFile.objects.filter(source__server="db1", finished=True).count() == 2
    assert not IngestRun.objects.filter(status=IngestRun.Status.FAILED).exists()


def test_a_worker_killed_mid_file_leaves_nothing_half_done(tmp_path: Path, workers: Workers) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    log = logs / "general.log"
    writer = GeneralLogWriter(log)
    writer.write(150_000)
    source = follow(str(log))
    worker = workers.start(INGEST_BATCH_SIZE="500")

    def mid_file() -> bool:
        run = IngestRun.objects.filter(source=source, status=IngestRun.Status.RUNNING).first()
        return run is not None and 0 < run.bytes_read < run.bytes_total // 2

    wait_for(mid_file, workers, seconds=60)
    workers.kill(worker)
    stored = Event.objects.filter(server="db1").count()
    resume = SourceFile.objects.get(source=source).resume
    assert 0 < stored < 150_000
    # What is stored is exactly what the committed checkpoint says was read: nothing half done.
    assert Event.objects.filter(server="db1", byte_offset__gte=resume["offset"]).count() == 0
    assert Event.objects.filter(server="db1").count() == stored
    writer.write(1000)  # the log goes on while no worker runs
    workers.start(INGEST_BATCH_SIZE="5000")
    expect_all(tmp_path, log.read_bytes(), workers)
    killed = IngestRun.objects.filter(source=source, status=IngestRun.Status.FAILED).get()
    assert killed.error.startswith("interrupted")


def test_two_workers_on_one_source_store_each_event_once(tmp_path: Path, workers: Workers) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    log = logs / "general.log"
    writer = GeneralLogWriter(log)
    source = follow(str(log) + "*")
    workers.start(INGEST_BATCH_SIZE="300")
    workers.start(beat=False, INGEST_BATCH_SIZE="300")
    content = b""
    for i in range(6):
        writer.write(1500)
        # Runs asked for on top of beat's polls: both workers get some, at the same time.
        for _ in range(4):
            ingest_source_task.apply_async(args=[source.pk], queue=workers.queue)
        time.sleep(0.5)
        if i == 3:
            content += rotate_rename(log).read_bytes()
            writer.reopen()
    content += log.read_bytes()
    expect_all(tmp_path, content, workers)
    assert not IngestRun.objects.filter(status=IngestRun.Status.FAILED).exists()


def test_a_source_held_by_another_connection_is_busy(tmp_path: Path, settings) -> None:
    settings.INGEST_SETTLE_SECONDS = 3600  # the last record waits, however slow this machine
    log = tmp_path / "general.log"
    GeneralLogWriter(log).write(10)
    source = follow(str(log))
    other = psycopg.connect(worker_database_url().replace("postgres://", "postgresql://"), autocommit=True)
    try:
        other.execute("SELECT pg_advisory_lock(%s, %s)", [LOCK_CLASS, source.pk])
        with pytest.raises(SourceBusy):
            ingest_source(source.pk)
        assert not Event.objects.exists()
    finally:
        other.close()  # the lock goes with the connection
    assert ingest_source(source.pk) is not None
    assert Event.objects.filter(server="db1").count() == 10  # banner + 9; the last waits


def test_a_siem_polling_alerts_while_two_workers_ingest_gets_each_alert_once(
    tmp_path: Path, workers: Workers
) -> None:
    """Two servers' logs ingested at once by two workers, in many small transactions that commit
    in whatever order they finish; a poller keeps the last cursor and asks for what follows."""
    from django.db.models import Q

    from ingest.alerts import alerts_after

    writers = []
    for name in ("db1", "db2"):
        folder = tmp_path / name
        folder.mkdir()
        writers.append(GeneralLogWriter(folder / "general.log"))
        Source.objects.create(
            name=name,
            path=str(folder / "general.log*"),
            server=name,
            format="general-log",
            interval_seconds=1,
        )
    workers.start(INGEST_BATCH_SIZE="97")
    workers.start(beat=False, INGEST_BATCH_SIZE="97")
    seen: list[tuple[int, object, bytes]] = []
    cursor = None

    def poll() -> None:
        nonlocal cursor
        while True:
            page = alerts_after(cursor, 50)
            seen.extend((a.position, a.event_time, bytes(a.event_hash)) for a in page.items)
            cursor = page.next_cursor
            if not page.more:
                return

    worth = Event.objects.filter(
        Q(destructive=True) | Q(flags__overlap=["anti_forensic", "privilege_change"])
    )
    for _ in range(8):
        for writer in writers:
            writer.write(400)
        poll()
        time.sleep(0.3)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        poll()
        busy = IngestRun.objects.filter(status=IngestRun.Status.RUNNING).exists()
        if not busy and len(seen) == worth.count() and worth.filter(server="db2").exists():
            break
        time.sleep(0.3)
    poll()
    positions = [p for p, _, _ in seen]
    assert positions == sorted(positions) and len(set(positions)) == len(positions)  # in order, once
    expected = {(e.occurred_at, bytes(e.record_hash)) for e in worth}
    assert len(expected) > 2000
    assert {(t, h) for _, t, h in seen} == expected  # every alert, and only those
    assert len(seen) == len(expected)
    assert {e.server for e in worth} == {"db1", "db2"}


SPLIT_SETTINGS = {
    "INGEST_SPLIT_BYTES": str(512 * 1024),
    "INGEST_CHUNK_BYTES": str(96 * 1024),
    "INGEST_BATCH_SIZE": "400",
    "INGEST_CHUNK_REDISPATCH_SECONDS": "3",
}


def backlog(tmp_path: Path, records: int) -> tuple[Path, bytes]:
    """A rotated file and the live one with `records` records between them, not read yet."""
    logs = tmp_path / "logs"
    logs.mkdir()
    log = logs / "general.log"
    writer = GeneralLogWriter(log)
    writer.write(records // 2)
    content = rotate_rename(log).read_bytes()
    writer.reopen()
    writer.write(records - records // 2)
    writer.f.flush()
    return log, content + log.read_bytes()


def test_two_workers_share_out_a_big_backlog_and_store_each_event_once(
    tmp_path: Path, workers: Workers
) -> None:
    log, content = backlog(tmp_path, 24000)
    source = follow(str(log) + "*")
    workers.start(**SPLIT_SETTINGS)
    workers.start(beat=False, **SPLIT_SETTINGS)
    expect_all(tmp_path, content, workers)
    split = Split.objects.get(source=source)
    wait_for(lambda: Split.objects.get(pk=split.pk).finished_at is not None, workers)
    chunks = Chunk.objects.filter(split=split)
    assert chunks.count() > 10 and not chunks.filter(done=False).exists()
    # Both workers read ranges (each is a worker process of its own: host and pid).
    assert len(set(chunks.values_list("worker", flat=True))) == 2, workers.logs()
    assert IngestRun.objects.get(pk=split.run_id).status == IngestRun.Status.DONE
    assert SourceFile.objects.filter(source=source, finished=True).count() == 1


def test_a_worker_killed_mid_range_leaves_the_split_to_the_others(tmp_path: Path, workers: Workers) -> None:
    log, content = backlog(tmp_path, 24000)
    source = follow(str(log) + "*")
    first = workers.start(**SPLIT_SETTINGS)

    def mid_range() -> bool:
        return Chunk.objects.filter(split__source=source, done=False, resume__isnull=False).exists()

    wait_for(mid_range, workers)
    workers.kill(first)
    assert Event.objects.filter(server="db1").count() < 23000
    workers.start(**SPLIT_SETTINGS)
    expect_all(tmp_path, content, workers)
    wait_for(lambda: not Split.objects.filter(source=source, finished_at__isnull=True).exists(), workers)
