"""One-shot ingests: a log file read once to its end, and a pull of a live mysql.general_log table.

The `ingest` command and `pull_general_log` call these; followed sources are ingest.follow's.
"""

from __future__ import annotations

import gzip
import hashlib
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import urlsplit, urlunsplit
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.db.models.functions import Greatest

from ingest.batch import Batch
from ingest.commit import commit_batch
from ingest.custody import chain_file_hash
from ingest.events import EventRecord, FlagCorrection, GapRecord
from ingest.identity import content_head, holding_source, recognise
from ingest.models import IngestRun, Source, SourceFile
from ingest.mysql_table import Puller
from ingest.normalize import GapFinder, SessionTracker, classifier_for
from ingest.oracle_table import OraclePuller
from ingest.parsers import by_name, reads_bytes
from ingest.parsers.detect import detect_format
from ingest.parsers.records import Hints, Problem
from ingest.rows import RowFormatter
from ingest.store import EventWriter
from ingest.tail import (
    FileLines,
    OpenedLog,
    in_second_process,
    is_log,
    open_log,
    tail_messages,
)

Progress = Callable[[IngestRun], None]


def source_for_path(path: Path, *, server: str, fmt: str, tz: str) -> Source:
    """The file source a command-line ingest belongs to (one per server and path). It is made
    switched off: a file read once is not followed (nor reported silent an hour later); switch
    it on, on the Sources page, to have beat poll it."""
    path = path.resolve()
    name = f"{server}:{path}"[:200]
    source, _ = Source.objects.get_or_create(
        name=name,
        defaults={
            "kind": Source.Kind.FILE,
            "path": str(path),
            "format": fmt,
            "server": server,
            "timezone": tz,
            "enabled": False,
        },
    )
    return source


@dataclass(frozen=True)
class ContentSoFar:
    """Sent before each batch of a one-shot read: the content read so far and its SHA-256, which
    the batch's commit records, so the file is recognised by it should the read stop there."""

    content_bytes: int
    sha256: str


@dataclass(frozen=True)
class FileEnd:
    """The last message of a one-shot read, after its batches: what its content hashed to."""

    content_bytes: int
    sha256: str


def ingest_file(
    path: Path,
    *,
    source: Source,
    fmt: str = "auto",
    tracker: SessionTracker | None = None,
    gap_finder: GapFinder | None = None,
    progress: Progress | None = None,
) -> IngestRun:
    """Read one log file to its end into the store. Returns the finished run. A binary log (a
    binary format of the registry) goes to `ingest.binlog_store.ingest_binlog` instead.

    1. Record the file (path, size, hash of its head) before parsing anything.
    2. Read it as a followed file is read (ingest.tail), from offset 0 to its end, in a stream:
       the file is never held in memory.
    3. Commit each batch with the run's progress (ingest.commit), so a crash loses at most the
       batch in flight (and a re-run stores exactly what is missing).
    4. Record the file's SHA-256 (of its content, hashed as it was parsed) in the file and in the
       source's custody chain, and the run's totals.
    """
    opened = open_log(path)
    excerpts = is_log(opened.head)
    if fmt == "auto":
        fmt = detect_format(opened.head)
    if reads_bytes(by_name(fmt)):  # ValueError naming the formats there are, for an unknown one
        opened.lines.close()
        opened.reader.close()
        from ingest.binlog_store import ingest_binlog  # here: an ingest of text logs never loads it

        return ingest_binlog(
            path,
            source=source,
            fmt=fmt,
            head_sha256=opened.head_sha256,
            size=opened.size,
            compressed=opened.compressed,
            progress=progress,
        )
    try:
        with holding_source(source.pk):
            return _ingest_text_file(path, opened, source, fmt, excerpts, tracker, gap_finder, progress)
    finally:
        opened.lines.close()
        opened.reader.close()


