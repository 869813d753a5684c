"""Sources followed over time: files that grow and rotate, and live tables, one poll at a time.

Beat asks for polls (`poll_due_sources`, `look_at_followed_files`); a worker runs one
(`ingest_source`) under the source's lock: it plans which files to read (ingest.checkpoints),
reads each from its resume point (ingest.tail) and commits every batch with the file's new
resume point (ingest.commit), or shares a big backlog out (ingest.split), or pulls a table
(ingest.pipeline.ingest_table).
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Generator, Iterable
from datetime import UTC, datetime, timedelta
from functools import partial

from django.conf import settings
from django.db import connection, models, transaction
from django.db.models import F
from django.db.models.functions import Greatest
from django.utils import timezone

from ingest.batch import Batch, ResumePoint
from ingest.binlog_follow import follow_binlogs, is_binlog_source
from ingest.binlog_join import join_binlogs
from ingest.binlog_replica import pull_binlogs
from ingest.checkpoints import (
    Plan,
    Read,
    content_size,
    ends_with_newline,
    known_file,
    listing_signature,
    open_content,
    plan_reads,
    source_lock,
    still_the_same,
    time_carried_into,
)
from ingest.commit import commit_batch, record_file_hash
from ingest.custody import FileHasher
from ingest.models import IngestRun, ParseProblem, Source, SourceFile, Split
from ingest.mysql_table import connect, source_password
from ingest.oracle_table import connect as connect_oracle
from ingest.parsers.records import Hints
from ingest.pipeline import ingest_oracle_table, ingest_table
from ingest.sources import check_sources_health
from ingest.split import look_after_split, plan_split, stored_ranges, worth_splitting
from ingest.store import EventWriter
from ingest.tail import (
    ContentReader,
    FileLines,
    followed_format,
    in_second_process,
    is_log,
    parsing_state,
    tail_messages,
)
from ingest.textsafe import storable

log = logging.getLogger(__name__)


class SourceBusy(Exception):
    """Another worker holds the source's advisory lock: it is being ingested right now."""


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
    4. New events: join the server's binlog rows not joined for sure yet (ingest.binlog_join).

    A file source of format binlog, and a binlog-replica source, are read by
    ingest.binlog_follow (after the pull into the spool, ingest.binlog_replica) instead of 2.

    With `dispatch` (a function that queues the reading of a range: the Celery task), a big
    backlog of a file source is shared out between workers instead (ingest.split); while that
    goes on, polls of the source only look after it.
    """
    source = Source.objects.get(pk=source_id)
    with source_lock(source.pk) as got:
        if not got:
            raise SourceBusy(f"source {source.pk} is being ingested by another worker")
        # (A shared-out backlog's run goes on while its ranges are read: its split ends it.)
        open_splits = Split.objects.filter(source=source, finished_at__isnull=True, planned=True)
        IngestRun.objects.filter(source=source).exclude(pk__in=open_splits.values("run_id")).fail(
            "interrupted: the worker running it stopped before the end"
        )
        run = IngestRun.objects.get(pk=run_id) if run_id else None
        try:
            if source.pulls_rows:
                run = _pull_table_source(source, run)
            elif source.kind == Source.Kind.BINLOG_REPLICA:
                run = pull_binlogs(source, run)
            elif is_binlog_source(source):
                run = follow_binlogs(source, run)
            else:
                run = _ingest_file_source(source, run, dispatch)
        finally:
            Source.objects.filter(pk=source.pk).update(last_polled_at=timezone.now())
            check_sources_health([Source.objects.get(pk=source.pk)])  # a run may fail, or heal it
    if run is not None and run.events_stored:
        join_binlogs(source.server)  # new statements may explain binlog rows stored before them
    return run


def _start_run(source: Source, run: IngestRun | None, bytes_total: int) -> IngestRun:
    """The run of this poll: the one asked for, started now, or a new one."""
    if run is None:
        return IngestRun.objects.create(source=source, bytes_total=bytes_total)
    run.begin(bytes_total)
    return run


def _nothing_to_read(source: Source, run: IngestRun | None) -> IngestRun | None:
    """A poll that reads nothing ends the run asked for (if one was); no run is made otherwise."""
    if run is None:
        return None
    run = _start_run(source, run, 0)
    run.finish()
    return run


def _pull_table_source(source: Source, run: IngestRun | None) -> IngestRun:
    try:
        password = source_password(source.password_env, os.environ)
        oracle = source.kind == Source.Kind.ORACLE_TABLE
        conn = (connect_oracle if oracle else connect)(source.dsn, password)
    except Exception as e:  # refused, unknown host, bad password: the source's health says so
        Source.objects.filter(pk=source.pk).update(
            last_error=storable(f"cannot connect to {source.dsn}: {e}")[:2000]
        )
        run = _start_run(source, run, 0)
        run.fail(e)
        return run
    try:
        pull = ingest_oracle_table if oracle else ingest_table
        run = pull(source, conn, run=_start_run(source, run, 0))
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
    if not look_after_split(source, dispatch):
        return _nothing_to_read(source, run)  # (asked for while a split goes on: that is the reading)
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
        return _nothing_to_read(source, run)
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
        run.fail(e)
        raise
    _note_watch(source, signature, plan)
    run.finish()
    return run


def _note_watch(source: Source, signature: str, plan: Plan) -> None:
    """Record what this poll saw, for look_at_followed_files: the files' listing signature, and
    when to look again without any change, if the newest file's last record is still pending
    and may be settled then (it ends with a newline but has not been quiet long enough)."""
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
        run.add_batch(read=0, seen=0, stored=0, problems=1)


def _read_file(source: Source, run: IngestRun, read: Read, done_before: int) -> None:
    """Read one file of a source from its resume point, committing each batch with the file's new
    resume point, its SHA-256 so far and the source's tracker state (see ingest_source)."""
    c = read.candidate
    known = known_file(source, read)
    if known is None:
        return
    start = ResumePoint.from_dict(known.resume)
    last_time = start.last_time
    if start.offset == 0 and last_time is None:
        last_time = time_carried_into(source, known)
    try:
        f, limit = open_content(c, start.offset)
    except (FileNotFoundError, PermissionError) as e:
        Source.objects.filter(pk=source.pk).update(last_error=storable(str(e))[:2000])
        return
    fmt = followed_format(source, c.head)
    excerpts = is_log(c.head)
    tracker, gaps = parsing_state(source, Source.objects.get(pk=source.pk).checkpoint or {})
    writer = EventWriter(source_file_id=known.pk, ingest_run_id=run.pk)
    ranges = stored_ranges(known, start.offset)  # (stored by a split given up)
    content = ContentReader(c, f)
    hasher = FileHasher(known.hash_state, known.hashed_bytes, content)
    lines = FileLines(f, start.offset, start.line, limit, partial_ok=read.finish)
    hints = Hints(
        mtime_year=datetime.fromtimestamp(c.mtime, UTC).year,
        last_time=last_time,
        log_line_prefix=source.log_line_prefix or None,
    )

    def produce() -> Generator[Batch, None, None]:
        return tail_messages(
            fmt=fmt,
            lines=lines,
            finish=read.finish,
            hints=hints,
            tracker=tracker,
            gaps=gaps,
            formatter=writer.formatter,
            batch_size=settings.INGEST_BATCH_SIZE,
            file_id=known.pk,
            settled=read.quiet,
            continues=start.settled,
            stored_below=known.stored_below,
            stored_ranges=ranges,
        )

    messages = in_second_process(produce) if settings.INGEST_PARALLEL else produce()
    try:
        for batch in messages:
            assert batch.resume is not None  # a followed read is resumable
            resume = batch.resume
            if not c.compressed and not still_the_same(f, c, resume.offset):
                # Truncated (copytruncate) and maybe written again since it was planned or while
                # it was read: these bytes may not be the file that was planned. Nothing of this
                # batch is kept; the next poll plans again (and finds the copy, if there is one).
                log.info("source %s: %s changed while it was read; read again next poll", source.pk, c.path)
                break
            now = timezone.now()
            moved = hasher.advance(resume.offset)  # the file's SHA-256 up to the new resume point

            progress = done_before + resume.offset - start.offset  # as far as this run got
            commit_batch(
                batch,
                writer=writer,
                source=source,
                source_file=known,
                run=run,
                read=progress - run.bytes_read,
                excerpts=excerpts,
                checkpoint=partial(
                    _move_file,
                    source,
                    known,
                    batch,
                    size=c.size,
                    hasher=hasher,
                    moved=moved,
                    now=now,
                    new_data=resume.offset > start.offset,
                ),
                run_file=known,
            )
    finally:
        messages.close()
        f.close()
        content.close()


