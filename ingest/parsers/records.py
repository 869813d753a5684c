"""Plain records that every parser yields: what the log said, and where it said it.

No Django here: parsers turn bytes into these objects, and everything downstream
(session tracking, classification, the store) consumes them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple, Protocol

# Longest excerpt of a bad record we keep in a Problem: enough to recognise it,
# bounded because a log line can be arbitrarily long (hostile input).
PROBLEM_EXCERPT_BYTES = 2048


@dataclass(slots=True)
class LogRecord:
    """One entry of a log (a statement or a connection event) exactly as written.

    `occurred_at` is timezone-aware when the log states the zone (`Z`, `+08:00`),
    naive when the log prints server-local time (the pipeline applies the
    source's time zone), and None when the log has printed no time yet.
    """

    line: int  # 1-based number of the record's first line
    offset: int  # byte offset of the record's first byte in the (decompressed) stream
    raw: bytes  # every byte of the record, continuation lines and final newline included
    occurred_at: datetime | None
    connection_id: int | None
    command: str  # as the server names it: "Connect", "Query", "Init DB", "Quit", ...
    argument: bytes  # the rest of the record, continuation lines joined, final newline removed
    # What the record itself says about who and where (Connect lines, table rows, audit logs).
    user: str | None = None
    host: str | None = None
    ip: str | None = None
    database: str | None = None
    # Outcome, where the format tells it: "ok", "denied", or an error code as text.
    status: str | None = None
    rows_affected: int | None = None
    extra: dict[str, str] = field(default_factory=dict)  # format-specific details kept verbatim
    # The relations the log itself names for the statement (pgAudit's OBJECT_NAME of each
    # entry, sub-statements included), as written: `schema.table`. Empty where it names none.
    objects: tuple[str, ...] = ()


@dataclass(slots=True)
class ServerStart:
    """A server start banner ("... Version: ... started with:") in the middle of a log.

    Thread ids start over after it, so it begins a new boot of the server.
    """

    line: int
    offset: int
    raw: bytes
    version: str  # as printed, e.g. "8.0.36 (MySQL Community Server - GPL)"


@dataclass(slots=True)
class Problem:
    """Bytes the parser could not read as a record. Stored and shown, never dropped."""

    line: int
    offset: int
    raw: bytes  # at most PROBLEM_EXCERPT_BYTES of the offending bytes
    reason: str


Item = LogRecord | ServerStart | Problem


@dataclass(frozen=True, slots=True)
class Hints:
    """What a parser may need to know about a file beyond its bytes (each format takes what it needs)."""

    # The year of the file's modification time: syslog's BSD time prints none (server_audit).
    mtime_year: int | None = None
    # The time the file before it (of a rotated set), or the read before this one, printed last:
    # a general log reopened in the same second prints no time on its first records (server
    # local time, naive).
    last_time: datetime | None = None
    # A PostgreSQL stderr log's log_line_prefix, as the server's configuration gives it (its
    # source's): read with it rather than guessed among the prefixes known (pgaudit_stderr).
    log_line_prefix: str | None = None


NO_HINTS = Hints()


class ParsePoint(NamedTuple):
    """Where a new parser starts so that it yields exactly what this one has not yet (in the bytes
    it was handed: ingest.batch.ResumePoint is a file's, made of this at a cut)."""

    offset: int  # byte offset of the first line to feed it
    line: int  # that line's 1-based number
    last_time: datetime | None  # time carried forward from before that line (general log's old layout)


class Resumable(Protocol):
    """A parser that can say where to start again before the item it has not yet yielded.

    A format whose records end only where the next one begins (the general log) offers one
    (its module's `resumable()`), so that a read which stops where the bytes end for now
    leaves the pending record to the next read, and resumes with the state it needs.
    """

    def feed(self, lines: Iterable[bytes]) -> Iterator[Item]:
        """Every item these lines complete; the last one may stay pending."""
        ...

    def finish(self) -> Iterator[Item]:
        """The item still pending at the end of the input."""
        ...

    def resume_point(self) -> ParsePoint | None:
        """Where a new parser starts to yield exactly what this one has not (None: it cannot tell)."""
        ...


# What a PostgreSQL bigint column (connection_id, rows_affected, ...) holds. A log may
# print any digits (a 20-digit thread id, a McAfee `rows` above 2^63): such a value is a
# problem of its record, never of the file (one of them used to abort the whole batch).
BIGINT_MIN, BIGINT_MAX = -(2**63), 2**63 - 1
_BIGINT_FIELDS = ("connection_id", "rows_affected")


def out_of_range(record: LogRecord) -> Problem | None:
    """Move the integers of `record` that a bigint cannot hold out of it, and say so.

    Each such field becomes None (unknown, as for a log that does not give it) and its
    digits are kept in `extra` under the field's name; the Problem returned, at the
    record's position, names them (it holds no bytes: the record has them).
    """
    bad = []
    for name in _BIGINT_FIELDS:
        value = getattr(record, name)
        if value is not None and not BIGINT_MIN <= value <= BIGINT_MAX:
            setattr(record, name, None)
            record.extra[name] = str(value)
            bad.append(f"{name} {value}")
    if not bad:
        return None
    return Problem(
        line=record.line,
        offset=record.offset,
        raw=b"",
        reason=f"out of range for a 64-bit integer: {', '.join(bad)}; the record is kept without it",
    )


def checked_integers(items: Iterable[Item]) -> Iterator[Item]:
    """`items`, each record followed by the Problem of its out-of-range integers if any."""
    for item in items:
        if type(item) is LogRecord and (
            (item.connection_id is not None and not BIGINT_MIN <= item.connection_id <= BIGINT_MAX)
            or (item.rows_affected is not None and not BIGINT_MIN <= item.rows_affected <= BIGINT_MAX)
        ):
            problem = out_of_range(item)
            yield item
            if problem is not None:
                yield problem
            continue
        yield item


def csv_records(
    lines: Iterable[bytes], offset: int, line: int, limit: int
) -> Iterator[tuple[int, int, bytes, bool]]:
    """(offset, first line, raw bytes, too long) of each CSV record: lines joined while a quote
    is open (quote parity). A record over `limit` bytes keeps only its first
    PROBLEM_EXCERPT_BYTES (too long: the caller states it as a problem)."""
    parts: list[bytes] = []
    size = 0
    start, start_line, odd, too_long = offset, line, False, False
    for chunk in lines:
        if not parts:
            if chunk.endswith(b"\n") and not chunk.count(b'"') & 1 and len(chunk) <= limit:
                # Nearly every record: one whole line, its quotes closed (what the loop below
                # makes of it, without joining a list of one).
                yield offset, line, chunk, False
                offset += len(chunk)
                line += 1
                continue
            start, start_line, too_long = offset, line, False
        if chunk.count(b'"') & 1:
            odd = not odd
        if size + len(chunk) <= limit:
            parts.append(chunk)
        elif not too_long:
            too_long = True
            parts.append(chunk[: max(0, PROBLEM_EXCERPT_BYTES - size)])
        size += len(chunk)
        offset += len(chunk)
        if chunk.endswith(b"\n"):
            line += 1
            if not odd:
                yield start, start_line, b"".join(parts), too_long
                parts, size = [], 0
    if parts:
        yield start, start_line, b"".join(parts), too_long
