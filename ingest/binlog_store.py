"""Binary logs into the store: the metadata pass of a file, committed in batches, exactly once.

`ingest_binlog` is what `pipeline.ingest_file` calls for a binary format (the registry's
`reads_bytes`): the file becomes a SourceFile, a run and a BinlogFile row before anything is
read; then its transactions, statements and table changes (ingest.binlog.metadata: counts and
positions, never a row value) are stored batch by batch. A transaction is stored once per
(server, file name, start position, commit time): the same file again, a copy, or a file read
while the server still wrote it and read again later, adds only what is new. The join with the
statements of the other logs is `ingest.binlog_join`, a set-wise step after the commit.
"""

from __future__ import annotations

import gzip
import hashlib
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

from django.db import connection, transaction
from psycopg.types.json import Jsonb

from ingest.binlog.metadata import BinlogFile as ScannedFile
from ingest.binlog.metadata import Transaction
from ingest.binlog.reader import BinlogProblem
from ingest.custody import chain_file_hash
from ingest.models import (
    BinlogFile,
    BinlogTransaction,
    IngestRun,
    ParseProblem,
    Source,
    SourceFile,
)
from ingest.parsers import binary_reader, by_name
from ingest.parsers.records import PROBLEM_EXCERPT_BYTES
from ingest.textsafe import storable

BATCH_TRANSACTIONS = 2000  # committed together with the run's progress
GZIP_MAGIC = b"\x1f\x8b"


class _Hashing:
    """A binary stream that hashes what is read from it (the scan reads the file once, in order)."""

    def __init__(self, raw: BinaryIO) -> None:
        self.raw, self.sha256, self.bytes_read = raw, hashlib.sha256(), 0

    def read(self, n: int = -1) -> bytes:
        data = self.raw.read(n)
        self.sha256.update(data)
        self.bytes_read += len(data)
        return data

    def seek(self, position: int, whence: int = 0) -> int:
        if (position, whence) != (0, 0) or self.bytes_read:
            raise ValueError("a hashed binlog is read once from its start")
        return self.raw.seek(0)


def open_binlog(path: str | Path) -> BinaryIO:
    """A binlog file for reading (and seeking), plain or gzip."""
    f = open(path, "rb")  # noqa: SIM115 (returned open, closed by the caller)
    if f.read(2) == GZIP_MAGIC:
        f.close()
        return gzip.open(path, "rb")  # seekable: each seek decompresses up to the position
    f.seek(0)
    return f


def _time(seconds: int) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def ingest_binlog(
    path: Path,
    *,
    source: Source,
    fmt: str,
    head_sha256: str,
    size: int,
    compressed: bool,
    progress: Callable[[IngestRun], None] | None = None,
) -> IngestRun:
    """Read one binlog file into the store. Returns the finished run, whose `events_seen` and
    `events_stored` count transactions (read, and new)."""
    read = binary_reader(by_name(fmt))
    if read is None:
        raise ValueError(f"{fmt}: not a binary format")
    source_file, _ = SourceFile.objects.get_or_create(
        source=source,
        path=str(path.resolve()),
        head_sha256=head_sha256,
        defaults={"size": size, "compressed": compressed},
    )
    run = IngestRun.objects.create(source=source, source_file=source_file, bytes_total=size)
    stream = _Hashing(open_binlog(path))
    binlog: BinlogFile | None = None
    pending: list[Transaction] = []
    problems: list[BinlogProblem] = []
    try:
        # The server's name for the file: a gzipped copy is the same file (and stored once).
        name = path.name.removesuffix(".gz") if compressed else path.name
        for item in read(stream, name):
            if isinstance(item, ScannedFile):
                binlog = _file_row(source_file, source.server, item)
            elif isinstance(item, Transaction):
                pending.append(item)
            else:
                problems.append(item)
            if len(pending) >= BATCH_TRANSACTIONS or len(problems) >= 1000:
                _commit(run, source_file, binlog, pending, problems, stream.bytes_read)
                pending, problems = [], []
                if progress:
                    progress(run)
        _commit(run, source_file, binlog, pending, problems, stream.bytes_read)
    except BaseException as e:
        run.fail(e)
        raise
    finally:
        stream.raw.close()
    sha256 = stream.sha256.hexdigest()
    with transaction.atomic():
        run.finish()
        SourceFile.objects.filter(pk=source_file.pk).update(
            size=size,
            sha256=sha256,
            bytes_read=stream.bytes_read,
            hashed_bytes=stream.bytes_read,
            last_read_at=run.finished_at,
            finished=True,
        )
        if run.events_stored:
            Source.objects.filter(pk=source.pk).update(last_data_at=run.finished_at)
            _analyze()
        if (source_file.sha256, source_file.hashed_bytes) != (sha256, stream.bytes_read):
            chain_file_hash(
                source_id=source.pk,
                source_file_id=source_file.pk,
                file_bytes=stream.bytes_read,
                sha256=sha256,
            )
    if progress:
        progress(run)
    return run


def _analyze() -> None:
    """Fresh planner statistics for the binlog tables after a file's bulk load (a sample: bounded
    time, whatever their size). Without them, a first join right after a big binlog is planned
    for a dozen rows, as a nested loop that rescans an index per transaction: quadratic (76 s
    for one query on 22,513 statements, 28 ms with them). Autovacuum comes too late for that."""
    with connection.cursor() as c:
        c.execute("ANALYZE ingest_binlogtransaction, ingest_binlogstatement, ingest_binlogchange")


