"""Ingestion as plain functions: the `ingest` command and the Celery tasks call these.

open file -> parse -> track sessions -> classify -> write batches (one transaction each)
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import logging
import os
import pickle
import queue
import signal
import threading
import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar
from urllib.parse import urlsplit, urlunsplit
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from ingest.events import Event, FlagCorrection, Gap
from ingest.models import Gap as GapRow
from ingest.models import IngestRun, ParseProblem, Source, SourceFile
from ingest.mysql_table import Puller
from ingest.normalize import GapFinder, SessionTracker, classify_events
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
T = TypeVar("T")

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
    corrections: list[FlagCorrection]  # applied after the batch's events are stored
    gaps: list[Gap]


def _batches(
    items: Iterator[Event | Problem | FlagCorrection | Gap], size: int, position: Callable[[], int]
) -> Iterator[Batch]:
    events: list[Event] = []
    problems: list[Problem] = []
    corrections: list[FlagCorrection] = []
    gaps: list[Gap] = []
    for item in items:
        if isinstance(item, Event):
            events.append(item)
            if len(events) >= size:
                yield Batch(events, problems, position(), corrections, gaps)
                events, problems, corrections, gaps = [], [], [], []
        elif isinstance(item, FlagCorrection):
            corrections.append(item)
        elif isinstance(item, Gap):
            gaps.append(item)
        else:
            problems.append(item)
    yield Batch(events, problems, position(), corrections, gaps)


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


def _store_gaps(source: Source, source_file: SourceFile, gaps: list[Gap]) -> None:
    GapRow.objects.bulk_create(
        [
            GapRow(
                server=source.server,
                reason=g.reason,
                started_at=g.started_at,
                ended_at=g.ended_at,
                detail=g.detail[:300],
                source_file=source_file,
                line=g.line,
                byte_offset=g.offset,
            )
            for g in gaps
        ],
        ignore_conflicts=True,  # the same gap, found by an earlier run over the same bytes
    )


def ingest_file(
    path: Path,
    *,
    source: Source,
    fmt: str = "auto",
    tracker: SessionTracker | None = None,
    gap_finder: GapFinder | None = None,
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
    gaps = gap_finder or GapFinder()

    def parse() -> Iterator[tuple[object, ...]]:
        """The parsing side: ("batch", formatted, problems, events, bytes read)..., then
        ("done", bytes read, SHA-256 of the file, the tracker's state)."""
        items = gaps.process(classify_events(tracker.process(parser(opened.lines, hints)), tracker.routines))
        for batch in _batches(items, settings.INGEST_BATCH_SIZE, lambda: opened.reader.bytes_read):
            formatted = writer.formatter.format(batch.events)
            extra = (batch.corrections, batch.gaps)
            yield ("batch", formatted, batch.problems, len(batch.events), batch.bytes_read, *extra)
        state = tracker.to_state() | {"gaps": gaps.to_state()}
        yield ("done", opened.reader.bytes_read, opened.reader.sha256.hexdigest(), state)

    messages = in_second_process(parse) if settings.INGEST_PARALLEL else parse()
    done: tuple[object, ...] = ()
    try:
        for message in messages:
            if message[0] == "done":
                done = message
                continue
            _, formatted, problems, seen, bytes_read, corrections, found = message
            with transaction.atomic():
                stored = writer.write_formatted(formatted)  # type: ignore[arg-type]
                writer.apply_corrections(corrections)  # type: ignore[arg-type]
                _store_gaps(source, source_file, found)  # type: ignore[arg-type]
                _store_problems(run, source_file, problems)  # type: ignore[arg-type]
                run.bytes_read = bytes_read  # type: ignore[assignment]
                run.events_seen += seen  # type: ignore[operator]
                run.events_stored += stored
                run.problems += len(problems)  # type: ignore[arg-type]
                run.save(update_fields=["bytes_read", "events_seen", "events_stored", "problems"])
            if progress:
                progress(run)
        if not done:
            raise RuntimeError("the parsing process ended without finishing the file")
    except BaseException as e:
        run.status = IngestRun.Status.FAILED
        run.error = f"{type(e).__name__}: {e}"[:2000]
        run.finished_at = timezone.now()
        run.save(update_fields=["status", "error", "finished_at"])
        raise
    finally:
        messages.close()  # type: ignore[attr-defined]
        opened.lines.close()
    _, bytes_read, sha256, state = done
    tracker.load_state(state)  # type: ignore[arg-type]  # sessions go on into the next file
    gaps.load_state(state["gaps"])  # type: ignore[index]
    run.status = IngestRun.Status.DONE
    run.finished_at = timezone.now()
    run.bytes_read = bytes_read  # type: ignore[assignment]
    run.save(update_fields=["status", "finished_at", "bytes_read"])
    SourceFile.objects.filter(pk=source_file.pk).update(
        size=opened.size, sha256=sha256, bytes_read=bytes_read, last_read_at=run.finished_at
    )
    return run


def in_second_process(produce: Callable[[], Iterator[T]]) -> Iterator[T]:
    """Run the generator `produce` in a forked child process and yield what it yields.

    Parsing, session tracking, classification and formatting are pure Python and take
    one core; writing to PostgreSQL (and PostgreSQL itself) take the other. The child
    never touches the database (it does not even close the connection it inherited) and
    leaves with os._exit. Its messages come through a pipe, pickled; an exception in it is
    raised here. If this side stops early, the child is killed.
    """
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(read_end)
        status = 0
        with os.fdopen(write_end, "wb", buffering=1 << 20) as out:
            try:
                for item in produce():
                    pickle.dump(("item", item), out, protocol=pickle.HIGHEST_PROTOCOL)
            except BaseException:  # handed to the parent, which raises it
                status = 1
                with contextlib.suppress(BaseException):
                    pickle.dump(("error", traceback.format_exc()), out)
            with contextlib.suppress(BaseException):
                out.flush()
        os._exit(status)
    os.close(write_end)
    # A thread drains the pipe as fast as the child fills it: a pipe holds 64 KiB, a batch
    # several MB, so without it the child would wait while this side writes to PostgreSQL.
    received: queue.Queue[tuple[str, object]] = queue.Queue(maxsize=2)
    incoming = os.fdopen(read_end, "rb", buffering=1 << 20)

    def drain() -> None:
        try:
            while True:
                received.put(pickle.load(incoming))  # our own child's messages, through our pipe
        except EOFError:
            received.put(("end", None))
        except BaseException as e:  # a torn message: the child died mid-write
            received.put(("error", f"{type(e).__name__}: {e}"))

    reader = threading.Thread(target=drain, name="ingest-pipe", daemon=True)
    reader.start()
    finished = False
    try:
        while True:
            kind, payload = received.get()
            if kind == "end":
                break
            if kind == "error":
                raise RuntimeError(f"the parsing process failed:\n{payload}")
            yield payload  # type: ignore[misc]
        finished = True
    finally:
        if not finished:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            while reader.is_alive():  # let it reach the end of the pipe
                with contextlib.suppress(queue.Empty):
                    received.get(timeout=0.1)
        reader.join()
        incoming.close()
        _, status = os.waitpid(pid, 0)
        if finished and status != 0:
            raise RuntimeError(f"the parsing process exited with status {status}")


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
    gaps = GapFinder()
    if checkpoint.get("gaps"):
        gaps.load_state(checkpoint["gaps"])
    items = gaps.process(classify_events(tracker.process(puller.records()), tracker.routines))
    try:
        for batch in _batches(items, settings.INGEST_BATCH_SIZE, lambda: puller.rows_read):
            with transaction.atomic():
                stored = writer.write(batch.events)
                writer.apply_corrections(batch.corrections)
                _store_gaps(source, source_file, batch.gaps)
                _store_problems(run, source_file, batch.problems)
                checkpoint = {
                    "watermark": puller.watermark,
                    "tracker": tracker.to_state(),
                    "gaps": gaps.to_state(),
                }
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
