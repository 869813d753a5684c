"""A big backlog of one file source, read by several workers at once.

Only who a statement belongs to (parser and session tracker) must be read in order, and that is
cheap; formatting and storing are not. So one worker plans byte ranges with the tracker's state
at each start, any worker reads a range, and whoever ends the last one finishes the split.
The three steps: docs/architecture.md, "A big backlog shared out between workers".
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import socket
from collections.abc import Callable, Generator, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F
from django.db.models.functions import Greatest
from django.utils import timezone

from ingest.batch import Batch, ResumePoint
from ingest.checkpoints import (
    Candidate,
    Read,
    content_size,
    find_candidates,
    known_file,
    open_candidate,
    open_content,
    source_lock,
    still_the_same,
    time_carried_into,
)
from ingest.commit import commit_batch, record_file_hash
from ingest.events import FlagCorrection
from ingest.models import Chunk, IngestRun, ParseProblem, Source, SourceFile, Split
from ingest.parsers import by_name, waits_for_next_line
from ingest.parsers.records import Hints
from ingest.reading import read_long_line
from ingest.store import EventWriter
from ingest.tail import (
    FileLines,
    followed_format,
    hash_file_upto,
    in_second_process,
    is_log,
    parsing_state,
    tail_messages,
)
from ingest.textsafe import storable

log = logging.getLogger(__name__)

# First key of the two-int advisory lock of a range: pg_try_advisory_lock(CHUNK_LOCK_CLASS, chunk id).
CHUNK_LOCK_CLASS = 0x4143
SCAN_ALL = 1 << 62  # no cut by number of events while scanning: only by bytes

Dispatch = Callable[[int], object]


def worth_splitting(reads: list[Read]) -> bool:
    """Whether the bytes these reads have left are enough to share out (INGEST_SPLIT_BYTES; 0: never)."""
    threshold = settings.INGEST_SPLIT_BYTES
    if threshold <= 0:
        return False
    pending = sum(max(0, content_size(r.candidate) - r.offset) for r in reads)
    return pending >= threshold and (len(reads) > 1 or pending > settings.INGEST_CHUNK_BYTES)


# -- 1. plan ---------------------------------------------------------------------------------------


def plan_split(source: Source, run: IngestRun, reads: list[Read], dispatch: Dispatch) -> Split:
    """Scan `reads` (in order) into ranges and dispatch each as soon as it is known; then try to
    finish the split (a small one may be read by the time the scan ends). Call it holding the
    source's lock."""
    split = Split.objects.create(source=source, run=run)
    state: dict[str, object] = {
        k: v for k, v in (source.checkpoint or {}).items() if k in ("tracker", "gaps")
    }
    ends: dict[str, object] = {}
    number = 0
    carried: datetime | None = None  # the time the file before ended with (as a sequential read)
    for read in reads:
        known = known_file(source, read)
        if known is None:
            continue
        start = ResumePoint.from_dict(known.resume)
        if start.offset == 0 and not start.last_time:
            before = time_carried_into(source, known) if number == 0 else None
            carried = carried or before
            if carried:
                start = replace(start, last_time=carried)
        for end, end_state, finished in _scan(source, read, start, state, known.pk):
            if end.offset > start.offset or finished:
                chunk = Chunk.objects.create(
                    split=split,
                    number=number,
                    source_file=known,
                    start=start.to_dict(),
                    start_state=state,
                    end_offset=end.offset,
                    finish=finished,
                    dispatched_at=timezone.now(),
                )
                dispatch(chunk.pk)
                number += 1
            ends[str(known.pk)] = {"resume": end.to_dict(), "finished": finished}
            start, state = end, end_state
            carried = end.last_time
    split.ends = ends
    split.final_state = state
    split.planned = True
    split.save(update_fields=["ends", "final_state", "planned"])
    log.info("source %s: split %s planned in %s ranges", source.pk, split.pk, number)
    finish_split(split.pk)
    return split


