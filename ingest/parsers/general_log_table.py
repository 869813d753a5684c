"""The `mysql.general_log` table (log_output=TABLE): its rows, its CSV file, its TSV export.

Pure: no Django, no database connection (ingest/mysql_table.py pulls live rows and hands
them to `row_record`). The table has the same columns in MariaDB 10.x/11.x and MySQL 5.1-8.x:

    event_time    TIMESTAMP(6)   when the server logged the command (MySQL 5.5: no fraction)
    user_host     MEDIUMTEXT     "priv_user[user] @ host [ip]", see parse_user_host
    thread_id     BIGINT         the connection id
    server_id     INT            @@server_id of the server that wrote the row
    command_type  VARCHAR(64)    "Query", "Connect", "Quit", "Init DB"... (as in the log file)
    argument      MEDIUMTEXT (MariaDB) / MEDIUMBLOB (MySQL): the SQL, or the Connect text

Three ways in, one record shape out (`row_record`):

1. Live rows (ingest/mysql_table.py): `raw` is a canonical serialisation, see `canonical_row`.
2. `general_log.CSV`, the CSV engine's data file, copied out of a datadir (FORMAT_CSV), one
   physical line a row, as ha_tina writes it:

       "2026-11-22 12:30:01.123456","alice[alice] @ localhost [127.0.0.1]",31,1,"Query","SELECT 1"

   String and time columns are quoted, numbers are not; inside quotes `\\` writes `\\\\`,
   `"` writes `\\"`, a newline `\\n` and a carriage return `\\r`; every other byte (tab, NUL,
   invalid UTF-8) is written as is. MariaDB's argument is utf8mb3 text: bytes that are
   not UTF-8 reach the table already rewritten as the text `\\xFF`; MySQL's MEDIUMBLOB keeps
   them. Quirk: the CSV engine prints event_time in the time
   zone of the session that wrote the row (normally the server's), so times are naive.
3. `SELECT * FROM mysql.general_log INTO OUTFILE '...'` with the default options
   (FORMAT_TSV): fields end with a tab, rows with a newline, and the escape character
   `\\` precedes `\\`, a tab or a newline inside a value (the byte itself follows it, so a
   multi-line statement spans several physical lines), `\\0` stands for NUL and `\\N`
   for NULL. The reader also accepts the LOAD DATA escapes `\\t \\n \\r \\b \\Z`.
   Quirk: a carriage return is written as is, so a row ends at "\\n" only; "\\r\\n" at
   the end of a line is an argument ending in "\\r", never a Windows line end.

Every record keeps the bytes of its row exactly as in the file and its byte offset and
1-based line. A line that is no row (wrong number of fields, a bad number, an
unterminated quote) becomes a Problem, and reading goes on with the next row. A time
that cannot be (month 13) keeps the record with `occurred_at=None` and
`extra["invalid_time"]`, and a Problem at the record's position tells why.

What the table cannot tell, whatever way it is read: byte offsets in a log (a live row's
position is the server, the table and the row's identity: event_time, thread_id and the
hash of its canonical serialisation), rows affected, or success.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime

from ingest.parsers.audit_fields import parse_user_host
from ingest.parsers.general_log import COMMANDS, parse_connect
from ingest.parsers.records import PROBLEM_EXCERPT_BYTES, Item, LogRecord, Problem, checked_integers

__all__ = [
    "FORMAT_CSV",
    "FORMAT_TSV",
    "canonical_row",
    "parse_general_log_csv",
    "parse_general_log_tsv",
    "parse_user_host",
    "recognise_csv",
    "recognise_tsv",
    "row_hash",
    "row_record",
]

FORMAT_CSV = "general-log-csv"
FORMAT_TSV = "general-log-tsv"

_COMMAND_NAMES = {name.encode(): name for name in COMMANDS}
_CONNECT_COMMANDS = frozenset({"Connect", "Change user"})
# A TSV row spans several lines when its argument holds newlines; a file whose lines all
# end in a backslash would make one endless "row". Beyond this (twice the 16 MiB a
# MEDIUMTEXT holds, escaped) the bytes are reported as a Problem and reading starts over.
_MAX_ROW_BYTES = 40 * 1024 * 1024

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


# -- files ---------------------------------------------------------------------------------

_TIME_FORMATS = ("%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%d %H:%M:%S")


def _event_time(text: bytes) -> datetime:
    s = text.decode("ascii")
    return datetime.strptime(s, _TIME_FORMATS[0] if "." in s else _TIME_FORMATS[1])


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


def _bad_row(raw: bytes, line: int, offset: int, reason: str) -> Problem:
    return Problem(line=line, offset=offset, raw=raw[:PROBLEM_EXCERPT_BYTES], reason=reason)


def _time_or_problem(
    text: bytes, raw: bytes, line: int, offset: int
) -> tuple[datetime | None, Problem | None]:
    try:
        return _event_time(text), None
    except ValueError as e:
        reason = f"invalid time {text.decode()!r} ({e}): the record is kept with an unknown time"
        return None, _bad_row(raw, line, offset, reason)


def parse_general_log_csv(
    lines: Iterable[bytes], *, start_offset: int = 0, start_line: int = 1
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
            yield _bad_row(
                raw, here_line, here, f"not a general_log.CSV row (6 fields expected): {len(raw)} bytes"
            )
            continue
        when, problem = _time_or_problem(m["time"], raw, here_line, here)
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
        yield _bad_row(raw, line, offset, f"not a general_log export row (6 fields expected, {n} found)")
        return
    time_f, user_host, thread, server, command, argument = fields
    if not (thread.isdigit() and server.isdigit() and len(thread) <= 20 and len(server) <= 10):
        yield _bad_row(raw, line, offset, "not a general_log export row (thread_id, server_id not numbers)")
        return
    if time_f == b"\\N" or not re.fullmatch(rb"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{1,6})?", time_f):
        yield _bad_row(raw, line, offset, "not a general_log export row (event_time not a time)")
        return
    when, problem = _time_or_problem(time_f, raw, line, offset)
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


def parse_general_log_tsv(
    lines: Iterable[bytes], *, start_offset: int = 0, start_line: int = 1
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
                yield _bad_row(
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


# -- recognisers -----------------------------------------------------------------------------

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
# The first row of an INTO OUTFILE export: the same values, separated by tabs, unquoted.
# A MySQL 5.7+ general log line has a "T" in its time and spaces before its thread id.
_TSV_HEAD = re.compile(
    rb"""
    \d{4}-\d\d-\d\d[ ]\d\d:\d\d:\d\d(?:\.\d{1,6})?\t      # event_time
    [^\t\n]*\[[^\t\n]*\][ ]@[ ][^\t\n]*[ ]\[[^\t\n]*\]\t  # user_host
    \d+\t\d+\t[A-Z]                                       # thread_id, server_id, command_type
    """,
    re.VERBOSE,
)


def recognise_csv(head: bytes) -> bool:
    """Whether the first KiB of a file is a general_log.CSV (its first line is a row)."""
    return _CSV_HEAD.match(head.lstrip(b"\r\n")) is not None


def recognise_tsv(head: bytes) -> bool:
    """Whether the first KiB of a file is a general_log INTO OUTFILE export."""
    return _TSV_HEAD.match(head.lstrip(b"\r\n")) is not None
