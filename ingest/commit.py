"""Committing what a read made: one Batch, with where the read got to, in one transaction."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from django.db import transaction

from ingest.batch import Batch
from ingest.custody import FileHasher, chain_file_hash
from ingest.events import GapRecord
from ingest.models import Gap, IngestRun, ParseProblem, Source, SourceFile
from ingest.parsers.records import PROBLEM_EXCERPT_BYTES, Problem
from ingest.store import EventWriter
from ingest.textsafe import storable

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
    # Nearly every gap closes in the batch that opened it: one query finds the few rows left open
    # (by another file or an earlier read), and only those are updated, not one query a gap.
    stored_open = _open_rows(source) if closing else set()
    new: list[GapRecord] = []
    for g in gaps:
        # Opened while another file of the source was read (its statement was that file's end).
        if g in closing and _key(g) in stored_open and _close_gap(source, g, exclude=source_file):
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
    if closing:  # (after the insert: an open row another worker committed meanwhile)
        stored_open = _open_rows(source, source_file)
        for g in closing:
            if _key(g) in stored_open:
                _close_gap(source, g, only=source_file)


def _key(gap: GapRecord) -> tuple[int, int, datetime | None]:
    return gap.line, gap.offset, gap.started_at


def _open_rows(
    source: Source, source_file: SourceFile | None = None
) -> set[tuple[int, int, datetime | None]]:
    """(line, offset, start) of the server's logging-off rows stored open (of one file)."""
    rows = Gap.objects.filter(
        source_file__source__server=source.server, reason=Gap.Reason.LOGGING_OFF, ended_at=None
    )
    if source_file is not None:
        rows = rows.filter(source_file=source_file)
    return set(rows.values_list("line", "byte_offset", "started_at"))


def _close_gap(
    source: Source, gap: GapRecord, *, only: SourceFile | None = None, exclude: SourceFile | None = None
) -> bool:
    """Give an open logging-off row of the server (the same statement: line, offset and start) its
    end; whether one was. The server's, not only the source's: `manage.py ingest` makes a source
    per file, and a blind spot opened in one file may end in the next."""
    rows = Gap.objects.filter(
        source_file__source__server=source.server,
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
    return rows.update(ended_at=gap.ended_at, detail=storable(gap.detail)[:1000]) > 0


def commit_batch(
    batch: Batch,
    *,
    writer: EventWriter,
    source: Source,
    source_file: SourceFile,
    run: IngestRun,
    read: int,
    excerpts: bool = True,
    checkpoint: Callable[[], object] | None = None,
    run_file: SourceFile | None = None,
) -> int:
    """Store one batch in one transaction, with where its read got to: a crash loses at most the
    batch in flight, and the read resumes exactly after the last one committed.

    1. Its events, the flags it learnt about events stored before, its gaps and its problems
       (with their bytes only if `excerpts`: the file begins like a log).
    2. `checkpoint()`, the caller's record of how far the read got (a file's resume point, a
       range's, a table's watermark), in the same transaction.
    3. The run's counters: `read` more bytes (rows, for a table), and `run_file` as its file.
    Returns how many events were new.
    """
    with transaction.atomic():
        stored = writer.write_formatted(batch.formatted) if batch.formatted is not None else 0
        writer.apply_corrections(batch.corrections)
        _store_gaps(source, source_file, batch.gaps)
        _store_problems(run, source_file, batch.problems, excerpts)
        if checkpoint is not None:
            checkpoint()
        run.add_batch(
            read=read, seen=batch.seen, stored=stored, problems=len(batch.problems), source_file=run_file
        )
    return stored


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
