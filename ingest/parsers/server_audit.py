"""The MariaDB `server_audit` plugin log (file output, or syslog lines): bytes lines in, records out.

Pure: no Django, no file opening. Operations are named in the general log's words (CONNECT ->
"Connect", QUERY -> "Query", TABLE events -> "Table WRITE"...), so the session tracker and the
classifier need no second vocabulary. The plugin never logs rows affected.
Layouts, operations and the ten quirks: docs/formats.md, 'server_audit'.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any

from ingest.parsers.digits import CLOCK, fraction
from ingest.parsers.records import (
    BIGINT_MAX,
    NO_HINTS,
    PROBLEM_EXCERPT_BYTES,
    Hints,
    Item,
    LogRecord,
    Problem,
    checked_integers,
)

__all__ = ["LABEL", "NAME", "parse", "recognise", "time_digits"]

NAME = "mariadb-audit"
LABEL = "MariaDB server_audit"

# -- the record line ------------------------------------------------------------------

_TIMESTAMP = rb"""
    (?:
        # The default: "%Y%m%d %H:%M:%S" in the server's local time zone.
        (?P<local>\d{8}[ ]\d\d:\d\d:\d\d)
        # MariaDB Enterprise server_audit_timestamp_format (e.g. %Y%m%dT%H:%i:%s.%f%z),
        # and other ISO 8601 spellings: maybe microseconds, maybe a zone.
      | (?P<iso>\d{4}-?\d\d-?\d\d[T ]\d\d:\d\d:\d\d(?:\.\d{1,6})?(?:Z|[+-]\d\d:?\d\d)?)
    )
    ,
"""
_FIELDS = rb"""
    (?P<serverhost>[^,\s]{0,256}),   # the server's host name (gethostname), never a space
    (?P<user>[^\r\n]{0,512}?),       # user name as the client gave it: may hold commas (6.)
    (?P<host>[^,\r\n]{0,256}),       # client host name, or its IP; maybe ":port" (4.)
    (?P<cid>\d{1,20}),               # connection (thread) id
    (?P<qid>-?\d{1,20}),             # query id: a statement's, shared by its TABLE events; 0
                                     # for connection events
    (?P<op>[A-Z][A-Z_]{0,31}),       # the operation: CONNECT, QUERY, WRITE, ...
"""
# A record line as the file output writes it. Groups: local, iso, then _FIELDS.
_TIMED = re.compile(_TIMESTAMP + _FIELDS, re.VERBOSE)
# The record without its timestamp, as the syslog output sends it. Groups: _FIELDS.
_UNTIMED = re.compile(_FIELDS, re.VERBOSE)
# Before an untimed record, the server_audit_syslog_info text (anything) and the one space
# the plugin writes after it ("%s %.*s"). One space, not a run: each of the 256 lengths
# tried for the info then costs a bounded look ahead, not one as long as the line.
_SYSLOG_INFO = re.compile(rb"(?P<info>[^\r\n]{1,256}?)[ ](?=" + _FIELDS + rb")", re.VERBOSE)

# The header a syslog daemon writes or sends before the message (quirk 7).
# "<PRI>", the priority (facility * 8 + severity) a message has on the wire: RFC 3164 and
# RFC 5424 messages as a receiver gets them, and what syslog(3) sends to /dev/log.
_PRI = re.compile(rb"<(?P<pri>\d{1,3})>")
_SYSLOG_TIME = rb"""
    (?:
        # RFC 3164 (classic syslog files, the wire): "Mar  1 12:00:00", local time, no year.
        (?P<bsd>[A-Z][a-z]{2}[ ][ \d]\d[ ]\d\d:\d\d:\d\d)
        # RFC 3339, rsyslog's RSYSLOG_FileFormat and RSYSLOG_ForwardFormat:
        # "2024-03-01T12:00:00.123456+01:00".
      | (?P<rfc3339>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:\d\d))
    )
    [ ]