def _scan(
    source: Source, read: Read, start: ResumePoint, state: dict[str, object], file_id: int
) -> Iterator[tuple[ResumePoint, dict[str, object], bool]]:
    """The cuts of one file from `start`: (resume point, state there, read to the end) each."""
    c = read.candidate
    f, limit = open_content(c, start.offset)
    try:
        tracker, gaps = parsing_state(source, state)
        lines = FileLines(f, start.offset, start.line, limit, partial_ok=read.finish)
        for batch in tail_messages(
            fmt=followed_format(source, c.head),
            lines=lines,
            finish=read.finish,
            hints=Hints(
                mtime_year=datetime.fromtimestamp(c.mtime, UTC).year,
                last_time=start.last_time,
                log_line_prefix=source.log_line_prefix or None,
            ),
            tracker=tracker,
            gaps=gaps,
            formatter=None,
            batch_size=SCAN_ALL,
            cut_bytes=None if c.compressed else settings.INGEST_CHUNK_BYTES,
            file_id=file_id,
        ):
            assert batch.resume is not None  # a scan is resumable
            # Kept while the scan goes on: nothing in it may be shared with the live stages.
            yield batch.resume, copy.deepcopy(batch.state), batch.finished
    finally:
        f.close()


# -- 2. read a range -------------------------------------------------------------------------------


@contextlib.contextmanager
def chunk_lock(chunk_id: int) -> Iterator[bool]:
    """Hold the range's advisory lock (freed by PostgreSQL if the worker dies); yields whether we got it."""
    with connection.cursor() as cur:
        cur.execute("SELECT pg_try_advisory_lock(%s, %s)", [CHUNK_LOCK_CLASS, chunk_id])
        got = bool(cur.fetchone()[0])
    try:
        yield got
    finally:
        if got:
            with connection.cursor() as cur:
                cur.execute("SELECT pg_advisory_unlock(%s, %s)", [CHUNK_LOCK_CLASS, chunk_id])


def read_chunk(chunk_id: int, *, stop_after: int | None = None) -> bool:
    """Read one range into the store; returns whether it is done (False: another worker holds it,
    or the file changed under it and it is left for a later dispatch). `stop_after` batches: for
    tests, a worker that stops mid-range."""
    with chunk_lock(chunk_id) as got:
        if not got:
            return False
        chunk = Chunk.objects.select_related("split__source", "split__run", "source_file").get(pk=chunk_id)
        if chunk.done:
            return True
        if chunk.split.finished_at is not None:  # given up (its plan was interrupted)
            return True
        return _read_chunk(chunk, stop_after)


def _read_chunk(chunk: Chunk, stop_after: int | None) -> bool:
    source, run, known = chunk.split.source, chunk.split.run, chunk.source_file
    c = locate(source, known, chunk.end_offset)
    if c is None:
        _chunk_lost(chunk, "the file vanished (or changed) before this part of it was read: it is lost")
        return True
    start = ResumePoint.from_dict(chunk.resume or chunk.start)
    offset = start.offset
    try:
        f, _ = open_content(c, offset)
    except (FileNotFoundError, PermissionError) as e:
        Chunk.objects.filter(pk=chunk.pk).update(error=storable(str(e))[:2000])
        return False
    fmt = followed_format(source, c.head)
    limit = chunk.end_offset - offset
    stop_at = None
    if waits_for_next_line(by_name(fmt)) and not chunk.finish:
        # Its record ends where the next begins (the general log), or a statement where its
        # session's next line comes, maybe lines later (pgAudit): the parser reads on as far as
        # it needs, and the read ends at the range's end (a resume point the scan found).
        limit = max(limit + _line_length_at(c, chunk.end_offset), content_size(c) - offset)
        stop_at = chunk.end_offset
    tracker, gaps = parsing_state(source, chunk.state or chunk.start_state)
    writer = EventWriter(source_file_id=known.pk, ingest_run_id=run.pk)
    ranges = stored_ranges(known, offset)
    lines = FileLines(f, offset, start.line, limit, partial_ok=chunk.finish)
    hints = Hints(
        mtime_year=datetime.fromtimestamp(c.mtime, UTC).year,
        last_time=start.last_time,
        log_line_prefix=source.log_line_prefix or None,
    )

    def produce() -> Generator[Batch, None, None]:
        return tail_messages(
            fmt=fmt,
            lines=lines,
            finish=chunk.finish,
            hints=hints,
            tracker=tracker,
            gaps=gaps,
            formatter=writer.formatter,
            batch_size=settings.INGEST_BATCH_SIZE,
            file_id=known.pk,
            stop_at=stop_at,
            stored_below=known.stored_below,  # (read by another source before: ingest.identity)
            stored_ranges=ranges,
        )

    worker = f"{socket.gethostname()}:{os.getpid()}"[:200]
    learnt = list(chunk.corrections)
    messages = in_second_process(produce) if settings.INGEST_PARALLEL else produce()
    done = False
    batches = 0
    try:
        for batch in messages:
            assert batch.resume is not None  # a range's read is resumable
            new_offset = batch.resume.offset
            last = batch.finished if chunk.finish else new_offset >= chunk.end_offset
            if not last and new_offset > chunk.end_offset:
                raise RuntimeError(f"range {chunk.pk} read past its end ({new_offset} > {chunk.end_offset})")
            if not c.compressed and not still_the_same(f, c, min(new_offset, chunk.end_offset)):
                log.info("range %s: %s changed while it was read; it is read again later", chunk.pk, c.path)
                break
            learnt += _corrections_json(batch.corrections)
            commit_batch(
                batch,
                writer=writer,
                source=source,
                source_file=known,
                run=run,
                read=new_offset - offset,
                excerpts=is_log(c.head),
                checkpoint=partial(
                    Chunk.objects.filter(pk=chunk.pk).update,
                    resume=batch.resume.to_dict(),
                    state=batch.state,
                    corrections=learnt,
                    worker=worker,
                    done=last,
                    error="",
                ),
            )
            offset = new_offset
            batches += 1
            if last:
                done = True
                break
            if stop_after is not None and batches >= stop_after:
                break
    finally:
        messages.close()
        f.close()
    if done:
        finish_split(chunk.split_id)
    return done


