"""Ingestion as plain functions: the `ingest` command and the Celery tasks call these.

open file -> parse -> track sessions -> classify -> write batches (one transaction each)
"""

from __future__ import annotations

import contextlib
import ctypes
import gzip
import hashlib
import io
import json
import logging
import os
import pickle
import queue
import signal
import threading
import time
import traceback
from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar
from urllib.parse import urlsplit, urlunsplit
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db import connection, models, transaction
from django.db.models import F
from django.utils import timezone

from ingest.checkpoints import listing_signature
from ingest.custody import FileHasher, chain_file_hash
from ingest.events import EventRecord, FlagCorrection, GapRecord
from ingest.models import Gap, IngestRun, ParseProblem, Source, SourceFile, Split
from ingest.mysql_table import Puller
from ingest.normalize import SETTLE, GapFinder, SessionTracker, Settle, classify_events
from ingest.parsers import NAMES, by_name, open_parser
from ingest.parsers.detect import HEAD_BYTES, UnknownFormat, detect_format
from ingest.parsers.records import PROBLEM_EXCERPT_BYTES, Hints, Item, Problem
from ingest.reading import CappedLines, cut_line, read_long_line, uncut
from ingest.reading import Cut as ReadCut
from ingest.sources import check_sources_health
from ingest.store import EventWriter
from ingest.textsafe import storable

log = logging.getLogger(__name__)
T = TypeVar("T")

HEAD_HASH_BYTES = 64 * 1024
GZIP_MAGIC = b"\x1f\x8b"


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
    events: list[EventRecord]
    problems: list[Problem]
    bytes_read: int  # of the file on disk, once this batch was parsed
    corrections: list[FlagCorrection]  # applied after the batch's events are stored
    gaps: list[GapRecord]


def _batches(
    items: Iterator[EventRecord | Problem | FlagCorrection | GapRecord],
    size: int,
    position: Callable[[], int],
) -> Iterator[Batch]:
    events: list[EventRecord] = []
    problems: list[Problem] = []
    corrections: list[FlagCorrection] = []
    gaps: list[GapRecord] = []
    for item in items:
        if isinstance(item, EventRecord):
            events.append(item)
            if len(events) >= size:
                yield Batch(events, problems, position(), corrections, gaps)
                events, problems, corrections, gaps = [], [], [], []
        elif isinstance(item, FlagCorrection):
            corrections.append(item)
        elif isinstance(item, GapRecord):
            gaps.append(item)
        else:
            problems.append(item)
    yield Batch(events, problems, position(), corrections, gaps)


def is_log(head: bytes) -> bool:
    """Whether a file's first bytes are those of a log AuditWeb knows. Only such files show the
    bytes of their problems: a source named to read /etc/shadow as a general log (a glob that
    caught it) must not show its lines as problem excerpts to every viewer."""
    try:
        detect_format(head)
    except UnknownFormat:
        return False
    return True


_WITHHELD = "its bytes are not shown, as the file does not begin like a log: "


def _store_problems(
    run: IngestRun, source_file: SourceFile, problems: list[Problem], excerpts: bool = True
) -> None:
    ParseProblem.objects.bulk_create(
        [
            ParseProblem(
                run=run,
                source_file=source_file,
                line=p.line,
                offset=p.offset,
                reason=storable(p.reason if excerpts else _WITHHELD + p.reason)[:500],
                excerpt=p.raw[:PROBLEM_EXCERPT_BYTES] if excerpts else b"",
            )
            for p in problems
        ],
        ignore_conflicts=True,  # a problem at the same position, seen by an earlier run
    )


def _store_gaps(source: Source, source_file: SourceFile, gaps: list[GapRecord]) -> None:
    """Store the gaps a batch found. A logging-off gap is stored open by a read that ended before
    anything followed it (a followed file, a table pull); the read that finds the next record
    sends it again with its end, which closes the open row, whichever was stored first."""
    closing = [g for g in gaps if g.reason == Gap.Reason.LOGGING_OFF and g.ended_at is not None]
    new: list[GapRecord] = []
    for g in gaps:
        # Opened while another file of the source was read (its statement was that file's end).
        if g in closing and _close_gap(source, g, exclude=source_file):
            continue
        new.append(g)
    Gap.objects.bulk_create(
        [
            Gap(
                server=source.server,
                reason=g.reason,
                started_at=g.started_at,
                ended_at=g.ended_at,
                detail=storable(g.detail)[:1000],
                source_file=source_file,
                line=g.line,
                byte_offset=g.offset,
            )
            for g in new
        ],
        ignore_conflicts=True,  # the same gap, found by an earlier run over the same bytes
    )
    for g in closing:  # (after the insert: an open row another worker committed meanwhile)
        _close_gap(source, g, only=source_file)


