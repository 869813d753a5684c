"""pgAudit in PostgreSQL's csvlog (`log_destination = 'csvlog'`). Pure: no Django.

One server message is one CSV record of 23 (PostgreSQL 12), 24 (13), or 26 columns (14 and
later: leader_pid, query_id); quoted fields may hold newlines, so a record ends at the first
line end outside quotes (quote parity, linear). The columns give every record its user,
database, session, host and application; see ingest/parsers/pgaudit.py for the records made.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable, Iterator

from ingest.parsers.pgaudit import DIALECT, MAX_MESSAGE_BYTES, Resumer, ServerLine, assemble, time_digits
from ingest.parsers.records import PROBLEM_EXCERPT_BYTES, Item, Problem, csv_records

__all__ = ["DIALECT", "LABEL", "NAME", "parse", "recognise", "resumable", "time_digits"]

NAME = "pgaudit-csv"
LABEL = "PostgreSQL csvlog with pgAudit"

# The first record: log_time, user, database, pid, connection_from, session_id (hex.hex),
# session_line_num, ... Only the leading columns are matched (the head may cut the line).
_HEAD_RE = re.compile(
    rb"""
    \A\d{4}-\d{2}-\d{2}\x20\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?(?:\x20[A-Za-z0-9+\-:/_]{1,32})?,  # log_time
    (?:"(?:[^"\n]|"")*+")?,(?:"(?:[^"\n]|"")*+")?,   # user, database
    \d+,(?:"[^"\n]*+")?,                             # pid, connection_from
    [0-9a-f]{1,16}\.[0-9a-f]{1,16},\d+,              # session_id, session_line_num
    """,
    re.X,
)
_COLUMNS = (23, 24, 26)


def recognise(head: bytes) -> bool:
    """A csvlog: its first line starts with csvlog's leading columns (a session id `hex.hex`)."""
    return _HEAD_RE.match(head.lstrip(b"\xef\xbb\xbf")) is not None


def _lines(lines: Iterable[bytes], start_offset: int, start_line: int) -> Iterator[ServerLine | Problem]:
    # One csv reader for the whole file, handed one record's text at a time (a reader per
    # record costs more than the parsing of it); after an error it is made again.
    texts: list[str] = []
    reader = csv.reader(iter(texts.pop, None), strict=True)
    for offset, line, raw, too_long in csv_records(lines, start_offset, start_line, MAX_MESSAGE_BYTES):
        if too_long:
            yield Problem(
                line,
                offset,
                raw[:PROBLEM_EXCERPT_BYTES],
                f"csvlog record longer than {MAX_MESSAGE_BYTES} bytes",
            )
            continue
        text = raw.decode("utf-8", "surrogateescape")
        texts.append(text.rstrip("\r\n"))
        try:
            c = next(reader)
        except csv.Error as error:
            texts.clear()
            reader = csv.reader(iter(texts.pop, None), strict=True)
            yield Problem(line, offset, raw[:PROBLEM_EXCERPT_BYTES], f"not a csvlog record: {error}")
            continue
        except IndexError:  # a quote still open where the text ends: the reader asked for more
            reader = csv.reader(iter(texts.pop, None), strict=True)
            yield Problem(
                line, offset, raw[:PROBLEM_EXCERPT_BYTES], "not a csvlog record: unexpected end of data"
            )
            continue
        if len(c) not in _COLUMNS:
            count = len(c)
            if not text.strip():
                continue
            yield Problem(
                line,
                offset,
                raw[:PROBLEM_EXCERPT_BYTES],
                f"not a csvlog record: {count} columns, not 23, 24 or 26",
            )
            continue
        host, _, port = c[4].rpartition(":") if c[4] and not c[4].startswith("[") else (c[4], "", "")
        pid, number = c[3], c[6]
        yield ServerLine(  # (by position: every record makes one)
            line,
            offset,
            raw,
            c[0],  # time
            c[1] or None,  # user
            c[2] or None,  # database
            int(pid) if pid.isdigit() and pid.isascii() and len(pid) < 19 else None,
            host or None,
            port or None,
            c[5] or None,  # session
            int(number) if number.isdigit() and number.isascii() and len(number) < 19 else None,
            c[9] or None,  # vxid
            c[7] or None,  # tag
            c[11],  # severity
            c[12] or None,  # sqlstate
            c[13],  # message
            c[14] or None,  # detail
            c[19] or None,  # statement
            c[22] or None,  # application
        )


def parse(
    lines: Iterable[bytes], *, start_offset: int = 0, start_line: int = 1, hints: object | None = None
) -> Iterator[Item]:
    """Every record and problem of a pgAudit csvlog, in order (hints: none needed)."""
    yield from assemble(_lines(lines, start_offset, start_line))


def resumable(*, start_offset: int = 0, start_line: int = 1, hints: object | None = None) -> Resumer:
    """A parser that says where to resume (ingest.parsers.pgaudit.Resumer): a statement's lines
    may come later, between other sessions' lines."""
    return Resumer(_lines, start_offset, start_line)