def locate(source: Source, known: SourceFile, needed: int) -> Candidate | None:
    """The file `known` is now, with at least `needed` bytes: under its name or renamed (same
    inode and first bytes), else a copy of it (copytruncate: same first bytes, long enough)."""
    candidates = find_candidates(source.path, [])
    same = [
        c for c in candidates if (c.device, c.inode) == (known.device, known.inode) and c.head_matches(known)
    ]
    copies = [c for c in candidates if c.head_matches(known)]
    for c in same + copies:
        if c.compressed or c.size >= needed:
            return c
    return None


def _line_length_at(c: Candidate, offset: int) -> int:
    """The length of the line of an uncompressed file that begins at `offset` (the first line of
    the next range), read in bounded pieces: it may be a line of any size (ingest.reading)."""
    with open_candidate(c) as f:
        f.seek(offset)
        first = f.readline(settings.INGEST_MAX_LINE_BYTES + 1)
        return read_long_line(first, f.readline)[0]


def _corrections_json(corrections: list[FlagCorrection]) -> list[object]:
    return [
        [c.flag, [[h.hex(), t.isoformat() if t else None] for h, t in c.keys], c.if_switched_off]
        for c in corrections
    ]


def _corrections_from(stored: list[list[Any]]) -> list[FlagCorrection]:
    return [
        FlagCorrection(
            flag,
            [(bytes.fromhex(h), datetime.fromisoformat(t) if t else None) for h, t in keys],
            condition[0] if condition else None,  # ranges stored before conditions have none
        )
        for flag, keys, *condition in stored
    ]


def _chunk_lost(chunk: Chunk, reason: str) -> None:
    """A range that can no longer be read: said where the operator looks, and the split goes on."""
    resume = ResumePoint.from_dict(chunk.resume or chunk.start)
    with transaction.atomic():
        ParseProblem.objects.bulk_create(
            [
                ParseProblem(
                    run=chunk.split.run,
                    source_file=chunk.source_file,
                    line=resume.line,
                    offset=resume.offset,
                    reason=reason,
                    excerpt=b"",
                )
            ],
            ignore_conflicts=True,
        )
        Chunk.objects.filter(pk=chunk.pk).update(done=True, error=reason)
        chunk.split.run.add_batch(read=0, seen=0, stored=0, problems=1)
    finish_split(chunk.split_id)


# -- 3. finish -------------------------------------------------------------------------------------


