"""The resumable read: a log file's bytes from a resume point to Batches, in a second process.

Opening and hashing files (`open_log`, `hash_file_upto`), the parsers by format, the lines of a
file with their offsets (`FileLines`), the read itself (`tail_messages`: parse, attribute,
classify, cut into batches each complete up to its resume point) and the parsing process
(`in_second_process`). Nothing here writes to the database: the writer commits what this
yields (ingest.commit).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import gzip
import hashlib
import io
import itertools
import os
import pickle
import queue
import signal
import threading
import traceback
from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast
from zoneinfo import ZoneInfo

from django.conf import settings

from ingest.batch import Batch, ResumePoint
from ingest.checkpoints import Candidate, find_candidates, open_candidate
from ingest.chunks import ContentWindow
from ingest.custody import FileHasher
from ingest.events import EventRecord, FlagCorrection, GapRecord
from ingest.models import Source, SourceFile
from ingest.normalize import (
    SETTLE,
    GapFinder,
    SessionTracker,
    Settle,
    classifier_for,
    classify_events,
    mysql_stages,
)
from ingest.parsers import NAMES, by_name, dialect_of, open_parser
from ingest.parsers.detect import HEAD_BYTES, UnknownFormat, detect_format
from ingest.parsers.records import Hints, Item, Problem, ServerStart
from ingest.reading import Cut as ReadCut
from ingest.reading import cut_line, read_long_line, uncut
from ingest.rows import RowFormatter

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

T = TypeVar("T")

HEAD_HASH_BYTES = 64 * 1024
GZIP_MAGIC = b"\x1f\x8b"


class HashingReader(io.RawIOBase):
    """Reads a file and hashes every byte on the way: the file's SHA-256 costs no second pass."""

    def __init__(self, raw: io.RawIOBase | io.BufferedIOBase) -> None:
        self.raw = raw
        self.sha256 = hashlib.sha256()
        self.bytes_read = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int | None:
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
    reader = HashingReader(path.open("rb", buffering=0))
    buffered = io.BufferedReader(reader, buffer_size=1 << 20)
    content, lines = reader, buffered
    if compressed:  # the evidence is the content: a .gz's hash is that of what zcat prints
        content = HashingReader(gzip.GzipFile(fileobj=buffered, mode="rb"))
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


def is_log(head: bytes) -> bool:
    """Whether a file's first bytes are those of a log AuditWeb knows. Only such files show the
    bytes of their problems: a source named to read /etc/shadow as a general log (a glob that
    caught it) must not show its lines as problem excerpts to every viewer."""
    try:
        detect_format(head)
    except UnknownFormat:
        return False
    return True


@dataclass
class _Cut:
    """A point where everything before is complete: where a batch may end and the next read start."""

    resume: ResumePoint | None  # of the first byte not covered (None: a read that needs none)
    state: dict[str, object]  # {"tracker": ..., "gaps": ...} after everything before
    ends: tuple[int, int, int, int]  # events, problems, corrections, gaps produced before it


class FileLines:
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
        # The content handed over, for the batches' chunks (ingest.chunks); a cut line's is not.
        self.window: ContentWindow | None = None

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
            if not self.partial_ok and raw[-1:] != b"\n":
                self.held = True  # it is being written: neither cut nor handed over yet
                break
            if cut is None and self.window is not None:
                self.window.add(self.offset, raw)
            if cut is not None:
                self.cuts.append(cut)
                self._starts.append(cut.start)
                self._removed += cut.removed
                self._removed_before.append(self._removed)
            self.offset += length
            self.line += 1
            yield raw
        self.eof = True


