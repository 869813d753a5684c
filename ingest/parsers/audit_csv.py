"""Percona audit_log plugin, `audit_log_format=CSV`. Pure: no Django. Bytes lines in, records out.

The server doubles a quote and escapes nothing else, so a record goes on over lines while a
quoted value is open; each record is read on its own, so a read from any record's offset yields
the same records after it. Layouts: docs/formats.md, 'audit_csv'; the quoting and why:
docs/architecture.md, "Percona's CSV over several lines".
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable, Iterator

from ingest.parsers.audit_fields import login_status, outcome, parse_time, parse_user_host, to_int
from ingest.parsers.digits import CLOCK, fraction
from ingest.parsers.records import (
    NO_HINTS,
    PROBLEM_EXCERPT_BYTES,
    Hints,
    Item,
    LogRecord,
    Problem,
    checked_integers,
)

__all__ = ["LABEL", "MAX_RECORD_BYTES", "NAME", "parse", "recognise", "time_digits"]

NAME = "audit-csv"
LABEL = "Percona audit_log CSV"
# How far a record whose quote stays open is followed before it becomes a Problem (and the
# lines up to the next record are skipped): the JSON and XML readers' cap, so that a damaged
# or hostile file cannot hold the rest of itself in memory as one record.
MAX_RECORD_BYTES = 16 << 20

_STATEMENT = ("NAME", "RECORD", "TIMESTAMP", "COMMAND_CLASS", "CONNECTION_ID", "STATUS", "SQLTEXT",
              "USER", "HOST", "OS_USER", "IP", "DB")  # fmt: skip
_CONNECTION = ("NAME", "RECORD", "TIMESTAMP", "CONNECTION_ID", "STATUS", "USER", "PRIV_USER",
               "OS_LOGIN", "PROXY_USER", "HOST", "IP", "DB")  # fmt: skip
_AUDIT = ("NAME", "RECORD", "TIMESTAMP", "MYSQL_VERSION", "STARTUP_OPTIONS", "OS_VERSION")
_CONNECTION_NAMES = {"Connect", "Quit", "Change user"}
_ANY_LENGTH = {"Audit", "NoAudit"}
_MIN_FIELDS = 3
_SERVER_MADE = 3  # NAME, RECORD and TIMESTAMP are the server's own text: never a newline in them

# A line that begins a record. Inside an open quoted value no such line can follow, whichever
# way the file quotes: its first quote would end the value and be followed by a letter, not a
# comma. So it ends a record left open before it (cut short by a crash, or damaged).
_RECORD_START = re.compile(
    rb"""[ \t]*
    "[A-Za-z][A-Za-z _]{0,39}",                    # NAME: Query, Connect, Change user, NoAudit...
    "[^"\r\n]{0,80}",                              # RECORD: <n>_<when the log was opened>
    "\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d                # TIMESTAMP
    """,
    re.VERBOSE,
)

# Where a reading of a record stands after the bytes handed to it.
_START, _QUOTED, _DONE, _FAILED = range(4)
_TRAILING = b" \t\r\n"  # what may follow a record's last value on its line
_BACKSLASH = 0x5C


class _Reading:
    """A record's bytes read as CSV line after line, with one convention for a quote inside a
    value: doubled (`""`, what the server writes) or after a backslash (`\\"`, the 2014 patch).
    Linear: each step finds the next quote or comma."""

    __slots__ = ("backslash", "fields", "piece", "state")

    def __init__(self, backslash: bool) -> None:
        self.backslash = backslash
        self.fields: list[bytes] = []
        self.piece = bytearray()  # the quoted value being read, which may go on over lines
        self.state = _START

    def feed(self, line: bytes) -> None:
        """Read on through `line` (the first from its first quote, then each next line whole)."""
        if self.state != _START and self.state != _QUOTED:
            self.state = _FAILED  # bytes after the record's end, or after a failure
            return
        i = 0
        fields, piece = self.fields, self.piece
        while True:
            if self.state == _QUOTED:
                j = line.find(b'"', i)
                if j < 0:  # the value goes on over the line's end
                    if len(fields) < _SERVER_MADE:
                        self.state = _FAILED
                    else:
                        piece += line[i:]
                    return
                if self.backslash and j > i and line[j - 1] == _BACKSLASH:
                    piece += line[i : j - 1]
                    piece += b'"'
                    i = j + 1
                    continue
                piece += line[i:j]
                if not self.backslash and line[j + 1 : j + 2] == b'"':
                    piece += b'"'
                    i = j + 2
                    continue
                fields.append(bytes(piece))
                piece.clear()
                i = j + 1
                if line[i : i + 1] == b",":
                    i += 1
                    self.state = _START
                    continue
                self.state = _DONE if not line[i:].strip(_TRAILING) else _FAILED
                return
            if line[i : i + 1] == b'"':
                self.state = _QUOTED
                i += 1
                continue
            # A bare value (STATUS, some versions' CONNECTION_ID): to the comma, a quote in it
            # taken as it stands (as the csv module does, which reads one-line records).
            j = line.find(b",", i)
            fields.append(line[i:j] if j >= 0 else line[i:].rstrip(_TRAILING))
            if j < 0:
                self.state = _DONE
                return
            i = j + 1

    def fits(self) -> bool:
        """Whether the values read are a whole record of its NAME's layout."""
        return self.state == _DONE and bool(self.fields) and _fits(_text(self.fields[0]), len(self.fields))


