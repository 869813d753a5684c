"""JSON audit logs: McAfee/Trellix audit plugin, Percona audit_log, MySQL Enterprise Audit and
the MySQL 8 / Percona 8 audit_log_filter. Pure: no Django. Bytes lines in, records out.

The layouts, told apart by their keys (one file may be read without knowing which):

    McAfee/Trellix   one object a line: {"msg-type":"activity","date":"1516567908029",
                     "thread-id":"26","user":"root","priv_user":"root","host":"localhost",
                     "ip":"","cmd":"select","query":"select 1","rows":"1","status":"0",
                     "objects":[{"db":"shop","name":"orders","obj_type":"TABLE"}]}
    Percona          one object a line: {"audit_record":{"name":"Query","timestamp":
                     "2021-06-30T15:07:58 UTC","connection_id":"2","status":0,
                     "sqltext":"...","user":"root[root] @ localhost []","host":...,"db":...}}
    MySQL Enterprise a JSON array of pretty-printed objects over many lines (audit_log_format
    and audit_log_filter  =JSON), or one object a line ending in "," (newer servers):
                     {"timestamp":"2019-10-03 14:23:35","id":2,"class":"general",
                      "event":"status","connection_id":5,"account":{"user":"root",
                      "host":"localhost"},"login":{"user":"root","os":"","ip":"::1"},
                      "general_data":{"command":"Query","query":"SHOW VARIABLES","status":0}}

How it is read:

1. A scanner splits the byte stream into top-level objects without reading the file
   whole: it follows strings, escapes and nesting, so an object may span any number of
   lines and a line may hold several. A line that is one whole object takes a fast path
   (json.loads of the line). Each object keeps its exact raw bytes, offset and first line.
2. Between objects only white space, `[`, `]` and `,` may stand (the array envelope);
   anything else becomes a Problem with its position. So does an object that is not
   valid JSON (e.g. documentation samples hard-wrapped inside strings), one nested deeper
   than json can read, one longer than MAX_OBJECT_BYTES (skipped to its end), and one
   unfinished at the end of the file.
3. Records map to the general log's vocabulary. Connect / Quit / Change user for
   connection events (a refused login keeps its error code as status); Query for a
   statement: McAfee records with a `query`, Percona `Query`, Enterprise `general`
   events `status` (written after the statement, with its outcome; the `log` event
   written before it becomes `Query log`, and audit_log_filter's `query_start` /
   `query_status_end` keep their names, so that each statement counts once). Table
   access events become `Table READ`, `Table INSERT`, ... naming the table. Other events
   (startup, shutdown, audit, command_start...) keep their own names.
4. Times: McAfee's `date` is milliseconds since the epoch; Percona's names UTC; MySQL
   Enterprise and audit_log_filter write UTC without saying so (their documentation).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

from ingest.parsers.audit_fields import outcome, parse_time, parse_user_host, to_int
from ingest.parsers.records import PROBLEM_EXCERPT_BYTES, Item, LogRecord, Problem

__all__ = ["FORMAT", "MAX_OBJECT_BYTES", "parse_json_audit", "recognise"]

FORMAT = "json-audit"
MAX_OBJECT_BYTES = 16 << 20

# The bytes the scanner stops at: quotes and backslashes (strings), and nesting.
_STRUCTURE = re.compile(rb'["\\{}\[\]]')
_ENVELOPE = frozenset(b" \t\r\n[],")
_KNOWN_KEYS = re.compile(rb'"(?:msg-type|audit_record|connection_id|class|thread-id)"\s*:')


def recognise(head: bytes) -> bool:
    """A JSON audit log: it starts with `{` or `[` and names a key one of the layouts writes."""
    start = head.lstrip()[:1]
    return start in (b"{", b"[") and _KNOWN_KEYS.search(head[:1024]) is not None


class _Scanner:
    def __init__(self, start_offset: int, start_line: int) -> None:
        self.offset = start_offset
        self.line = start_line
        self.depth = 0  # nesting inside the current object (0: between objects)
        self.in_string = False
        self.buffer: bytearray | None = None  # the current object's bytes (None while skipping one)
        self.start = (0, 0)  # its (offset, line)
        self.garbage = bytearray()
        self.garbage_at = (0, 0)
        self.garbage_size = 0

    def feed(self, lines: Iterable[bytes]) -> Iterator[Item]:
        for data in lines:
            if self.depth == 0 and not self.garbage:
                stripped = data.strip().rstrip(b",")
                if stripped[:1] == b"{" and stripped[-1:] == b"}":
                    # Fast path: the line is one object (json.loads checks that it is exactly one).
                    lead = len(data) - len(data.lstrip())
                    try:
                        value = json.loads(stripped)
                    except (ValueError, RecursionError):
                        value = None
                    if isinstance(value, dict):
                        raw = data[lead : lead + len(stripped)]
                        yield _record(value, raw, self.offset + lead, self.line)
                        self._advance(data)
                        continue
            yield from self._scan(data)
            self._advance(data)

    def finish(self) -> Iterator[Item]:
        yield from self._flush_garbage()
        if self.depth:
            offset, line = self.start
            excerpt = bytes(self.buffer[:PROBLEM_EXCERPT_BYTES]) if self.buffer is not None else b""
            yield Problem(line, offset, excerpt, "unfinished JSON object at the end")
            self.depth = 0

    def _advance(self, data: bytes) -> None:
        self.offset += len(data)
        self.line += 1

    def _scan(self, data: bytes) -> Iterator[Item]:
        pos = 0
        n = len(data)
        while pos < n:
            if self.depth == 0:
                start = data.find(b"{", pos)
                self._between(data[pos : start if start >= 0 else n], pos)
                if start < 0:
                    return
                yield from self._flush_garbage()
                self.depth, self.in_string = 1, False
                self.buffer = bytearray(b"{")
                self.start = (self.offset + start, self.line)
                pos = start + 1
                continue
            end = self._object_end(data, pos)
            piece = data[pos : end if end >= 0 else n]
            if self.buffer is not None:
                self.buffer += piece
                if len(self.buffer) > MAX_OBJECT_BYTES:
                    offset, line = self.start
                    excerpt = bytes(self.buffer[:PROBLEM_EXCERPT_BYTES])
                    self.buffer = None  # skip the rest of it
                    yield Problem(line, offset, excerpt, f"JSON object longer than {MAX_OBJECT_BYTES} bytes")
            if end < 0:
                if self.in_string and data.endswith(b"\n"):
                    # JSON strings hold no raw newline: the object is broken (cut short, or
                    # wrapped by hand). Report it and start afresh on the next line, so that
                    # one bad record never swallows the good ones after it.
                    offset, line = self.start
                    excerpt = bytes(self.buffer[:PROBLEM_EXCERPT_BYTES]) if self.buffer is not None else b""
                    self.depth, self.in_string, self.buffer = 0, False, None
                    yield Problem(
                        line, offset, excerpt, "not valid JSON: a string runs past the end of its line"
                    )
                return
            if self.buffer is not None:
                raw, (offset, line) = bytes(self.buffer), self.start
                yield _parse_object(raw, offset, line)
            self.buffer = None
            pos = end

    def _object_end(self, data: bytes, pos: int) -> int:
        """Follow strings and nesting from data[pos:]; the index after the object's last `}`, or -1.

        A backslash in a string escapes the byte after it; lines end in a newline, so an
        escape never reaches into the next line.
        """
        skip_to = pos
        for m in _STRUCTURE.finditer(data, pos):
            at = m.start()
            if at < skip_to:
                continue
            c = data[at]
            if self.in_string:
                if c == 0x5C:  # backslash
                    skip_to = at + 2
                elif c == 0x22:  # "
                    self.in_string = False
            elif c == 0x22:
                self.in_string = True
            elif c in (0x7B, 0x5B):  # { [
                self.depth += 1
            elif c in (0x7D, 0x5D):  # } ]
                self.depth -= 1
                if self.depth == 0:
                    return at + 1
        return -1

    def _between(self, data: bytes, pos: int) -> None:
        if not data or (not self.garbage and all(b in _ENVELOPE for b in data)):
            return
        if not self.garbage:
            self.garbage_at = (self.offset + pos, self.line)
        self.garbage_size += len(data)
        if len(self.garbage) < PROBLEM_EXCERPT_BYTES:
            self.garbage += data[: PROBLEM_EXCERPT_BYTES - len(self.garbage)]

    def _flush_garbage(self) -> Iterator[Item]:
        if self.garbage and any(b not in _ENVELOPE for b in self.garbage):
            offset, line = self.garbage_at
            yield Problem(line, offset, bytes(self.garbage), f"not a JSON object: {self.garbage_size} bytes")
        self.garbage = bytearray()
        self.garbage_size = 0


def _parse_object(raw: bytes, offset: int, line: int) -> Item:
    try:
        value = json.loads(raw)
    except RecursionError:
        return Problem(line, offset, raw[:PROBLEM_EXCERPT_BYTES], "JSON nested too deeply to read")
    except ValueError as error:
        return Problem(line, offset, raw[:PROBLEM_EXCERPT_BYTES], f"not valid JSON: {error}")
    if not isinstance(value, dict):
        return Problem(line, offset, raw[:PROBLEM_EXCERPT_BYTES], "not a JSON object")
    return _record(value, raw, offset, line)


# -- the layouts -----------------------------------------------------------------------------------


def _text(value: Any) -> str | None:
    """A field as text: None for missing, empty or structured values."""
    if value is None or isinstance(value, dict | list):
        return None
    text = str(value).strip()
    return text or None


def _sql(value: Any) -> bytes:
    return value.encode("utf-8", "surrogatepass") if isinstance(value, str) else b""


def _record(value: dict[str, Any], raw: bytes, offset: int, line: int) -> Item:
    if "msg-type" in value:
        return _mcafee(value, raw, offset, line)
    if isinstance(value.get("audit_record"), dict):
        return _percona(value["audit_record"], raw, offset, line)
    if "class" in value or "event" in value:
        return _enterprise(value, raw, offset, line)
    return Problem(line, offset, raw[:PROBLEM_EXCERPT_BYTES], "a JSON object of no known audit layout")


def _who(user_field: str | None, host: str | None, ip: str | None) -> tuple[str | None, ...]:
    """(user, account, host, ip) from a user field that may be `priv[user] @ host [ip]`."""
    split = parse_user_host(user_field or "")
    if not any(split):
        return user_field, None, host, ip
    return split.user or split.account, split.account, host or split.host, ip or split.ip


def _mcafee(v: dict[str, Any], raw: bytes, offset: int, line: int) -> LogRecord:
    cmd = _text(v.get("cmd")) or _text(v.get("msg-type")) or "Unknown"
    status = outcome(_text(v.get("status")))
    if cmd == "Failed Login":
        command, status = "Connect", status if status not in (None, "ok") else "denied"
    elif cmd in ("Connect", "Quit", "Change user"):
        command = cmd
    elif "query" in v:
        command = "Query"
    else:
        command = cmd
    when = None
    millis = to_int(_text(v.get("date")))
    if millis is not None:
        try:
            when = datetime.fromtimestamp(millis / 1000, UTC)
        except (OverflowError, OSError, ValueError):
            when = None
    objects = v.get("objects") if isinstance(v.get("objects"), list) else []
    names = [
        ".".join(p for p in (_text(o.get("db")), _text(o.get("name"))) if p)
        for o in objects
        if isinstance(o, dict)
    ]
    extra = {"layout": "mcafee", "cmd": cmd}
    for key in ("query-id", "priv_user", "os_user", "appname", "pid", "msg-type"):
        if _text(v.get(key)):
            extra[key.replace("-", "_")] = _text(v.get(key))  # type: ignore[assignment]
    if names:
        extra["objects"] = ",".join(n for n in names if n)
    attrs = v.get("connect_attrs")
    if isinstance(attrs, dict) and _text(attrs.get("program_name")):
        extra["program_name"] = _text(attrs.get("program_name"))  # type: ignore[assignment]
    return LogRecord(
        line=line,
        offset=offset,
        raw=raw,
        occurred_at=when,
        connection_id=to_int(_text(v.get("thread-id"))),
        command=command,
        argument=_sql(v.get("query")),
        user=_text(v.get("user")),
        host=_text(v.get("host")),
        ip=_text(v.get("ip")),
        database=_text(v.get("db")),
        status=status,
        rows_affected=to_int(_text(v.get("rows"))),
        extra=extra,
    )


def _percona(r: dict[str, Any], raw: bytes, offset: int, line: int) -> LogRecord:
    name = _text(r.get("name")) or "Unknown"
    user, account, host, ip = _who(_text(r.get("user")), _text(r.get("host")), _text(r.get("ip")))
    extra = {"layout": "percona", "name": name}
    for key in ("record", "command_class", "os_user", "os_login", "priv_user", "proxy_user"):
        if _text(r.get(key)):
            extra[key] = _text(r.get(key))  # type: ignore[assignment]
    if account:
        extra["account"] = account
    stamp = _text(r.get("timestamp"))
    when = parse_time(stamp) if stamp else None
    if stamp and when is None:
        extra["invalid_time"] = stamp
    return LogRecord(
        line=line,
        offset=offset,
        raw=raw,
        occurred_at=when,
        connection_id=to_int(_text(r.get("connection_id"))),
        command=name,
        argument=_sql(r.get("sqltext")),
        user=user or _text(r.get("priv_user")),
        host=host,
        ip=ip,
        database=_text(r.get("db")),
        status=outcome(_text(r.get("status"))),
        extra=extra,
    )


_CONNECTION_EVENTS = {"connect": "Connect", "disconnect": "Quit", "change_user": "Change user"}


def _enterprise(v: dict[str, Any], raw: bytes, offset: int, line: int) -> LogRecord:
    cls, event = _text(v.get("class")) or "", _text(v.get("event")) or ""
    account = v.get("account") if isinstance(v.get("account"), dict) else {}
    login = v.get("login") if isinstance(v.get("login"), dict) else {}
    extra = {"layout": "mysql-enterprise", "class": cls, "event": event}
    status: str | None = None
    sql = b""
    database = None
    command = event or cls or "Unknown"
    rows = None
    if cls == "connection":
        data = v.get("connection_data") if isinstance(v.get("connection_data"), dict) else {}
        command = _CONNECTION_EVENTS.get(event, event)
        status = outcome(_text(data.get("status")))
        database = _text(data.get("db"))
        if _text(data.get("connection_type")):
            extra["connection_type"] = _text(data.get("connection_type"))  # type: ignore[assignment]
        attrs = data.get("connection_attributes")
        if isinstance(attrs, dict):
            for key in ("program_name", "os_user", "_os", "_client_name"):
                if _text(attrs.get(key)):
                    extra[key.lstrip("_")] = _text(attrs.get(key))  # type: ignore[assignment]
    elif cls == "general":
        data = v.get("general_data") if isinstance(v.get("general_data"), dict) else {}
        given = _text(data.get("command")) or "Query"
        command = given if event == "status" else f"{given} {event}".strip()
        status = outcome(_text(data.get("status")))
        sql = _sql(data.get("query"))
        if _text(data.get("sql_command")):
            extra["sql_command"] = _text(data.get("sql_command"))  # type: ignore[assignment]
    elif cls == "table_access":
        data = v.get("table_access_data") if isinstance(v.get("table_access_data"), dict) else {}
        command = f"Table {event.upper()}" if event else "Table access"
        database = _text(data.get("db"))
        sql = _sql(_text(data.get("table")) or "")
        if _text(data.get("query")):
            extra["query"] = _text(data.get("query"))  # type: ignore[assignment]
    elif cls == "query":
        data = v.get("query_data") if isinstance(v.get("query_data"), dict) else {}
        status = outcome(_text(data.get("status")))
        sql = _sql(data.get("query"))
    stats = v.get("query_statistics")
    if isinstance(stats, dict):
        for key in ("rows_sent", "rows_examined", "query_time"):
            if _text(stats.get(key)):
                extra[key] = _text(stats.get(key))  # type: ignore[assignment]
    user, account_name, host, ip = _who(
        _text(account.get("user")) or _text(login.get("user")),
        _text(account.get("host")),
        _text(login.get("ip")),
    )
    if account_name:
        extra["account"] = account_name
    if _text(login.get("os")):
        extra["os_login"] = _text(login.get("os"))  # type: ignore[assignment]
    stamp = _text(v.get("timestamp"))
    when = parse_time(stamp) if stamp else None
    if when is not None and when.tzinfo is None:
        when = when.replace(tzinfo=UTC)  # these servers write UTC without saying so
    if stamp and when is None:
        extra["invalid_time"] = stamp
    return LogRecord(
        line=line,
        offset=offset,
        raw=raw,
        occurred_at=when,
        connection_id=to_int(_text(v.get("connection_id"))),
        command=command,
        argument=sql,
        user=user,
        host=host,
        ip=ip,
        database=database,
        status=status,
        rows_affected=rows,
        extra=extra,
    )


def parse_json_audit(lines: Iterable[bytes], *, start_offset: int = 0, start_line: int = 1) -> Iterator[Item]:
    """Every record and problem of a JSON audit log, in order. See the module docstring."""
    scanner = _Scanner(start_offset, start_line)
    yield from scanner.feed(lines)
    yield from scanner.finish()