def tail_messages(
    *,
    fmt: str,
    lines: FileLines,
    finish: bool,
    hints: Hints,
    tracker: SessionTracker,
    gaps: GapFinder,
    formatter: RowFormatter | None,
    batch_size: int,
    cut_bytes: int | None = None,
    file_id: int | None = None,
    settled: bool = False,
    continues: dict[str, object] | None = None,
    stop_at: int | None = None,
    stored_below: int = 0,
    stored_ranges: Sequence[tuple[int, int]] = (),
) -> Generator[Batch, None, None]:
    """Parse a file from a resume point into Batches, each complete up to its resume point.

    Batches end only at cuts, points where every stage has finished with everything before
    ("Cuts" and "The ingest core" in docs/architecture.md): when a batch is full, and where the
    bytes end for now if the file may grow (`finish` false). A `settled` (quiet) file has its
    last record flushed and said in the resume point; `continues` is what such a read said.
    With no `formatter` it only scans (ingest.split): events are counted, not kept. `cut_bytes`
    also cuts whenever that many bytes were read since the last cut. `file_id` (the
    SourceFile's) tells the tracker which file a Connect was read in. A one-shot read
    (ingest.pipeline.ingest_file) cuts as every read does: its resume points are its checkpoints
    (how far the store holds the file: exactly once, ingest.identity). `stop_at`
    (a shared-out range's end, a resume point the scan found): the read ends, as where the
    bytes end for now, before the first item the parser would resume at or after it (the
    lines after it are read only to complete what comes before it). Events that start before
    `stored_below` are in the store already (ingest.identity), and so are those that start in
    one of `stored_ranges` ([start, end) offsets: ranges of a split that was given up, ingest.split):
    they are seen, not formatted.
    """
    start_line = lines.line
    if formatter is not None:  # the events point into the content read, kept in chunks
        formatter.window = lines.window = ContentWindow()
    tracker.file = file_id
    # The format decides the server's SQL dialect, and so how its statements are classified and
    # what shows a gap (the stages are chosen here once, not asked per event).
    tracker.dialect = gaps.dialect = dialect_of(fmt)
    classify = classifier_for(tracker.dialect)
    # `hints.last_time`: the time carried into the resume point (general log).
    parser = open_parser(by_name(fmt), start_offset=lines.offset, start_line=start_line, hints=hints)

    def finished() -> Iterator[Item]:
        if finish or (settled and not lines.held):  # else a pending last item is read again later
            yield from parser.finish()

    # (chain: no frame of ours between the parser's items and the stages)
    items: Iterator[Item] = itertools.chain(parser.feed(lines), finished())
    # Where the parser would resume before its next item, as it tells it (a cheap tuple: the
    # resume point is made of it only where a cut is made); None when it cannot tell.
    resume_point = parser.resume_point

    # Lines too long to hand over are cut (FileLines): the parser counts only what it was
    # handed. uncut gives its items the file's offsets back, says each cut, and may hold a
    # Problem until the next item: so the resume point before each item the parser yields is
    # taken as the parser is asked for it, and kept with it (`points`); an item uncut makes
    # itself (a cut said) has none, and no cut is made before it.
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

    def at(point: tuple[int, int, datetime | None] | None, item: Item | None = None) -> ResumePoint:
        """The resume point of the parser's `point` (offsets as the parser counts), else `item`'s,
        else where the lines end."""
        if point is not None:
            return ResumePoint(lines.file_offset(point[0]), point[1], point[2])
        if item is not None:
            return ResumePoint(item.offset, item.line)
        return ResumePoint(lines.offset, lines.line)

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

    def cut(resume: ResumePoint | None) -> _Cut:
        """A cut here; without a resume point, no state either."""
        state: dict[str, object] = {}
        if resume is not None:
            if continues and resume.offset == start_offset:
                resume = replace(resume, settled=continues)  # nothing read since: still the case
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

    # Where the last start banner handed to the tracker begins (None: no point before it).
    banner_at: ResumePoint | None = None

    def end_for_now(end: ResumePoint) -> tuple[bool, ResumePoint]:
        """(whether the tracker must decide now, where the read ends) where the bytes end for now.
        While the tracker holds a start banner's records, the read ends before the banner, to be
        read again with what the server writes after it (a read of the whole file weighs those
        too, and dates the start by the record after it); only a quiet file (`settled`), or a
        banner with no point before it, has the tracker decide now (SETTLE)."""
        if tracker.holding and banner_at is not None and not settled:
            return False, banner_at  # (what the tracker holds is outside its state: see holding)
        return tracker.holding, end

    def valve() -> Iterator[Item | Settle]:
        """The parser's items, with the cuts made between them. A cut is made only where the
        tracker holds nothing back: not while it holds a start banner's records until they show
        reopen or restart. Where the bytes end for now, the read ends before a banner it holds
        (end_for_now), or, in a quiet file, it is told to decide (SETTLE)."""
        nonlocal want_cut, final, cut_from, flushed_from, flushed_line, continues, banner_at
        iterator = iter(items)
        while True:
            try:
                item = next(iterator)
            except StopIteration:
                if not finish:
                    decide, end = end_for_now(at(last_point[0]))
                    if decide:
                        yield SETTLE
                    if flushed_from is not None:
                        keys = [*flushed_keys]
                        said = {"line": flushed_line, "offset": flushed_from, "keys": keys}
                        end = replace(end, settled=said)
                    report_open_gap()
                    final = cut(end)
                return
            made = not points or points[0][0] is not item  # by uncut: a cut said
            before = None if made else points.popleft()[1]
            if (
                stop_at is not None
                and before is not None
                and not tracker.holding
                and lines.file_offset(before[0]) >= stop_at
            ):
                report_open_gap()  # (as where the bytes end: the next range closes it)
                final = cut(at(before, item))
                return
            if made:
                if continues is not None and isinstance(item, Problem) and item.offset == start_offset:
                    _continued(item, continues, corrections)
                continues = None
                if isinstance(item, ServerStart):
                    banner_at = None  # (no point before it: not to be read again from it)
                yield item
                continue
            if not finish and lines.eof:
                if not settled or lines.held:
                    decide, end = end_for_now(at(before, item))
                    if decide:
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
                cuts.append(cut(at(before, item)))
                want_cut = False
                cut_from = lines.offset
            if isinstance(item, ServerStart):
                banner_at = at(before, item)
            yield item

    def send(c: _Cut, finished: bool) -> Batch:
        n = [c.ends[i] - taken[i] for i in range(4)]
        batch_events, batch_problems = events[: n[0]], problems[: n[1]]
        batch_corrections, batch_gaps = corrections[: n[2]], found[: n[3]]
        del events[: n[0]], problems[: n[1]], corrections[: n[2]], found[: n[3]]
        for i in range(4):
            taken[i] = c.ends[i]
        # The content up to where this batch's read got goes with it (ingest.chunks).
        upto = c.resume.offset if c.resume else lines.offset if finished else None
        kept = batch_events
        if (stored_below or stored_ranges) and formatter:
            kept = [
                e
                for e in batch_events
                if e.offset >= stored_below and not any(lo <= e.offset < hi for lo, hi in stored_ranges)
            ]
        return Batch(
            formatted=formatter.format(kept, upto) if formatter else None,
            seen=len(batch_events),
            problems=batch_problems,
            corrections=batch_corrections,
            gaps=batch_gaps,
            resume=c.resume,
            state=c.state,
            finished=finished,
            read_to=c.resume.offset if c.resume else lines.offset,
        )

    stream: Iterator[Item | Settle] = valve()
    if classify is classify_events:  # MySQL and MariaDB: the three stages in one loop
        outputs: Iterator[object] = mysql_stages(stream, tracker, gaps)
    else:
        outputs = gaps.process(classify(tracker.process(stream), tracker.routines))
    for out in outputs:
        if type(out) is EventRecord:  # (exactly: it has no subclasses)
            if formatter:
                events.append(out)
            else:  # a scan counts them: it keeps none
                events.append(None)  # type: ignore[arg-type]  # a placeholder, counted and dropped
            if flushed_from is not None and out.offset >= flushed_from and len(flushed_keys) < 100:
                when = out.occurred_at
                flushed_keys.append([out.record_hash().hex(), when.isoformat() if when else None])
            # (Not while a cut made since is still to be sent: the events it holds are counted
            # here until then, and a second cut would send one event alone.)
            if not cuts and (
                len(events) >= batch_size or (cut_bytes and lines.offset - cut_from >= cut_bytes)
            ):
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
        yield send(cut(at(resume_point())), True)
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
    stored = settled.get("keys")
    keys = [
        (bytes.fromhex(str(h)), datetime.fromisoformat(str(t)) if t else None)
        for h, t in (stored if isinstance(stored, list) else [])
    ]
    if keys:
        corrections.append(FlagCorrection("continued_after_quiet", keys))


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