"""
_SYSLOG_TAG = rb"""
    (?P<tag>[^\s:\[]{1,128})         # the ident: server_audit_syslog_ident, "mysql-server_auditing"
    (?:\[(?P<pid>\d{1,10})\])?       # the pid, when the daemon adds it
    :[ ]*                            # ": ", and the space the plugin puts after an empty info
"""
# RFC 3164 without a host name: what syslog(3) sends, and what some relays pass on.
# Groups: bsd, rfc3339, tag, pid.
_SYSLOG_HOSTLESS = re.compile(_SYSLOG_TIME + _SYSLOG_TAG, re.VERBOSE)
# With the host the syslog daemon names. Groups: bsd, rfc3339, shost, tag, pid.
_SYSLOG = re.compile(
    _SYSLOG_TIME
    + rb"""
    (?P<shost>\S{0,254}[^\s:])[ ]    # the host the syslog daemon names; never ends in ":"
    """
    + _SYSLOG_TAG,
    re.VERBOSE,
)
# RFC 5424 after its "<PRI>": version, time, host, app, procid, msgid (each "-" when nil),
# then the structured data (read by _structured_data_end), a space and the message.
_RFC5424 = re.compile(
    rb"""
    (?P<version>[1-9]\d{0,2})[ ]     # "1"
    (?P<ts>-|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:\d\d))[ ]
    (?P<shost>\S{1,255})[ ]          # HOSTNAME
    (?P<app>\S{1,48})[ ]             # APP-NAME: server_audit_syslog_ident
    (?P<procid>\S{1,128})[ ]         # PROCID
    (?P<msgid>\S{1,32})[ ]           # MSGID
    """,
    re.VERBOSE,
)
_BOM = b"\xef\xbb\xbf"  # RFC 5424: the message may start with a UTF-8 byte order mark
# Structured data longer than this is no header of ours (hostile input stays bounded).
_MAX_STRUCTURED_DATA = 8192
_FACILITIES = (
    "kern", "user", "mail", "daemon", "auth", "syslog", "lpr", "news", "uucp", "cron", "authpriv",
    "ftp", "ntp", "audit", "alert", "clock", *(f"local{i}" for i in range(8)),
)  # fmt: skip
_SEVERITIES = ("emerg", "alert", "crit", "err", "warning", "notice", "info", "debug")
_MONTHS = {
    m: i
    for i, m in enumerate(
        (b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec"), 1
    )
}

# After "OPERATION," of a QUERY: the database, then the opening quote (a line break may sit
# before the quote in hand-wrapped samples, MariaDB's documentation among them).
_QUERY_OPEN = re.compile(rb"(?P<db>[^\r\n']{0,256}?),(?:\r?\n)?'")
# After the closing quote: the return code, maybe more fields, the end of the line.
_QUERY_CLOSE = re.compile(rb",(?P<ret>-?\d{1,11})(?:,(?P<more>[^'\r\n]*))?\r?\n?\Z")
# After "OPERATION," of any other operation: database, object, return code (empty for
# TABLE events), maybe more fields (5.).
_PLAIN_REST = re.compile(
    rb"""
    (?P<db>[^,\r\n]*),               # current database ("" when none; garbage, see quirk 10)
    (?P<obj>[^,\r\n]*),              # table, "old|newdb.new", TLS version, key=value, or ""
    (?P<ret>-?\d{0,11})              # return code; empty for TABLE events
    (?:,(?P<more>[^\r\n]*))?         # fields after the return code (Enterprise 12.x)
    \r?\n?\Z
    """,
    re.VERBOSE,
)
# RENAME as MariaDB Enterprise's documentation shows it: "db,old,newdb,new".
_RENAME_4 = re.compile(
    rb"(?P<db>[^,\r\n]{0,256}),(?P<obj>[^,\r\n]*),(?P<newdb>[^,\r\n]*),(?P<new>[^,\r\n]*),?\r?\n?\Z"
)

_QUERY = "Query"
_CONNECTION_COMMANDS = {
    b"CONNECT": "Connect",
    b"FAILED_CONNECT": "Connect",
    b"DISCONNECT": "Quit",
    b"CHANGEUSER": "Change user",
}
_TABLE_OPERATIONS = (b"READ", b"WRITE", b"CREATE", b"ALTER", b"RENAME", b"DROP")
_TABLE_COMMANDS = {op: "Table " + op.decode() for op in _TABLE_OPERATIONS}

# Backslash escapes of the plugin (its esc_map): the byte each one stands for.
_ESCAPES = {b"b": b"\b", b"t": b"\t", b"n": b"\n", b"f": b"\f", b"r": b"\r", b"'": b"'", b"\\": b"\\"}
_ESCAPE = re.compile(rb"\\([btnfr'\\])")

# A statement cut from its closing quote takes at most this many lines and bytes; beyond,
# the lines are garbage (a hostile file must not make one record of all the rest).
_MAX_CONTINUATION_LINES = 10_000
_MAX_RECORD_BYTES = 64 * 1024 * 1024

# A database name is at most 64 characters, 256 bytes of UTF-8 (quirk 10).
_MAX_DATABASE_BYTES = 256

_FIRST_BYTE_DIGIT = frozenset(b"0123456789")

# The line nearly every record of a file output is, read in one anchored match up to the
# statement's opening quote: the default timestamp, fields without commas (a user name or a
# database with one takes the general reading), a QUERY. Each field is bounded and ends at a
# comma it cannot hold, so there is one way to split the line (the one the general reading
# finds first) and the match is linear. Groups: local, serverhost, user, host, cid, qid, db.
_COMMON_QUERY = re.compile(
    rb"""
    (?P<local>\d{8}[ ]\d\d:\d\d:\d\d),
    (?P<serverhost>[^,\s]{0,256}),
    (?P<user>[^,\r\n]{0,512}),
    (?P<host>[^,\r\n]{0,256}),
    (?P<cid>\d{1,20}),
    (?P<qid>-?\d{1,20}),
    QUERY,
    (?P<db>[^,\r\n']{0,256}),'
    """,
    re.VERBOSE,
)
_SUCCESS_END = (b",0\n", b",0", b",0\r\n")  # the closing quote's tail when the statement succeeded


# Each escape but the backslash's own, as (written, meant).
_SINGLE_ESCAPES = tuple((b"\\" + k, v) for k, v in _ESCAPES.items() if k != b"\\")


def _unescape(body: bytes) -> bytes:
    """The statement as the client sent it (quirk 1). Unknown escapes stay as written."""
    if b"\\" not in body:
        return body
    if b"\\\\" not in body:
        # No two backslashes in a row (most statements: a quote escaped here and there): every
        # escape is one backslash and the byte after it, none overlaps another and none is made
        # by replacing one, so each is replaced on its own, in C (the pattern's substitution
        # calls Python for each escape).
        for written, meant in _SINGLE_ESCAPES:
            body = body.replace(written, meant)
        return body
    return _ESCAPE.sub(lambda m: _ESCAPES[m[1]], body)


def _chomp(b: bytes) -> bytes:
    """Without its final line terminator ("\n", or "\r\n" from a log that passed through Windows)."""
    if b.endswith(b"\n"):
        return b[:-2] if b.endswith(b"\r\n") else b[:-1]
    return b


def _text(b: bytes) -> str:
    return b.decode("utf-8", "replace")


class _Hosts:
    """host field -> (host, ip, port), cached: a log names few hosts, each many times."""

    def __init__(self) -> None:
        self._cache: dict[bytes, tuple[str | None, str | None, str | None]] = {}

    def get(self, field: bytes) -> tuple[str | None, str | None, str | None]:
        hit = self._cache.get(field)
        if hit is None:
            if len(self._cache) > 10_000:
                self._cache.clear()
            hit = self._cache[field] = _split_host(field)
        return hit


def _split_host(field: bytes) -> tuple[str | None, str | None, str | None]:
    host = _text(field).lstrip(" ")
    port = None
    if host.startswith("[") and "]:" in host:  # "[::1]:3306"
        host, port = host[1:].split("]:", 1)
    elif host.count(":") == 1:  # "10.0.0.7:54312", "localhost:unavailable"; not "::1"
        host, port = host.split(":")
    if not host:
        return None, None, port
    try:
        ip: str | None = str(ipaddress.ip_address(host))
    except ValueError:
        ip = None
    return host, ip, port


class _Times:
    """Timestamp bytes -> datetime, caching the last one (a log repeats each second)."""

    def __init__(self, year: int | None) -> None:
        self._key: bytes | None = None
        self._value: datetime | None = None
        self._error: str | None = None  # why the cached time is impossible
        self.year = year
        self._month = 0  # month of the last BSD syslog time, to see the year turn

    def record_time(self, local: bytes | None, iso: bytes | None) -> datetime:
        """The record's own timestamp (quirk 3); ValueError when it cannot be."""
        key = local or iso
        if key != self._key:
            self._key, self._value, self._error = key, None, None
            try:
                if local is not None:
                    d, t = local[:8], local[9:]
                    self._value = datetime(
                        int(d[:4]), int(d[4:6]), int(d[6:8]), int(t[:2]), int(t[3:5]), int(t[6:8])
                    )
                elif iso is not None:
                    self._value = datetime.fromisoformat(iso.decode())
            except ValueError as e:
                self._error = str(e)
        if self._value is None:
            raise ValueError(self._error)
        return self._value

    def syslog_time(self, bsd: bytes) -> datetime | None:
        """A BSD syslog time in the year given, carried over New Year (quirk 7)."""
        month = _MONTHS.get(bsd[:3])
        if month is None:
            raise ValueError(f"unknown month {bsd[:3].decode(errors='replace')!r}")
        if self.year is None:
            return None
        if month < self._month:
            self.year += 1
        self._month = month
        return datetime(self.year, month, int(bsd[4:6]), int(bsd[7:9]), int(bsd[10:12]), int(bsd[13:15]))


def parse(
    lines: Iterable[bytes], *, start_offset: int = 0, start_line: int = 1, hints: Hints = NO_HINTS
) -> Iterator[Item]:
    """See `_parse_server_audit`; integers a bigint cannot hold become problems of their record.

    `hints.mtime_year`: syslog's BSD time has no year, so it takes the file's (carried over New
    Year); without it such a record's time is unknown."""
    return checked_integers(
        _parse_server_audit(lines, start_offset=start_offset, start_line=start_line, year=hints.mtime_year)
    )


def _parse_server_audit(
    lines: Iterable[bytes],
    *,
    start_offset: int = 0,
    start_line: int = 1,
    year: int | None = None,
    fast: bool = True,
) -> Iterator[Item]:
    """Every record and problem of a server_audit log, in order (docs/formats.md, 'server_audit').

    1. A line that starts a record (optional syslog prefix, then the header up to the
       operation) is read at once, unless it is a QUERY whose quote does not close on it:
       that one stays pending, and the lines that follow continue it until one closes it
       (quirk 1), a record line starts, or the input ends (quirk 2).
    2. Any other line continues the pending QUERY, or else joins the pending run of
       garbage lines (quirk 8).
    Before a record is yielded, whatever was pending before it is yielded.

    The common line (a QUERY on one line, with its own timestamp) is first offered to
    `_Common.record`, which reads it in one match and yields the record step 1 would; anything
    else it declines (None), and the steps above read it. `fast=False` leaves that out (the
    tests compare both readings).
    """
    times = _Times(year)
    hosts = _Hosts()
    common = _Common(times, hosts) if fast else None
    offset, lineno = start_offset, start_line
    garbage: list[Any] = []  # [offset, line, excerpt, lines, bytes] of the run
    pending: _PendingQuery | None = None
    for raw in lines:
        if not raw:
            continue
        if common is not None and (record := common.record(raw, offset, lineno)) is not None:
            if pending is not None:
                yield from pending.finish(hosts)
                pending = None
            if garbage:
                yield _garbage_problem(garbage)
                garbage = []
            yield record
            offset += len(raw)
            lineno += 1
            continue
        head = _header(raw, times)
        if head is None:
            if pending is not None and pending.take(raw):
                if pending.closed:
                    yield from pending.finish(hosts)
                    pending = None
            elif garbage:
                _add_garbage(garbage, raw)
            else:
                if pending is not None:  # too long to be one statement: it ends here
                    yield from pending.finish(hosts)
                    pending = None
                garbage = [offset, lineno, b"", 0, 0]
                _add_garbage(garbage, raw)
            offset += len(raw)
            lineno += 1
            continue
        if pending is not None:
            yield from pending.finish(hosts)
            pending = None
        if garbage:
            yield _garbage_problem(garbage)
            garbage = []
        if head.query and not head.closed:
            pending = _PendingQuery(offset, lineno, raw, head)
        else:
            yield from _items(offset, lineno, raw, head, hosts)
        offset += len(raw)
        lineno += 1
    if pending is not None:
        yield from pending.finish(hosts)
    if garbage:
        yield _garbage_problem(garbage)


class _Common:
    """The record of the line nearly every record of a file output is, read in one match."""

    def __init__(self, times: _Times, hosts: _Hosts) -> None:
        self.times, self.hosts = times, hosts
        # Decoded field texts, by their bytes: a log names few servers, users and databases.
        self.texts: dict[bytes, str] = {}

    def text(self, b: bytes) -> str:
        t = self.texts.get(b)
        if t is None:
            if len(self.texts) > 10_000:  # bounded: a log of ever-new names only evicts
                self.texts.clear()
            t = self.texts[b] = _text(b)
        return t

    def record(self, raw: bytes, offset: int, line: int) -> LogRecord | None:
        """The LogRecord _items makes of `raw`, or None when `raw` is not the common line: another
        operation, a syslog header, a comma in a user name or database, a quote that does not
        close on the line, fields after the return code, a time that cannot be, an id a bigint
        cannot hold (the general reading then says what is wrong, as before)."""
        m = _COMMON_QUERY.match(raw)
        if m is None:
            return None
        start = m.end()
        close = raw.rfind(b"'", start)
        if close < 0:
            return None
        tail = raw[close + 1 :]
        if tail in _SUCCESS_END:
            ret = "0"
        else:
            c = _QUERY_CLOSE.match(tail)
            if c is None or c["more"] is not None:
                return None
            ret = c["ret"].decode()
        if raw[close - 1] == 0x5C:  # backslash: closed only after an even number of them
            before = close
            while before > start and raw[before - 1] == 0x5C:
                before -= 1
            if (close - before) % 2:
                return None
        local, serverhost, user, host_field, cid_text, qid, db = m.groups()
        cid = int(cid_text)
        if cid > BIGINT_MAX:
            return None
        try:
            when = self.times.record_time(local, None)
        except ValueError:
            return None
        body = raw[start:close]
        text = self.text
        extra = {"query_id": qid.decode(), "serverhost": text(serverhost), "operation": "QUERY"}
        extra["retcode"] = ret
        host, ip, port = self.hosts.get(host_field)
        if port is not None:
            extra["port"] = port
        # Positional, in LogRecord's field order (keywords cost more, on every record).
        return LogRecord(
            line, offset, raw, when, cid, _QUERY, _unescape(body) if b"\\" in body else body,
            text(user) or None, host, ip, text(db) or None, "ok" if ret == "0" else ret, None, extra,
        )  # fmt: skip


class _Header:
    """What a record line's start says, before its object is read."""

    __slots__ = (
        "cid",
        "closed",
        "extra",
        "host",
        "note",
        "op",
        "qid",
        "query",
        "rest",
        "serverhost",
        "time_error",
        "time_text",
        "untimed",
        "user",
        "when",
    )
    # Set by _fields, from the record's own fields (the slots above hold them).
    serverhost: bytes
    user: bytes
    host: bytes
    op: bytes
    cid: int
    qid: bytes
    rest: int  # where the text after the operation starts

    def __init__(self) -> None:
        self.when: datetime | None = None
        self.time_error: str | None = None  # why the time could not be read
        self.time_text: str | None = None
        self.extra: dict[str, str] = {}
        self.query = False  # a QUERY* operation
        self.closed = False  # for a QUERY: its quote closes on this line
        self.untimed = False  # a syslog message without the record's own timestamp
        self.note: str | None = None  # what is wrong in the syslog header (a bogus PRI)


def _header(raw: bytes, times: _Times) -> _Header | None:
    """Read a record line's start, or None when the line starts no record."""
    if raw[0] in _FIRST_BYTE_DIGIT:
        m = _TIMED.match(raw)
        if m is not None:
            return _timed(m, raw, times)
    # A syslog header; an RFC 3339 syslog time starts with a digit too.
    return _syslog_header(raw, times)


def _timed(m: re.Match[bytes], raw: bytes, times: _Times) -> _Header:
    """A record with its own timestamp (quirk 3)."""
    h = _Header()
    local, iso = m["local"], m["iso"]
    try:
        h.when = times.record_time(local, iso)
    except ValueError as e:
        h.time_text, h.time_error = (local or iso).decode(), str(e)
    return _fields(h, m, raw)


def _syslog_header(raw: bytes, times: _Times) -> _Header | None:
    """A record after a syslog header (quirk 7), or None.

    1. "<PRI>", when the line starts with "<": then "<PRI>1 " starts an RFC 5424 header.
    2. Otherwise an RFC 3164 header (BSD or RFC 3339 time): first read as having a host
       name ("time host tag: msg"), then as having none ("time tag: msg"). A tag ends in
       ":" (or "[pid]:"), a host name does not, so a tag is not taken for a host; a host
       with colons (IPv6) is not taken for a tag either, as the host reading comes first
       (server_audit_syslog_info can be any text, so a reading whose "tag" leaves the
       rest of a host name before the record would otherwise be accepted). Each reading
       is one anchored match of bounded fields: linear.
    """
    pos = 0
    pri = None
    if raw[0] == 0x3C:  # "<"
        p = _PRI.match(raw)
        if p is None:
            return None
        pri, pos = p["pri"], p.end()
        m5 = _RFC5424.match(raw, pos)
        if m5 is not None:
            return _rfc5424(raw, m5, pri, times)
    for prefix in (_SYSLOG, _SYSLOG_HOSTLESS):
        s = prefix.match(raw, pos)
        if s is None:
            continue
        h = _message(raw, s.end(), times)
        if h is None:
            continue
        extra = h.extra
        if pri is not None:
            _priority(h, pri)
        if prefix is _SYSLOG:
            extra["syslog_host"] = _text(s["shost"])
        extra["syslog_tag"] = _text(s["tag"])
        if s["pid"] is not None:
            extra["syslog_pid"] = s["pid"].decode()
        _syslog_time(h, times, s["bsd"], s["rfc3339"])
        return h
    return None


def _rfc5424(raw: bytes, m: re.Match[bytes], pri: bytes, times: _Times) -> _Header | None:
    """The record of an RFC 5424 message whose header `m` matched, or None."""
    end = _structured_data_end(raw, m.end())
    if end < 0 or raw[end : end + 1] != b" ":
        return None
    pos = end + 1
    if raw.startswith(_BOM, pos):
        pos += len(_BOM)
    spaces = _SPACES.match(raw, pos)  # it matches everywhere, if only the empty string
    h = _message(raw, spaces.end() if spaces else pos, times)
    if h is None:
        return None
    _priority(h, pri)
    extra = h.extra
    extra["syslog_version"] = m["version"].decode()
    for key, group in (("syslog_host", "shost"), ("syslog_tag", "app"), ("syslog_pid", "procid")):
        if m[group] != b"-":  # NILVALUE
            extra[key] = _text(m[group])
    if m["msgid"] != b"-":
        extra["syslog_msgid"] = _text(m["msgid"])
    if raw[m.end()] != 0x2D:  # "-": no structured data
        extra["syslog_structured_data"] = _text(raw[m.end() : end])
    ts = m["ts"]
    _syslog_time(h, times, None, None if ts == b"-" else ts)
    return h


_SPACES = re.compile(rb"[ ]*")


def _structured_data_end(raw: bytes, pos: int) -> int:
    """Where RFC 5424 structured data from `pos` ends: "-", or "[id k="v" ...]" elements.

    -1 when it is neither, or longer than _MAX_STRUCTURED_DATA. A "]" inside a quoted value
    (escaped as "\\]" or not) does not end its element. One pass over at most that many bytes.
    """
    if raw[pos : pos + 1] == b"-":
        return pos + 1
    end = min(len(raw), pos + _MAX_STRUCTURED_DATA)
    i = pos
    while i < end and raw[i] == 0x5B:  # "[": an element
        i += 1
        quoted = False
        while i < end:
            c = raw[i]
            if quoted:
                if c == 0x5C:  # backslash: the next byte is escaped
                    i += 1
                elif c == 0x22:  # '"'
                    quoted = False
            elif c == 0x22:
                quoted = True
            elif c == 0x5D:  # "]"
                break
            elif c == 0x0A:
                return -1
            i += 1
        else:
            return -1
        i += 1  # past the "]"
    return i if i > pos else -1


def _message(raw: bytes, pos: int, times: _Times) -> _Header | None:
    """The record in a syslog message from `pos`, or None.

    A record that kept the plugin's own timestamp is read with it. One without (what the
    plugin sends) maybe after server_audit_syslog_info: `h.untimed` tells the caller to
    take the syslog header's time.
    """
    m = _TIMED.match(raw, pos)
    if m is not None:
        return _timed(m, raw, times)
    m = _UNTIMED.match(raw, pos)
    info = None
    if m is None:
        info = _SYSLOG_INFO.match(raw, pos)
        if info is None:
            return None
        m = _UNTIMED.match(raw, info.end())
        if m is None:  # pragma: no cover - the lookahead saw it
            return None
    h = _Header()
    h.untimed = True
    if info is not None:
        h.extra["syslog_info"] = _text(info["info"])
    return _fields(h, m, raw)


def _priority(h: _Header, pri: bytes) -> None:
    """The facility and severity of a "<PRI>"; above 191 there are none (a note says so)."""
    h.extra["syslog_pri"] = pri.decode()
    value = int(pri)
    if value <= 191:
        h.extra["syslog_facility"] = _FACILITIES[value >> 3]
        h.extra["syslog_severity"] = _SEVERITIES[value & 7]
    else:
        h.note = f"invalid syslog priority <{pri.decode()}> (at most 191): facility and severity unknown"


def _syslog_time(h: _Header, times: _Times, bsd: bytes | None, rfc3339: bytes | None) -> None:
    """The time of a record that has none of its own: the syslog header's."""
    if not h.untimed:
        return
    try:
        if bsd is not None:
            h.when = times.syslog_time(bsd)
            if h.when is None:
                h.extra["syslog_time"] = bsd.decode()
        elif rfc3339 is not None:
            h.when = datetime.fromisoformat(rfc3339.decode())
        else:  # RFC 5424's nil time: the message was sent without one
            h.extra["syslog_time"] = "-"
    except ValueError as e:
        h.time_text, h.time_error = (bsd or rfc3339 or b"").decode(), str(e)


def _fields(h: _Header, m: re.Match[bytes], raw: bytes) -> _Header:
    h.serverhost, h.user, h.host, cid, qid, h.op = m.group("serverhost", "user", "host", "cid", "qid", "op")
    h.cid, h.qid = int(cid), qid
    h.rest = m.end()
    if h.op.startswith(b"QUERY"):
        h.query = True
        o = _QUERY_OPEN.match(raw, h.rest)
        if o is not None:
            h.closed = _closing_quote(raw, o.end()) >= 0
    return h


def _closing_quote(raw: bytes, start: int) -> int:
    """Where the quote that closes a statement is, from `start` on; -1 if none (quirk 1).

    It is the last quote, followed by the return code and the end of the line, and not
    escaped: an even number of backslashes before it (a statement line of an old plugin
    can end in "\\',0" and go on).
    """
    close = raw.rfind(b"'", start)
    if close < 0 or _QUERY_CLOSE.match(raw, close + 1) is None:
        return -1
    before = close
    while before > start and raw[before - 1] == 0x5C:  # backslash
        before -= 1
    return -1 if (close - before) % 2 else close


class _PendingQuery:
    """A QUERY whose quote has not closed yet, and the lines that continue it (quirk 1)."""

    def __init__(self, offset: int, line: int, raw: bytes, head: _Header) -> None:
        self.offset, self.line, self.head = offset, line, head
        self.parts = [raw]
        self.size = len(raw)
        self.closed = False

    def take(self, raw: bytes) -> bool:
        """Continue the statement with this line, unless that would make it too long."""
        if len(self.parts) > _MAX_CONTINUATION_LINES or self.size + len(raw) > _MAX_RECORD_BYTES:
            return False
        self.parts.append(raw)
        self.size += len(raw)
        close = _closing_quote(raw, 0)
        self.closed = close >= 0
        if self.closed and len(self.parts) == 2 and _QUERY_OPEN.match(self.parts[0], self.head.rest) is None:
            # The quote may have opened on this line (after "db," and a line break).
            joined = b"".join(self.parts)
            o = _QUERY_OPEN.match(joined, self.head.rest)
            self.closed = o is not None and o.end() <= len(self.parts[0]) + close
        return True

    def finish(self, hosts: _Hosts) -> Iterator[Item]:
        raw = self.parts[0] if len(self.parts) == 1 else b"".join(self.parts)
        self.head.closed = self.closed
        return _items(self.offset, self.line, raw, self.head, hosts)


def _items(offset: int, line: int, raw: bytes, h: _Header, hosts: _Hosts) -> Iterator[Item]:
    """The record of a complete line (or lines), and the Problems noting what is wrong in it."""
    op = h.op
    extra = h.extra
    extra["query_id"] = h.qid.decode()
    extra["serverhost"] = _text(h.serverhost)
    extra["operation"] = op.decode()
    notes: list[str] = []
    database = None
    status = None
    if h.query:
        command = _QUERY
        o = _QUERY_OPEN.match(raw, h.rest)
        if h.closed and o is not None:
            close = _closing_quote(raw, o.end())
            c = _QUERY_CLOSE.match(raw, close + 1)
            assert close >= 0 and c is not None  # h.closed says so
            argument = _unescape(raw[o.end() : close])
            ret, more = c.groups()
            extra["retcode"] = ret.decode()
            status = "ok" if ret == b"0" else extra["retcode"]
            if more is not None and more:
                extra["after_retcode"] = _text(more)
        else:
            # Quirk 2: the quote never closes. Keep what there is.
            body = raw[o.end() :] if o is not None else raw[raw.find(b",", h.rest) + 1 :]
            argument = _unescape(_chomp(body))
            extra["unterminated"] = "true"
            notes.append(
                "unterminated quoted statement: the record is kept with the text up to the end"
                " of its last line, and no return code"
            )
        if o is not None:
            database = o["db"]
        else:
            comma = raw.find(b",", h.rest)
            database = raw[h.rest : comma] if comma >= 0 else None
    else:
        r = _PLAIN_REST.match(raw, h.rest)
        renamed = None
        if r is None and op == b"RENAME":
            r4 = _RENAME_4.match(raw, h.rest)
            if r4 is not None:
                database, argument = r4["db"], r4["obj"]
                renamed = r4["newdb"] + b"." + r4["new"]
        elif r is not None:
            database, argument, ret, more = r.group("db", "obj", "ret", "more")
            if ret:
                extra["retcode"] = ret.decode()
                status = "ok" if ret == b"0" else extra["retcode"]
            if more:
                extra["after_retcode"] = _text(more)
            if op == b"RENAME" and b"|" in argument:
                renamed = argument.split(b"|", 1)[1]
        if database is None:
            yield Problem(
                line=line,
                offset=offset,
                raw=raw[:PROBLEM_EXCERPT_BYTES],
                reason=f"server_audit {op.decode()} record whose fields after the operation cannot be read",
            )
            return
        if database and (len(database) > _MAX_DATABASE_BYTES or op == b"CHANGEUSER"):  # quirk 10
            extra["database_field"] = _text(database[:_MAX_DATABASE_BYTES])
            database = b""
        command = _CONNECTION_COMMANDS.get(op) or _TABLE_COMMANDS.get(op) or op.decode()
        if renamed is not None:
            extra["renamed_to"] = _text(renamed)
        if op in _CONNECTION_COMMANDS:
            if argument:
                extra["object"] = _text(argument)
            argument = b""
            if op == b"FAILED_CONNECT":
                status = "denied"
    if h.note is not None:
        notes.insert(0, h.note)
    if h.time_error is not None:
        extra["invalid_time"] = h.time_text or ""  # set together with time_error
        notes.insert(
            0, f"invalid time {h.time_text!r} ({h.time_error}): the record is kept with an unknown time"
        )
    host, ip, port = hosts.get(h.host)
    if port is not None:
        extra["port"] = port
    yield LogRecord(
        line=line,
        offset=offset,
        raw=raw,
        occurred_at=h.when,
        connection_id=h.cid,
        command=command,
        argument=argument,
        user=_text(h.user) or None,
        host=host,
        ip=ip,
        database=_text(database) or None if database is not None else None,
        status=status,
        extra=extra,
    )
    for note in notes:
        yield Problem(line=line, offset=offset, raw=raw[:PROBLEM_EXCERPT_BYTES], reason=note)


def _add_garbage(pending: list[Any], raw: bytes) -> None:
    """Count a line into a run of garbage, keeping a bounded excerpt."""
    if len(pending[2]) < PROBLEM_EXCERPT_BYTES:
        pending[2] += raw[: PROBLEM_EXCERPT_BYTES - len(pending[2])]
    pending[3] += 1
    pending[4] += len(raw)


def _garbage_problem(pending: list[Any]) -> Problem:
    offset, line, excerpt, count, size = pending
    lines_text = f"{count} line{'s' if count > 1 else ''}"
    cut = f" (the first {PROBLEM_EXCERPT_BYTES} kept here)" if size > PROBLEM_EXCERPT_BYTES else ""
    return Problem(
        line=line,
        offset=offset,
        raw=excerpt,
        reason=f"not a server_audit record: {lines_text}, {size} bytes{cut}",
    )


# -- detection ---------------------------------------------------------------------------

# The operations the plugin writes (MariaDB and MariaDB Enterprise).
_KNOWN_OPERATION = re.compile(
    rb"CONNECT|FAILED_CONNECT|DISCONNECT|CHANGEUSER|QUERY(?:_[A-Z_]+)?|AUDIT_CONFIG|"
    + b"|".join(_TABLE_OPERATIONS)
)


def recognise(head: bytes) -> bool:
    """Whether the first KiB of a file is a server_audit log (file or syslog output).

    True when a line in it starts a record whose operation is one the plugin writes.
    General query logs (tab-separated, six-digit dates), JSON, XML and CSV audit logs
    have no line of that shape.
    """
    times = _Times(None)
    for raw in head[:1024].split(b"\n"):
        if not raw:
            continue
        h = _header(raw, times)
        if h is not None and _KNOWN_OPERATION.fullmatch(h.op):
            return True
    return False


def time_digits(head: bytes) -> int | None:
    """Digits after the seconds of a record's time (`20260105 08:48:22`, an ISO time with its
    fraction, or a syslog header's time), looked for near the line's start."""
    return fraction(CLOCK.search(head, 0, 80))
