"""JSON audit logs: McAfee/Trellix audit plugin, Percona audit_log, MySQL Enterprise Audit and
the MySQL 8 / Percona 8 audit_log_filter. Pure: no Django. Bytes lines in, records out.

The layouts are told apart by their keys, and an object may span lines, so a scanner splits the
stream into objects without reading the file whole. Layouts and how they are read:
docs/formats.md, 'json_audit'.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

import orjson

from ingest.parsers.audit_fields import login_status, outcome, parse_time, parse_user_host, to_int
from ingest.parsers.digits import EPOCH_DIGITS, clock_in
from ingest.parsers.records import (
    NO_HINTS,
    PROBLEM_EXCERPT_BYTES,
    Hints,
    Item,
    LogRecord,
    Problem,
    checked_integers,
)

__all__ = ["LABEL", "MAX_OBJECT_BYTES", "NAME", "parse", "recognise", "time_digits"]

NAME = "json-audit"
LABEL = "JSON audit log (McAfee/Trellix, Percona, MySQL Enterprise)"
MAX_OBJECT_BYTES = 16 << 20

# The bytes the scanner stops at: quotes and backslashes (strings), and nesting.
_STRUCTURE = re.compile(rb'["\\{}\[\]]')
_ENVELOPE = b" \t\r\n[],"  # what may stand between objects: the array's punctuation
_KNOWN_KEYS = re.compile(rb'"(?:msg-type|audit_record|connection_id|class|thread-id)"\s*:')


def recognise(head: bytes) -> bool:
    """A JSON audit log: it starts with `{` or `[` and names a key one of the layouts writes."""
    start = head.lstrip()[:1]
    return start in (b"{", b"[") and _KNOWN_KEYS.search(head[:1024]) is not None


class _Scanner:
    def __init__(self, start_offset: int, start_line: int) -> None:
        self.offset = start_offset
        self.line = start_line
        self.at_line_start = True  # the next piece begins a line
        self.depth = 0  # nesting inside the current object (0: between objects)
        self.in_string = False
        self.escape = False  # a backslash ended the last piece inside a string
        self.buffer: bytearray | None = None  # the current object's bytes (None while skipping one)
        self.start = (0, 0)  # its (offset, line)
        self.indent: int | None = None  # its `{`'s column when nothing stood before it on its line
        self.garbage = bytearray()
        self.garbage_at = (0, 0)
        self.garbage_size = 0

    def feed(self, lines: Iterable[bytes]) -> Iterator[Item]:
        for chunk in lines:
            # Lines as a binary file iterates them hold one newline, at the end; any other
            # chunking is cut at its newlines so that each piece lies within one line.
            end = chunk.find(b"\n")
            if end < 0 or end == len(chunk) - 1:
                if self.depth == 0 and not self.garbage:
                    # The line that nearly every line of these logs is, one whole object, read
                    # here: _piece's fast path without a generator a line.
                    record = self._whole_line(chunk)
                    if record is not None:
                        self.at_line_start = chunk.endswith(b"\n")
                        yield record
                        self._advance(chunk)
                        continue
                    yield from self._piece(chunk, tried=True)
                    continue
                yield from self._piece(chunk)
                continue
            for data in _split_lines(chunk):
                yield from self._piece(data)

    def _whole_line(self, data: bytes) -> Item | None:
        """The item of a line that is one object (json.loads checks that it is exactly one), or
        None when it is not one (the scanner then reads it)."""
        stripped = data.strip().rstrip(b",")
        if stripped[:1] == b"{" and stripped[-1:] == b"}" and len(stripped) <= MAX_OBJECT_BYTES:
            try:
                value = _loads(stripped)
            except (ValueError, RecursionError):
                return None
            if isinstance(value, dict):
                lead = len(data) - len(data.lstrip())
                return _record(value, data[lead : lead + len(stripped)], self.offset + lead, self.line)
        return None

    def _piece(self, data: bytes, tried: bool = False) -> Iterator[Item]:
        """The items a piece of one line completes (`tried`: it is known not to be one object)."""
        line_start, self.at_line_start = self.at_line_start, data.endswith(b"\n")
        if line_start and self.depth and not self.in_string:
            body = data.lstrip(b" \t")
            if body[:1] == b"{" and (len(data) - len(body) == self.indent or _is_whole_record(body)):
                # An object still open when a line starts with `{` where it started itself, or
                # a line is one whole audit record: it was cut short (a crash mid-write, then
                # the server appended again; or stray bytes opened it). Report it and read on,
                # so that it never swallows the records after it.
                yield from self._cut_short(f"unfinished JSON object: another one begins at line {self.line}")
        if self.depth == 0 and not self.garbage and not tried:
            # Fast path: the line is one object.
            record = self._whole_line(data)
            if record is not None:
                yield record
                self._advance(data)
                return
        yield from self._scan(data, line_start)
        self._advance(data)

    def finish(self) -> Iterator[Item]:
        yield from self._flush_garbage()
        if self.depth:
            yield from self._cut_short("unfinished JSON object at the end")

    def _cut_short(self, reason: str) -> Iterator[Item]:
        offset, line = self.start
        if self.buffer is not None:  # (an object over the bound was reported already)
            yield Problem(line, offset, bytes(self.buffer[:PROBLEM_EXCERPT_BYTES]), reason)
        self.depth, self.in_string, self.escape, self.buffer = 0, False, False, None

    def _advance(self, data: bytes) -> None:
        self.offset += len(data)
        if data.endswith(b"\n"):
            self.line += 1

    def _scan(self, data: bytes, line_start: bool) -> Iterator[Item]:
        pos = 0
        n = len(data)
        while pos < n:
            if self.depth == 0:
                start = data.find(b"{", pos)
                self._between(data[pos : start if start >= 0 else n], pos)
                if start < 0:
                    return
                yield from self._flush_garbage()
                self.depth, self.in_string, self.escape = 1, False, False
                self.buffer = bytearray(b"{")
                self.start = (self.offset + start, self.line)
                self.indent = start if line_start and not data[:start].strip(b" \t") else None
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
                    yield from self._cut_short("not valid JSON: a string runs past the end of its line")
                return
            if self.buffer is not None:
                raw, (offset, line) = bytes(self.buffer), self.start
                yield _parse_object(raw, offset, line)
            self.buffer = None
            pos = end

    def _object_end(self, data: bytes, pos: int) -> int:
        """Follow strings and nesting from data[pos:]; the index after the object's last `}`, or -1.

        A backslash in a string escapes the byte after it, also when it ends a piece of a
        line cut short by the reader (the escape then carries over to the next piece).
        """
        skip_to = pos
        if self.escape:
            self.escape, skip_to = False, pos + 1
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
        self.escape = skip_to > len(data) and not data.endswith(b"\n")
        return -1

    def _between(self, data: bytes, pos: int) -> None:
        if not data or (not self.garbage and not data.translate(None, _ENVELOPE)):
            return
        if not self.garbage:
            self.garbage_at = (self.offset + pos, self.line)
        self.garbage_size += len(data)
        if len(self.garbage) < PROBLEM_EXCERPT_BYTES:
            self.garbage += data[: PROBLEM_EXCERPT_BYTES - len(self.garbage)]

    def _flush_garbage(self) -> Iterator[Item]:
        if self.garbage and self.garbage.translate(None, _ENVELOPE):
            offset, line = self.garbage_at
            yield Problem(line, offset, bytes(self.garbage), f"not a JSON object: {self.garbage_size} bytes")
        self.garbage = bytearray()
        self.garbage_size = 0


def _is_whole_record(body: bytes) -> bool:
    """Whether a line (from its `{` on) is one JSON object of a known audit layout."""
    stripped = body.rstrip().rstrip(b",")
    if stripped[-1:] != b"}" or len(stripped) > MAX_OBJECT_BYTES:
        return False
    try:
        value = _loads(stripped)
    except (ValueError, RecursionError):
        return False
    return isinstance(value, dict) and _layout(value) is not None


def _loads(data: bytes) -> Any:
    """The JSON value of `data`: orjson (about 4x the standard library's speed) reads what is
    valid UTF-8 within its limits; anything it refuses is read again by the standard library,
    which accepts a little more (NaN, lone surrogate escapes, integers over 64 bits, UTF-16)
    and words the errors that problems keep."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


def _split_lines(chunk: bytes) -> list[bytes]:
    """The chunk cut after each newline (only there: a lone \\r is no line end here)."""
    parts = chunk.split(b"\n")
    pieces = [part + b"\n" for part in parts[:-1]]
    if parts[-1]:
        pieces.append(parts[-1])
    return pieces


def _parse_object(raw: bytes, offset: int, line: int) -> Item:
    try:
        value = _loads(raw)
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
    if type(value) is not str:  # (most fields are strings: that test comes first)
        if value is None or isinstance(value, dict | list):
            return None
        value = str(value)
    return value.strip() or None


def _sql(value: Any) -> bytes:
    return value.encode("utf-8", "surrogatepass") if isinstance(value, str) else b""


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _put(extra: dict[str, str], key: str, value: Any) -> None:
    """Keep a field in `extra` when it says something."""
    text = _text(value)
    if text:
        extra[key] = text


def _keep(extra: dict[str, str], block: Any, names: dict[str, str]) -> None:
    """Keep the fields of `block` that `names` lists, under their names there (when they say
    something). Only the keys a record has are looked at: most blocks are small or absent."""
    if not isinstance(block, dict):
        return
    for key, value in block.items():
        name = names.get(key)
        if name is not None:
            _put(extra, name, value)


def _layout(value: dict[str, Any]) -> str | None:
    """Which layout wrote this object, by the keys only it writes; None when none did."""
    if "msg-type" in value:
        return "mcafee"
    if isinstance(value.get("audit_record"), dict):
        return "percona"
    if "class" in value or "event" in value:
        return "mysql-enterprise"
    return None


def _record(value: dict[str, Any], raw: bytes, offset: int, line: int) -> Item:
    layout = _layout(value)
    if layout == "mcafee":
        return _mcafee(value, raw, offset, line)
    if layout == "percona":
        return _percona(value["audit_record"], raw, offset, line)
    if layout == "mysql-enterprise":
        return _enterprise(value, raw, offset, line)
    return Problem(line, offset, raw[:PROBLEM_EXCERPT_BYTES], "a JSON object of no known audit layout")


def _who(user_field: str | None, host: str | None, ip: str | None) -> tuple[str | None, ...]:
    """(user, account, host, ip) from a user field that may be `priv[user] @ host [ip]`."""
    split = parse_user_host(user_field or "")
    if not any(split):
        return user_field, None, host, ip
    return split.user or split.account, split.account, host or split.host, ip or split.ip


# Fields kept in `extra`, by the key the layout writes them under.
_MCAFEE_FIELDS = {
    k: k.replace("-", "_") for k in ("query-id", "os_user", "appname", "pid", "msg-type", "client_port")
}
_PERCONA_FIELDS = {k: k for k in ("record", "command_class", "os_user", "os_login", "proxy_user")}
_CONNECTION_ATTRIBUTES = {
    k: k.lstrip("_") for k in ("program_name", "os_user", "_os", "_client_name", "_pid")
}
_SERVER_FIELDS = {k: k for k in ("server_id", "mysql_version", "os_version")}
_STATISTICS = {k: k for k in ("rows_sent", "rows_examined", "query_time", "bytes_sent", "bytes_received")}
_MCAFEE_CONNECTION = frozenset({"Connect", "Quit", "Change user"})


def _mcafee(v: dict[str, Any], raw: bytes, offset: int, line: int) -> LogRecord:
    """McAfee/Trellix: `cmd` is the server command ("Connect", "Quit", "Init DB", "Failed Login")
    or the statement's SQL command ("select", "delete", "create_table"...)."""
    cmd = _text(v.get("cmd")) or _text(v.get("msg-type")) or "Unknown"
    status = outcome(_text(v.get("status")))
    query = v.get("query") if isinstance(v.get("query"), str) else None
    if query is not None and query.strip() in (cmd, "n/a", ""):
        # The plugin writes the command's name as the query when the command has no text
        # (Quit, Init DB, Ping...; "n/a" when it has no name either): that is no statement.
        query = None
    objects = (
        [o for o in v.get("objects") or () if isinstance(o, dict)]
        if isinstance(v.get("objects"), list)
        else []
    )
    names = [".".join(p for p in (_text(o.get("db")), _text(o.get("name"))) if p) for o in objects]
    databases = [_text(o.get("db")) for o in objects if _text(o.get("obj_type")) == "database"]
    argument = _sql(query)
    if cmd == "Failed Login":
        command, status = "Connect", status if status not in (None, "ok") else "denied"
    elif cmd in _MCAFEE_CONNECTION:
        command = cmd
    elif cmd == "Init DB":
        # The database it changed to is the object the plugin names (the general log's argument).
        command = cmd
        argument = argument or (databases[0] or "").encode() if databases else argument
    elif query is not None:
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
    extra = {"layout": "mcafee", "cmd": cmd}
    _put(extra, "account", v.get("priv_user"))
    _keep(extra, v, _MCAFEE_FIELDS)
    if any(names):
        extra["objects"] = ",".join(n for n in names if n)
    _put(extra, "program_name", _dict(v.get("connect_attrs")).get("program_name"))
    if millis is not None and when is None:
        extra["invalid_time"] = str(v.get("date"))
    return LogRecord(
        line=line,
        offset=offset,
        raw=raw,
        occurred_at=when,
        connection_id=to_int(_text(v.get("thread-id"))),
        command=command,
        argument=argument,
        user=_text(v.get("user")) or _text(v.get("priv_user")),
        host=_text(v.get("host")),
        ip=_text(v.get("ip")),
        database=_text(v.get("db")) or (databases[0] if command == "Init DB" and databases else None),
        status=login_status(command, status, extra),
        rows_affected=to_int(_text(v.get("rows"))),
        extra=extra,
    )


def _percona(r: dict[str, Any], raw: bytes, offset: int, line: int) -> LogRecord:
    """Percona audit_log: the XML layout's fields as JSON keys, in lower case."""
    name = _text(r.get("name")) or "Unknown"
    user, account, host, ip = _who(_text(r.get("user")), _text(r.get("host")), _text(r.get("ip")))
    extra = {"layout": "percona", "name": name}
    _keep(extra, r, _PERCONA_FIELDS)
    account = account or _text(r.get("priv_user"))  # Connect records: a bare USER and PRIV_USER
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
        user=user or account,
        host=host,
        ip=ip,
        database=_text(r.get("db")),
        status=login_status(name, outcome(_text(r.get("status"))), extra),
        extra=extra,
    )