def _move_file(
    source: Source,
    known: SourceFile,
    batch: Batch,
    *,
    size: int,
    hasher: FileHasher,
    moved: bool,
    now: datetime,
    new_data: bool,
) -> None:
    """A followed file's part of committing a batch: its resume point and SHA-256 so far, and the
    source's tracker state (merged into its checkpoint, which holds other keys too)."""
    assert batch.resume is not None
    SourceFile.objects.filter(pk=known.pk).update(
        resume=batch.resume.to_dict(),
        bytes_read=batch.resume.offset,
        stored_below=Greatest(F("stored_below"), batch.resume.offset),  # (ingest.identity)
        size=size,
        last_read_at=now,
        finished=batch.finished,
    )
    record_file_hash(source.pk, known.pk, hasher, moved)
    fresh = dict(Source.objects.select_for_update().get(pk=source.pk).checkpoint or {})
    fresh.update(batch.state)
    update: dict[str, object] = {"checkpoint": fresh}
    if new_data:
        update["last_data_at"] = now
    Source.objects.filter(pk=source.pk).update(**update)


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
            transaction.on_commit(partial(queue, source_id))
            queued += 1
    return queued


def source_ingest_now(source: Source, queue: Callable[[int, int], object]) -> IngestRun:
    """A run asked for now (the API, the Sources page): stored as queued, then queued on commit."""
    run = IngestRun.objects.create(source=source, status=IngestRun.Status.QUEUED)
    transaction.on_commit(lambda: queue(source.pk, run.pk))
    return run
