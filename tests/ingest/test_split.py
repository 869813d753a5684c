"""A backlog shared out in byte ranges (ingest.split), with the ranges read in any order, by
functions called directly: the store must be exactly what one sequential read stores. The
real-worker test is in tests/test_continuous.py."""

from __future__ import annotations

import itertools
import os
import shutil
from collections import Counter
from pathlib import Path

import pytest
from django.test import override_settings

from ingest.follow import ingest_source
from ingest.models import Chunk, Event, Gap, IngestRun, Source, SourceFile, Split
from ingest.pipeline import ingest_file, source_for_path
from ingest.split import read_chunk
from tests.conftest import FIXTURES
from tests.logwriter import GeneralLogWriter, rotate_rename

pytestmark = pytest.mark.django_db(transaction=True)

CRIME_SCENE = FIXTURES / "crime_scene"


def stored(server: str, path: Path | None = None) -> Counter[tuple[object, ...]]:
    """Every event of a server (read from `path`) with all the tracker and classifier decided."""
    events = Event.objects.filter(server=server)
    if path is not None:
        events = events.filter(source_file__in=SourceFile.objects.filter(path=str(path)))
    rows = events.values_list(
        "occurred_at",
        "connection_id",
        "session__boot",
        "command",
        "user",
        "host",
        "database",
        "statement_type",
        "tables",
        "destructive",
        "flags",
        "sql",
        "id",  # (its raw bytes, inline or in the file's chunks since issue 22: taken below)
        "line",
        "byte_offset",
    )
    raw = {e.pk: e.raw for e in events}
    rows = [(*row[:12], raw[row[12]], *row[13:]) for row in rows]
    return Counter(
        (
            *row[:8],
            tuple(sorted(row[8])),
            row[9],
            tuple(sorted(row[10])),
            *row[11:12],
            bytes(row[12]),
            *row[13:],
        )
        for row in rows
    )


def gaps_of(server: str, path: Path | None = None) -> Counter[tuple[object, ...]]:
    gaps = Gap.objects.filter(server=server)
    if path is not None:
        gaps = gaps.filter(source_file__path=str(path))
    return Counter(gaps.values_list("reason", "started_at", "ended_at", "line"))


def reference(
    tmp_path: Path, log: Path, fmt: str
) -> tuple[Counter[tuple[object, ...]], Counter[tuple[object, ...]]]:
    copy = tmp_path / "reference" / log.name
    copy.parent.mkdir(exist_ok=True)
    shutil.copyfile(log, copy)
    ingest_file(copy, source=source_for_path(copy, server="reference", fmt=fmt, tz="UTC"), fmt=fmt)
    return stored("reference"), gaps_of("reference")


def follow(path: Path | str, fmt: str) -> Source:
    return Source.objects.create(
        name=f"followed {path}", kind=Source.Kind.FILE, path=str(path), server="db1", format=fmt
    )


@pytest.mark.parametrize(
    ("name", "fmt", "every"),
    [
        ("mariadb-10.11.19-general.log", "general-log", 256),
        ("mariadb-10.11.19-server_audit.log", "mariadb-audit", 1024),
    ],
)
def test_ranges_read_in_any_order_store_what_one_read_stores(
    tmp_path: Path, name: str, fmt: str, every: int
) -> None:
    """The crime scene (sessions across ranges, transactions rolled back in a later range,
    prepared statements, a restart, logging switched off) cut every few records, read backwards.
    It is a rotated file (a newer one follows it), so it is read to its very end."""
    log = tmp_path / f"{name}.1"
    shutil.copyfile(CRIME_SCENE / name, log)
    os.utime(log, (1_700_000_000, 1_700_000_000))
    (tmp_path / name).write_bytes(log.read_bytes().splitlines(keepends=True)[-1])  # not its head
    source = follow(tmp_path / f"{name}*", fmt)
    queued: list[int] = []
    with override_settings(INGEST_SPLIT_BYTES=1, INGEST_CHUNK_BYTES=every):
        run = ingest_source(source.pk, dispatch=queued.append)
        assert run is not None and run.status == IngestRun.Status.RUNNING
        split = Split.objects.get(source=source)
        assert split.planned and split.finished_at is None
        assert len(queued) == split.chunks.count() > 10
        # The source waits for its split: a poll reads nothing and queues nothing new.
        assert ingest_source(source.pk, dispatch=queued.append) is None
        for chunk_id in reversed(queued):
            assert read_chunk(chunk_id)

    split.refresh_from_db()
    assert split.finished_at is not None
    run.refresh_from_db()
    assert run.status == IngestRun.Status.DONE
    want_events, want_gaps = reference(tmp_path, log, fmt)
    assert stored("db1", log) == want_events
    assert gaps_of("db1", log) == want_gaps
    assert sum(want_gaps.values()) > 0
    assert any("rolled_back" in row[10] for row in want_events)  # a correction crossed ranges
    # Each range ended in the state the scan said the next one starts in.
    chunks = list(split.chunks.order_by("number"))
    for before, after in itertools.pairwise(chunks):
        if before.source_file_id == after.source_file_id:
            assert before.resume["offset"] == after.start["offset"]
            assert before.state == after.start_state
    # The files and the source now stand where one read would have left them.
    rotated = SourceFile.objects.get(source=source, path=str(log))
    assert rotated.finished and rotated.bytes_read == log.stat().st_size
    assert Source.objects.get(pk=source.pk).checkpoint["tracker"] == chunks[-1].state["tracker"]