def parsing_state(source: Source, state: Mapping[str, Any]) -> tuple[SessionTracker, GapFinder]:
    """A session tracker and a gap finder in the state a checkpoint recorded (empty: a fresh start)."""
    tracker = SessionTracker(source.server, ZoneInfo(source.timezone))
    if state.get("tracker"):
        tracker.load_state(state["tracker"])
    gaps = GapFinder()
    if state.get("gaps"):
        gaps.load_state(state["gaps"])
    return tracker, gaps


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


def in_second_process(produce: Callable[[], Iterator[T]]) -> Generator[T, None, None]:
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
        # Everything inherited (Django, the modules, sqlglot's tables, the classifier's caches)
        # lives as long as the child: out of the collector's sight, its full collections look
        # only at what the read makes (15% of the parsing process's CPU on mariadb-slap's log).
        gc.freeze()
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
    # several MB, so without it the child would wait while this side writes to PostgreSQL. A
    # one-shot read sends two messages a batch (how far its content is hashed, then the batch):
    # eight hold about four batches, so the child parses on while a batch is written.
    received: queue.Queue[tuple[str, object]] = queue.Queue(maxsize=8)
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
            yield cast("T", payload)
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


def hash_file_upto(source: Source, known: SourceFile, upto: int) -> tuple[FileHasher, bool] | None:
    """A file's SHA-256 brought up to `upto` from where its hash stopped, for a file whose resume
    point moves without a poll reading it in order (a split's ranges, read by several workers).
    The file is found as the split finds it (same inode and first bytes, else a copy); None when
    it is gone (its hash then stays where it was, and verify_evidence says how far it goes)."""
    candidates = [c for c in find_candidates(source.path, []) if c.head_matches(known)]
    same = [c for c in candidates if (c.device, c.inode) == (known.device, known.inode)]
    for c in same + candidates:
        if c.compressed or c.size >= upto:
            with open_candidate(c) as f:
                reader = ContentReader(c, f)
                try:
                    hasher = FileHasher(known.hash_state, known.hashed_bytes, reader)
                    return hasher, hasher.advance(upto)
                finally:
                    reader.close()
    return None


class ContentReader:
    """`read_at(offset, n)` over a file's content for FileHasher: for a plain file, pread on the
    descriptor being parsed (which moves no one's position: the parser reads the same descriptor
    in the other process); for a .gz, a decompressing reader of its own, going forward."""

    def __init__(self, candidate: Candidate, f: io.IOBase) -> None:
        self.candidate, self.f = candidate, f
        self.raw: io.BufferedReader | None = None
        self.gz: gzip.GzipFile | None = None

    def __call__(self, offset: int, n: int) -> bytes:
        if not self.candidate.compressed:
            return os.pread(self.f.fileno(), n, offset)
        gz = self.gz
        if gz is None or gz.tell() > offset:
            self.close()
            self.raw = open_candidate(self.candidate)
            gz = self.gz = gzip.GzipFile(fileobj=self.raw, mode="rb")
        gz.seek(offset)
        return gz.read(n)

    def close(self) -> None:
        if self.gz is not None:
            self.gz.close()
            self.gz = None
        if self.raw is not None:
            self.raw.close()
            self.raw = None