def _ingest_text_file(
    path: Path,
    opened: OpenedLog,
    source: Source,
    fmt: str,
    excerpts: bool,
    tracker: SessionTracker | None,
    gap_finder: GapFinder | None,
    progress: Progress | None,
) -> IngestRun:
    """ingest_file's read of a text log, holding its source's lock."""
    head = content_head(opened.head)
    source_file, _ = SourceFile.objects.get_or_create(
        source=source,
        path=str(path.resolve()),
        head_sha256=opened.head_sha256,
        defaults={"size": opened.size, "compressed": opened.compressed, "content_head": head},
    )
    if source_file.content_head != head:  # (a file recorded before migration 0027)
        SourceFile.objects.filter(pk=source_file.pk).update(content_head=head)
        source_file.content_head = head
    # What of this content is stored already, read under this name or another (exactly once).
    stored_below = recognise(
        source_file,
        source.server,
        partial(_open_content, path, opened.compressed),
        same_source=True,
    )
    run = IngestRun.objects.create(source=source, source_file=source_file, bytes_total=opened.size)
    tracker = tracker or SessionTracker(source.server, ZoneInfo(source.timezone))
    writer = EventWriter(source_file_id=source_file.pk, ingest_run_id=run.pk)
    carried = None
    if tracker.last_time is not None:  # a file before this one of the same set was read
        carried = tracker.last_time.astimezone(ZoneInfo(source.timezone)).replace(tzinfo=None)
    hints = Hints(
        mtime_year=datetime.fromtimestamp(path.stat().st_mtime, UTC).year,
        last_time=carried,
        log_line_prefix=source.log_line_prefix or None,
    )
    gaps = gap_finder or GapFinder()

    def read() -> Generator[Batch | FileEnd, None, None]:
        """The parsing side: the batches (with the bytes read on disk, for progress), then FileEnd."""
        # Each line bounded (a 1 GiB line, or a .gz bomb): cut lines keep their head, length, hash.
        lines = FileLines(opened.lines, 0, 1, None, partial_ok=True)
        for batch in tail_messages(
            fmt=fmt,
            lines=lines,
            finish=True,
            hints=hints,
            tracker=tracker,
            gaps=gaps,
            formatter=writer.formatter,
            batch_size=settings.INGEST_BATCH_SIZE,
            file_id=source_file.pk,
            stored_below=stored_below,
        ):
            yield ContentSoFar(opened.content.bytes_read, opened.content.sha256.copy().hexdigest())
            yield replace(batch, read_to=opened.reader.bytes_read)
        yield FileEnd(opened.content.bytes_read, opened.content.sha256.hexdigest())

    messages = in_second_process(read) if settings.INGEST_PARALLEL else read()
    end: FileEnd | None = None
    so_far = ContentSoFar(0, "")
    state: dict[str, Any] = {}
    try:
        for message in messages:
            if isinstance(message, FileEnd):
                end = message
                continue
            if isinstance(message, ContentSoFar):
                so_far = message
                continue
            state = message.state
            # Every event before its resume point is in this batch or an earlier one (ingest.tail).
            below = message.resume.offset if message.resume is not None else 0
            commit_batch(
                message,
                writer=writer,
                source=source,
                source_file=source_file,
                run=run,
                read=message.read_to - run.bytes_read,
                excerpts=excerpts,
                checkpoint=partial(_one_shot_progress, source_file.pk, below, so_far),
            )
            if progress:
                progress(run)
        if end is None:
            raise RuntimeError("the parsing process ended without finishing the file")
    except BaseException as e:
        run.fail(e)
        raise
    finally:
        messages.close()
    tracker.load_state(state["tracker"])  # sessions go on into the next file
    gaps.load_state(state["gaps"])
    with transaction.atomic():
        run.finish()
        SourceFile.objects.filter(pk=source_file.pk).update(
            size=opened.size,
            sha256=end.sha256,
            bytes_read=end.content_bytes,
            hashed_bytes=end.content_bytes,
            stored_below=end.content_bytes,  # every event of it is stored
            last_read_at=run.finished_at,
            # Read to its end, its last record flushed. Switched on later, its source polls it as a
            # new file (named by its first KiB, not the 64 KiB here), so new lines are still read.
            finished=True,
        )
        if end.content_bytes > source_file.hashed_bytes or run.events_stored:
            Source.objects.filter(pk=source.pk).update(last_data_at=run.finished_at)  # it delivered
        # New or changed:
        if (source_file.sha256, source_file.hashed_bytes) != (end.sha256, end.content_bytes):
            chain_file_hash(
                source_id=source.pk,
                source_file_id=source_file.pk,
                file_bytes=end.content_bytes,
                sha256=end.sha256,
            )
    return run


