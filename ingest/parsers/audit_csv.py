"""Percona audit_log plugin, `audit_log_format=CSV`. Pure: no Django. Bytes lines in, records out.

One record a line, quoted CSV, its fields fixed by the record's NAME (Percona's
audit_log.c writes each kind with its own list):

    Query, Execute, ...  NAME,RECORD,TIMESTAMP,COMMAND_CLASS,CONNECTION_ID,STATUS,SQLTEXT,USER,
                         HOST,OS_USER,IP[,DB]
    Connect, Quit, ...   NAME,RECORD,TIMESTAMP,CONNECTION_ID,STATUS,USER,PRIV_USER,OS_LOGIN,
                         PROXY_USER,HOST,IP[,DB]
    Audit                NAME,RECORD,TIMESTAMP,MYSQL_VERSION,STARTUP_OPTIONS,OS_VERSION
    NoAudit              NAME,RECORD,TIMESTAMP

    "Query","22567_2021-06-30T16:10:09","2021-06-30T16:19:00 UTC","select","2",0,
    "select count(*) from one","root[root] @ localhost []","localhost","","",""

The server escapes quotes, backslashes and newlines inside values with a backslash, so a
record never spans lines; both `\\"` and a doubled `""` are read as a quote. USER is
`priv_user[user] @ host [ip]` on statements. A line that is not such a record (too few
fields, an unterminated quote, a documentation sample wrapped by hand) becomes a Problem.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Iterator

from ingest.parsers.audit_fields import outcome, parse_time, parse_user_host, to_int
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

__all__ = ["LABEL", "NAME", "parse", "recognise", "time_digits"]

NAME = "audit-csv"
LABEL = "Percona audit_log CSV"

_STATEMENT = ("NAME", "RECORD", "TIMESTAMP", "COMMAND_CLASS", "CONNECTION_ID", "STATUS", "SQLTEXT",
              "USER", "HOST", "OS_USER", "IP", "DB")  # fmt: skip
_CONNECTION = ("NAME", "RECORD", "TIMESTAMP", "CONNECTION_ID", "STATUS", "USER", "PRIV_USER",
               "OS_LOGIN", "PROXY_USER", "HOST", "IP", "DB")  # fmt: skip
_AUDIT = ("NAME", "RECORD", "TIMESTAMP", "MYSQL_VERSION", "STARTUP_OPTIONS", "OS_VERSION")
_CONNECTION_NAMES = {"Connect", "Quit", "Change user"}
_MIN_FIELDS = 3


def recognise(head: bytes) -> bool:
    """A Percona CSV audit log: its first line is a quoted record whose third field is a timestamp."""
    first = head.lstrip().split(b"\n", 1)[0]
    if not first.startswith(b'"'):
        return False
    fields = _split(first)
    return fields is not None and len(fields) >= _MIN_FIELDS and parse_time(fields[2]) is not None


class _OneLine:
    """The input of one long-lived csv.reader: each line given to `split`, once. (A reader
    made per line costs more than reading the line.)"""

    def __init__(self) -> None:
        self.text: str | None = None
        self.reader = csv.reader(self, escapechar="\\", doublequote=True, strict=True)

    def __iter__(self) -> _OneLine:
        return self

    def __next__(self) -> str:
        text, self.text = self.text, None
        if text is None:  # the reader asks for more: the quote it is in never ends
            raise StopIteration
        return text

    def split(self, text: str) -> list[str] | None:
        self.text = text
        try:
            return next(self.reader)
        except (csv.Error, StopIteration):
            return None
        finally:
            self.text = None


def _split(line: bytes, reader: _OneLine | None = None) -> list[str] | None:
    text = line.decode("utf-8", "replace").rstrip("\r\n").strip()
    if not text or (text.count('"') % 2 and '\\"' not in text):
        return None
    return (reader or _OneLine()).split(text)


def _record(fields: list[str], raw: bytes, offset: int, line: int) -> Item:
    name = fields[0].strip()
    layout = _CONNECTION if name in _CONNECTION_NAMES else _AUDIT if name == "Audit" else _STATEMENT
    if name not in ("Audit", "NoAudit") and len(fields) < len(layout) - 1:
        reason = f"{name!r} record with {len(fields)} fields, {len(layout) - 1} or more expected"
        return Problem(line, offset, raw[:PROBLEM_EXCERPT_BYTES], reason)
    v = dict(zip(layout, fields, strict=False))
    extra = {key.lower(): value for key, value in v.items() if value and key not in _USED}
    extra["layout"] = "percona-csv"
    user_field = v.get("USER", "").strip()
    split = parse_user_host(user_field)
    if any(split):
        user, host, ip = split.user or split.account, split.host, split.ip
        if split.account:
            extra["account"] = split.account
    else:
        user, host, ip = user_field or None, None, None
    when = parse_time(v["TIMESTAMP"]) if v.get("TIMESTAMP") else None
    if v.get("TIMESTAMP") and when is None:
        extra["invalid_time"] = v["TIMESTAMP"]
    return LogRecord(
        line=line,
        offset=offset,
        raw=raw,
        occurred_at=when,
        connection_id=to_int(v.get("CONNECTION_ID")),
        command=name or "Unknown",
        argument=v.get("SQLTEXT", "").encode("utf-8", "surrogateescape"),
        user=user,
        host=v.get("HOST", "").strip() or host,
        ip=v.get("IP", "").strip() or ip,
        database=v.get("DB", "").strip() or None,
        status=outcome(v.get("STATUS")),
        extra=extra,
    )


_USED = {"NAME", "TIMESTAMP", "CONNECTION_ID", "STATUS", "SQLTEXT", "USER", "HOST", "IP", "DB"}


def parse(
    lines: Iterable[bytes], *, start_offset: int = 0, start_line: int = 1, hints: Hints = NO_HINTS
) -> Iterator[Item]:
    """See `_parse_audit_csv`; integers a bigint cannot hold become problems of their record."""
    return checked_integers(_parse_audit_csv(lines, start_offset=start_offset, start_line=start_line))


def _parse_audit_csv(lines: Iterable[bytes], *, start_offset: int = 0, start_line: int = 1) -> Iterator[Item]:
    """Every record and problem of a Percona CSV audit log, in order. See the module docstring."""
    offset, number = start_offset, start_line
    reader = _OneLine()
    for raw in lines:
        body = raw.strip()
        if body:
            lead = len(raw) - len(raw.lstrip())
            fields = _split(raw, reader)
            if fields is None or len(fields) < _MIN_FIELDS:
                yield Problem(number, offset, raw[:PROBLEM_EXCERPT_BYTES], "not a CSV audit record")
            else:
                yield _record(fields, raw[lead:].rstrip(b"\r\n"), offset + lead, number)
        offset += len(raw)
        number += 1


def time_digits(head: bytes) -> int | None:
    """Digits after the seconds of the record's TIMESTAMP, the first time of day on its line."""
    return fraction(CLOCK.search(head, 0, 200))
