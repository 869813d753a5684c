"""Ingestion as plain functions: the `ingest` command and the Celery tasks call these.

open file -> parse -> track sessions -> classify -> write batches (one transaction each)
"""

from __future__ import annotations

import contextlib
import ctypes
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
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar
from urllib.parse import urlsplit, urlunsplit
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db import models, transaction
from django.db.models import F
from django.utils import timezone

from ingest.custody import FileHasher, chain_file_hash
from ingest.events import Event, FlagCorrection, Gap
from ingest.models import Gap as GapRow
from ingest.models import IngestRun, ParseProblem, Source, SourceFile, Split
from ingest.mysql_table import Puller
from ingest.normalize import SETTLE, GapFinder, SessionTracker, Settle, classify_events
from ingest.parsers.audit_csv import parse_audit_csv
from ingest.parsers.detect import HEAD_BYTES, detect_format
from ingest.parsers.general_log import GeneralLogParser, parse_general_log
from ingest.parsers.general_log_table import parse_general_log_csv, parse_general_log_tsv
from ingest.parsers.json_audit import parse_json_audit
from ingest.parsers.records import PROBLEM_EXCERPT_BYTES, Item, Problem
from ingest.parsers.server_audit import parse_server_audit
from ingest.parsers.xml_audit import parse_xml_audit
from ingest.reading import CappedLines, uncut
from ingest.sources import check_sources_health
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
    reader: HashingReader  # counts the bytes as they are on disk (progress)
    content: HashingReader  # counts and hashes the content: the same reader for a plain file
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
    content, lines = reader, buffered
    if compressed:  # the evidence is the content: a .gz's hash is that of what zcat prints
        content = HashingReader(gzip.GzipFile(fileobj=buffered, mode="rb"))  # type: ignore[arg-type]
        lines = io.BufferedReader(content, buffer_size=1 << 20)
    return OpenedLog(
        reader=reader,
        content=content,
        lines=lines,
        size=os.fstat(reader.raw.fileno()).st_size,
        compressed=compressed,
        head_sha256=hashlib.sha256(disk_head).hexdigest(),
        head=head,
    )


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
                detail=g.detail[:1000],
                source_file=source_file,
                line=g.line,
                byte_offset=g.offset,
            )
            for g in gaps
        ],
        ignore_conflicts=True,  # the same gap, found by an earlier run over the same bytes
    )