def _file_row(source_file: SourceFile, server: str, scanned: ScannedFile) -> BinlogFile:
    row, _ = BinlogFile.objects.update_or_create(
        source_file=source_file,
        defaults={
            "server": server,
            "name": scanned.file[:200],
            "server_version": scanned.server_version[:100],
            "server_id": scanned.server_id,
            "boot_started_at": _time(scanned.created) if scanned.created else None,
        },
    )
    return row


def _commit(
    run: IngestRun,
    source_file: SourceFile,
    binlog: BinlogFile | None,
    transactions: list[Transaction],
    problems: list[BinlogProblem],
    bytes_read: int,
) -> None:
    """One batch in one transaction: the transactions not stored yet, the problems, the run's counts."""
    with transaction.atomic():
        store_batch(run, source_file, binlog, transactions, problems, read=bytes_read - run.bytes_read)
        run.bytes_read = bytes_read


def store_batch(
    run: IngestRun,
    source_file: SourceFile,
    binlog: BinlogFile | None,
    transactions: list[Transaction],
    problems: list[BinlogProblem],
    *,
    read: int,
) -> int:
    """Store a batch inside the caller's transaction (with what it covers: a followed file's
    resume point, ingest.binlog_follow); returns how many transactions were new."""
    complete = [t for t in transactions if t.ended_by != "incomplete"]
    stored = 0
    if binlog is not None and complete:
        with connection.cursor() as c:  # two ingests of one server's binlogs: one at a time
            c.execute("SELECT pg_advisory_xact_lock(hashtext('auditweb binlog ' || %s))", [binlog.server])
        stored = _store_transactions(binlog, complete)
        times = [_time(t.commit_time) for t in complete if t.commit_time]
        if times:
            first, last = min(times), max(times)
            BinlogFile.objects.filter(pk=binlog.pk).update(
                first_time=min(binlog.first_time or first, first),
                last_time=max(binlog.last_time or last, last),
            )
            binlog.first_time, binlog.last_time = (
                min(binlog.first_time or first, first),
                max(binlog.last_time or last, last),
            )
    ParseProblem.objects.bulk_create(
        [
            ParseProblem(
                run=run,
                source_file=source_file,
                line=0,  # a binlog has no lines: the offset is the event's byte position
                offset=p.position,
                reason=storable(p.reason)[:500],
                excerpt=p.raw[:PROBLEM_EXCERPT_BYTES],
            )
            for p in problems
        ],
        ignore_conflicts=True,
    )
    run.add_batch(read=read, seen=len(complete), stored=stored, problems=len(problems))
    return stored


_COPY = {
    "ingest_binlogtransaction": 'id, file_id, server, file_name, start, "end", gtid, server_id,'
    " thread_id, commit_time, ended_by, rows",
    "ingest_binlogstatement": "id, transaction_id, server, index, time, text, has_text, text_length,"
    " thread_id, rows, event_id, confidence, evidence, candidates, reason",
    "ingest_binlogchange": 'statement_id, "table", change, rows, table_map_position, positions',
}


def _store_transactions(binlog: BinlogFile, transactions: Iterable[Transaction]) -> int:
    """The transactions of `binlog` that are not stored yet, with their statements and changes:
    tuples COPYed into the three tables (no model instances), ids for the rows that others
    point to taken from their sequences in one query each. Ids ascend in file order, as
    `bulk_create`'s did."""
    todo = list(transactions)
    known = set(
        BinlogTransaction.objects.filter(
            server=binlog.server, file_name=binlog.name, start__in=[t.start for t in todo]
        ).values_list("start", "commit_time")
    )
    new = [t for t in todo if (t.start, _time(t.commit_time)) not in known]
    if not new:
        return 0
    tx_ids = _ids("ingest_binlogtransaction", len(new))
    transaction_rows = []
    statements = []  # (transaction id, index, Statement, thread id)
    for tx_id, t in zip(tx_ids, new, strict=True):
        transaction_rows.append(
            (tx_id, binlog.pk, binlog.server, binlog.name, t.start, t.end, t.gtid, t.server_id,
             t.thread_id, _time(t.commit_time), t.ended_by, t.rows)
        )  # fmt: skip
        for i, s in enumerate(t.statements):
            if s.changes:  # DDL and statement-based events: no rows to show or join
                statements.append((tx_id, i, s, t.thread_id or s.thread_id))
    statement_ids = _ids("ingest_binlogstatement", len(statements))
    no_evidence = Jsonb([])
    statement_rows = [
        (pk, tx_id, binlog.server, i, _time(s.time), storable(s.text or ""), s.text is not None,
         s.text_length, thread_id, s.rows, None, "", no_evidence, [], "")
        for pk, (tx_id, i, s, thread_id) in zip(statement_ids, statements, strict=True)
    ]  # fmt: skip
    change_rows = [
        (pk, storable(c.table)[:400], c.change, c.rows, c.table_map_position, list(c.positions))
        for pk, (_, _, s, _) in zip(statement_ids, statements, strict=True)
        for c in s.changes
    ]
    _copy("ingest_binlogtransaction", transaction_rows)
    _copy("ingest_binlogstatement", statement_rows)
    _copy("ingest_binlogchange", change_rows)
    return len(new)


def _ids(table: str, n: int) -> list[int]:
    """`n` ids from the table's id sequence, ascending."""
    if not n:
        return []
    with connection.cursor() as c:
        c.execute("SELECT nextval(pg_get_serial_sequence(%s, 'id')) FROM generate_series(1, %s)", [table, n])
        return sorted(row[0] for row in c.fetchall())


def _copy(table: str, rows: list[tuple]) -> None:
    if not rows:
        return
    statement = f"COPY {table} ({_COPY[table]}) FROM STDIN"  # the psycopg cursor: Django's has no COPY
    with connection.connection.cursor() as cur, cur.copy(statement) as copy:
        for row in rows:
            copy.write_row(row)
