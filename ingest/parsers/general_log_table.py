"""The `mysql.general_log` table (log_output=TABLE): what its rows, its CSV file and its TSV export share.

Pure: no Django, no database connection (ingest/mysql_table.py pulls live rows and hands
them to `row_record`). Three ways in, one record shape out (`row_record`); the two files are
two formats with their own modules. Columns and what the table cannot tell: docs/formats.md,
'general_log_table'.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
from datetime import UTC, datetime

from ingest.parsers.audit_fields import parse_user_host
from ingest.parsers.general_log import COMMANDS, parse_connect
from ingest.parsers.records import PROBLEM_EXCERPT_BYTES, LogRecord, Problem

__all__ = [
    "bad_row",
    "canonical_row",
    "parse_user_host",
    "row_hash",
    "row_record",
    "time_or_problem",
]

_COMMAND_NAMES = {name.encode(): name for name in COMMANDS}
_CONNECT_COMMANDS = frozenset({"Connect", "Change user"})

# -- user_host: see ingest.parsers.audit_fields.parse_user_host (shared with the audit logs) --


# -- one row -----------------------------------------------------------------------------

# Canonical serialisation of a live row: unambiguous and on one line.
_CANON_ESCAPES = {b"\\": b"\\\\", b"\t": b"\\t", b"\n": b"\\n", b"\r": b"\\r", b"\x00": b"\\0"}
_CANON_SPECIAL = re.compile(rb"[\\\t\n\r\x00]")


def _canon_escape(value: bytes) -> bytes:
    return _CANON_SPECIAL.sub(lambda m: _CANON_ESCAPES[m[0]], value)


def _time_text(event_time: datetime | None) -> str:
    """Microsecond time as the server prints it; an aware time in UTC with "+00:00"."""
    if event_time is None:
        return "-"
    if event_time.tzinfo is not None:
        event_time = event_time.astimezone(UTC)
    return event_time.isoformat(sep=" ", timespec="microseconds")


def canonical_row(
    event_time: datetime | None,
    user_host: str | bytes,
    thread_id: int,
    server_id: int,
    command_type: str | bytes,
    argument: bytes,
) -> bytes:
    """The `raw` of a live row: the six columns, tab-separated, ending with a newline.

    event_time as "YYYY-MM-DD HH:MM:SS.ffffff" (an aware time converted to UTC, with
    "+00:00" after it), the numbers in decimal, the texts as UTF-8 and the argument as
    its bytes; in each text `\\`, tab, newline, carriage return and NUL are written
    `\\\\ \\t \\n \\r \\0`. The same row always gives the same bytes, so its record hash is
    stable from one pull to the next.
    """
    if isinstance(user_host, str):
        user_host = user_host.encode("utf-8", "surrogateescape")
    if isinstance(command_type, str):
        command_type = command_type.encode("utf-8", "surrogateescape")
    return (
        b"\t".join(
            (
                _time_text(event_time).encode(),
                _canon_escape(user_host),
                str(thread_id).encode(),
                str(server_id).encode(),
                _canon_escape(command_type),
                _canon_escape(argument),
            )
        )
        + b"\n"
    )


def row_hash(raw: bytes, twin: int = 0) -> str:
    """Short identity of a row (hex): its canonical bytes, and which of identical twins it is."""
    h = hashlib.blake2b(raw, digest_size=8)
    if twin:
        h.update(b"\x00%d" % twin)
    return h.hexdigest()


def _ip(text: str) -> str | None:
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        return None


def row_record(
    event_time: datetime | None,
    user_host: str | bytes,
    thread_id: int,
    server_id: int,
    command_type: str | bytes,
    argument: bytes,
    *,
    line: int = 0,
    offset: int = 0,
    raw: bytes | None = None,
) -> LogRecord:
    """The LogRecord for one row of the table, however it was read.

    `raw`, `line` and `offset` are the row's bytes and position in a file; for a live row
    leave them out: `raw` is then `canonical_row(...)` (line 0, offset as given: the
    puller numbers identical twins 0, 1, ... so that their record hashes differ).
    who: `user` is the name the client gave, `extra["account"]` the authenticated account
    (when known), `host` and `ip` from user_host (`host` is the address when the server
    resolved no name). Connect and Change user rows also carry
    "user@host on db using TCP/IP" in their argument, read as in the log file (that fills
    `database` and `extra["connection_type"]`); the address from user_host completes it.
    """
    if isinstance(command_type, bytes):
        command = _COMMAND_NAMES.get(command_type) or command_type.decode("utf-8", "replace")
    else:
        command = command_type
    if raw is None:
        raw = canonical_row(event_time, user_host, thread_id, server_id, command_type, argument)
    user, account, host, ip = parse_user_host(user_host)
    if host is None and ip is not None:
        # The server resolved no name (skip-name-resolve, or a lookup that failed): the
        # address is the client's host, as a Connect line ("u@127.0.0.1 on db") says.
        host = ip
    record = LogRecord(
        line=line,
        offset=offset,
        raw=raw,
        occurred_at=event_time,
        connection_id=thread_id,
        command=command,
        argument=argument,
        user=user,
        host=host,
        ip=ip,
    )
    if account is not None:
        record.extra["account"] = account
    if user is None and account is None and host is None and ip is None:
        text = user_host.decode("utf-8", "replace") if isinstance(user_host, bytes) else user_host
        if text:
            record.extra["user_host"] = text[:PROBLEM_EXCERPT_BYTES]
    record.extra["server_id"] = str(server_id)
    if command in _CONNECT_COMMANDS:
        parse_connect(record)
        if record.ip is None and ip is not None and record.host in (host, ip):
            record.ip = _ip(ip) or ip
    return record


# -- what the two files share ----------------------------------------------------------------

_TIME_FORMATS = ("%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%d %H:%M:%S")


def _event_time(text: bytes) -> datetime:
    s = text.decode("ascii")
    return datetime.strptime(s, _TIME_FORMATS[0] if "." in s else _TIME_FORMATS[1])


def bad_row(raw: bytes, line: int, offset: int, reason: str) -> Problem:
    """The Problem of a line (or lines) that is no row, with a bounded excerpt."""
    return Problem(line=line, offset=offset, raw=raw[:PROBLEM_EXCERPT_BYTES], reason=reason)


def time_or_problem(
    text: bytes, raw: bytes, line: int, offset: int
) -> tuple[datetime | None, Problem | None]:
    """A row's event_time, or None and the Problem saying why it cannot be (month 13)."""
    try:
        return _event_time(text), None
    except ValueError as e:
        reason = f"invalid time {text.decode()!r} ({e}): the record is kept with an unknown time"
        return None, bad_row(raw, line, offset, reason)