def store_batch(
    writer: EventWriter,
    source: Source,
    source_file: SourceFile,
    run: IngestRun,
    batch: tuple[object, object, object, object],
) -> int:
    """Store one parsed batch, inside the caller's transaction: its events, the flags it learnt
    about events stored before, its gaps and its problems. Returns how many events were new.
    `batch` is (formatted events, corrections, gaps, problems) as the parsing side sent them."""
    formatted, corrections, found, problems = batch
    stored = writer.write_formatted(formatted)  # type: ignore[arg-type]
    writer.apply_corrections(corrections)  # type: ignore[arg-type]
    _store_gaps(source, source_file, found)  # type: ignore[arg-type]
    _store_problems(run, source_file, problems)  # type: ignore[arg-type]
    return stored


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
    4. Record the file's SHA-256 (of its content, hashed as it was parsed) in the file and in the
       source's custody chain, and the run's totals.
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
    tracker.file = source_file.pk  # Connects read from here on were read in this file
    writer = EventWriter(source_file_id=source_file.pk, ingest_run_id=run.pk)
    hints = FileHints(mtime_year=datetime.fromtimestamp(path.stat().st_mtime, UTC).year)
    gaps = gap_finder or GapFinder()

    def parse() -> Iterator[tuple[object, ...]]:
        """The parsing side: ("batch", formatted, problems, events, bytes read)..., then
        ("done", bytes read, content bytes, their SHA-256, the tracker's state)."""
        # Each line bounded (a 1 GiB line, or a .gz bomb): cut lines keep their head, length, hash.
        lines = CappedLines(opened.lines, settings.INGEST_MAX_LINE_BYTES)  # type: ignore[arg-type]
        records = uncut(parser(lines, hints), lines.cuts)
        items = gaps.process(classify_events(tracker.process(records), tracker.routines))
        for batch in _batches(items, settings.INGEST_BATCH_SIZE, lambda: opened.reader.bytes_read):
            formatted = writer.formatter.format(batch.events)
            extra = (batch.corrections, batch.gaps)
            yield ("batch", formatted, batch.problems, len(batch.events), batch.bytes_read, *extra)
        state = tracker.to_state() | {"gaps": gaps.to_state()}
        content = opened.content
        yield ("done", opened.reader.bytes_read, content.bytes_read, content.sha256.hexdigest(), state)

    messages = in_second_process(parse) if settings.INGEST_PARALLEL else parse()
    done: tuple[object, ...] = ()
    try:
        for message in messages:
            if message[0] == "done":
                done = message
                continue
            _, formatted, problems, seen, bytes_read, corrections, found = message
            with transaction.atomic():
                stored = store_batch(
                    writer, source, source_file, run, (formatted, corrections, found, problems)
                )
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
        opened.reader.close()
    _, bytes_read, content_bytes, sha256, state = done
    tracker.load_state(state)  # type: ignore[arg-type]  # sessions go on into the next file
    gaps.load_state(state["gaps"])  # type: ignore[index]
    run.status = IngestRun.Status.DONE
    run.finished_at = timezone.now()
    run.bytes_read = bytes_read  # type: ignore[assignment]
    with transaction.atomic():
        run.save(update_fields=["status", "finished_at", "bytes_read"])
        SourceFile.objects.filter(pk=source_file.pk).update(
            size=opened.size,
            sha256=sha256,
            bytes_read=content_bytes,
            hashed_bytes=content_bytes,
            last_read_at=run.finished_at,
        )
        if (source_file.sha256, source_file.hashed_bytes) != (sha256, content_bytes):  # new or changed
            chain_file_hash(
                source_id=source.pk,
                source_file_id=source_file.pk,
                file_bytes=content_bytes,  # type: ignore[arg-type]
                sha256=sha256,  # type: ignore[arg-type]
            )
    return run


# linux/prctl.h: ask the kernel for a signal when the parent ends.
_PR_SET_PDEATHSIG = 1


def _die_with(parent: int) -> None:
    """Make this (forked) process die when `parent`, the process that forked it, dies.

    A child that is between two messages (parsing a long record, classifying) never
    notices that its pipe has no reader any more: a killed `manage.py ingest`, or a
    worker stopped by Celery's hard time limit, would leave it running with no parent.
    On Linux the kernel kills it with the parent (prctl PR_SET_PDEATHSIG; strictly, with
    the thread that forked it, which is the one iterating in_second_process, alive as long
    as the messages are read). Elsewhere the closed pipe still ends it at its next write.
    """
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the line above: nobody will read
        os._exit(1)


def in_second_process(produce: Callable[[], Iterator[T]]) -> Iterator[T]:
    """Run the generator `produce` in a forked child process and yield what it yields.

    Parsing, session tracking, classification and formatting are pure Python and take
    one core; writing to PostgreSQL (and PostgreSQL itself) take the other. The child
    never touches the database (it does not even close the connection it inherited) and
    leaves with os._exit. Its messages come through a pipe, pickled; an exception in it is
    raised here. If this side stops early, the child is killed.
    """
    read_end, write_end = os.pipe()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:  # the child
        _die_with(parent)
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


def ingest_table(
    source: Source, conn: object, *, progress: Progress | None = None, run: IngestRun | None = None
) -> IngestRun:
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


# -- sources followed over time: files that grow and rotate, live tables ---------------------------


class SourceBusy(Exception):
    """Another worker holds the source's advisory lock: it is being ingested right now."""


