"""Ingestion as plain functions: the `ingest` command and the Celery tasks call these.

open file -> parse -> track sessions -> classify -> write batches (one transaction each)
"""

from __future__ import annotations

import gzip
import hashlib
import io
import logging
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from ingest.events import Event
from ingest.models import IngestRun, ParseProblem, Source, SourceFile
from ingest.mysql_table import Puller
from ingest.normalize import SessionTracker, classify_events
from ingest.parsers.audit_csv import parse_audit_csv
from ingest.parsers.detect import HEAD_BYTES, detect_format
from ingest.parsers.general_log import parse_general_log
from ingest.parsers.general_log_table import parse_general_log_csv, parse_general_log_tsv
from ingest.parsers.json_audit import parse_json_audit
from ingest.parsers.records import PROBLEM_EXCERPT_BYTES, Item, Problem
from ingest.parsers.server_audit import parse_server_audit
from ingest.parsers.xml_audit import parse_xml_audit
from ingest.store import EventWriter

log = logging.getLogger(__name__)

HEAD_HASH_BYTES = 64 * 1024
GZIP_MAGIC = b"\x1f\x8b"


def _server_audit(lines: Iterable[bytes], hints: FileHints) -> Iterator[Item]:
    # Syslog's BSD time has no year: take the file's (the parser carries it over New Year).
    return parse_server_audit(lines, year=hints.mtime_year)


@dataclass(frozen=True)
class FileHints:
    """What a parser may need to know about the file beyond its bytes."""

    mtime_year: int


# --format name -> parser of the file's lines, with what else it may need to know.
PARSERS: dict[str, Callable[[Iterable[bytes], FileHints], Iterator[Item]]] = {
    "general-log": lambda lines, hints: parse_general_log(lines),
    "mariadb-audit": _server_audit,
    "json-audit": lambda lines, hints: parse_json_audit(lines),
    "xml-audit": lambda lines, hints: parse_xml_audit(lines),
    "audit-csv": lambda lines, hints: parse_audit_csv(lines),
    "general-log-csv": lambda lines, hints: parse_general_log_csv(lines),
    "general-log-tsv": lambda lines, hints: parse_general_log_tsv(lines),
}

Progress = Callable[[IngestRun], None]


class HashingReader(io.RawIOBase):
    """Reads a file and hashes every byte on the way: the file's SHA-256 costs no second pass."""

    def __init__(self, raw: io.BufferedReader) -> None:
        self.raw = raw
        self.sha256 = hashlib.sha256()
        self.bytes_read = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        n = self.raw.readinto(buffer)
        if n:
            self.sha256.update(memoryview(buffer)[:n])
            self.bytes_read += n
        return n

    def close(self) -> None:
        self.raw.close()
        super().close()


@dataclass
class OpenedLog:
    reader: HashingReader  # counts and hashes the bytes as they are on disk
    lines: io.BufferedIOBase  # decompressed when the file is gzip
    size: int
    compressed: bool
    head_sha256: str
    head: bytes  # first bytes of the decompressed content, for format detection


def open_log(path: Path) -> OpenedLog:
    with path.open("rb") as f:
        disk_head = f.read(HEAD_HASH_BYTES)
    compressed = disk_head.startswith(GZIP_MAGIC)
    head = disk_head
    if compressed:
        with gzip.open(path, "rb") as g:
            head = g.read(HEAD_BYTES)
    reader = HashingReader(path.open("rb", buffering=0))  # type: ignore[arg-type]
    buffered = io.BufferedReader(reader, buffer_size=1 << 20)
    lines: io.BufferedIOBase = gzip.GzipFile(fileobj=buffered, mode="rb") if compressed else buffered
    return OpenedLog(
        reader=reader,
        lines=lines,
        size=os.fstat(reader.raw.fileno()).st_size,
        compressed=compressed,
        head_sha256=hashlib.sha256(disk_head).hexdigest(),
        head=head,
    )


def source_for_path(path: Path, *, server: str, fmt: str, tz: str) -> Source:
    """The file source a command-line ingest belongs to (one per server and path)."""
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
        },
    )
    return source


@dataclass
class Batch:
    events: list[Event]
    problems: list[Problem]
    bytes_read: int  # of the file on disk, once this batch was parsed


def _batches(items: Iterator[Event | Problem], size: int, position: Callable[[], int]) -> Iterator[Batch]:
    events: list[Event] = []
    problems: list[Problem] = []
    for item in items:
        if isinstance(item, Event):
            events.append(item)
            if len(events) >= size:
                yield Batch(events, problems, position())
                events, problems = [], []
        else:
            problems.append(item)
    yield Batch(events, problems, position())


def _store_problems(run: IngestRun, source_file: SourceFile, problems: list[Problem]) -> None:
    ParseProblem.objects.bulk_create(
        [
            ParseProblem(
                run=run,
                source_file=source_file,
                line=p.line,
                offset=p.offset,
                reason=p.reason[:500],
                excerpt=p.raw[:PROBLEM_EXCERPT_BYTES],
            )
            for p in problems
        ],
        ignore_conflicts=True,  # a problem at the same position, seen by an earlier run
    )