_CONNECTION_EVENTS = {"connect": "Connect", "disconnect": "Quit", "change_user": "Change user"}


# Records repeat their connection's account and their second's time: each is read once.
@lru_cache(maxsize=4096)
def _enterprise_who(
    login_user: str | None, account_user: str | None, account_host: str | None, login_ip: str | None
) -> tuple[str | None, ...]:
    """(user, account, host, ip, account host pattern) of a MySQL Enterprise record.

    `login.user` is the name the client gave, `account` the account the server matched
    (CURRENT_USER()): the user is the given name, as in every other format, the account
    beside it. The account's host is a pattern: a wildcard ('%', a netmask) is no host.
    """
    user, login_account, host, ip = _who(login_user or account_user, account_host, login_ip)
    account = login_account or _who(account_user, None, None)[0]
    if host is not None and ("%" in host or "/" in host):
        return user, account, None, ip, host
    return user, account, host, ip, None


@lru_cache(maxsize=4096)  # records repeat their connection's login and account: each is read once
def _enterprise_people(
    given: tuple[Any, ...],
) -> tuple[str | None, str | None, str | None, tuple[tuple[str, str], ...]]:
    """(user, host, ip, what goes to `extra`) from the record's login.user, account.user,
    account.host, login.ip, login.os and login.proxy."""
    login_user, account_user, account_host, login_ip, os_login, proxy = map(_text, given)
    user, account_name, host, ip, host_pattern = _enterprise_who(
        login_user, account_user, account_host, login_ip
    )
    known = (
        ("account", account_name),
        ("account_host", host_pattern),
        ("os_login", os_login),
        ("proxy_user", proxy),
    )
    return user, host, ip, tuple((key, value) for key, value in known if value)