@dataclass
class _Cut:
    """A point where everything before is complete: where a batch may end and the next read start."""

    resume: dict[str, object]  # {"offset", "line", "last_time"} of the first byte not covered
    state: dict[str, object]  # {"tracker": ..., "gaps": ...} after everything before
    ends: tuple[int, int, int, int]  # events, problems, corrections, gaps produced before it


class _Lines:
    """The complete lines of an open file from `offset`, at most `limit` bytes; knows where it is.

    A last line without its newline is held back (it is being written) unless `partial_ok`."""

    def __init__(
        self, f: io.BufferedIOBase, offset: int, line: int, limit: int | None, partial_ok: bool
    ) -> None:
        self.f, self.offset, self.line, self.limit, self.partial_ok = f, offset, line, limit, partial_ok
        self.eof = False  # the parser asked for a line past the end

    def __iter__(self) -> Iterator[bytes]:
        remaining = self.limit
        for raw in self.f:
            if remaining is not None:
                if len(raw) > remaining:
                    raw = raw[:remaining]
                remaining -= len(raw)
            if raw[-1:] != b"\n" and not self.partial_ok:
                break
            self.offset += len(raw)
            self.line += 1
            yield raw
            if remaining is not None and remaining <= 0:
                break
        self.eof = True


# --format name -> parser of the lines of a file read from a given offset and line.
TAIL_PARSERS: dict[str, Callable[[Iterable[bytes], int, int, FileHints], Iterator[Item]]] = {
    "mariadb-audit": lambda lines, offset, line, hints: parse_server_audit(
        lines, start_offset=offset, start_line=line, year=hints.mtime_year
    ),
    "json-audit": lambda lines, offset, line, hints: parse_json_audit(
        lines, start_offset=offset, start_line=line
    ),
    "xml-audit": lambda lines, offset, line, hints: parse_xml_audit(
        lines, start_offset=offset, start_line=line
    ),
    "audit-csv": lambda lines, offset, line, hints: parse_audit_csv(
        lines, start_offset=offset, start_line=line
    ),
    "general-log-csv": lambda lines, offset, line, hints: parse_general_log_csv(
        lines, start_offset=offset, start_line=line
    ),
    "general-log-tsv": lambda lines, offset, line, hints: parse_general_log_tsv(
        lines, start_offset=offset, start_line=line
    ),
}


def _resume_dict(offset: int, line: int, last_time: datetime | None = None) -> dict[str, object]:
    return {"offset": offset, "line": line, "last_time": last_time.isoformat() if last_time else None}


def _resume_before(point: tuple[int, int, datetime | None] | None, item: Item) -> dict[str, object]:
    """The resume point just before `item`: the parser's own when it gives one, else the item's."""
    return _resume_dict(*point) if point else _resume_dict(item.offset, item.line)


