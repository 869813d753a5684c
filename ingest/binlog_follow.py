"""Binary logs followed: a server's binlog files by glob (or a replica pull's spool), read poll by
poll from where the last one stopped, each transaction stored exactly once.

A followed binlog file is a SourceFile known by its path and its head (the magic and the format
description, with the "in use" flag masked: the server clears it in place when it closes the
file), so a file written again under the same name after a RESET MASTER is another file. Its
`resume` is the position just after the last complete transaction stored, committed in the same
database transaction as that transaction (ingest.binlog_store.store_batch): a poll scans only what
came after it. A transaction still being written at the end of the newest file is left for the
next poll; in a file that a newer one followed (rotation, FLUSH BINARY LOGS, a restart) the same
cut is a problem stated on the file. Files are read in the server's order (their index number),
and a poll reads at most BINLOG_POLL_BYTES (the next poll goes on).

What is never silent: a file removed (PURGE BINARY LOGS, RESET MASTER) before it was read to its
end, and index numbers missing between the files seen (purged before any poll saw them).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from ingest.binlog.metadata import BinlogFile as ScannedFile
from ingest.binlog.metadata import Transaction, scan
from ingest.binlog.reader import HEADER_LEN, MAGIC, BinlogProblem
from ingest.binlog_store import _file_row, store_batch
from ingest.checkpoints import open_inside_roots
from ingest.commit import record_file_hash
from ingest.custody import FileHasher
from ingest.models import BinlogFile, IngestRun, ParseProblem, Source, SourceFile
from ingest.parsers import AUTO, by_name, reads_bytes
from ingest.textsafe import storable

log = logging.getLogger(__name__)

BATCH_TRANSACTIONS = 2000
HEAD_MAX = 64 * 1024  # a format description is about 250 bytes; anything near this is corrupt
# `mariadb-bin.000042`: the server's name for its files, numbered. The `.index` (and MariaDB's
# `.state`) beside them are not binlogs: only numbered names are read.
_NUMBERED = re.compile(r"(?P<base>.+)\.(?P<number>\d{1,12})")
_IN_USE_FLAG_AT = 4 + 17  # the format description's flags: LOG_EVENT_BINLOG_IN_USE_F is bit 0


@dataclass(frozen=True, slots=True)
class Listed:
    """A binlog file as a poll found it."""

    path: Path
    base: str  # the folder and the name before the number: one server's sequence
    number: int
    size: int
    device: int
    inode: int


def list_binlogs(pattern: str) -> tuple[list[Listed], list[str]]:
    """The numbered files `pattern` matches, in the server's order (folder, then index number),
    and why others were left out (named in the source's last error, never dropped silently)."""
    files, notes = [], []
    for name in Path("/").glob(pattern.lstrip("/")) if os.path.isabs(pattern) else Path().glob(pattern):
        m = _NUMBERED.fullmatch(name.name)
        if m is None:
            if not name.name.endswith((".index", ".state")):
                notes.append(f"{name} is not a numbered binlog file: not read")
            continue
        try:
            st = name.stat()
        except OSError:
            continue  # gone between the glob and the stat: the next poll sees what happened
        if not name.is_file():
            continue
        base = str(name.parent / m["base"])
        files.append(Listed(name, base, int(m["number"]), st.st_size, st.st_dev, st.st_ino))
    files.sort(key=lambda f: (f.base, f.number))
    return files, notes


def is_binlog_source(source: Source) -> bool:
    """A file source is read as binlogs when its format says so, or, left to `auto`, when the
    first numbered file its glob matches begins with the binlog magic (the other formats are text)."""
    if source.format != AUTO:
        return reads_bytes(by_name(source.format))
    if not source.path:
        return False
    listing, _ = list_binlogs(source.path)
    for listed in listing[:1]:
        try:
            with open_inside_roots(listed.path) as f:
                return f.read(4) == MAGIC
        except OSError:
            return False
    return False


def binlog_head(f: BinaryIO) -> bytes | None:
    """The magic and the format description as they identify the file (in-use flag masked);
    None while the file is too short to hold them (just created). Raises ValueError for a file
    that is not a binlog."""
    f.seek(0)
    start = f.read(4 + HEADER_LEN)
    if len(start) >= 4 and start[:4] != MAGIC:
        raise ValueError("not a binary log: it does not begin with \\xfebin")
    if len(start) < 4 + HEADER_LEN:
        return None
    (size,) = struct.unpack_from("<I", start, 4 + 9)
    if not HEADER_LEN <= size <= HEADER_LEN + HEAD_MAX:
        raise ValueError(f"corrupt: its format description says it has {size} bytes")
    head = bytearray(start + f.read(size - HEADER_LEN))
    if len(head) < 4 + size:
        return None
    head[_IN_USE_FLAG_AT] &= 0xFE
    return bytes(head)


class _Window:
    """The file up to the size the poll listed: a poll reads what was there when it looked."""

    def __init__(self, raw: BinaryIO, limit: int) -> None:
        self.raw, self.limit = raw, limit

    def seek(self, position: int, whence: int = 0) -> int:
        return self.raw.seek(position, whence)

    def read(self, n: int = -1) -> bytes:
        left = self.limit - self.raw.tell()
        if left <= 0:
            return b""
        return self.raw.read(left if n < 0 else min(n, left))


@dataclass
class _Budget:
    bytes: int
    deadline: float

    def spent(self) -> bool:
        return self.bytes <= 0 or time.monotonic() > self.deadline


def follow_binlogs(
    source: Source,
    run: IngestRun | None,
    *,
    pattern: str | None = None,
    notes: list[str] | None = None,
    roots: list[Path] | None = None,
) -> IngestRun | None:
    """One poll of a binlog source: every numbered file of `pattern` (the source's path, or the
    spool a replica pull writes) read from its resume point, in order. Returns the run (None when
    nothing was new and no run was asked for). `notes`: gaps a replica pull found, stated on the
    first file read (and emptied once they are). Every file is opened inside `roots` (the log
    roots, AUDITWEB_LOG_ROOTS, by default: a symbolic link leading out is refused)."""
    listing, errors = list_binlogs(pattern or source.path)
    if not listing and not errors:
        errors.append(f"no binlog file matches {pattern or source.path}")
    known = {(sf.path, sf.head_sha256): sf for sf in SourceFile.objects.filter(source=source, finished=False)}
    work: list[tuple[Listed, bool]] = []  # the file, and whether a newer one of its sequence follows
    for i, listed in enumerate(listing):
        later = i + 1 < len(listing) and listing[i + 1].base == listed.base
        work.append((listed, later))
    state = dict((source.checkpoint or {}).get("binlog") or {})
    stored = _known_files(source)
    unread = [
        (listed, later)
        for listed, later in work
        if not _nothing_new(stored.get((str(listed.path), listed.device, listed.inode)), listed, later)
    ]
    present = {str(listed.path) for listed in listing}
    vanished = [sf for (path, _), sf in known.items() if path not in present]
    if not unread and not vanished and not notes:
        Source.objects.filter(pk=source.pk).update(last_error=storable("; ".join(errors))[:2000])
        if run is not None:
            run.begin(0)
            run.finish()
        return run
    backlog = 0
    for listed, _ in unread:
        before = stored.get((str(listed.path), listed.device, listed.inode))
        backlog += max(0, listed.size - (before.resume if before else 0))
    if run is None:
        run = IngestRun.objects.create(source=source, bytes_total=backlog)
    else:
        run.begin(backlog)
    try:
        for sf in vanished:
            _vanished(run, sf)
        budget = _Budget(settings.BINLOG_POLL_BYTES, time.monotonic() + settings.BINLOG_POLL_SECONDS)
        for listed, later in unread:
            if budget.spent():
                break
            missing = _missing_before(state, listed)
            if notes and listed.base == listing[-1].base:  # a replica's notes: its newest folder
                missing = "; ".join([*notes, *([missing] if missing else [])])
                notes.clear()
            state[listed.base] = listed.number  # lower than before: a new sequence (RESET MASTER)
            error = _read_binlog(
                source, run, listed, later=later, budget=budget, missing=missing, roots=roots
            )
            if error:
                errors.append(error)
    except BaseException as e:
        run.fail(e)
        raise
    _save_state(source, state)
    Source.objects.filter(pk=source.pk).update(last_error=storable("; ".join(errors))[:2000])
    run.finish()
    run.refresh_from_db()
    return run


@dataclass(frozen=True, slots=True)
class _Known:
    """What the store knows of a listed file (the newest row of that path, device and inode)."""

    finished: bool
    size: int
    resume: int


def _known_files(source: Source) -> dict[tuple[str, int | None, int | None], _Known]:
    """The source's files as the store knows them, in one query (a server may keep thousands)."""
    known: dict[tuple[str, int | None, int | None], _Known] = {}
    rows = SourceFile.objects.filter(source=source).order_by("pk")
    for path, device, inode, finished, size, resume in rows.values_list(
        "path", "device", "inode", "finished", "size", "resume"
    ):
        known[(path, device, inode)] = _Known(finished, size, int((resume or {}).get("offset", 0)))
    return known


def _nothing_new(known: _Known | None, listed: Listed, later: bool) -> bool:
    """A file read to its end before, or the newest file at the size it had when last read:
    a stat, and nothing opened."""
    if known is None:
        return False
    return known.finished or (not later and known.size == listed.size)


def _missing_before(state: dict[str, int], listed: Listed) -> str | None:
    """Index numbers skipped since the highest one a poll saw in this sequence: files purged
    before AuditWeb read them (a lower number is a new sequence: RESET MASTER)."""
    last = state.get(listed.base)
    if last is None or listed.number <= last + 1:
        return None
    width = len(listed.path.name) - len(Path(listed.base).name) - 1
    first, upto = str(last + 1).zfill(width), str(listed.number - 1).zfill(width)
    names = first if first == upto else f"{first} to {upto}"
    return (
        f"binlog files {Path(listed.base).name}.{names} were never read: removed (PURGE BINARY LOGS?) "
        "before a poll saw them; their transactions are not stored"
    )


def _save_state(source: Source, state: dict[str, int]) -> None:
    with connection.cursor() as cur:  # one key of the checkpoint, whatever else it holds now
        cur.execute(
            "UPDATE ingest_source SET checkpoint = COALESCE(checkpoint, '{}'::jsonb)"
            " || jsonb_build_object('binlog', %s::jsonb) WHERE id = %s",
            [json.dumps(state), source.pk],
        )


def _vanished(run: IngestRun, sf: SourceFile) -> None:
    """A followed binlog removed (PURGE BINARY LOGS, RESET MASTER, by hand) before it was known
    to be read to its end: stated on the file, which is then finished."""
    offset = int(sf.resume.get("offset", 0))
    reason = (
        f"the file was removed (PURGE BINARY LOGS, RESET MASTER or by hand) before it was read to its "
        f"end: transactions after byte {offset}, if it had any, are not stored"
    )
    with transaction.atomic():
        ParseProblem.objects.bulk_create(
            [
                ParseProblem(
                    run=run, source_file=sf, line=0, offset=max(offset, 1), reason=reason, excerpt=b""
                )
            ],
            ignore_conflicts=True,
        )
        SourceFile.objects.filter(pk=sf.pk).update(finished=True)
        run.add_batch(read=0, seen=0, stored=0, problems=1)


def _read_binlog(
    source: Source,
    run: IngestRun,
    listed: Listed,
    *,
    later: bool,
    budget: _Budget,
    missing: str | None,
    roots: list[Path] | None,
) -> str | None:
    """Read one file from its resume point; returns an error for the source (None: none)."""
    try:
        raw = open_inside_roots(listed.path, roots)
    except OSError as e:
        return f"{listed.path}: {e}"
    with raw:
        st = os.fstat(raw.fileno())
        if (st.st_dev, st.st_ino) != (listed.device, listed.inode):
            return None  # replaced since it was listed: the next poll looks again
        try:
            head = binlog_head(raw)
        except ValueError as e:
            return f"{listed.path}: {e}"
        if head is None:
            return None  # just created: its format description comes with the next poll
        sf, _ = SourceFile.objects.get_or_create(
            source=source,
            path=str(listed.path),
            head_sha256=hashlib.sha256(head).hexdigest(),
            defaults={"size": 0, "device": listed.device, "inode": listed.inode, "head_length": len(head)},
        )
        for old in SourceFile.objects.filter(source=source, path=str(listed.path), finished=False).exclude(
            pk=sf.pk
        ):
            _vanished(run, old)  # the same name, another file: written again after RESET MASTER
        if sf.finished:
            return None
        start = int(sf.resume.get("offset", 0))
        size = st.st_size if later else listed.size  # a closed file whole; the newest as listed
        log.info("source %s: binlog %s from %s to %s", source.pk, listed.path, start, size)
        hasher = FileHasher(sf.hash_state, sf.hashed_bytes, partial_reader(listed.path, roots))
        _scan_into_store(
            source, run, sf, _Window(raw, size), listed, start, size, later, budget, hasher, missing
        )
    return None


def partial_reader(path: Path, roots: list[Path] | None) -> Callable[[int, int], bytes]:
    """Reads for the file's SHA-256 (ingest.custody.FileHasher), by path: the scan has its own."""

    def read_at(offset: int, n: int) -> bytes:
        with open_inside_roots(path, roots) as f:
            f.seek(offset)
            return f.read(n)

    return read_at


def _batches(
    items: Iterator[ScannedFile | Transaction | BinlogProblem], later: bool
) -> Iterator[tuple[ScannedFile | None, list[Transaction], list[BinlogProblem], bool]]:
    """(format, complete transactions, problems, whether the file is done) per batch. The cut
    end of a file still being written is no problem: it comes again at the next poll."""
    scanned: ScannedFile | None = None
    pending: list[Transaction] = []
    problems: list[BinlogProblem] = []
    held: list[BinlogProblem] = []  # problems at the live end: kept only if the file is closed
    for item in items:
        if isinstance(item, ScannedFile):
            scanned = item
        elif isinstance(item, Transaction):
            if item.ended_by == "incomplete":
                continue  # its problem came just before it
            pending.append(item)
        elif item.reason.startswith(("truncated", "the file ends inside a transaction (cut short")):
            held.append(item)
        else:
            problems.append(item)
        if len(pending) >= BATCH_TRANSACTIONS or len(problems) >= 1000:
            yield scanned, pending, problems, False
            pending, problems = [], []
    yield scanned, pending, problems + (held if later else []), later


def _scan_into_store(
    source: Source,
    run: IngestRun,
    sf: SourceFile,
    stream: _Window,
    listed: Listed,
    start: int,
    size: int,
    later: bool,
    budget: _Budget,
    hasher: FileHasher,
    missing: str | None,
) -> None:
    binlog: BinlogFile | None = BinlogFile.objects.filter(source_file=sf).first()
    resume = start
    read_before = start
    extra = [BinlogProblem(0, missing)] if missing else []
    batches = _batches(scan(stream, listed.path.name, start=start), later)
    try:
        for scanned, complete, problems, done in batches:
            if scanned is not None and binlog is None:
                binlog = _file_row(sf, source.server, scanned)
            if complete:
                resume = complete[-1].end
            finished = done  # a newer file follows and this one was read to its end
            if finished:
                resume = max(resume, size)
            moved = hasher.advance(resume)
            now = timezone.now()
            with transaction.atomic():
                store_batch(run, sf, binlog, complete, problems + extra, read=resume - read_before)
                SourceFile.objects.filter(pk=sf.pk).update(
                    resume={"offset": resume, "line": 0},
                    bytes_read=resume,
                    size=size,
                    device=listed.device,
                    inode=listed.inode,
                    last_read_at=now,
                    finished=finished,
                )
                record_file_hash(source.pk, sf.pk, hasher, moved)
                if complete:
                    Source.objects.filter(pk=source.pk).update(last_data_at=now)
            budget.bytes -= resume - read_before
            read_before, extra = resume, []
            if budget.spent() and not done:
                break  # the next poll goes on from `resume`
    finally:
        batches.close()