def _open_content(path: Path, compressed: bool) -> BinaryIO:
    """The file's content, decompressed for a .gz (what its hashes are of)."""
    return gzip.open(path, "rb") if compressed else path.open("rb")  # type: ignore[return-value]  # GzipFile reads bytes


def _one_shot_progress(file_id: int, below: int, so_far: ContentSoFar) -> None:
    """A one-shot read's part of committing a batch: how far its events are stored, and the SHA-256
    of the content read so far (what names the file should the read stop here: ingest.identity)."""
    update: dict[str, object] = {"stored_below": Greatest(F("stored_below"), below)}
    if so_far.content_bytes:
        update |= {"sha256": so_far.sha256, "hashed_bytes": so_far.content_bytes}
    SourceFile.objects.filter(pk=file_id).update(**update)


# -- the mysql.general_log table, live ------------------------------------------------------------


def table_source(*, dsn: str, server: str) -> Source:
    """The mysql-table source of one server's general_log (its DSN is kept without a password)."""
    safe = redact_dsn(dsn)
    source, _ = Source.objects.get_or_create(
        name=f"{server}: mysql.general_log at {safe}",
        defaults={"kind": Source.Kind.MYSQL_TABLE, "dsn": safe, "server": server, "timezone": "UTC"},
    )
    return source


def redact_dsn(dsn: str) -> str:
    """The DSN without its password: `mysql://user@host:port/?unix_socket=...`."""
    parts = urlsplit(dsn)
    host = parts.hostname or ""
    netloc = f"{parts.username}@{host}" if parts.username else host
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme or "mysql", netloc, parts.path, parts.query, ""))


def _table_batches(
    items: Iterator[EventRecord | Problem | FlagCorrection | GapRecord],
    size: int,
    formatter: RowFormatter,
    checkpoint: Callable[[], dict[str, object]],
    rows_read: Callable[[], int],
) -> Iterator[Batch]:
    """A pull's items in Batches of `size` events, each with the checkpoint that covers it."""
    events: list[EventRecord] = []
    problems: list[Problem] = []
    corrections: list[FlagCorrection] = []
    gaps: list[GapRecord] = []

    def batch() -> Batch:
        return Batch(
            formatted=formatter.format(events),
            seen=len(events),
            problems=problems,
            corrections=corrections,
            gaps=gaps,
            resume=None,
            state=checkpoint(),
            finished=False,
            read_to=rows_read(),
        )

    for item in items:
        if isinstance(item, EventRecord):
            events.append(item)
            if len(events) >= size:
                yield batch()
                events, problems, corrections, gaps = [], [], [], []
        elif isinstance(item, FlagCorrection):
            corrections.append(item)
        elif isinstance(item, GapRecord):
            gaps.append(item)
        else:
            problems.append(item)
    yield batch()


def _save_checkpoint(source_id: int, checkpoint: dict[str, object]) -> None:
    """A pull's part of committing a batch: the watermark and the tracker's state it reached."""
    Source.objects.filter(pk=source_id).update(checkpoint=checkpoint)