def tail_messages(
    *,
    fmt: str,
    lines: _Lines,
    finish: bool,
    hints: FileHints,
    tracker: SessionTracker,
    gaps: GapFinder,
    writer: EventWriter | None,
    batch_size: int,
    last_time: datetime | None = None,
    cut_bytes: int | None = None,
    file_id: int | None = None,
) -> Iterator[tuple[object, ...]]:
    """Parse a file from a resume point; yield ("batch", formatted events, problems, events seen,
    corrections, gaps, resume point, state, finished) messages, each complete up to its resume point.

    The stages (parser, tracker, classifier, gap finder) are generators pulled one item at a
    time, so when the parser is asked for its next item every stage after it has finished
    with everything before: that moment is a cut. The valve between the parser and the
    tracker records cuts there:
    1. when the batch is full (not while the tracker holds a start banner's records, outside
       its state, until they show reopen or restart);
    2. at the end of the bytes when the file may still grow (`finish` false): the state after
       the last complete item, a held banner decided with what was read; an item only the end
       of the bytes completed (the parser cannot know that the next line does not continue it)
       and whatever follows are left for the next read, which starts at that item.
    A file that is finished is read to its end and every stage flushed.

    With no `writer` it only scans (ingest.split): events are counted, not kept or formatted.
    `cut_bytes` also makes a cut whenever that many bytes were read since the last one.
    `file_id` (the SourceFile's) tells the tracker which file a connection's Connect was read in.
    """
    start_line = lines.line
    tracker.file = file_id
    # Where the parser would resume before its next item, as it tells it (a cheap tuple: the
    # resume point is made of it only where a cut is made).
    resume_point: Callable[[], tuple[int, int, datetime | None]] | None = None
    if fmt == "general-log":
        parser = GeneralLogParser(start_offset=lines.offset, start_line=start_line, last_time=last_time)

        def general() -> Iterator[Item]:
            yield from parser.feed(lines)
            if finish:
                yield from parser.finish()

        items: Iterator[Item] = general()
        resume_point = parser.resume_point
    else:
        items = TAIL_PARSERS[fmt](lines, lines.offset, start_line, hints)

    events: list[Event] = []
    problems: list[Problem] = []
    corrections: list[FlagCorrection] = []
    found: list[Gap] = []
    taken = [0, 0, 0, 0]  # produced and already sent, per list
    cuts: list[_Cut] = []
    want_cut = False
    final: _Cut | None = None
    cut_from = lines.offset

    def cut(resume: dict[str, object]) -> _Cut:
        state = {"tracker": tracker.to_state(), "gaps": gaps.to_state()}
        ends = (
            taken[0] + len(events),
            taken[1] + len(problems),
            taken[2] + len(corrections),
            taken[3] + len(found),
        )
        return _Cut(resume, state, ends)

    def valve() -> Iterator[Item | Settle]:
        """The parser's items, with the cuts made between them (see above). A cut is made only
        where the tracker holds nothing back: not while it holds a start banner's records until
        they show reopen or restart. Where the bytes end for now, it is told to decide (SETTLE)."""
        nonlocal want_cut, final, cut_from
        iterator = iter(items)
        while True:
            before = resume_point() if resume_point else None
            try:
                item = next(iterator)
            except StopIteration:
                if not finish:
                    end = _resume_dict(*before) if before else _resume_dict(lines.offset, lines.line)
                    if tracker.holding:
                        yield SETTLE
                    final = cut(end)
                return
            if not finish and lines.eof:
                end = _resume_before(before, item)
                if tracker.holding:
                    yield SETTLE
                final = cut(end)
                return
            if want_cut and not tracker.holding:
                cuts.append(cut(_resume_before(before, item)))
                want_cut = False
                cut_from = lines.offset
            yield item

    def send(c: _Cut, finished: bool) -> tuple[object, ...]:
        n = [c.ends[i] - taken[i] for i in range(4)]
        batch_events, batch_problems = events[: n[0]], problems[: n[1]]
        batch_corrections, batch_gaps = corrections[: n[2]], found[: n[3]]
        del events[: n[0]], problems[: n[1]], corrections[: n[2]], found[: n[3]]
        for i in range(4):
            taken[i] = c.ends[i]
        formatted = writer.formatter.format(batch_events) if writer else None
        return (
            "batch",
            formatted,
            batch_problems,
            len(batch_events),
            batch_corrections,
            batch_gaps,
            c.resume,
            c.state,
            finished,
        )

    for out in gaps.process(classify_events(tracker.process(valve()), tracker.routines)):
        if isinstance(out, Event):
            events.append(out if writer else None)  # type: ignore[arg-type]
            if len(events) >= batch_size or (cut_bytes and lines.offset - cut_from >= cut_bytes):
                want_cut = True
        elif isinstance(out, FlagCorrection):
            corrections.append(out)
        elif isinstance(out, Gap):
            found.append(out)
        else:
            problems.append(out)
        while cuts:
            yield send(cuts.pop(0), False)
    if finish:
        yield send(cut(_resume_dict(lines.offset, lines.line)), True)
    else:
        assert final is not None
        yield send(final, False)  # what came after it is read again next time


