"""The general query log file of MySQL 5.0-8.x and MariaDB: bytes lines in, records out.

Pure: no Django, no file opening. A record ends only where the next one begins (statements span
lines, and old layouts print a time only when the second changes), so `GeneralLogParser` carries
the time forward and can stop anywhere: `resume_point()` says where a new parser must start.
Layouts and the rules kept: docs/formats.md, 'general_log'.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any, cast

from ingest.parsers.digits import ISO, fraction
from ingest.parsers.records import (
    BIGINT_MAX,
    NO_HINTS,
    PROBLEM_EXCERPT_BYTES,
    Hints,
    Item,
    LogRecord,
    ParsePoint,
    Problem,
    ServerStart,
)

__all__ = [
    "COMMANDS",
    "LABEL",
    "NAME",
    "GeneralLogParser",
    "parse",
    "parse_connect",
    "recognise",
    "resumable",
    "time_digits",
]

NAME = "general-log"
LABEL = "General query log"

# Every command name the servers print (MySQL `command_name[]` / MariaDB `command_name[]`
# in sql_parse.cc), most frequent first: the regex tries them in this order. A name that
# begins with another one comes before it ("Connect Out" before "Connect").
COMMANDS: tuple[str, ...] = (
    "Query",
    "Execute",
    "Prepare",
    "Close stmt",
    "Connect Out",
    "Connect",
    "Quit",
    "Init DB",
    "Field List",
    "Reset stmt",
    "Reset connection",  # MariaDB 10.2+
    "Reset Connection",  # MySQL 5.7+
    "Long Data",
    "Fetch",
    "Change user",
    "Set option",
    "Ping",
    "Statistics",
    "Processlist",
    "Refresh",
    "Shutdown",
    "Kill",
    "Debug",
    "Time",
    "Sleep",
    "Create DB",
    "Drop DB",
    "Delayed insert",
    "Binlog Dump GTID",  # MySQL 5.6+
    "Binlog Dump",
    "Table Dump",
    "Register Slave",
    "Register Replica",  # MySQL 8.0.26+
    "Daemon",
    "Unimpl get tid",  # MariaDB
    "Bulk_execute",  # MariaDB 10.2+
    "Slave_worker",  # MariaDB
    "Slave_IO",  # MariaDB
    "Slave_SQL",  # MariaDB
    "Com_multi",  # MariaDB 10.2
    "Clone",  # MySQL 8.0.17+
    "Error",  # MariaDB COM_END
)
_COMMAND_NAMES = {name.encode(): name for name in COMMANDS}

# -- the record line -----------------------------------------------------------------

_TIME = rb"""
    (?:
        # MySQL 5.7, 8.x: ISO 8601 in UTC ("Z") or, with log_timestamps=SYSTEM, with an
        # offset ("+08:00"); microseconds always printed, tolerated absent.
        (?P<iso>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:\d\d)?)
        # MySQL 5.0-5.6 and MariaDB: "%02d%02d%02d %2d:%02d:%02d", so a space-padded
        # hour ("100211  0:55:24"); hand-edited logs add spaces ("051007   21:55:24").
      | (?P<old>\d{6}[ ]+\d{1,2}:\d\d:\d\d)
    )