def ingest_table(
    source: Source, conn: object, *, progress: Progress | None = None, run: IngestRun | None = None
) -> IngestRun:
    """Pull the rows of mysql.general_log added since the source's checkpoint into the store.

    Each batch of events is committed with the checkpoint that covers it (the puller's
    watermark and the session tracker's state), so a pull killed at any point resumes
    where its last committed batch ended: nothing lost, nothing stored twice. `conn` is a
    DB-API connection with SELECT on mysql.general_log (see ingest.mysql_table.connect).
    """
    checkpoint = dict(source.checkpoint or {})
    puller = Puller(conn, checkpoint.get("watermark"))
    path = f"{source.dsn or 'mysql://'}/mysql.general_log"
    return _pull_into_store(source, puller, path, "mysql", progress=progress, run=run)


def ingest_oracle_table(
    source: Source, conn: object, *, progress: Progress | None = None, run: IngestRun | None = None
) -> IngestRun:
    """Pull the rows of Oracle's UNIFIED_AUDIT_TRAIL added since the source's checkpoint (at most
    OraclePuller.max_rows a pull; the overlap window re-read and de-duplicated), as ingest_table
    does for MySQL's table: classified by dialect oracle. `conn` is a DB-API connection of an
    account with the AUDIT_VIEWER role (see ingest.oracle_table.connect)."""
    checkpoint = dict(source.checkpoint or {})
    puller = OraclePuller(conn, checkpoint.get("watermark"))
    path = f"{source.dsn or 'oracle://'}/UNIFIED_AUDIT_TRAIL"
    return _pull_into_store(source, puller, path, "oracle", progress=progress, run=run)


def _pull_into_store(
    source: Source,
    puller: Puller | OraclePuller,
    path: str,
    dialect: str,
    *,
    progress: Progress | None,
    run: IngestRun | None,
) -> IngestRun:
    """A table pull's records through the stages of its dialect, committed batch by batch with
    the checkpoint that covers each."""
    source_file, _ = SourceFile.objects.get_or_create(
        source=source,
        path=path,
        head_sha256=hashlib.sha256(path.encode()).hexdigest(),  # a table has no head: its address
        defaults={"size": 0},
    )
    if run is None:
        run = IngestRun.objects.create(source=source, source_file=source_file)
    else:  # a run the caller started (a source polled by a worker)
        run.source_file = source_file
        run.save(update_fields=["source_file"])
    checkpoint = dict(source.checkpoint or {})
    tz = ZoneInfo(source.timezone)
    state = checkpoint.get("tracker")
    tracker = (
        SessionTracker.from_state(source.server, tz, state) if state else SessionTracker(source.server, tz)
    )
    tracker.dialect = dialect
    writer = EventWriter(source_file_id=source_file.pk, ingest_run_id=run.pk)
    gaps = GapFinder(dialect=dialect)
    if checkpoint.get("gaps"):
        gaps.load_state(checkpoint["gaps"])
    classify = classifier_for(dialect)
    items = gaps.process(classify(tracker.process(puller.records()), tracker.routines))

    def covered() -> dict[str, object]:
        return {"watermark": puller.watermark, "tracker": tracker.to_state(), "gaps": gaps.to_state()}

    try:
        for batch in _table_batches(
            items, settings.INGEST_BATCH_SIZE, writer.formatter, covered, lambda: puller.rows_read
        ):
            checkpoint = batch.state
            commit_batch(
                batch,
                writer=writer,
                source=source,
                source_file=source_file,
                run=run,
                read=batch.read_to - run.bytes_read,  # rows read, for a table
                checkpoint=partial(_save_checkpoint, source.pk, checkpoint),
            )
            if progress:
                progress(run)
    except Exception as e:
        run.fail(e)
        raise
    source.checkpoint = checkpoint
    run.finish()
    SourceFile.objects.filter(pk=source_file.pk).update(last_read_at=run.finished_at)
    return run