def ingest_source(
    source_id: int, *, run_id: int | None = None, dispatch: Callable[[int], object] | None = None
) -> IngestRun | None:
    """One incremental pass over a source, under its advisory lock: read what is new since its
    checkpoint into the store. Returns the run (None when there was nothing new and no run was
    asked for). Raises SourceBusy when another worker is ingesting the source.

    1. Take the source's lock; runs left "running" by a worker that died are marked failed.
    2. Files: plan which files to read (ingest.checkpoints) and read each from its resume point,
       committing every batch of events with the file's new resume point and the source's
       tracker state in one transaction. Tables: pull from the watermark (ingest_table).
    3. Record when the source was polled, when data last came, and why it could not be read.

    With `dispatch` (a function that queues the reading of a range: the Celery task), a big
    backlog of a file source is shared out between workers instead (ingest.split); while that
    goes on, polls of the source only look after it.
    """
    from ingest.checkpoints import source_lock

    source = Source.objects.get(pk=source_id)
    with source_lock(source.pk) as got:
        if not got:
            raise SourceBusy(f"source {source.pk} is being ingested by another worker")
        # (A shared-out backlog's run goes on while its ranges are read: its split ends it.)
        open_splits = Split.objects.filter(source=source, finished_at__isnull=True, planned=True)
        IngestRun.objects.filter(source=source, status=IngestRun.Status.RUNNING).exclude(
            pk__in=open_splits.values("run_id")
        ).update(
            status=IngestRun.Status.FAILED,
            error="interrupted: the worker running it stopped before the end",
            finished_at=timezone.now(),
        )
        run = IngestRun.objects.get(pk=run_id) if run_id else None
        try:
            if source.kind == Source.Kind.MYSQL_TABLE:
                run = _pull_table_source(source, run)
            else:
                run = _ingest_file_source(source, run, dispatch)
        finally:
            Source.objects.filter(pk=source.pk).update(last_polled_at=timezone.now())
            check_sources_health([Source.objects.get(pk=source.pk)])  # a run may fail, or heal it
    return run


def _start_run(source: Source, run: IngestRun | None, bytes_total: int) -> IngestRun:
    if run is None:
        return IngestRun.objects.create(source=source, bytes_total=bytes_total)
    run.status = IngestRun.Status.RUNNING
    run.bytes_total = bytes_total
    run.started_at = timezone.now()
    run.save(update_fields=["status", "bytes_total", "started_at"])
    return run


def _end_run(run: IngestRun, error: BaseException | None = None) -> IngestRun:
    run.finished_at = timezone.now()
    if error is None:
        run.status = IngestRun.Status.DONE
    else:
        run.status = IngestRun.Status.FAILED
        run.error = f"{type(error).__name__}: {error}"[:2000]
    run.save(update_fields=["status", "error", "finished_at"])
    return run


def _pull_table_source(source: Source, run: IngestRun | None) -> IngestRun:
    from ingest.mysql_table import connect

    password = os.environ.get(source.password_env) if source.password_env else None
    try:
        conn = connect(source.dsn, password)
    except Exception as e:  # refused, unknown host, bad password: the source's health says so
        Source.objects.filter(pk=source.pk).update(last_error=f"cannot connect to {source.dsn}: {e}"[:2000])
        return _end_run(_start_run(source, run, 0), e)
    try:
        run = ingest_table(source, conn, run=_start_run(source, run, 0))
    finally:
        conn.close()
    update: dict[str, object] = {"last_error": ""}
    if run.events_seen:
        update["last_data_at"] = run.finished_at
    Source.objects.filter(pk=source.pk).update(**update)
    return run