def _close_gap(
    source: Source, gap: GapRecord, *, only: SourceFile | None = None, exclude: SourceFile | None = None
) -> bool:
    """Give an open logging-off row of the source (the same statement) its end; whether one was."""
    rows = Gap.objects.filter(
        source_file__source=source,
        reason=gap.reason,
        line=gap.line,
        byte_offset=gap.offset,
        started_at=gap.started_at,
        ended_at=None,
    )
    if only is not None:
        rows = rows.filter(source_file=only)
    if exclude is not None:
        rows = rows.exclude(source_file=exclude)
    return rows.update(ended_at=gap.ended_at) > 0


def store_batch(
    writer: EventWriter,
    source: Source,
    source_file: SourceFile,
    run: IngestRun,
    batch: tuple[object, object, object, object],
    *,
    excerpts: bool = True,
) -> int:
    """Store one parsed batch, inside the caller's transaction: its events, the flags it learnt
    about events stored before, its gaps and its problems. Returns how many events were new.
    `batch` is (formatted events, corrections, gaps, problems) as the parsing side sent them."""
    formatted, corrections, found, problems = batch
    stored = writer.write_formatted(formatted)  # type: ignore[arg-type]
    writer.apply_corrections(corrections)  # type: ignore[arg-type]
    _store_gaps(source, source_file, found)  # type: ignore[arg-type]
    _store_problems(run, source_file, problems, excerpts)  # type: ignore[arg-type]
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
    excerpts = is_log(opened.head)
    if fmt == "auto":
        fmt = detect_format(opened.head)
    parse_lines = by_name(fmt).parse  # ValueError naming the formats there are
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
    carried = None
    if tracker.last_time is not None:  # a file before this one of the same set was read
        carried = tracker.last_time.astimezone(ZoneInfo(source.timezone)).replace(tzinfo=None)
    hints = Hints(mtime_year=datetime.fromtimestamp(path.stat().st_mtime, UTC).year, last_time=carried)
    gaps = gap_finder or GapFinder()

    def parse() -> Iterator[tuple[object, ...]]:
        """The parsing side: ("batch", formatted, problems, events, bytes read)..., then
        ("done", bytes read, content bytes, their SHA-256, the tracker's state)."""
        # Each line bounded (a 1 GiB line, or a .gz bomb): cut lines keep their head, length, hash.
        lines = CappedLines(opened.lines, settings.INGEST_MAX_LINE_BYTES)  # type: ignore[arg-type]
        records = uncut(parse_lines(lines, hints=hints), lines.cuts)
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
                    writer,
                    source,
                    source_file,
                    run,
                    (formatted, corrections, found, problems),
                    excerpts=excerpts,
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
        run.error = storable(f"{type(e).__name__}: {e}")[:2000]
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
            # Read to its end, its last record flushed. Switched on later, its source polls it as a
            # new file (named by its first KiB, not the 64 KiB here), so new lines are still read.
            finished=True,
        )
        if content_bytes > source_file.hashed_bytes or run.events_stored:  # type: ignore[operator]
            Source.objects.filter(pk=source.pk).update(last_data_at=run.finished_at)  # it delivered
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
        run.error = storable(f"{type(e).__name__}: {e}")[:2000]
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

    A last line without its newline is held back (it is being written) unless `partial_ok`.
    A line longer than `cap` (INGEST_MAX_LINE_BYTES) is read in bounded pieces and handed
    over cut, as CappedLines does (ingest.reading): `offset` and `line` stay the file's,
    `cuts` says what the parser was not handed, and `file_offset` turns an offset as the
    parser counts into the file's (for resume points, which must be exact)."""

    def __init__(
        self,
        f: io.BufferedIOBase,
        offset: int,
        line: int,
        limit: int | None,
        partial_ok: bool,
        cap: int | None = None,
    ) -> None:
        self.f, self.offset, self.line, self.limit, self.partial_ok = f, offset, line, limit, partial_ok
        self.cap = cap or settings.INGEST_MAX_LINE_BYTES
        self.eof = False  # the parser asked for a line past the end
        self.held = False  # a last line without its newline was held back
        self.cuts: list[ReadCut] = []
        self._removed = 0  # bytes of the file not handed to the parser (cut lines' middles)
        self._starts: list[int] = []  # of the cuts, as the parser counts
        self._removed_before: list[int] = [0]  # bytes removed by the first k cuts

    def file_offset(self, counted: int) -> int:
        """The file's offset of a line start the parser counts as `counted` (from `offset`)."""
        return counted + self._removed_before[bisect_left(self._starts, counted)]

    def __iter__(self) -> Iterator[bytes]:
        remaining = self.limit
        readline, cap = self.f.readline, self.cap
        while remaining is None or remaining > 0:
            raw = readline(cap + 1 if remaining is None else min(cap + 1, remaining))
            if not raw:
                break
            length, cut = len(raw), None
            if length > cap and raw[-1:] != b"\n":
                # Too long to hand over whole: read on to its end, hashing, keeping its tail.
                length, sha, tail = read_long_line(raw, readline, remaining)
                start = self.offset - self._removed
                raw, cut = cut_line(raw, length, sha, tail, cap, line=self.line, start=start)
            if remaining is not None:
                remaining -= length
            if raw[-1:] != b"\n" and not self.partial_ok:
                self.held = True  # it is being written: neither cut nor handed over yet
                break
            if cut is not None:
                self.cuts.append(cut)
                self._starts.append(cut.start)
                self._removed += cut.removed
                self._removed_before.append(self._removed)
            self.offset += length
            self.line += 1
            yield raw
        self.eof = True


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
    hints: Hints,
    tracker: SessionTracker,
    gaps: GapFinder,
    writer: EventWriter | None,
    batch_size: int,
    cut_bytes: int | None = None,
    file_id: int | None = None,
    settled: bool = False,
    continues: dict[str, object] | None = None,
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

    A file that is `settled` (quiet: it has not grown for a while and ends with a newline, see
    ingest.checkpoints.is_quiet) may grow again, but its last record is complete: when the
    bytes end with a whole line, the parser's pending item is flushed and stored, and the last
    cut comes after it (the later stages are not flushed: their state goes on). The resume
    point then says so (`settled`: the record's line, offset and event keys), so that lines
    which later turn out to continue it (a log written by hand or damaged: servers write each
    record whole) are not lost: the next read (`continues`) makes them a Problem saying which
    record they continue, and flags that record `continued_after_quiet`.

    With no `writer` it only scans (ingest.split): events are counted, not kept or formatted.
    `cut_bytes` also makes a cut whenever that many bytes were read since the last one.
    `file_id` (the SourceFile's) tells the tracker which file a connection's Connect was read in.
    """
    start_line = lines.line
    tracker.file = file_id
    # `hints.last_time`: the time carried into the resume point (general log).
    parser = open_parser(by_name(fmt), start_offset=lines.offset, start_line=start_line, hints=hints)

    def parsed() -> Iterator[Item]:
        yield from parser.feed(lines)
        if finish or (settled and not lines.held):  # else a pending last item is read again later
            yield from parser.finish()

    items: Iterator[Item] = parsed()
    # Where the parser would resume before its next item, as it tells it (a cheap tuple: the
    # resume point is made of it only where a cut is made); None when it cannot tell.
    resume_point = parser.resume_point

    # Lines too long to hand over are cut (_Lines): the parser counts only what it was handed.
    # uncut gives its items the file's offsets back, says each cut, and may hold a Problem
    # until the next item: so the resume point before each item the parser yields is taken
    # as the parser is asked for it, and kept with it (`points`); an item uncut makes itself
    # (a cut said) has none, and no cut is made before it.
    points: deque[tuple[Item, tuple[int, int, datetime | None] | None]] = deque()
    last_point: list[tuple[int, int, datetime | None] | None] = [None]

    def pointed(source: Iterator[Item]) -> Iterator[Item]:
        while True:
            last_point[0] = resume_point()
            try:
                item = next(source)
            except StopIteration:
                return
            points.append((item, last_point[0]))
            yield item

    def file_point(p: tuple[int, int, datetime | None]) -> tuple[int, int, datetime | None]:
        return lines.file_offset(p[0]), p[1], p[2]

    def until() -> int:  # the cut lines after the parser's last resume point are read again
        return last_point[0][0] if last_point[0] else 1 << 62

    items = uncut(pointed(iter(items)), lines.cuts, None if finish else until)

    events: list[EventRecord] = []
    problems: list[Problem] = []
    corrections: list[FlagCorrection] = []
    found: list[GapRecord] = []
    taken = [0, 0, 0, 0]  # produced and already sent, per list
    cuts: list[_Cut] = []
    want_cut = False
    final: _Cut | None = None
    cut_from = lines.offset
    start_offset = lines.offset
    # A quiet tail flushed at the end of these bytes: where its first item starts, and the
    # keys of the events made of it (for the flag, should lines continue it later).
    flushed_from: int | None = None
    flushed_line = 0
    flushed_keys: list[list[object]] = []

    def cut(resume: dict[str, object]) -> _Cut:
        if continues and resume["offset"] == start_offset:
            resume = resume | {"settled": continues}  # nothing read since: still the case
        state = {"tracker": tracker.to_state(), "gaps": gaps.to_state()}
        ends = (
            taken[0] + len(events),
            taken[1] + len(problems),
            taken[2] + len(corrections),
            taken[3] + len(found),
        )
        return _Cut(resume, state, ends)

    def report_open_gap() -> None:
        """Where the bytes end for now, a logging-off gap nothing closed yet is stored open (a file
        read to its end does the same); the finder keeps it, so what a later read finds closes it.
        Every stage has finished with what came before: this is a cut."""
        gap = gaps.open_gap()
        if gap is not None:
            found.append(gap)

    def valve() -> Iterator[Item | Settle]:
        """The parser's items, with the cuts made between them (see above). A cut is made only
        where the tracker holds nothing back: not while it holds a start banner's records until
        they show reopen or restart. Where the bytes end for now, it is told to decide (SETTLE)."""
        nonlocal want_cut, final, cut_from, flushed_from, flushed_line, continues
        iterator = iter(items)
        while True:
            try:
                item = next(iterator)
            except StopIteration:
                if not finish:
                    before = last_point[0]
                    end = (
                        _resume_dict(*file_point(before))
                        if before
                        else _resume_dict(lines.offset, lines.line)
                    )
                    if tracker.holding:
                        yield SETTLE
                    if flushed_from is not None:
                        keys = [*flushed_keys]
                        end["settled"] = {"line": flushed_line, "offset": flushed_from, "keys": keys}
                    report_open_gap()
                    final = cut(end)
                return
            made = not points or points[0][0] is not item  # by uncut: a cut said
            before = None if made else points.popleft()[1]
            if before is not None:
                before = file_point(before)
            if made:
                if continues is not None and isinstance(item, Problem) and item.offset == start_offset:
                    _continued(item, continues, corrections)
                continues = None
                yield item
                continue
            if not finish and lines.eof:
                if not settled or lines.held:
                    end = _resume_before(before, item)
                    if tracker.holding:
                        yield SETTLE
                    report_open_gap()
                    final = cut(end)
                    return
                # The quiet tail: complete, since the file ends with a whole line.
                if flushed_from is None:
                    flushed_from, flushed_line = item.offset, item.line
            if continues is not None:
                if isinstance(item, Problem) and item.offset == start_offset:
                    _continued(item, continues, corrections)
                continues = None  # only the bytes right after it can continue it
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
        if isinstance(out, EventRecord):
            events.append(out if writer else None)  # type: ignore[arg-type]
            if flushed_from is not None and out.offset >= flushed_from and len(flushed_keys) < 100:
                when = out.occurred_at
                flushed_keys.append([out.record_hash().hex(), when.isoformat() if when else None])
            if len(events) >= batch_size or (cut_bytes and lines.offset - cut_from >= cut_bytes):
                want_cut = True
        elif isinstance(out, FlagCorrection):
            corrections.append(out)
        elif isinstance(out, GapRecord):
            found.append(out)
        else:
            problems.append(out)
        while cuts:
            yield send(cuts.pop(0), False)
    if finish:
        # (The general log's carried time goes with it: the next file may print none at first.)
        point = resume_point()
        end = file_point(point) if point else (lines.offset, lines.line, None)
        yield send(cut(_resume_dict(*end)), True)
    else:
        assert final is not None
        yield send(final, False)  # what came after it is read again next time


def _continued(problem: Problem, settled: dict[str, object], corrections: list[FlagCorrection]) -> None:
    """Lines that continue a record stored because its file had gone quiet: say so in their
    Problem, and flag that record (its stored statement lacks them)."""
    problem.reason = (
        f"these lines continue the record at line {settled['line']} (offset {settled['offset']}), "
        "stored when its file had stopped growing with a newline at its end; a server writes each "
        "record whole, so this log was written by hand or damaged. The record is kept as it was "
        "stored and flagged continued_after_quiet; these bytes are kept here. "
        f"({problem.reason})"
    )
    keys = [
        (bytes.fromhex(str(h)), datetime.fromisoformat(str(t)) if t else None)
        for h, t in settled.get("keys", [])  # type: ignore[attr-defined]
    ]
    if keys:
        corrections.append(FlagCorrection("continued_after_quiet", keys))


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
        run.error = storable(f"{type(error).__name__}: {error}")[:2000]
    run.save(update_fields=["status", "error", "finished_at"])
    return run


def _pull_table_source(source: Source, run: IngestRun | None) -> IngestRun:
    from ingest.mysql_table import connect, source_password

    try:
        password = source_password(source.password_env, os.environ)
        conn = connect(source.dsn, password)
    except Exception as e:  # refused, unknown host, bad password: the source's health says so
        Source.objects.filter(pk=source.pk).update(
            last_error=storable(f"cannot connect to {source.dsn}: {e}")[:2000]
        )
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
    signature = listing_signature(source.path)  # before the plan: a change after it shows
    plan = plan_reads(source)
    errors = list(plan.errors)
    if not plan.matched_any:
        errors.append(f"no file matches {source.path}")
    reads = [
        r
        for r in plan.reads
        # New bytes since the last read (its pending record is read again), a file to finish,
        # or a quiet file whose last record is still pending.
        if r.finish
        or r.known is None
        or r.candidate.size != r.known.size
        or (r.quiet and r.offset < r.candidate.size)
    ]
    Source.objects.filter(pk=source.pk).update(last_error=storable("; ".join(errors))[:2000])
    if not reads and not plan.vanished:
        _note_watch(source, signature, plan)
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
    _note_watch(source, signature, plan)
    return _end_run(run)


def _note_watch(source: Source, signature: str, plan: object) -> None:
    """Record what this poll saw, for look_at_followed_files: the files' listing signature, and
    when to look again without any change, if the newest file's last record is still pending
    and may be settled then (it ends with a newline but has not been quiet long enough)."""
    from ingest.checkpoints import Plan, ends_with_newline

    assert isinstance(plan, Plan)
    recheck_at = None
    live = plan.live
    if live is not None and not live.compressed and not any(r.quiet for r in plan.reads):
        resume = (
            SourceFile.objects.filter(source=source, device=live.device, inode=live.inode, finished=False)
            .order_by("-pk")
            .values_list("resume", flat=True)
            .first()
        )
        pending = int((resume or {}).get("offset", 0)) < live.size
        if pending and ends_with_newline(live):
            # Quiet since its last change by its own clock, or from now if that lies ahead.
            recheck_at = min(live.mtime, time.time()) + settings.INGEST_SETTLE_SECONDS
    watch = {"signature": signature, "recheck_at": recheck_at}
    with connection.cursor() as cur:  # one key of the checkpoint, whatever else it holds now
        cur.execute(
            "UPDATE ingest_source SET checkpoint = COALESCE(checkpoint, '{}'::jsonb)"
            " || jsonb_build_object('watch', %s::jsonb) WHERE id = %s",
            [json.dumps(watch), source.pk],
        )


def look_at_followed_files(queue: Callable[[int], object], skip: Iterable[int] = ()) -> int:
    """Queue (with `queue(source id)`) a poll of each enabled file source whose files changed
    since its last poll looked (a glob and a stat each: no file is opened, nothing is read), or
    whose newest file's pending last record is due to be settled; returns how many.

    This is what makes new records, and the last record of a log gone quiet, searchable
    within seconds whatever the source's interval, while an idle source costs a stat a tick.
    Sources being shared out (ingest.split) are left to their split."""
    now = time.time()
    splitting = Split.objects.filter(finished_at__isnull=True).values("source_id")
    followed = (
        Source.objects.filter(enabled=True, kind=Source.Kind.FILE)
        .exclude(pk__in=splitting)
        .exclude(pk__in=list(skip))
        .values_list("pk", "path", "checkpoint__watch")
    )
    queued = 0
    for source_id, path, watch in followed:
        watch = watch if isinstance(watch, dict) else {}
        recheck_at = watch.get("recheck_at")
        due = recheck_at is not None and float(recheck_at) <= now
        if due or watch.get("signature") != listing_signature(path):
            queue(source_id)
            queued += 1
    return queued


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
    try:
        fmt = source.format if source.format != "auto" else detect_format(head)
    except UnknownFormat:  # its message quotes the first line: a followed file may be no log at all
        raise ValueError(
            "Cannot tell the format of this file from its first bytes: it is no log AuditWeb knows "
            "(name the source's format if it is one)."
        ) from None
    if fmt not in NAMES:
        raise ValueError(f"Format {fmt!r} cannot be followed (supported: {', '.join(NAMES)}).")
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
    if offset == 0 and last_time is None:
        last_time = time_carried_into(source, known)
    try:
        f, limit = open_content(c, offset)
    except (FileNotFoundError, PermissionError) as e:
        Source.objects.filter(pk=source.pk).update(last_error=storable(str(e))[:2000])
        return
    fmt = followed_format(source, c.head)
    excerpts = is_log(c.head)
    tracker, gaps = parsing_state(source, Source.objects.get(pk=source.pk).checkpoint or {})
    writer = EventWriter(source_file_id=known.pk, ingest_run_id=run.pk)
    hasher = FileHasher(known.hash_state, known.hashed_bytes, _ContentReader(c, f))
    lines = _Lines(f, offset, line, limit, partial_ok=read.finish)  # type: ignore[arg-type]
    hints = Hints(mtime_year=datetime.fromtimestamp(c.mtime, UTC).year, last_time=last_time)

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
            file_id=known.pk,
            settled=read.quiet,
            continues=(known.resume or {}).get("settled"),
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
                stored = store_batch(
                    writer, source, known, run, (formatted, corrections, found, problems), excerpts=excerpts
                )
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


def time_carried_into(source: Source, new: SourceFile) -> datetime | None:
    """The time a new file of a source starts with: the one the file read before it ended with.

    An old-layout general log prints a record's time only when the second changes, and the
    server keeps that second across reopening its log: after a rotation (FLUSH GENERAL LOGS, or
    a copytruncate) the new file's first records may print none, being in the second the old
    file printed last."""
    before = SourceFile.objects.filter(source=source).exclude(pk=new.pk).exclude(last_read_at=None)
    resume = before.order_by("-last_read_at", "-pk").values_list("resume", flat=True).first()
    return resume_of(resume)[2] if resume and resume.get("last_time") else None


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
    from ingest.checkpoints import find_candidates, open_candidate

    candidates = [c for c in find_candidates(source.path, []) if c.head_matches(known)]
    same = [c for c in candidates if (c.device, c.inode) == (known.device, known.inode)]
    for c in same + candidates:
        if c.compressed or c.size >= upto:
            with open_candidate(c) as f:
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
            from ingest.checkpoints import open_candidate

            self.close()
            self.gz = gzip.GzipFile(fileobj=open_candidate(self.candidate), mode="rb")  # type: ignore[arg-type]
            self.gz.myfileobj = self.gz.fileobj  # type: ignore[attr-defined]  # closed with it
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