def _fits(name: str, count: int) -> bool:
    name = name.strip()
    return count >= _MIN_FIELDS and (name in _ANY_LENGTH or count >= len(_layout(name)) - 1)


def _layout(name: str) -> tuple[str, ...]:
    return _CONNECTION if name in _CONNECTION_NAMES else _AUDIT if name == "Audit" else _STATEMENT


class _OneLine:
    """The input of one long-lived csv.reader: each line given to `split`, once. (A reader
    made per line costs more than reading the line.)"""

    def __init__(self) -> None:
        self.text: str | None = None
        self.reader = csv.reader(self, doublequote=True, strict=True)

    def __iter__(self) -> _OneLine:
        return self

    def __next__(self) -> str:
        text, self.text = self.text, None
        if text is None:  # the reader asks for more: a quote left open
            raise StopIteration
        return text

    def split(self, line: bytes) -> list[str] | None:
        """The values of a whole one-line record read the server's way, in C: what the doubled
        reading would find, or None when it needs the careful one (a quote left open, any
        other quoting, bytes that are no UTF-8, a value over the csv module's 128 KiB)."""
        try:
            self.text = line.decode("utf-8").rstrip(" \t\r\n")
            return next(self.reader)
        except (csv.Error, StopIteration, UnicodeDecodeError):
            return None
        finally:
            self.text = None


def recognise(head: bytes) -> bool:
    """A Percona CSV audit log: its first line is a quoted record whose third field is a timestamp."""
    first = head.lstrip().split(b"\n", 1)[0]
    if not first.startswith(b'"'):
        return False
    reading = _Reading(backslash=False)
    reading.feed(first)  # the line may go on (a statement over lines) or be cut at the head's end
    fields = reading.fields
    return len(fields) >= _MIN_FIELDS and parse_time(fields[2].decode("utf-8", "replace")) is not None


def _text(value: bytes) -> str:
    return value.decode("utf-8", "replace")


def _record(values: list[str], sql: bytes, backslash: bool, raw: bytes, offset: int, line: int) -> Item:
    """The record of these values (SQLTEXT given apart, as bytes: `sql`)."""
    name = values[0].strip()
    layout = _layout(name)
    if not _fits(name, len(values)):
        reason = f"{name!r} record with {len(values)} fields, {len(layout) - 1} or more expected"
        return Problem(line, offset, raw[:PROBLEM_EXCERPT_BYTES], reason)
    v = dict(zip(layout, values, strict=False))
    extra = {key.lower(): value for key, value in v.items() if value and key not in _USED}
    extra["layout"] = "percona-csv"
    if backslash:
        extra["quoting"] = "backslash"
    user_field = v.get("USER", "").strip()
    split = parse_user_host(user_field)
    if any(split):
        user, host, ip = split.user or split.account, split.host, split.ip
        if split.account:
            extra["account"] = split.account
    else:
        user, host, ip = user_field or None, None, None
    get = v.get
    stamp = get("TIMESTAMP")
    when = parse_time(stamp) if stamp else None
    if stamp and when is None:
        extra["invalid_time"] = stamp
    command = name or "Unknown"
    status = get("STATUS")
    status = "ok" if status == "0" else outcome(status)  # (nearly every record: "0")
    if command == "Connect":
        status = login_status(command, status, extra)  # a refused login: its code in extra
    connection_id = get("CONNECTION_ID")
    if connection_id is not None:
        try:
            connection_id = int(connection_id)  # (nearly every record: digits alone)
        except ValueError:
            connection_id = to_int(connection_id)
    # Positional, in LogRecord's field order (keywords cost more, on every record).
    return LogRecord(
        line, offset, raw, when, connection_id, command,
        sql if layout is _STATEMENT else b"",  # as written (the server's utf8mb4)
        user, get("HOST", "").strip() or host, get("IP", "").strip() or ip, get("DB", "").strip() or None,
        status, None, extra,
    )  # fmt: skip


_USED = {"NAME", "TIMESTAMP", "CONNECTION_ID", "STATUS", "SQLTEXT", "USER", "HOST", "IP", "DB"}