def _ingest_file_source(
    source: Source, run: IngestRun | None, dispatch: Callable[[int], object] | None
) -> IngestRun | None:
    from ingest.checkpoints import content_size, plan_reads
    from ingest.split import look_after_split, plan_split, worth_splitting

    if not look_after_split(source, dispatch):
        if run is not None:  # asked for while a split goes on: that split is the reading
            return _end_run(_start_run(source, run, 0))
        return None
    plan = plan_reads(source)
    errors = list(plan.errors)
    if not plan.matched_any:
        errors.append(f"no file matches {source.path}")
    reads = [
        r
        for r in plan.reads
        # New bytes since the last read (its pending record is read again), or a file to finish.
        if r.finish or r.known is None or r.candidate.size != r.known.size
    ]
    Source.objects.filter(pk=source.pk).update(last_error="; ".join(errors)[:2000])
    if not reads and not plan.vanished:
        if run is not None:
            return _end_run(_start_run(source, run, 0))
        return None
    totals = [max(0, content_size(r.candidate) - r.offset) for r in reads]
    run = _start_run(source, run, sum(totals))
    try:
        for gone in plan.vanished:
            _file_vanished(run, gone)
        if dispatch is not None and worth_splitting(reads):
            plan_split(source, run, reads, dispatch)
            return IngestRun.objects.get(pk=run.pk)  # ended by the split's last range
        done = 0
        for r, total in zip(reads, totals, strict=True):
            c = r.candidate
            log.info(
                "source %s: reading %s (inode %s, %s bytes) from offset %s as file #%s%s",
                source.pk, c.path, c.inode, c.size, r.offset, r.known.pk if r.known else "(new)",
                ", to its end" if r.finish else "",
            )  # fmt: skip
            _read_file(source, run, r, done)
            done += total
    except BaseException as e:
        _end_run(run, e)
        raise
    return _end_run(run)


def _file_vanished(run: IngestRun, known: SourceFile) -> None:
    """A followed file disappeared before it was read to its end: say so where the operator looks."""
    offset = int(known.resume.get("offset", 0))
    with transaction.atomic():
        ParseProblem.objects.bulk_create(
            [
                ParseProblem(
                    run=run,
                    source_file=known,
                    line=int(known.resume.get("line", 1)),
                    offset=offset,
                    reason="the file vanished before it was read to its end: what came after this is lost",
                    excerpt=b"",
                )
            ],
            ignore_conflicts=True,
        )
        SourceFile.objects.filter(pk=known.pk).update(finished=True)
        IngestRun.objects.filter(pk=run.pk).update(problems=F("problems") + 1)
    run.refresh_from_db(fields=["problems"])


def known_file(source: Source, read: object) -> SourceFile | None:
    """The SourceFile a planned read continues (made for a new file); None if it is finished."""
    from ingest.checkpoints import Read

    assert isinstance(read, Read)
    c = read.candidate
    known = read.known
    if known is None:
        known, _ = SourceFile.objects.get_or_create(
            source=source,
            path=str(c.path),
            head_sha256=c.head_sha256,
            defaults={
                "size": c.size,
                "compressed": c.compressed,
                "device": c.device,
                "inode": c.inode,
                "head_length": len(c.head),
                "resume": _resume_dict(0, 1),
            },
        )
        if known.finished:
            return None
    elif known.head_length < len(c.head) and (known.device, known.inode) == (c.device, c.inode):
        # The file grew past the bytes that named it: name it by more of them from now on.
        SourceFile.objects.filter(pk=known.pk).update(head_sha256=c.head_sha256, head_length=len(c.head))
    return known


def followed_format(source: Source, head: bytes) -> str:
    """The format a followed file is read in (its source's, or detected from its first bytes)."""
    fmt = source.format if source.format != "auto" else detect_format(head)
    if fmt != "general-log" and fmt not in TAIL_PARSERS:
        raise ValueError(
            f"Format {fmt!r} cannot be followed (supported: general-log, {', '.join(TAIL_PARSERS)})."
        )
    return fmt


def parsing_state(source: Source, state: dict[str, object]) -> tuple[SessionTracker, GapFinder]:
    """A session tracker and a gap finder in the state a checkpoint recorded (empty: a fresh start)."""
    tracker = SessionTracker(source.server, ZoneInfo(source.timezone))
    if state.get("tracker"):
        tracker.load_state(state["tracker"])  # type: ignore[arg-type]
    gaps = GapFinder()
    if state.get("gaps"):
        gaps.load_state(state["gaps"])  # type: ignore[arg-type]
    return tracker, gaps