def finish_split(split_id: int) -> bool:
    """End the split if every range is read: returns whether it is ended. Needs the source's lock
    (advisory locks nest: the planner and a poll hold it already); False if another holds it."""
    split = Split.objects.select_related("source", "run").get(pk=split_id)
    if split.finished_at is not None:
        return True
    if not split.planned or split.chunks.filter(done=False).exists():
        return False
    with source_lock(split.source_id) as got:
        if not got:
            return False
        # Each file's SHA-256 up to where the split ends (ingest.custody), read before the transaction.
        files = SourceFile.objects.in_bulk([int(file_id) for file_id in split.ends])
        hashes = {
            file_id: hash_file_upto(split.source, files[int(file_id)], int(end["resume"]["offset"]))
            for file_id, end in split.ends.items()
        }
        with transaction.atomic():
            split = Split.objects.select_for_update().select_related("source", "run").get(pk=split_id)
            if split.finished_at is not None:
                return True
            writer = EventWriter(source_file_id=0, ingest_run_id=None)
            for stored in split.chunks.exclude(corrections=[]).values_list("corrections", flat=True):
                writer.apply_corrections(_corrections_from(stored))
            now = timezone.now()
            for file_id, end in split.ends.items():
                offset = int(end["resume"]["offset"])
                SourceFile.objects.filter(pk=int(file_id)).update(
                    resume=end["resume"],
                    bytes_read=offset,
                    stored_below=Greatest(F("stored_below"), offset),
                    last_read_at=now,
                    finished=end["finished"],
                )
                hashed = hashes.get(file_id)
                if hashed is not None:
                    record_file_hash(split.source_id, int(file_id), *hashed)
            source = Source.objects.select_for_update().get(pk=split.source_id)
            checkpoint = dict(source.checkpoint or {}) | split.final_state
            Source.objects.filter(pk=source.pk).update(checkpoint=checkpoint, last_data_at=now)
            split.finished_at = now
            split.save(update_fields=["finished_at"])
            split.run.finish()
    log.info("source %s: split %s finished", split.source_id, split.pk)
    return True


def look_after_split(source: Source, dispatch: Dispatch | None) -> bool:
    """A poll of a source with a split under way (call it holding the source's lock): give up a
    split whose scan was interrupted, dispatch again the ranges no worker is reading and that
    look forgotten, and finish it if it can be. Returns whether the source is free to be read."""
    split = Split.objects.filter(source=source, finished_at__isnull=True).first()
    if split is None:
        return True
    if not split.planned:
        # Its planner held this lock, which we have now: it died. Its resume points never moved:
        # reading on from them stores what its ranges did not, and skips what they stored
        # (stored_ranges). Given up only while no worker reads one of its ranges (holding every
        # range's lock), so what they stored is final; else the next poll tries again.
        with contextlib.ExitStack() as held:
            for chunk_id in split.chunks.values_list("pk", flat=True):
                if not held.enter_context(chunk_lock(chunk_id)):
                    return False
            now = timezone.now()
            Split.objects.filter(pk=split.pk).update(finished_at=now)
            split.run.fail("interrupted while its backlog was being shared out")
        return True
    if finish_split(split.pk):
        return True
    if dispatch is not None:
        forgotten = timezone.now() - timedelta(seconds=settings.INGEST_CHUNK_REDISPATCH_SECONDS)
        for chunk in split.chunks.filter(done=False):
            started = chunk.resume is not None
            if (started or (chunk.dispatched_at and chunk.dispatched_at < forgotten)) and _lock_free(
                chunk.pk
            ):
                Chunk.objects.filter(pk=chunk.pk).update(dispatched_at=timezone.now())
                dispatch(chunk.pk)
    return False


def stored_ranges(known: SourceFile, after: int) -> list[tuple[int, int]]:
    """The byte ranges of a file after offset `after` that ranges of a split given up stored
    (every event that starts in one is in the store): the whole of a range read to its end, the
    part before its resume point of one started. A split that finished moved the file's resume
    point past its ranges, so only given-up ones are found."""
    ranges = []
    chunks = Chunk.objects.filter(source_file=known, split__finished_at__isnull=False, end_offset__gt=after)
    for start, end, resume, done in chunks.values_list("start", "end_offset", "resume", "done"):
        stop = end if done else int(resume["offset"]) if resume else None
        first = int(start["offset"])
        if stop is not None and stop > first:
            ranges.append((first, stop))
    return sorted(ranges)


def _lock_free(chunk_id: int) -> bool:
    with chunk_lock(chunk_id) as got:
        return got