def ingest_file(
    path: Path,
    *,
    source: Source,
    fmt: str = "auto",
    tracker: SessionTracker | None = None,
    progress: Progress | None = None,
) -> IngestRun:
    """Read one log file to its end into the store. Returns the finished run.

    1. Record the file (path, size, hash of its head) before parsing anything.
    2. Parse, attribute and classify in a stream; never hold the file in memory.
    3. Write each batch of events with its problems and the run's progress in one
       transaction, so a crash loses at most the batch in flight (and a re-run
       stores exactly what is missing).
    4. Record the file's SHA-256 and the run's totals.
    """
    opened = open_log(path)
    if fmt == "auto":
        fmt = detect_format(opened.head)
    parser = PARSERS.get(fmt)
    if parser is None:
        raise ValueError(f"Format {fmt!r} is not supported yet (supported: {', '.join(PARSERS)}).")
    source_file, _ = SourceFile.objects.get_or_create(
        source=source,
        path=str(path.resolve()),
        head_sha256=opened.head_sha256,
        defaults={"size": opened.size, "compressed": opened.compressed},
    )
    run = IngestRun.objects.create(source=source, source_file=source_file, bytes_total=opened.size)
    tracker = tracker or SessionTracker(source.server, ZoneInfo(source.timezone))
    writer = EventWriter(source_file_id=source_file.pk, ingest_run_id=run.pk)
    hints = FileHints(mtime_year=datetime.fromtimestamp(path.stat().st_mtime, UTC).year)
    items = classify_events(tracker.process(parser(opened.lines, hints)))
    try:
        batches = _batches(items, settings.INGEST_BATCH_SIZE, lambda: opened.reader.bytes_read)
        for batch in batches:
            events, problems = batch.events, batch.problems
            with transaction.atomic():
                stored = writer.write(events)
                _store_problems(run, source_file, problems)
                run.bytes_read = batch.bytes_read
                run.events_seen += len(events)
                run.events_stored += stored
                run.problems += len(problems)
                run.save(update_fields=["bytes_read", "events_seen", "events_stored", "problems"])
            if progress:
                progress(run)
    except Exception as e:
        run.status = IngestRun.Status.FAILED
        run.error = f"{type(e).__name__}: {e}"[:2000]
        run.finished_at = timezone.now()
        run.save(update_fields=["status", "error", "finished_at"])
        raise
    finally:
        opened.lines.close()
    run.status = IngestRun.Status.DONE
    run.finished_at = timezone.now()
    run.bytes_read = opened.reader.bytes_read
    run.save(update_fields=["status", "finished_at", "bytes_read"])
    SourceFile.objects.filter(pk=source_file.pk).update(
        size=opened.size, sha256=opened.reader.sha256.hexdigest(), bytes_read=opened.reader.bytes_read,
        last_read_at=run.finished_at,
    )  # fmt: skip
    return run


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


def ingest_table(source: Source, conn: object, *, progress: Progress | None = None) -> IngestRun:
    """Pull the rows of mysql.general_log added since the source's checkpoint into the store.

    Each batch of events is committed with the checkpoint that covers it (the puller's
    watermark and the session tracker's state), so a pull killed at any point resumes
    where its last committed batch ended: nothing lost, nothing stored twice. `conn` is a
    DB-API connection with SELECT on mysql.general_log (see ingest.mysql_table.connect).
    """
    path = f"{source.dsn or 'mysql://'}/mysql.general_log"
    source_file, _ = SourceFile.objects.get_or_create(
        source=source,
        path=path,
        head_sha256=hashlib.sha256(path.encode()).hexdigest(),  # a table has no head: its address
        defaults={"size": 0},
    )
    run = IngestRun.objects.create(source=source, source_file=source_file)
    checkpoint = dict(source.checkpoint or {})
    tz = ZoneInfo(source.timezone)
    state = checkpoint.get("tracker")
    tracker = (
        SessionTracker.from_state(source.server, tz, state) if state else SessionTracker(source.server, tz)
    )
    puller = Puller(conn, checkpoint.get("watermark"))
    writer = EventWriter(source_file_id=source_file.pk, ingest_run_id=run.pk)
    items = classify_events(tracker.process(puller.records()))
    try:
        for batch in _batches(items, settings.INGEST_BATCH_SIZE, lambda: puller.rows_read):
            with transaction.atomic():
                stored = writer.write(batch.events)
                _store_problems(run, source_file, batch.problems)
                checkpoint = {"watermark": puller.watermark, "tracker": tracker.to_state()}
                Source.objects.filter(pk=source.pk).update(checkpoint=checkpoint)
                run.bytes_read = batch.bytes_read  # rows read, for a table
                run.events_seen += len(batch.events)
                run.events_stored += stored
                run.problems += len(batch.problems)
                run.save(update_fields=["bytes_read", "events_seen", "events_stored", "problems"])
            if progress:
                progress(run)
    except Exception as e:
        run.status = IngestRun.Status.FAILED
        run.error = f"{type(e).__name__}: {e}"[:2000]
        run.finished_at = timezone.now()
        run.save(update_fields=["status", "error", "finished_at"])
        raise
    source.checkpoint = checkpoint
    run.status = IngestRun.Status.DONE
    run.finished_at = timezone.now()
    run.save(update_fields=["status", "finished_at"])
    SourceFile.objects.filter(pk=source_file.pk).update(last_read_at=run.finished_at)
    return run