def resume_of(resume: dict[str, object]) -> tuple[int, int, datetime | None]:
    """(offset, line, time carried forward) of a resume point."""
    last_time = datetime.fromisoformat(str(resume["last_time"])) if resume.get("last_time") else None
    return int(resume["offset"]), int(resume["line"]), last_time  # type: ignore[call-overload]


def _read_file(source: Source, run: IngestRun, read: object, done_before: int) -> None:
    """Read one file of a source from its resume point; see tail_messages and ingest_source."""
    from ingest.checkpoints import Read, open_content, still_the_same

    assert isinstance(read, Read)
    c = read.candidate
    known = known_file(source, read)
    if known is None:
        return
    offset, line, last_time = resume_of(known.resume or _resume_dict(0, 1))
    try:
        f, limit = open_content(c, offset)
    except (FileNotFoundError, PermissionError) as e:
        Source.objects.filter(pk=source.pk).update(last_error=str(e)[:2000])
        return
    fmt = followed_format(source, c.head)
    tracker, gaps = parsing_state(source, Source.objects.get(pk=source.pk).checkpoint or {})
    writer = EventWriter(source_file_id=known.pk, ingest_run_id=run.pk)
    hasher = FileHasher(known.hash_state, known.hashed_bytes, _ContentReader(c, f))
    lines = _Lines(f, offset, line, limit, partial_ok=read.finish)  # type: ignore[arg-type]
    hints = FileHints(mtime_year=datetime.fromtimestamp(c.mtime, UTC).year)

    def produce() -> Iterator[tuple[object, ...]]:
        return tail_messages(
            fmt=fmt,
            lines=lines,
            finish=read.finish,
            hints=hints,
            tracker=tracker,
            gaps=gaps,
            writer=writer,
            batch_size=settings.INGEST_BATCH_SIZE,
            last_time=last_time,
            file_id=known.pk,
        )

    messages = in_second_process(produce) if settings.INGEST_PARALLEL else produce()
    try:
        for message in messages:
            _, formatted, problems, seen, corrections, found, new_resume, state, finished = message
            new_offset = int(new_resume["offset"])  # type: ignore[index]
            if not c.compressed and not still_the_same(f, c, new_offset):
                # Truncated (copytruncate) and maybe written again since it was planned or while
                # it was read: these bytes may not be the file that was planned. Nothing of this
                # batch is kept; the next poll plans again (and finds the copy, if there is one).
                log.info("source %s: %s changed while it was read; read again next poll", source.pk, c.path)
                break
            now = timezone.now()
            moved = hasher.advance(new_offset)  # the file's SHA-256 up to the new resume point
            with transaction.atomic():
                stored = store_batch(writer, source, known, run, (formatted, corrections, found, problems))
                SourceFile.objects.filter(pk=known.pk).update(
                    resume=new_resume,
                    bytes_read=new_offset,
                    size=c.size,
                    last_read_at=now,
                    finished=finished,
                )
                record_file_hash(source.pk, known.pk, hasher, moved)
                fresh = dict(Source.objects.select_for_update().get(pk=source.pk).checkpoint or {})
                fresh.update(state)  # type: ignore[arg-type]
                update: dict[str, object] = {"checkpoint": fresh}
                if new_offset > offset:
                    update["last_data_at"] = now
                Source.objects.filter(pk=source.pk).update(**update)
                run.bytes_read = done_before + new_offset - offset
                run.events_seen += seen  # type: ignore[operator]
                run.events_stored += stored
                run.problems += len(problems)  # type: ignore[arg-type]
                run.source_file = known
                run.save(
                    update_fields=["bytes_read", "events_seen", "events_stored", "problems", "source_file"]
                )
    finally:
        messages.close()  # type: ignore[attr-defined]
        f.close()  # type: ignore[attr-defined]
        hasher.read_at.close()  # type: ignore[attr-defined]