class _Open:
    """A record the csv module could not read on its one line, read over as many as it takes:
    where it starts, its bytes, and its readings (the backslash one from the first line on,
    when the server's own does not hold the record there)."""

    __slots__ = ("backslash", "doubled", "head", "lead", "line", "more", "offset", "size")

    def __init__(self, raw: bytes, stripped: bytes, offset: int, line: int) -> None:
        self.head, self.more, self.size = raw, bytearray(), len(raw)
        self.offset, self.line, self.lead = offset, line, len(raw) - len(stripped)
        self.doubled = _Reading(backslash=False)
        self.doubled.feed(stripped)
        self.backslash: _Reading | None = None
        if not self.doubled.fits():  # the server's quoting does not end the record on its line
            self.backslash = _Reading(backslash=True)
            self.backslash.feed(stripped)

    def add(self, raw: bytes) -> None:
        """The next line of the record (a quoted value was open at the end of the last one)."""
        self.more += raw
        self.size += len(raw)
        for reading in (self.doubled, self.backslash):
            if reading is not None and reading.state != _FAILED:
                reading.feed(raw)  # (a reading that had ended fails: the record goes on past it)

    def reading(self) -> _Reading | None:
        """The reading that holds the whole record, None while one of them is still open."""
        if self.doubled.fits():
            return self.doubled
        if self.doubled.state == _QUOTED:
            return None
        if self.backslash is not None:
            if self.backslash.fits():
                return self.backslash
            if self.backslash.state == _QUOTED:
                return None
        return self.doubled  # neither reads it: the Problem says what the server's reading found

    def is_open(self) -> bool:
        return self.reading() is None

    def raw(self) -> bytes:
        data = self.head[self.lead :] + bytes(self.more) if self.more else self.head[self.lead :]
        return data.rstrip(b"\r\n")

    def excerpt(self) -> bytes:
        head = self.head[:PROBLEM_EXCERPT_BYTES]
        return (head + bytes(self.more[: PROBLEM_EXCERPT_BYTES - len(head)]))[:PROBLEM_EXCERPT_BYTES]

    def item(self) -> Item:
        reading = self.reading()
        assert reading is not None  # (called once it is closed)
        fields = reading.fields
        if reading.state == _FAILED or len(fields) < _MIN_FIELDS:
            return Problem(self.line, self.offset, self.excerpt(), "not a CSV audit record")
        sql = fields[6] if len(fields) > 6 else b""
        values = [_text(value) for value in fields]
        return _record(values, sql, reading.backslash, self.raw(), self.offset + self.lead, self.line)

    def problem(self, why: str) -> Problem:
        return Problem(self.line, self.offset, self.excerpt(), why)


def parse(
    lines: Iterable[bytes], *, start_offset: int = 0, start_line: int = 1, hints: Hints = NO_HINTS
) -> Iterator[Item]:
    """See `_parse_audit_csv`; integers a bigint cannot hold become problems of their record."""
    return checked_integers(_parse_audit_csv(lines, start_offset=start_offset, start_line=start_line))


def _parse_audit_csv(lines: Iterable[bytes], *, start_offset: int = 0, start_line: int = 1) -> Iterator[Item]:
    """Every record and problem of a Percona CSV audit log, in order.

    1. A line whose first byte after white space is a quote begins a record; any other line
       that is not blank is a Problem of its own.
    2. While a quoted value of the record is open at a line's end, the next line goes on with
       it, unless that line begins a record: the open one is then a Problem, and so it is at
       MAX_RECORD_BYTES (the lines up to the next record are then skipped) and at the end.
    """
    offset, number = start_offset, start_line
    one_line = _OneLine()
    record: _Open | None = None
    skipping = False  # after a record too long to follow: until a line begins a record
    for raw in lines:
        here, line = offset, number
        offset += len(raw)
        number += 1
        if record is not None:
            if not _RECORD_START.match(raw):
                record.add(raw)
                if not record.is_open():
                    yield record.item()
                    record = None
                elif record.size > MAX_RECORD_BYTES:
                    yield record.problem(_TOO_LONG)
                    record, skipping = None, True
                continue
            yield record.problem(f"a quoted value of this record never closes: line {line} begins a record")
            record = None
        elif skipping:
            if not _RECORD_START.match(raw):
                continue
            skipping = False
        stripped = raw.lstrip()
        if not stripped:
            continue
        if stripped[:1] != b'"':
            yield Problem(line, here, raw[:PROBLEM_EXCERPT_BYTES], "not a CSV audit record")
            continue
        values = one_line.split(stripped)
        if values is not None and _fits(values[0], len(values)):  # most records: one line, in C
            sql = values[6].encode("utf-8") if len(values) > 6 else b""  # (the line was UTF-8)
            lead = len(raw) - len(stripped)
            yield _record(values, sql, False, raw[lead:].rstrip(b"\r\n"), here + lead, line)
            continue
        record = _Open(raw, stripped, here, line)
        if not record.is_open():
            yield record.item()
            record = None
        elif record.size > MAX_RECORD_BYTES:
            yield record.problem(_TOO_LONG)
            record, skipping = None, True
    if record is not None:
        yield record.problem("the input ends inside a quoted value of this record")


_TOO_LONG = (
    f"a quoted value of this record is still open after {MAX_RECORD_BYTES} bytes:"
    " the lines up to the next one that begins a record are skipped"
)


def time_digits(head: bytes) -> int | None:
    """Digits after the seconds of the record's TIMESTAMP, the first time of day on its line."""
    return fraction(CLOCK.search(head, 0, 200))