@lru_cache(maxsize=256)
def _enterprise_time(stamp: str) -> datetime | None:
    when = parse_time(stamp)
    if when is not None and when.tzinfo is None:
        when = when.replace(tzinfo=UTC)  # these servers write UTC without saying so
    return when


def _status(value: Any) -> str | None:
    """`outcome(_text(value))`, with the integer nearly every record writes read at once."""
    if type(value) is int:
        return "ok" if value == 0 else str(value)
    return outcome(_text(value))


def _enterprise(v: dict[str, Any], raw: bytes, offset: int, line: int) -> LogRecord:
    """MySQL Enterprise Audit and audit_log_filter: `class` and `event` name the kind, and a
    `<class>_data` block holds its details. Blocks are read where they stand, whatever the
    class (Filebeat's samples carry `general_data` under class `audit`).

    This runs for every record of the log: a field that is text (nearly all) is read in place,
    others by `_text`; the record is built positionally."""
    get = v.get
    cls, event = get("class"), get("event")
    cls = (cls.strip() if type(cls) is str else _text(cls)) or ""
    event = (event.strip() if type(event) is str else _text(event)) or ""
    extra = {"layout": "mysql-enterprise", "class": cls, "event": event}
    status: str | None = None
    sql = b""
    database = None
    command = event or cls or "Unknown"
    if "connection_data" in v or cls == "connection":
        data = _dict(get("connection_data"))
        command = _CONNECTION_EVENTS.get(event, command)
        status = _status(data.get("status"))
        database = _text(data.get("db"))
        _put(extra, "connection_type", data.get("connection_type"))
        _keep(extra, data.get("connection_attributes"), _CONNECTION_ATTRIBUTES)
    if "general_data" in v:
        # `status` is written after the statement with its outcome; `log` before it and
        # `error` / `result` beside it keep the event in their name, so that each statement
        # counts once.
        data = _dict(get("general_data"))
        given = data.get("command")
        given = (given.strip() if type(given) is str else _text(given)) or "Query"
        command = given if event == "status" else f"{given} {event}".strip()
        status = _status(data.get("status"))
        query = data.get("query")
        sql = query.encode("utf-8", "surrogatepass") if type(query) is str else _sql(query)
        _put(extra, "sql_command", data.get("sql_command"))
    elif "table_access_data" in v:
        data = _dict(get("table_access_data"))
        command = f"Table {event.upper()}" if event else "Table access"
        database = _text(data.get("db"))
        sql = _sql(_text(data.get("table")) or "")
        _put(extra, "query", data.get("query"))
        _put(extra, "sql_command", data.get("sql_command"))
    elif "query_data" in v:  # audit_log_filter's query class: query_start, query_status_end...
        data = _dict(get("query_data"))
        status = _status(data.get("status"))
        sql = _sql(data.get("query"))
        _put(extra, "sql_command", data.get("sql_command"))
    elif "command_data" in v:  # audit_log_filter's command class: command_start, command_end
        _put(extra, "command", _dict(get("command_data")).get("command"))
    if "startup_data" in v or "shutdown_data" in v:
        _keep(extra, get("startup_data"), _SERVER_FIELDS)
        _keep(extra, get("shutdown_data"), _SERVER_FIELDS)
    if "query_statistics" in v:
        _keep(extra, get("query_statistics"), _STATISTICS)
    account, login = get("account"), get("login")
    if type(account) is not dict:
        account = {}
    if type(login) is not dict:
        login = _dict(login)
    people = (
        login.get("user"),
        account.get("user"),
        account.get("host"),
        login.get("ip"),
        login.get("os"),
        login.get("proxy"),
    )
    try:
        user, host, ip, known = _enterprise_people(people)
    except TypeError:  # a list or an object where text belongs: unhashable, read it uncached
        user, host, ip, known = _enterprise_people.__wrapped__(people)
    if known:
        extra.update(known)
    stamp = get("timestamp")
    stamp = stamp.strip() if type(stamp) is str else _text(stamp)
    when = _enterprise_time(stamp) if stamp else None
    if stamp and when is None:
        extra["invalid_time"] = stamp
    ident = get("id")
    if type(ident) is int and ident >= 0:
        # With the timestamp, the record's place in the log: numbered from 0 within each second.
        extra["id"] = str(ident)
    connection_id = get("connection_id")
    if type(connection_id) is not int:
        connection_id = to_int(_text(connection_id))
    if command == "Connect":
        status = login_status(command, status, extra)
    return LogRecord(
        line, offset, raw, when, connection_id, command, sql, user, host, ip, database, status, None, extra
    )


def parse(
    lines: Iterable[bytes], *, start_offset: int = 0, start_line: int = 1, hints: Hints = NO_HINTS
) -> Iterator[Item]:
    """Every record and problem of a JSON audit log, in order (docs/formats.md, 'json_audit')."""
    scanner = _Scanner(start_offset, start_line)
    yield from checked_integers(scanner.feed(lines))
    yield from checked_integers(scanner.finish())


_MILLIS = re.compile(rb'"date"\s*:\s*"?(\d{10,16})\b')  # McAfee/Trellix: epoch milliseconds
_STAMP = re.compile(rb'"timestamp"\s*:\s*"([^"]{1,64})"')  # Percona, MySQL Enterprise


def time_digits(head: bytes) -> int | None:
    """Digits after the seconds of a record's time: McAfee's epoch number by its length, else
    the fraction of its `timestamp` value (None when the head shows neither)."""
    millis = _MILLIS.search(head)
    if millis:
        return EPOCH_DIGITS.get(len(millis.group(1)))
    stamp = _STAMP.search(head)
    return clock_in(stamp.group(1)) if stamp else None