def record_file_hash(source_id: int, file_id: int, hasher: FileHasher, moved: bool) -> None:
    """Store a file's SHA-256 so far (and the computation, to go on from) and, when it covers
    more bytes than before, chain it. Inside the transaction of what it covers."""
    SourceFile.objects.filter(pk=file_id).update(
        sha256=hasher.state.hexdigest(), hashed_bytes=hasher.hashed, hash_state=hasher.state.saved()
    )
    if moved:
        chain_file_hash(
            source_id=source_id,
            source_file_id=file_id,
            file_bytes=hasher.hashed,
            sha256=hasher.state.hexdigest(),
        )


def hash_file_upto(source: Source, known: SourceFile, upto: int) -> tuple[FileHasher, bool] | None:
    """A file's SHA-256 brought up to `upto` from where its hash stopped, for a file whose resume
    point moves without a poll reading it in order (a split's ranges, read by several workers).
    The file is found as the split finds it (same inode and first bytes, else a copy); None when
    it is gone (its hash then stays where it was, and verify_evidence says how far it goes)."""
    from ingest.checkpoints import find_candidates

    candidates = [c for c in find_candidates(source.path, []) if c.head_matches(known)]
    same = [c for c in candidates if (c.device, c.inode) == (known.device, known.inode)]
    for c in same + candidates:
        if c.compressed or c.size >= upto:
            with c.path.open("rb") as f:
                reader = _ContentReader(c, f)
                try:
                    hasher = FileHasher(known.hash_state, known.hashed_bytes, reader)
                    return hasher, hasher.advance(upto)
                finally:
                    reader.close()
    return None


class _ContentReader:
    """`read_at(offset, n)` over a file's content for FileHasher: for a plain file, pread on the
    descriptor being parsed (which moves no one's position: the parser reads the same descriptor
    in the other process); for a .gz, a decompressing reader of its own, going forward."""

    def __init__(self, candidate: object, f: object) -> None:
        self.candidate, self.f = candidate, f
        self.gz: gzip.GzipFile | None = None

    def __call__(self, offset: int, n: int) -> bytes:
        if not self.candidate.compressed:  # type: ignore[attr-defined]
            return os.pread(self.f.fileno(), n, offset)  # type: ignore[attr-defined]
        if self.gz is None or self.gz.tell() > offset:
            self.close()
            self.gz = gzip.open(self.candidate.path, "rb")  # type: ignore[attr-defined, assignment]  # noqa: SIM115 - closed by close()
        self.gz.seek(offset)  # type: ignore[union-attr]
        return self.gz.read(n)  # type: ignore[union-attr]

    def close(self) -> None:
        if self.gz is not None:
            self.gz.close()
            self.gz = None


def poll_due_sources(queue: Callable[[int], object]) -> int:
    """Queue (with `queue(source id)`) every enabled source whose next poll is due; returns how many.

    Each source is claimed with one conditional UPDATE that moves its next poll forward, so
    two beats (or a beat and a slow worker) never queue the same poll twice.
    """
    now = timezone.now()
    due = Source.objects.filter(enabled=True).filter(
        models.Q(next_poll_at__isnull=True) | models.Q(next_poll_at__lte=now)
    )
    queued = 0
    for source_id, interval in due.values_list("pk", "interval_seconds"):
        claimed = (
            Source.objects.filter(pk=source_id)
            .filter(models.Q(next_poll_at__isnull=True) | models.Q(next_poll_at__lte=now))
            .update(next_poll_at=now + timedelta(seconds=interval))
        )
        if claimed:
            transaction.on_commit(lambda source_id=source_id: queue(source_id))  # type: ignore[misc]
            queued += 1
    return queued


def source_ingest_now(source: Source, queue: Callable[[int, int], object]) -> IngestRun:
    """A run asked for now (the API, the Sources page): stored as queued, then queued on commit."""
    run = IngestRun.objects.create(source=source, status=IngestRun.Status.QUEUED)
    transaction.on_commit(lambda: queue(source.pk, run.pk))
    return run