def test_a_worker_stopped_mid_range_and_a_second_reading_store_each_event_once(tmp_path: Path) -> None:
    log = tmp_path / "general.log"
    writer = GeneralLogWriter(log)
    writer.write(6000)
    queued: list[int] = []
    source = follow(str(log) + "*", "general-log")
    with override_settings(INGEST_SPLIT_BYTES=1, INGEST_CHUNK_BYTES=64 * 1024, INGEST_BATCH_SIZE=200):
        ingest_source(source.pk, dispatch=queued.append)
        assert len(queued) > 3
        middle = queued[len(queued) // 2]
        assert not read_chunk(middle, stop_after=1)  # killed after its first batch
        assert Chunk.objects.get(pk=middle).resume is not None
        for chunk_id in queued:
            read_chunk(chunk_id)
        for chunk_id in queued:  # read again (a duplicate message): nothing more is stored
            assert read_chunk(chunk_id)
    writer.write(300)  # the log goes on after the split: plain polls take over
    ingest_source(source.pk)
    whole = log.read_bytes()
    want, _ = reference(tmp_path, log, "general-log")
    last = max(want, key=lambda row: (row[0], row[13]))  # pending: nothing says it is complete
    assert stored("db1") + Counter([last]) == want
    assert len(whole) > 64 * 1024 * 3


def test_a_rotated_set_is_shared_out_a_file_or_more_each(tmp_path: Path) -> None:
    """Rotated files (the gzip one read whole by one worker), then the live file, in order."""
    import gzip

    log = tmp_path / "general.log"
    writer = GeneralLogWriter(log)
    content = b""
    for _ in range(3):
        writer.write(1500)
        old = rotate_rename(log)
        writer.reopen()
        content += old.read_bytes()
    gz = old.with_name(old.name + ".gz")
    gz.write_bytes(gzip.compress(old.read_bytes()))
    old.unlink()
    writer.write(1500)
    writer.f.flush()
    queued: list[int] = []
    source = follow(str(log) + "*", "general-log")
    with override_settings(INGEST_SPLIT_BYTES=1, INGEST_CHUNK_BYTES=48 * 1024):
        ingest_source(source.pk, dispatch=queued.append)
        split = Split.objects.get(source=source)
        files = {c.source_file_id for c in split.chunks.all()}
        assert len(files) == 4
        gz_file = SourceFile.objects.get(source=source, path=str(gz))
        assert split.chunks.filter(source_file=gz_file).count() == 1
        assert split.chunks.count() > 4
        for chunk_id in reversed(queued):
            read_chunk(chunk_id)
    assert Split.objects.get(pk=split.pk).finished_at is not None
    assert SourceFile.objects.filter(source=source, finished=True).count() == 3
    whole = tmp_path / "whole.log"
    whole.write_bytes(content + log.read_bytes())
    want, _ = reference(tmp_path, whole, "general-log")
    mine = Counter(row[:13] for row in stored("db1").elements())  # lines and offsets are per file
    last = max(want, key=lambda row: (row[0], row[13]))
    assert mine + Counter([last[:13]]) == Counter(row[:13] for row in want.elements())


def test_a_poll_gives_up_a_split_whose_planner_died(tmp_path: Path) -> None:
    log = tmp_path / "general.log"
    GeneralLogWriter(log).write(500)
    source = follow(log, "general-log")
    run = IngestRun.objects.create(source=source)
    Split.objects.create(source=source, run=run)  # never planned: its worker died scanning
    ingest_source(source.pk)
    assert Split.objects.get(source=source).finished_at is not None
    assert IngestRun.objects.get(pk=run.pk).status == IngestRun.Status.FAILED
    assert Event.objects.filter(server="db1").count() > 400


def test_the_run_page_shows_each_range_and_who_read_it(tmp_path: Path, investigator_client) -> None:
    log = tmp_path / "general.log"
    GeneralLogWriter(log).write(3000)
    source = follow(log, "general-log")
    queued: list[int] = []
    with override_settings(INGEST_SPLIT_BYTES=1, INGEST_CHUNK_BYTES=32 * 1024):
        run = ingest_source(source.pk, dispatch=queued.append)
        read_chunk(queued[0])
    page = investigator_client.get(f"/sources/runs/{run.pk}/").content.decode()
    assert "Shared out between workers" in page
    assert page.count("<td>queued</td>") == len(queued) - 1
    assert page.count("<td>stored</td>") == 1
    assert Chunk.objects.get(pk=queued[0]).worker.split(":")[-1] in page