"""

# The connection id and the command after the time (or after the tabs standing for it).
_ID_AND_COMMAND = (
    rb"""
    [ \t]+                       # "\t" after the time, "\t\t" in its place, or 5.0 padding
    (?P<id>\d{1,20})             # connection (thread) id, right-aligned in 5 to 7 columns
    [ ]+                         # one space (5.1+), or more in hand-edited samples
    (?P<command>"""
    + b"|".join(re.escape(name.encode()) for name in COMMANDS)
    + rb""")                     # the server command, as named in COMMANDS
    (?:
        \t                       # 5.1+, MariaDB: one tab, then the argument
      | (?P<pad>[ ]+)            # MySQL 5.0: "%-11.11s " pads the command with spaces
      | (?=[\r\n])               # no argument
      | \Z                       # no argument, no newline (last line of a file)
    )
    """
)
# A line that starts with a tab or a space: a record in a second already printed (old
# layout), or a continuation line. Groups: id, command, pad.
_UNTIMED_START = re.compile(_ID_AND_COMMAND, re.VERBOSE)
# A line that starts with a digit: a record with its time, or a continuation line.
# Groups: iso, old, id, command, pad.
_TIMED_START = re.compile(_TIME + _ID_AND_COMMAND, re.VERBOSE)
# A timed line whose command is not in COMMANDS (a server newer than this list): the time
# makes it a record for sure. Only the tab-separated layouts (5.1+), whose command ends at
# the tab, name it unambiguously; untimed lines with an unknown command stay continuations.
_TIMED_UNKNOWN_START = re.compile(
    _TIME
    + rb"""
    [ \t]+
    (?P<id>\d{1,20})             # connection id
    [ ]+
    (?P<command>[A-Z][A-Za-z_]*(?:[ ][A-Za-z_]+){0,5})   # "Word" or "Some words"
    (?:\t|(?=\r?\n)|\Z)          # the tab before the argument, or no argument
    (?P<pad>(?!))?               # never set: the same groups as _TIMED_START
    """,
    re.VERBOSE,
)

# What the first byte of a line tells: 1 = tab or space (maybe an untimed record),
# 2 = digit (maybe a timed record), 0 = anything else (a continuation, or a banner).
_START_KIND = bytes(1 if b in b"\t " else 2 if b in b"0123456789" else 0 for b in range(256))

# -- the start banner ------------------------------------------------------------------

# "/usr/sbin/mysqld, Version: 5.7.12-0ubuntu1-log ((Ubuntu)). started with:"
# "/usr/sbin/mariadbd, Version: 10.11.19-MariaDB-0+deb12u1 (Debian 12). started with:"
# Written whenever the server opens the log file: at start-up, and also on
# SET GLOBAL general_log=ON and FLUSH LOGS.
# Linear: the program runs to the first ", Version: " by a scan that looks one phrase
# ahead at each byte (a lazy program before a lazy version tried every ", Version: " of
# the line against the whole rest of it: 5.5 s for an 80 KB line).
_BANNER = re.compile(
    rb"""
    (?P<program>(?:(?!,[ ]Version:[ ])[^\r\n])*+)   # path of the server binary, as started
    ,[ ]Version:[ ]
    (?P<version>[^\r\n]*?)       # "8.0.36 (MySQL Community Server - GPL)"
    \.?[ ]started[ ]with:
    [ \t]*\r?\n?\Z
    """,
    re.VERBOSE,
)
# The lines under it: "Tcp port: 3306  Unix socket: /run/mysqld/mysqld.sock" (Unix),
# "TCP Port: 3306, Named Pipe: MySQL" (Windows), then the column header, which MySQL
# writes with spaces ("Time                 Id Command    Argument") and MariaDB with
# tabs ("Time\t\t    Id Command\tArgument").
_BANNER_PORT_PREFIXES = (b"Tcp port:", b"TCP Port:")
# A banner names a path (PATH_MAX is 4096) and a version: a longer line is none.
_BANNER_MAX_BYTES = 8192
_BANNER_HEADER = re.compile(rb"Time[ \t]+Id[ \t]+Command[ \t]+Argument[ \t]*\r?\n?\Z")
_BANNER_MAX_LINES = 3

# -- Connect and Change user arguments ---------------------------------------------------

# "user@host on db using TCP/IP" and its variants:
#   MySQL 5.0          "root@localhost on db1", "root@localhost on", "root@localhost on "
#   MySQL 5.5+         "nobody@localhost as  on ", "joe@host as anonymous on db" (the
#                      account the server authenticated, when it differs: proxy users,
#                      anonymous accounts)
#   MySQL 5.6+, MariaDB "root@localhost on  using Socket" (empty database), "... using TCP/IP"
_CONNECT = re.compile(
    rb"""
    (?P<user>.*?)                # user name as the client sent it (may hold "@" or spaces)
    @
    (?P<host>[^\s@]*)            # host name or address: the text after the last "@"
    (?:[ ]as[ ](?P<priv>\S*))?   # authenticated as this account (5.5+)
    (?:[ ]on(?:[ ](?P<db>.*?))?)?  # current database, empty when none
    (?:[ ]using[ ](?P<via>\S.*?))? # connection type: TCP/IP, Socket, SSL/TLS, Named Pipe...
    [ \t\x00]*\Z
    """,
    re.VERBOSE | re.DOTALL,
)
# "Access denied for user 'x'@'h' (using password: YES)", or with " to database 'db'"
# when the account may log in but not use the database it asked for.
_ACCESS_DENIED = re.compile(
    rb"""
    Access[ ]denied[ ]for[ ]user[ ]
    '(?P<user>.*)'@'(?P<host>[^']*)'           # the account as the client named it
    (?:[ ]to[ ]database[ ]'(?P<db>.*)')?       # the database it was refused
    (?:[ ]\(using[ ]password:[ ](?P<password>YES|NO)\))?   # whether it sent a password
    [ \t\x00]*\Z
    """,
    re.VERBOSE | re.DOTALL,
)
# A real Connect argument is at most a user (80), a host (255) and a database (64) name
# and a few words; beyond this it cannot be one, and regexes need not look at it.
_CONNECT_MAX_BYTES = 1024
_CONNECT_COMMANDS = frozenset({"Connect", "Change user"})


def _text(b: bytes) -> str:
    return b.decode("utf-8", "replace")


def _ip(host: str) -> str | None:
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return None


def parse_connect(record: LogRecord) -> None:
    """Fill user, host, ip, database, status and extra from a Connect/Change user argument.

    Leaves them None when the argument is in no known form. `status` is "denied" for a
    refused login, and stays None otherwise: MariaDB writes "user@host on db" when a
    login starts, before it is checked (a refusal follows as a second Connect record of
    the same connection, "Access denied ..."), so that line proves no success.
    """
    arg = record.argument
    if len(arg) > _CONNECT_MAX_BYTES:
        return
    if arg.startswith(b"Access denied"):
        record.status = "denied"
        m = _ACCESS_DENIED.match(arg)
        if m is None:
            return
        record.user = _text(m["user"])
        record.host = _text(m["host"])
        record.ip = _ip(record.host)
        if m["db"] is not None:
            record.database = _text(m["db"])
        if m["password"] is not None:
            record.extra["using_password"] = m["password"].decode()
        return
    m = _CONNECT.match(arg)
    if m is None:
        return
    record.user = _text(m["user"])
    record.host = _text(m["host"])
    record.ip = _ip(record.host)
    db = m["db"]
    record.database = _text(db) if db else None  # "on " and "on  using ...": no database
    if m["priv"] is not None:
        record.extra["authenticated_as"] = _text(m["priv"])
    if m["via"] is not None:
        record.extra["connection_type"] = _text(m["via"])


def _old_time(stamp: bytes) -> datetime:
    """`YYMMDD H:MM:SS` (any spaces between) to a naive datetime. Raises ValueError."""
    yy, mo, dd = int(stamp[0:2]), int(stamp[2:4]), int(stamp[4:6])
    h, mi, s = stamp[6:].split(b":")
    # Two-digit years: the old layout predates 2070, and no server logged before 1970.
    return datetime(2000 + yy if yy < 70 else 1900 + yy, mo, dd, int(h), int(mi), int(s))


# What is pending while the parser waits to know whether the next line continues it.
_NOTHING, _RECORD, _BANNER_PENDING, _GARBAGE = 0, 1, 2, 3
# Connection ids parsed so far (bytes -> int): a log repeats a few thousand ids millions
# of times, and a dict hit is cheaper than int(). Emptied when it grows past this.
_ID_CACHE_MAX = 65536
# A pending record: the arguments of _record(). A pending banner or run of garbage is a list
# (see _other), mutable because lines are added to it.
_Pending = tuple[
    int, int, datetime | None, int | None, str, bytes, int, dict[str, str] | None, list[bytes] | None
]


class GeneralLogParser:
    """Resumable general log parser. Feed it lines; `finish()` yields the last item.

        parser = GeneralLogParser(start_offset=..., start_line=..., last_time=...)
        for item in parser.feed(lines): ...
        for item in parser.finish(): ...

    `resume_point()` is valid at any time: while the caller holds an item, after
    `feed()` is exhausted, and after the caller stopped iterating it.
    """

    def __init__(
        self, *, start_offset: int = 0, start_line: int = 1, last_time: datetime | None = None
    ) -> None:
        self._offset = start_offset  # offset of the next line fed
        self._line = start_line  # its number
        self._time = last_time  # the time records without one carry
        self._time_key: bytes | None = None  # the old-layout stamp self._time was read from
        self._kind = _NOTHING
        # The pending item: a record as the arguments of _record(), or a banner or a run
        # of garbage as the list _other() takes.
        self._pending: _Pending | list[Any] | None = None
        self._ids: dict[bytes, int] = {}
        # Where everything not yet yielded starts: (offset, line, last_time). A plain
        # tuple, stored before every yield; resume_point() names its fields.
        self._resume: tuple[int, int, datetime | None] = (start_offset, start_line, last_time)

    def resume_point(self) -> ParsePoint:
        return ParsePoint(*self._resume)

    def feed(self, lines: Iterable[bytes]) -> Iterator[Item]:
        """Yield every item these lines complete; the last one stays pending.

        1. A line that starts a record completes the pending item, and becomes the
           pending record (continuation lines may follow).
        2. Any other line continues the pending record; with none pending, it is a
           banner, a line under a banner, or garbage.
        This is the hot loop, so the state lives in locals, and no work is done per
        line that can be done per record: the offset and number of a line are those of
        the pending item plus its length. Before each yield the locals are complete
        again (the new item pending) and the resume point is stored, so the caller may
        checkpoint or stop at any item; `finally` writes the locals back.
        """
        untimed_start, timed_start = _UNTIMED_START.match, _TIMED_START.match
        start_kind, names, ids = _START_KIND, _COMMAND_NAMES, self._ids
        offset, lineno = self._offset, self._line  # the next line, while nothing is pending
        cur_time, time_key = self._time, self._time_key
        kind = self._kind
        # The pending record, unpacked: most items are records.
        p_off = p_line = p_arg = 0
        p_cid: int | None = 0
        p_time: datetime | None = None
        p_cmd = ""
        p_raw = b""
        p_extra: dict[str, str] | None = None
        p_more: list[bytes] | None = None
        other: list[Any] = []  # the pending banner or garbage
        if kind == _RECORD:  # the kind says which of the two is pending
            p_off, p_line, p_time, p_cid, p_cmd, p_raw, p_arg, p_extra, p_more = cast(_Pending, self._pending)
        elif kind != _NOTHING:
            other = cast(list[Any], self._pending)
        p_before = self._resume[2]  # the carried time before the pending item
        try:
            for raw in lines:
                if not raw:
                    continue
                k = start_kind[raw[0]]
                if k:
                    before = cur_time
                    if k == 1:
                        m = untimed_start(raw)
                        if m is not None:
                            cid, command, pad = m.groups()
                            extra = invalid = None
                    else:
                        m = timed_start(raw) or _TIMED_UNKNOWN_START.match(raw)
                        if m is not None:
                            iso, old, cid, command, pad = m.groups()
                            extra = invalid = None
                            if iso is not None:
                                time_key = None
                                try:
                                    cur_time = datetime.fromisoformat(iso.decode())
                                except ValueError as e:
                                    cur_time, extra = None, {"invalid_time": iso.decode()}
                                    invalid = _invalid_time(raw, iso, e)
                            elif old != time_key:
                                time_key = old
                                try:
                                    cur_time = _old_time(old)
                                except ValueError as e:
                                    cur_time, extra = None, {"invalid_time": old.decode()}
                                    invalid = _invalid_time(raw, old, e)
                    if m is not None:
                        # 1. A new record: complete what was pending, then hold this one.
                        if kind == _RECORD:
                            if p_more is None and p_extra is None and p_cmd not in _CONNECT_COMMANDS:
                                # The common case, inlined: _record() of a one-line record.
                                # Its final "\n" (or "\r\n") is no part of the argument.
                                here, here_line = p_off + len(p_raw), p_line + 1
                                end = (-2 if p_raw[-2] == 13 else -1) if p_raw[-1] == 10 else None
                                item: Item | None = LogRecord(
                                    p_line, p_off, p_raw, p_time, p_cid, p_cmd, p_raw[p_arg:end]
                                )
                            else:
                                here = p_off + len(p_raw) + (sum(map(len, p_more)) if p_more else 0)
                                here_line = p_line + 1 + (len(p_more) if p_more else 0)
                                item = _record(
                                    p_off, p_line, p_time, p_cid, p_cmd, p_raw, p_arg, p_extra, p_more
                                )
                        elif kind == _NOTHING:
                            here, here_line, item = offset, lineno, None
                        else:
                            here, here_line = _end_of(kind, other)
                            item = _other(kind, other)
                        kind, p_off, p_line, p_time, p_before = _RECORD, here, here_line, cur_time, before
                        p_raw, p_extra, p_more, p_arg = raw, extra, None, m.end()
                        p_cid = ids.get(cid)
                        if p_cid is None:
                            if len(ids) > _ID_CACHE_MAX:
                                ids.clear()
                            p_cid = ids[cid] = int(cid)
                            if p_cid > BIGINT_MAX:  # 20 digits: a problem of this record only
                                del ids[cid]
                                p_cid = None
                                p_extra = {**(p_extra or {}), "connection_id": cid.decode()}
                                invalid = _too_big(invalid, raw, cid)
                        p_cmd = names.get(command) or command.decode()
                        if pad is not None:
                            # MySQL 5.0: "%-11.11s " pads the command to 11 columns, then
                            # one space; spaces beyond those belong to the argument.
                            want = max(11 - len(command), 0) + 1
                            if len(pad) > want:
                                p_arg = m.start("pad") + want
                        if item is not None:
                            self._resume = (here, here_line, before)
                            yield item
                        if invalid is not None:
                            invalid.offset, invalid.line = here, here_line
                            self._resume = (here, here_line, before)
                            yield invalid
                        continue
                if kind == _RECORD and (k or b"started with:" not in raw):
                    # 2. A continuation line of the pending record (multi-line statements).
                    if p_more is None:
                        p_more = [raw]
                    else:
                        p_more.append(raw)
                    continue
                # 3. A banner, a line under one, or bytes that are no record.
                banner = (
                    _BANNER.match(raw)
                    if not k and len(raw) <= _BANNER_MAX_BYTES and b"started with:" in raw
                    else None
                )
                if banner is None:
                    if kind == _RECORD:  # "started with:" in a statement: no banner
                        if p_more is None:
                            p_more = [raw]
                        else:
                            p_more.append(raw)
                        continue
                    if kind == _GARBAGE:
                        _add_garbage(other, raw)
                        continue
                    if (
                        kind == _BANNER_PENDING
                        and len(other[3]) < _BANNER_MAX_LINES
                        and (raw.startswith(_BANNER_PORT_PREFIXES) or _BANNER_HEADER.match(raw))
                    ):
                        other[3].append(raw)
                        continue
                if kind == _RECORD:
                    here = p_off + len(p_raw) + (sum(map(len, p_more)) if p_more else 0)
                    here_line = p_line + 1 + (len(p_more) if p_more else 0)
                    item = _record(p_off, p_line, p_time, p_cid, p_cmd, p_raw, p_arg, p_extra, p_more)
                    p_more = None
                elif kind == _NOTHING:
                    here, here_line, item = offset, lineno, None
                else:
                    here, here_line = _end_of(kind, other)
                    item = _other(kind, other)
                if banner is not None:
                    kind, other = _BANNER_PENDING, [here, here_line, _text(banner["version"]), [raw]]
                else:
                    kind, other = _GARBAGE, [here, here_line, b"", 0, 0]
                    _add_garbage(other, raw)
                p_before = cur_time
                if item is not None:
                    self._resume = (here, here_line, cur_time)
                    yield item
        finally:
            # The input ended, or the caller stopped iterating: either way the locals
            # hold a complete state (lines consumed, one item pending).
            self._time, self._time_key, self._kind = cur_time, time_key, kind
            if kind == _RECORD:
                self._pending = (p_off, p_line, p_time, p_cid, p_cmd, p_raw, p_arg, p_extra, p_more)
                self._resume = (p_off, p_line, p_before)
                self._offset = p_off + len(p_raw) + (sum(map(len, p_more)) if p_more else 0)
                self._line = p_line + 1 + (len(p_more) if p_more else 0)
            elif kind == _NOTHING:
                self._pending = None
                self._resume = (offset, lineno, cur_time)
                self._offset, self._line = offset, lineno
            else:
                self._pending = other
                self._resume = (other[0], other[1], p_before)
                self._offset, self._line = _end_of(kind, other)

    def finish(self) -> Iterator[Item]:
        """Yield the item still pending at the end of the input."""
        kind, pending = self._kind, self._pending
        self._kind, self._pending = _NOTHING, None
        self._resume = (self._offset, self._line, self._time)
        if kind == _RECORD:  # the kind says which of the two is pending
            yield _record(*cast(_Pending, pending))
        elif kind != _NOTHING:
            yield _other(kind, cast(list[Any], pending))


def _record(
    offset: int,
    line: int,
    when: datetime | None,
    cid: int | None,
    command: str,
    raw: bytes,
    arg_start: int,
    extra: dict[str, str] | None,
    more: list[bytes] | None,
) -> LogRecord:
    if more is not None:
        raw = b"".join((raw, *more))
    end = len(raw)
    if raw[end - 1] == 10:  # the final "\n" ends the line, not the argument
        end -= 1
        if end and raw[end - 1] == 13:  # "\r\n" from a log that passed through Windows
            end -= 1
    record = LogRecord(line, offset, raw, when, cid, command, raw[arg_start:end] if end > arg_start else b"")
    if extra is not None:
        record.extra = extra
    if command in _CONNECT_COMMANDS:
        parse_connect(record)
    return record


def _other(kind: int, pending: list[Any]) -> ServerStart | Problem:
    """The banner, or the Problem for a run of garbage lines, that `pending` holds."""
    if kind == _BANNER_PENDING:
        offset, line, version, lines = pending
        return ServerStart(line=line, offset=offset, raw=b"".join(lines), version=version)
    offset, line, excerpt, count, size = pending
    lines_text = f"{count} line{'s' if count > 1 else ''}"
    cut = f" (the first {PROBLEM_EXCERPT_BYTES} kept here)" if size > PROBLEM_EXCERPT_BYTES else ""
    return Problem(
        line=line,
        offset=offset,
        raw=excerpt,
        reason=f"not a general log record, and no record before it to continue: {lines_text}, {size} bytes"
        + cut,
    )


def _add_garbage(pending: list[Any], raw: bytes) -> None:
    """Count a line into a run of garbage, keeping a bounded excerpt (a log may be any file)."""
    if len(pending[2]) < PROBLEM_EXCERPT_BYTES:
        pending[2] += raw[: PROBLEM_EXCERPT_BYTES - len(pending[2])]
    pending[3] += 1
    pending[4] += len(raw)


def _end_of(kind: int, pending: list[Any]) -> tuple[int, int]:
    """Offset and number of the line after a pending banner or run of garbage."""
    if kind == _BANNER_PENDING:
        return pending[0] + sum(map(len, pending[3])), pending[1] + len(pending[3])
    return pending[0] + pending[4], pending[1] + pending[3]


def _invalid_time(raw: bytes, stamp: bytes, error: ValueError) -> Problem:
    """The Problem for a record line whose time cannot be; the caller sets its position."""
    return Problem(
        line=0,
        offset=0,
        raw=raw[:PROBLEM_EXCERPT_BYTES],
        reason=f"invalid time {stamp.decode()!r} ({error}): the record is kept with an unknown time",
    )


def _too_big(problem: Problem | None, raw: bytes, cid: bytes) -> Problem:
    """The Problem of a record whose connection id a bigint cannot hold (added to `problem`)."""
    reason = (
        f"connection id {cid.decode()} is out of range for a 64-bit integer: the record is kept without it"
    )
    if problem is None:
        return Problem(line=0, offset=0, raw=raw[:PROBLEM_EXCERPT_BYTES], reason=reason)
    problem.reason += f"; {reason}"
    return problem


def resumable(*, start_offset: int = 0, start_line: int = 1, hints: Hints = NO_HINTS) -> GeneralLogParser:
    """A parser that says its resume point: a record ends only where the next one begins."""
    return GeneralLogParser(start_offset=start_offset, start_line=start_line, last_time=hints.last_time)


def parse(
    lines: Iterable[bytes], *, start_offset: int = 0, start_line: int = 1, hints: Hints = NO_HINTS
) -> Iterator[Item]:
    """Every record, banner and problem of a general log, in order (docs/formats.md, 'general_log').

    `hints.last_time`: the time the log printed last before these lines (the file before it
    of a rotated set), carried by records that print none."""
    parser = resumable(start_offset=start_offset, start_line=start_line, hints=hints)
    yield from parser.feed(lines)
    yield from parser.finish()


# -- recognising the format, and the precision of its times ----------------------------------

_HEAD = re.compile(
    rb"""
    (?:^|\n)
    (?:
        [^\n]*,\x20Version:\x20[^\n]*started\x20with:    # server start banner
      | Time\s+Id\s+Command\s+Argument                   # its column header line
      | \d{6}\s+\d{1,2}:\d{2}:\d{2}\s+\d+\s+[A-Z][a-z]   # 5.0-5.6 / MariaDB: 100211  0:55:24   7 Query
      | \d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})\s+\d+\s+[A-Z][a-z]  # 5.7+
      | \t\t\s*\d+\s+(?:Connect|Query|Quit|Init\x20DB|Execute|Prepare)\b  # tab-indented, no time
    )
    """,
    re.VERBOSE,
)


def recognise(head: bytes) -> bool:
    """Whether the first KiB of a file holds a line only a general log writes (the loosest test)."""
    return _HEAD.search(head) is not None


def time_digits(head: bytes) -> int | None:
    """Digits after the seconds of a record's time: 5.7+/8.x print an ISO time on every line
    (with the fraction the server chose); 5.0-5.6 and MariaDB print `260105  8:48:22`, or no
    time at all on a line in the same second (whole seconds either way)."""
    found = ISO.match(head)
    return fraction(found) if found else 0
