"""`general_log.CSV`: the CSV engine's data file of the `mysql.general_log` table (log_output=TABLE).

Copied out of a datadir; pure (no Django). One physical line a row, backslash-escaped inside
quotes; times are naive (the zone of the session that wrote the row).
Layout and escapes: docs/formats.md, 'general_log_csv'.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from ingest.parsers.digits import ISO, fraction
from ingest.parsers.general_log_table import bad_row, row_record, time_or_problem
from ingest.parsers.records import NO_HINTS, Hints, Item, checked_integers

__all__ = ["LABEL", "NAME", "parse", "recognise", "time_digits"]

NAME = "general-log-csv"
LABEL = "general_log.CSV (CSV engine file)"

_QUOTED = rb'"([^"\\]*(?:\\.[^"\\]*)*)"'  # a quoted CSV value, backslash escapes inside
_CSV_ROW = re.compile(
    rb"""
    "(?P<time>\d{4}-\d\d-\d\d[ ]\d\d:\d\d:\d\d(?:\.\d{1,6})?)",  # event_time, session time zone
    """
    + _QUOTED.replace(b"(", b"(?P<user_host>", 1)
    + rb""",                     # user_host, quoted and escaped
    (?P<thread>\d{1,20}),        # thread_id (connection id), unquoted
    (?P<server>\d{1,10}),        # server_id, unquoted
    """
    + _QUOTED.replace(b"(", b"(?P<command>", 1)
    + rb""",                     # command_type
    """
    + _QUOTED.replace(b"(", b"(?P<argument>", 1)
    + rb"""                      # argument (any bytes; newlines written as \n)
    (?:\r?\n)?\Z
    """,
    re.VERBOSE | re.DOTALL,
)
# ha_tina's escapes inside quotes; any other escaped byte keeps its backslash (the engine
# itself reads a foreign file that way).
_CSV_ESCAPES = {b"\\": b"\\", b'"': b'"', b"n": b"\n", b"r": b"\r"}
_CSV_ESCAPE = re.compile(rb"\\(.)", re.DOTALL)


def _csv_unescape(value: bytes) -> bytes:
    if b"\\" not in value:
        return value
    return _CSV_ESCAPE.sub(lambda m: _CSV_ESCAPES.get(m[1], m[0]), value)


def parse(
    lines: Iterable[bytes], *, start_offset: int = 0, start_line: int = 1, hints: Hints = NO_HINTS
) -> Iterator[Item]:
    """See `_parse_general_log_csv`; integers a bigint cannot hold become problems of their record."""
    return checked_integers(_parse_general_log_csv(lines, start_offset=start_offset, start_line=start_line))


def _parse_general_log_csv(
    lines: Iterable[bytes], *, start_offset: int = 0, start_line: int = 1
) -> Iterator[Item]:
    """Every row of a `general_log.CSV` file as a LogRecord, and a Problem for each bad line.

    The CSV engine writes newlines and carriage returns inside values as `\\n` and `\\r`,
    so each physical line is one row. An empty line is skipped (and counted).
    """
    offset, lineno = start_offset, start_line
    for raw in lines:
        here, here_line = offset, lineno
        offset += len(raw)
        lineno += 1
        if raw in (b"\n", b"\r\n"):
            continue
        # A row ends with the closing quote of its argument: checking that first spares the
        # regex a second pass over a long line that cannot match (hostile input).
        m = _CSV_ROW.match(raw) if raw.rstrip(b"\r\n").endswith(b'"') else None
        if m is None:
            yield bad_row(
                raw, here_line, here, f"not a general_log.CSV row (6 fields expected): {len(raw)} bytes"
            )
            continue
        when, problem = time_or_problem(m["time"], raw, here_line, here)
        record = row_record(
            when,
            _csv_unescape(m["user_host"]),
            int(m["thread"]),
            int(m["server"]),
            _csv_unescape(m["command"]),
            _csv_unescape(m["argument"]),
            line=here_line,
            offset=here,
            raw=raw,
        )
        if problem is not None:
            record.extra["invalid_time"] = m["time"].decode()
        yield record
        if problem is not None:
            yield problem


# -- recognising the format, and the precision of its times ----------------------------------

# The first row of a general_log.CSV: a quoted time, then a quoted user_host of the
# "priv[user] @ host [ip]" shape, then two unquoted numbers. General log files start rows
# with a bare time or tabs, server_audit with an unquoted time: neither starts with '"'.
_CSV_HEAD = re.compile(
    rb"""
    "\d{4}-\d\d-\d\d[ ]\d\d:\d\d:\d\d(?:\.\d{1,6})?",  # event_time
    "[^"\n]*\[[^"\n]*\][ ]@[ ][^"\n]*[ ]\[[^"\n]*\]",  # user_host
    \d+,\d+,"                                          # thread_id, server_id, command_type
    """,
    re.VERBOSE,
)


def recognise(head: bytes) -> bool:
    """Whether the first KiB of a file is a general_log.CSV (its first line is a row)."""
    return _CSV_HEAD.match(head.lstrip(b"\r\n")) is not None


def time_digits(head: bytes) -> int | None:
    """Digits after the seconds of a row's event_time (TIMESTAMP(6): six, unless an old server's)."""
    return fraction(ISO.match(head, 1))
