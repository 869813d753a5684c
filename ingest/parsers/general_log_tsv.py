"""`SELECT * FROM mysql.general_log INTO OUTFILE '...'` with the default options: a TSV export.

Pure (no Django). Fields end with a tab, rows with a newline, and the escape character
`\\` precedes `\\`, a tab or a newline inside a value (the byte itself follows it, so a
multi-line statement spans several physical lines), `\\0` stands for NUL and `\\N`
for NULL. The reader also accepts the LOAD DATA escapes `\\t \\n \\r \\b \\Z`.
Quirk: a carriage return is written as is, so a row ends at "\\n" only; "\\r\\n" at
the end of a line is an argument ending in "\\r", never a Windows line end.

The columns, the record made of a row and what the table cannot tell are described in
docs/formats.md, 'general_log_table', shared with the CSV engine file and live rows.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from ingest.parsers.digits import ISO, fraction
from ingest.parsers.general_log_table import bad_row, row_record, time_or_problem
from ingest.parsers.records import NO_HINTS, Hints, Item, checked_integers

__all__ = ["LABEL", "NAME", "parse", "recognise", "time_digits"]

NAME = "general-log-tsv"
LABEL = "mysql.general_log exported INTO OUTFILE"

# A TSV row spans several lines when its argument holds newlines; a file whose lines all
# end in a backslash would make one endless "row". Beyond this (twice the 16 MiB a
# MEDIUMTEXT holds, escaped) the bytes are reported as a Problem and reading starts over.
_MAX_ROW_BYTES = 40 * 1024 * 1024

_TSV_FIELD = re.compile(rb"[^\t\\]*(?:\\.[^\t\\]*)*", re.DOTALL)  # one value, escapes inside
# INTO OUTFILE writes `\` + the byte itself for `\`, tab and newline, and `\0` for NUL; the
# letters are what LOAD DATA reads (a file edited by hand, or by another tool).
_TSV_ESCAPES = {b"0": b"\x00", b"b": b"\b", b"n": b"\n", b"r": b"\r", b"t": b"\t", b"Z": b"\x1a"}
_TSV_ESCAPE = re.compile(rb"\\(.)", re.DOTALL)


def _tsv_unescape(value: bytes) -> bytes:
    if b"\\" not in value:
        return value
    return _TSV_ESCAPE.sub(lambda m: _TSV_ESCAPES.get(m[1], m[1]), value)


def _tsv_fields(row: bytes) -> list[bytes] | None:
    """The escaped values of a row (its final newline removed), or None when it splits badly."""
    fields: list[bytes] = []
    pos, end = 0, len(row)
    while True:
        m = _TSV_FIELD.match(row, pos)
        assert m is not None  # the pattern matches the empty string
        fields.append(m[0])
        pos = m.end()
        if pos >= end:
            return fields
        if row[pos] != 9:  # a lone backslash at the very end
            return None
        pos += 1
        if pos == end:
            fields.append(b"")
            return fields


def _continues(raw: bytes) -> bool:
    """Whether a physical line ends with an escaped newline (an odd run of backslashes)."""
    if not raw.endswith(b"\n"):
        return False
    body = raw[:-1]
    return (len(body) - len(body.rstrip(b"\\"))) % 2 == 1


def _tsv_row(raw: bytes, line: int, offset: int) -> Iterator[Item]:
    # The final newline ends the row, unless escaped: the file ended inside a value.
    # A carriage return before it is data: INTO OUTFILE does not escape \r, so an argument
    # ending in one looks exactly like a CRLF line end (the real server's file, tested).
    row = raw[:-1] if raw.endswith(b"\n") and not _continues(raw) else raw
    fields = _tsv_fields(row)
    if fields is None or len(fields) != 6:
        n = "?" if fields is None else len(fields)
        yield bad_row(raw, line, offset, f"not a general_log export row (6 fields expected, {n} found)")
        return
    time_f, user_host, thread, server, command, argument = fields
    if not (thread.isdigit() and server.isdigit() and len(thread) <= 20 and len(server) <= 10):
        yield bad_row(raw, line, offset, "not a general_log export row (thread_id, server_id not numbers)")
        return
    if time_f == b"\\N" or not re.fullmatch(rb"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{1,6})?", time_f):
        yield bad_row(raw, line, offset, "not a general_log export row (event_time not a time)")
        return
    when, problem = time_or_problem(time_f, raw, line, offset)
    nulls = [name for name, v in (("user_host", user_host), ("command_type", command)) if v == b"\\N"]
    record = row_record(
        when,
        b"" if user_host == b"\\N" else _tsv_unescape(user_host),
        int(thread),
        int(server),
        b"" if command == b"\\N" else _tsv_unescape(command),
        b"" if argument == b"\\N" else _tsv_unescape(argument),
        line=line,
        offset=offset,
        raw=raw,
    )
    if argument == b"\\N":
        nulls.append("argument")
    if nulls:
        record.extra["null"] = ",".join(nulls)
    if problem is not None:
        record.extra["invalid_time"] = time_f.decode()
    yield record
    if problem is not None:
        yield problem


def parse(
    lines: Iterable[bytes], *, start_offset: int = 0, start_line: int = 1, hints: Hints = NO_HINTS
) -> Iterator[Item]:
    """See `_parse_general_log_tsv`; integers a bigint cannot hold become problems of their record."""
    return checked_integers(_parse_general_log_tsv(lines, start_offset=start_offset, start_line=start_line))


def _parse_general_log_tsv(
    lines: Iterable[bytes], *, start_offset: int = 0, start_line: int = 1
) -> Iterator[Item]:
    """Every row of a tab-separated `SELECT ... INTO OUTFILE` export, and a Problem per bad row.

    1. A physical line ending in an escaped newline continues into the next one: the
       row's value holds a newline. The row's raw bytes are all its lines.
    2. A complete row splits at unescaped tabs into exactly six values.
    """
    offset, lineno = start_offset, start_line
    pending: list[bytes] = []
    size = 0
    p_off = p_line = 0
    for raw in lines:
        if not pending:
            p_off, p_line = offset, lineno
            if raw in (b"\n", b"\r\n"):
                offset += len(raw)
                lineno += 1
                continue
        offset += len(raw)
        lineno += 1
        pending.append(raw)
        size += len(raw)
        if _continues(raw):
            if size > _MAX_ROW_BYTES:
                joined = b"".join(pending)
                pending, size = [], 0
                yield bad_row(
                    joined,
                    p_line,
                    p_off,
                    f"export row longer than {_MAX_ROW_BYTES} bytes: {len(joined)} bytes",
                )
            continue
        joined = pending[0] if len(pending) == 1 else b"".join(pending)
        pending, size = [], 0
        yield from _tsv_row(joined, p_line, p_off)
    if pending:
        yield from _tsv_row(b"".join(pending), p_line, p_off)


# -- recognising the format, and the precision of its times ----------------------------------

# The first row of an INTO OUTFILE export: the values of a general_log.CSV row, separated by
# tabs, unquoted.
# A MySQL 5.7+ general log line has a "T" in its time and spaces before its thread id.
_TSV_HEAD = re.compile(
    rb"""
    \d{4}-\d\d-\d\d[ ]\d\d:\d\d:\d\d(?:\.\d{1,6})?\t      # event_time
    [^\t\n]*\[[^\t\n]*\][ ]@[ ][^\t\n]*[ ]\[[^\t\n]*\]\t  # user_host
    \d+\t\d+\t[A-Z]                                       # thread_id, server_id, command_type
    """,
    re.VERBOSE,
)


def recognise(head: bytes) -> bool:
    """Whether the first KiB of a file is a general_log INTO OUTFILE export."""
    return _TSV_HEAD.match(head.lstrip(b"\r\n")) is not None


def time_digits(head: bytes) -> int | None:
    """Digits after the seconds of a row's event_time (TIMESTAMP(6): six, unless an old server's)."""
    return fraction(ISO.match(head))
