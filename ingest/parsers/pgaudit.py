"""PostgreSQL server logs with pgAudit: what the three layouts share. Pure: no Django.

The layout modules (pgaudit_csv, pgaudit_json, pgaudit_stderr) cut their bytes into
`ServerLine`s: one message of the server each, with its exact raw bytes and position. The
`Assembler` here turns those into records:

- `connection authorized: user=... database=... application_name=...` -> Connect; a FATAL
  that refuses a login (SQLSTATE class 28, or 3D000 no such database, or its known words)
  -> Connect with status "denied"; `disconnection: ...` -> Quit;
- `AUDIT: <type>,<statement id>,<substatement id>,<class>,<command>,<object type>,
  <object name>,<statement>,<parameter>[,<rows>]` lines of one session and one statement id
  -> ONE Query record naming every relation (`LogRecord.objects`), its sub-statements kept in
  `extra`, and the ERROR of the same statement when one follows (status = its SQLSTATE);
- an ERROR whose statement pgAudit did not log (refused before it ran, failed DML: with
  `pgaudit.log_rows` pgAudit writes at the end of execution, statements in an aborted
  transaction) -> Query with that statement, status = SQLSTATE, `extra["audited"] = "no"`;
- `starting PostgreSQL ...` -> ServerStart; `parameter "x" changed to "y"` and `parameter "x"
  removed from configuration file, reset to default` (a reload) -> a Config record; other
  server chatter (checkpoints, connection received...) is no record.

Records come out in the order of their first byte. A statement's lines need not be adjacent
in the file (other sessions write between them): its record's `raw` is its lines joined, and
`extra["parts"]` lists each piece's offset and length when there is more than one.
See docs/architecture.md "PostgreSQL pgAudit" for the rules and their limits.
"""

from __future__ import annotations

import csv
import itertools
import json
import re
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone

from ingest.parsers.digits import ISO, fraction
from ingest.parsers.records import (
    PROBLEM_EXCERPT_BYTES,
    Item,
    LogRecord,
    ParsePoint,
    Problem,
    ServerStart,
    checked_integers,
)

# A statement's lines wait for the rest of it at most this many server lines, and a record
# holds at most this many pgAudit entries and raw bytes: a session that never ends its
# statement (or a hostile log) cannot hold memory or the records after it.
MAX_WAIT_LINES = 10_000
MAX_ENTRIES = 1_000
MAX_RECORD_BYTES = 8 << 20
MAX_MESSAGE_BYTES = 4 << 20  # one server message (a statement is at most 1 GB in PostgreSQL)
# The SQL the three layouts hold is PostgreSQL's: ingest.dialects.postgres classifies it.
DIALECT = "postgres"


def time_digits(head: bytes) -> int | None:
    """Digits after the seconds of the first record's time (3 for %m and the csv/json logs,
    0 for %t; None for an epoch %n or no time in the head)."""
    return fraction(ISO.search(head[:512]))


@dataclass(slots=True)
class ServerLine:
    """One message of the server log, as a layout module read it."""

    line: int
    offset: int
    raw: bytes
    time: str | None = None
    user: str | None = None
    database: str | None = None
    pid: int | None = None
    host: str | None = None
    port: str | None = None
    session: str | None = None
    session_line: int | None = None
    vxid: str | None = None
    tag: str | None = None  # command tag (ps display)
    severity: str = ""
    sqlstate: str | None = None
    message: str = ""
    detail: str | None = None
    statement: str | None = None  # the statement an ERROR names (log_min_error_statement)
    application: str | None = None


# -- the AUDIT message ------------------------------------------------------------------------------


@dataclass(slots=True)
class Entry:
    """One `AUDIT:` line's fields."""

    audit_type: str
    statement_id: int
    substatement_id: int
    cls: str
    command: str
    object_type: str
    object_name: str
    statement: str | None
    parameter: str | None
    rows: int | None


def parse_entry(message: str) -> Entry | None:
    """The fields of `AUDIT: ...`, or None when they are not pgAudit's."""
    fields = _split_entry(message, 7)  # (after "AUDIT: ", without copying the rest)
    if fields is None:
        try:
            fields = next(csv.reader((message[7:],), strict=True))
        except (csv.Error, StopIteration):
            return None
    count = len(fields)
    if count < 7 or count > 10 or fields[0] not in ("SESSION", "OBJECT"):
        return None
    statement_id, substatement_id = fields[1], fields[2]
    if not (statement_id.isdigit() and statement_id.isascii()):
        return None
    if not (substatement_id.isdigit() and substatement_id.isascii()):
        return None
    if count < 9:
        statement = fields[7] if count == 8 else None
        parameter = rows = None
    else:
        statement, parameter = fields[7], fields[8]
        if parameter == "<not logged>" or parameter == "<none>":
            parameter = None
        rows = fields[9] if count == 10 else None
    return Entry(
        fields[0],
        int(statement_id),
        int(substatement_id),
        fields[3],
        fields[4],
        fields[5],
        fields[6],
        statement,
        parameter,
        int(rows) if rows is not None and rows.isdigit() and rows.isascii() and len(rows) < 20 else None,
    )


# A quoted CSV field from its opening quote (possessive: linear, in C, however many quotes).
_QUOTED_FIELD_RE = re.compile(r'"(?:[^"]|"")*+"')


def _split_entry(body: str, start: int = 0) -> list[str] | None:
    """The CSV fields of an AUDIT message (`body` from `start`) by str methods, for the forms
    pgAudit writes nearly always: seven plain fields, then the statement plain or in one pair of
    quotes, then plain fields (parameter, rows). None for anything else (a quote elsewhere, a
    line end outside the quotes): the csv module reads it, as it reads every field the same way
    (strict)."""
    head = body.split(",", 7)
    if len(head) < 8:  # (not pgAudit's: no statement field)
        return None
    rest = head.pop()
    end = len(body) - len(rest)
    if body.find('"', start, end) >= 0:
        return None
    if body.find("\n", start, end) >= 0 or body.find("\r", start, end) >= 0:
        return None  # (a line end in an unquoted field: the csv module refuses it, and so must this)
    if start:
        head[0] = head[0][start:]
    if rest[:1] != '"':
        if '"' in rest or "\n" in rest or "\r" in rest:
            return None
        if "," not in rest:  # (the statement the last field: most entries without parameters)
            head.append(rest)
            return head
        return head + rest.split(",")
    # The statement, quoted: to its closing quote (a doubled quote is one quote).
    if '""' not in rest:
        end = rest.find('"', 1)
        if end < 0:
            return None
    else:
        m = _QUOTED_FIELD_RE.match(rest)
        if m is None:
            return None
        end = m.end() - 1
    after = rest[end + 1 :]
    if after and (after[0] != "," or '"' in after or "\n" in after or "\r" in after):
        return None
    statement = rest[1:end]
    head.append(statement.replace('""', '"') if '""' in statement else statement)
    if after:
        head += after[1:].split(",")
    return head


def parameters(text: str) -> list[str]:
    """The values of pgAudit's PARAMETER field (itself CSV)."""
    try:
        return next(csv.reader([text]))
    except (csv.Error, StopIteration):
        return [text]


# -- times ---------------------------------------------------------------------------------------------

_TIME_RE = re.compile(
    r"""
    (?P<date>\d{4}-\d{2}-\d{2}) [ T]
    (?P<clock>\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?)
    (?:[ ]?(?P<zone>[A-Za-z][A-Za-z0-9_/+-]{0,31}|[+-]\d{2}(?::?\d{2})?))?
    \Z
    """,
    re.X,
)
_UTC_NAMES = frozenset({"UTC", "GMT", "Z", "UCT", "Etc/UTC"})
# The csvlog/jsonlog times read last (`... .123 UTC`) and their values (immutable, so shared):
# sessions write between each other, so the same millisecond comes back after other lines.
# Bounded: emptied when full.
_TIMES: dict[str, datetime] = {}
_TIMES_MAX = 4096


def parse_time(text: str | None) -> tuple[datetime | None, str | None]:
    """(time, zone kept aside): aware for UTC or a numeric offset; naive (the source's time zone
    applies) for an abbreviation such as CET, which is named in the second value; (None, None)
    when the text is no time."""
    if not text:
        return None, None
    known = _TIMES.get(text)
    if known is not None:  # (records of the same millisecond: one object, made once)
        return known, None
    if (
        len(text) == 27
        and text.endswith(" UTC")
        and text[10] == " "
        and text[19] == "."
        and text[20:23].isdigit()
    ):
        # csvlog's and jsonlog's `2024-05-01 10:00:00.123 UTC` (%m with log_timezone UTC): most
        # lines of most logs, read without the pattern. The offset written out is read with the
        # rest (`replace(tzinfo=UTC)` cost five times the parse, measured); a text that already
        # names an offset then has two and is read as before.
        try:
            when = datetime.fromisoformat(text[:23] + "+00:00")
        except ValueError:
            try:
                when = datetime.fromisoformat(text[:23]).replace(tzinfo=UTC)
            except ValueError:
                when = None  # the pattern below says
        if when is not None:
            if len(_TIMES) >= _TIMES_MAX:
                _TIMES.clear()
            _TIMES[text] = when
            return when, None
    m = _TIME_RE.match(text.strip())
    if m is None:
        return None, None
    try:
        when = datetime.fromisoformat(f"{m['date']}T{m['clock']}")
    except ValueError:
        return None, None
    zone = m["zone"]
    if zone is None:
        return when, None
    if zone in _UTC_NAMES:
        return when.replace(tzinfo=UTC), None
    if zone[0] in "+-" and zone[1:3].isdigit():
        digits = zone[1:].replace(":", "")
        minutes = int(digits[:2]) * 60 + (int(digits[2:4]) if len(digits) >= 4 else 0)
        if minutes >= 24 * 60:
            return None, None
        sign = -1 if zone[0] == "-" else 1
        return when.replace(tzinfo=timezone(timedelta(minutes=sign * minutes))), None
    return when, zone


def session_number(session: str | None) -> int | None:
    """A connection id for `%c` (backend start in seconds and pid, in hex): start << 24 | pid.

    One number per session that never repeats within a server (pids do), ordered by start
    time, within a bigint until the year 2^39 s; None when the text is not that form (or the
    pid does not fit in 24 bits: Linux's pid_max is 2^22).
    """
    if not session or "." not in session or len(session) > 24:
        return None
    known = _SESSION_NUMBERS.get(session)
    if known is not None:
        return known
    number = _session_number(session)
    if number is not None:
        if len(_SESSION_NUMBERS) >= 10_000:
            _SESSION_NUMBERS.clear()
        _SESSION_NUMBERS[session] = number
    return number


_SESSION_NUMBERS: dict[str, int] = {}  # (a session writes many lines: each id read once)


def _session_number(session: str) -> int | None:
    start, _, pid = session.partition(".")
    try:
        start_n, pid_n = int(start, 16), int(pid, 16)
    except ValueError:
        return None
    if start_n < 0 or pid_n < 0 or pid_n >= 1 << 24 or start_n >= 1 << 39:
        return None
    return start_n << 24 | pid_n


# -- from server lines to records ------------------------------------------------------------------

_AUTHORIZED_RE = re.compile(r"connection authorized: user=(?P<user>\S*)(?: database=(?P<db>\S*))?")
_APPLICATION_RE = re.compile(r" application_name=(?P<app>.*?)(?: SSL enabled| GSS|\Z)", re.S)
_PARAMETER_RE = re.compile(r'parameter "(?P<name>[^"\n]{1,200})" changed to "(?P<value>.{0,4096})"\Z', re.S)
# A reload after the setting left every configuration file (ALTER SYSTEM RESET over a
# postgresql.conf that does not set it): the server goes back to the setting's default.
_REMOVED_RE = re.compile(
    r'parameter "(?P<name>[^"\n]{1,200})" removed from configuration file, reset to default\Z'
)
_START_RE = re.compile(r"starting (?P<version>PostgreSQL .{1,400})\Z", re.S)
# Refused logins, by SQLSTATE where the layout gives one, else by the server's words (English).
_LOGIN_STATES = ("28", "3D000")
_LOGIN_WORDS = re.compile(
    r"\A(?:password authentication failed|role \".*\" does not exist|no pg_hba\.conf entry"
    r"|database \".*\" does not exist|role \".*\" is not permitted to log in|(?:Ident|Peer|LDAP|"
    r"RADIUS|certificate|GSSAPI|SSPI|PAM) authentication failed)",
    re.S,
)
_ERRORS = frozenset({"ERROR", "FATAL", "PANIC"})


def _problem(line: ServerLine, reason: str) -> Problem:
    return Problem(line.line, line.offset, line.raw[:PROBLEM_EXCERPT_BYTES], reason)


@dataclass(slots=True)
class _Pending:
    """A record waiting for the rest of its lines (a statement's) or for its turn (others)."""

    first: ServerLine
    item: Item | None = None  # set when complete
    entries: list[Entry] = field(default_factory=list)
    lines: list[ServerLine] = field(default_factory=list)
    size: int = 0
    error: ServerLine | None = None
    seen_at: int = 0  # the assembler's line count when it began


_REACH_KEPT = 1024  # entries of Assembler.reach before those that can no longer matter go


class Assembler:
    """Server lines in, records out, in the order of their first byte (see the module docstring).

    1. Each line joins its session's open statement (same pgAudit statement id), or closes it
       (any other line of that session; the ERROR of that statement is taken into it first),
       or becomes a record of its own.
    2. Records wait in a queue in file order; the head leaves when complete. A statement
       still open MAX_WAIT_LINES lines after its first is closed as it stands.
    """

    def __init__(self) -> None:
        self.queue: deque[_Pending] = deque()  # in order of first offset
        self.open: dict[str, _Pending] = {}  # session -> its open statement
        self.count = 0
        # Records yielded whose lines other records' lines interrupt: (first offset, first line,
        # end of their last line). A resume point must not fall inside one (see Resumer).
        self.reach: list[tuple[int, int, int]] = []
        self.keep_reach = False  # a Resumer's: a one-shot read never asks, and must not hold them
        self.reach_limit = _REACH_KEPT

    def feed(self, lines: Iterable[ServerLine | Problem]) -> Iterator[Item]:
        queue = self.queue
        take = self._take
        for line in lines:
            self.count += 1
            if type(line) is Problem:
                queue.append(_Pending(_line_of(line), line, seen_at=self.count))
            else:
                take(line)
            # (Most lines leave the head waiting for its session, or complete it alone: no
            # generator made for them. What _ready does for a head of one line, spelt out.)
            while queue:
                head = queue[0]
                if head.item is None:
                    if self.count - head.seen_at > MAX_WAIT_LINES:
                        yield from self._ready()
                    break
                if len(head.lines) > 1:
                    yield from self._ready()
                    break
                queue.popleft()
                yield head.item

    def finish(self) -> Iterator[Item]:
        for session in list(self.open):
            self._close(session)
        yield from self._ready()

    def _ready(self) -> Iterator[Item]:
        queue = self.queue
        while queue:
            head = queue[0]
            if head.item is None and self.count - head.seen_at > MAX_WAIT_LINES:
                session = head.first.session or ""
                if self.open.get(session) is head:
                    self._close(session)
            if head.item is None:
                return
            queue.popleft()
            offset = head.first.offset
            if (
                self.keep_reach
                and len(head.lines) > 1
                and isinstance(head.item, LogRecord)
                and "parts" in head.item.extra
            ):
                last = head.lines[-1]
                self.reach.append((offset, head.first.line, last.offset + len(last.raw)))
                if len(self.reach) > self.reach_limit:
                    # No later resume point comes before this record's first byte (records
                    # leave in order of it, and the lines fed go on past it): those that end
                    # before it can go. Bounded in a one-shot read too, which asks for no point
                    # until its end.
                    self.reach = [r for r in self.reach if r[2] > offset]
                    self.reach_limit = max(_REACH_KEPT, 2 * len(self.reach))
            yield head.item

    def _take(self, line: ServerLine) -> None:
        session = line.session or ""
        current = self.open.get(session) if session else None
        audit = line.message.startswith("AUDIT: ")
        entry = parse_entry(line.message) if audit else None
        if entry is not None and session:
            if current is not None:
                if (
                    current.entries[0].statement_id == entry.statement_id
                    and len(current.entries) < MAX_ENTRIES
                    and current.size + len(line.raw) <= MAX_RECORD_BYTES
                ):
                    current.entries.append(entry)
                    current.lines.append(line)
                    current.size += len(line.raw)
                    return
                del self.open[session]  # (_close, spelt out: nearly every line closes one)
                current.item = _statement(current)
            pending = _Pending(line, None, [entry], [line], len(line.raw), None, self.count)
            self.open[session] = pending
            self.queue.append(pending)
            return
        if current is not None:
            if line.severity == "ERROR" and _same_statement(current, line):
                current.error = line
                current.lines.append(line)
                self._close(session)
                return
            self._close(session)
        item = self._single(line, entry_broken=audit)
        if item is not None:
            self.queue.append(_Pending(line, item, seen_at=self.count))

    def _close(self, session: str) -> None:
        pending = self.open.pop(session)
        pending.item = _statement(pending)

    def _single(self, line: ServerLine, *, entry_broken: bool) -> Item | None:
        message = line.message
        if entry_broken:
            return _problem(line, "an AUDIT line whose fields are not pgAudit's (or without a session id)")
        if line.severity == "LOG":
            if message.startswith("connection authorized: "):
                return _connect(line)
            if message.startswith("disconnection: "):
                return _record(line, "Quit", b"", status=None)
            if message.startswith("starting PostgreSQL"):
                m = _START_RE.match(message)
                return ServerStart(line.line, line.offset, line.raw, m["version"] if m else message[9:409])
            if message.startswith("parameter "):
                m = _PARAMETER_RE.match(message)
                if m is not None:
                    record = _record(line, "Config", message.encode("utf-8", "surrogatepass"), status=None)
                    record.extra["parameter"] = m["name"]
                    record.extra["value"] = m["value"]
                    return record
                m = _REMOVED_RE.match(message)
                if m is not None:
                    record = _record(line, "Config", message.encode("utf-8", "surrogatepass"), status=None)
                    record.extra["parameter"] = m["name"]
                    record.extra["reset_to_default"] = "yes"
                    return record
            return None
        if line.severity not in _ERRORS:
            return None
        if line.severity == "FATAL" and (
            (line.sqlstate or "").startswith(_LOGIN_STATES) or _LOGIN_WORDS.match(message)
        ):
            record = _record(line, "Connect", b"", status="denied")
            record.extra["error"] = message
            return record
        status = line.sqlstate or "error"
        if line.statement is not None:
            record = _record(line, "Query", line.statement.encode("utf-8", "surrogatepass"), status=status)
            record.extra["audited"] = "no"
        else:
            record = _record(line, line.severity.title(), b"", status=status)
        record.extra["error"] = message
        if line.detail:
            record.extra["error_detail"] = line.detail
        return record


def _line_of(problem: Problem) -> ServerLine:
    return ServerLine(problem.line, problem.offset, problem.raw)


def _same_statement(pending: _Pending, error: ServerLine) -> bool:
    """Whether `error` (the next line of the session) is the failure of the open statement.

    Its statement text is one a pgAudit entry of it names: yes. Otherwise the entries are
    sub-statements of a statement pgAudit did not log itself (a SELECT or CALL of a function,
    a DO block): yes when the layout tells the virtual transaction and it is the same, and the
    command tag, where told, too; in a stderr log without %v the text must match.
    """
    statement = error.statement
    if statement is None:
        return False
    if any(e.statement == statement for e in pending.entries):
        return True
    first = pending.first
    if first.vxid is None or error.vxid is None or first.vxid != error.vxid:
        return False
    return first.tag is None or error.tag is None or first.tag == error.tag


def _record(line: ServerLine, command: str, argument: bytes, *, status: str | None) -> LogRecord:
    text = line.time
    when = _TIMES.get(text) if text else None  # (parse_time's first answer, without the call)
    if when is not None:
        zone = None
    else:
        when, zone = parse_time(text)
    # Only client sessions are connections (csvlog and jsonlog give the postmaster a session
    # id too; a stderr prefix stops at %q for it).
    user, session = line.user, line.session
    if user is None:
        number = None
    else:  # (session_number's remembered answer first: every session writes many lines)
        number = _SESSION_NUMBERS.get(session) if session else None
        if number is None:
            number = session_number(session)
    # _extra(line), spelt out: this runs for every record.
    extra: dict[str, str] = {}
    if user is not None and session:
        extra["session"] = session
    if line.pid is not None:
        extra["pid"] = str(line.pid)
    if line.session_line is not None:
        extra["session_line"] = str(line.session_line)
    if line.port:
        extra["port"] = line.port
    if line.application:
        extra["application"] = line.application
    if line.vxid:
        extra["vxid"] = line.vxid
    record = LogRecord(
        line.line,
        line.offset,
        line.raw,
        when,
        number,
        command,
        argument,
        user or None,
        line.host or None,
        None,
        line.database or None,
        status,
        None,
        extra,
    )
    if zone:
        record.extra["time_zone"] = zone
    if line.time and when is None:
        record.extra["invalid_time"] = line.time[:64]
    if line.sqlstate and line.sqlstate != "00000" and status != line.sqlstate:
        record.extra["sqlstate"] = line.sqlstate
    return record


def _connect(line: ServerLine) -> LogRecord:
    m = _AUTHORIZED_RE.match(line.message)
    record = _record(line, "Connect", b"", status="ok")
    if m is not None:
        record.user = record.user or m["user"] or None
        record.database = record.database or m["db"] or None
    app = _APPLICATION_RE.search(line.message)
    if app is not None and app["app"]:
        record.extra["application"] = app["app"]
    return record


# The JSON of a statement's entries, by their fields: a log repeats the same few (the rows
# aside, an entry names a class, a command and an object), so it is made once each.
_COMMANDS_JSON: dict[tuple[tuple[object, ...], ...], str] = {}
_COMMANDS_JSON_MAX = 10_000


def _commands_json(entries: list[Entry]) -> str:
    if len(entries) == 1:
        e = entries[0]
        key: tuple[tuple[object, ...], ...] = (
            (e.substatement_id, e.cls, e.command, e.object_type, e.object_name, e.rows),
        )
    else:
        key = tuple(
            (e.substatement_id, e.cls, e.command, e.object_type, e.object_name, e.rows) for e in entries
        )
    text = _COMMANDS_JSON.get(key)
    if text is None:
        text = json.dumps([list(k) for k in key], ensure_ascii=False)
        if len(_COMMANDS_JSON) >= _COMMANDS_JSON_MAX:
            _COMMANDS_JSON.clear()
        if len(text) <= 1024:
            _COMMANDS_JSON[key] = text
    return text


def _statement(pending: _Pending) -> LogRecord:
    """One Query record of a statement's pgAudit entries (and its ERROR)."""
    first, entries, error = pending.first, pending.entries, pending.error
    e0 = entries[0]
    single = len(entries) == 1  # (most statements: the one entry's fields as they are)
    if error is not None and error.statement:
        top = error.statement
    elif single:
        top = e0.statement or ""
    else:
        top = next((e.statement for e in entries if e.statement), "")
    record = _record(first, "Query", top.encode("utf-8", "surrogatepass"), status=None)
    extra = record.extra
    if single:
        record.objects = (e0.object_name,) if e0.object_name else ()
        extra["audit_type"] = e0.audit_type
        extra["statement_id"] = str(e0.statement_id)
        extra["classes"] = e0.cls
    else:
        record.objects = tuple(dict.fromkeys(e.object_name for e in entries if e.object_name))
        extra["audit_type"] = ",".join(dict.fromkeys(e.audit_type for e in entries))
        extra["statement_id"] = str(e0.statement_id)
        extra["classes"] = ",".join(dict.fromkeys(e.cls for e in entries))
    record.rows_affected = e0.rows
    extra["commands"] = _commands_json(entries)
    if not single or (e0.statement and e0.statement != top):
        subs: dict[str, str] = {}
        for e in entries:
            if e.statement and e.statement != top:
                subs.setdefault(str(e.substatement_id), e.statement)
        if subs:
            extra["substatements"] = json.dumps(subs, ensure_ascii=False)
    given = e0.parameter if single else next((e.parameter for e in entries if e.parameter is not None), None)
    if given is not None:
        extra["parameters"] = json.dumps(parameters(given), ensure_ascii=False)
    if error is not None:
        record.status = error.sqlstate or "error"
        extra["error"] = error.message
        if error.detail:
            extra["error_detail"] = error.detail
    else:
        record.status = "ok"
    lines = pending.lines
    if len(lines) > 1:
        record.raw = b"".join(line.raw for line in lines)
        offsets = [(line.offset, len(line.raw)) for line in lines]
        if not all(a + n == b for (a, n), (b, _) in itertools.pairwise(offsets)):
            extra["parts"] = ",".join(f"{a}:{n}" for a, n in offsets)
    return record


def assemble(lines: Iterable[ServerLine | Problem]) -> Iterator[Item]:
    """Records of a layout's server lines (see Assembler)."""
    assembler = Assembler()
    yield from checked_integers(assembler.feed(lines))
    yield from checked_integers(assembler.finish())


Messages = Callable[[Iterable[bytes], int, int], Iterator[ServerLine | Problem]]


class Resumer:
    """A resumable pgAudit parser (records.Resumable): what a followed file is read with.

    A layout (Messages: bytes lines to server messages) feeds an Assembler. Where the lines
    end for now, the message the layout flushes at their end may be incomplete (a DETAIL
    still to come, a csvlog record with its quote still open): it is held, not assembled,
    and given over only by `finish()`. A message complete before the end (csvlog, jsonlog: at
    its line end) is assembled at once, and closes the statement its session had open: like
    the general log's, a read that stops at a given offset reads the line after it.
    `resume_point()` is where a new parser yields exactly what this one has not: the first
    byte of the earliest record not yet yielded, or the end of the last message assembled;
    and never inside a yielded record whose lines others interrupt (its later lines would be
    read again as a record of their own): then it goes back to that record's first byte, so
    that it and the records after it are read again whole (the store keeps each once: same
    bytes, same offset, same record hash). One `feed` per parser.
    """

    def __init__(self, messages: Messages, start_offset: int, start_line: int) -> None:
        self.messages = messages
        self.assembler = Assembler()
        self.assembler.keep_reach = True
        self.start = (start_offset, start_line)
        self.last: ServerLine | Problem | None = None  # the last message given to the assembler
        self.read_to: tuple[int, int] | None = None  # after every line fed, once finished
        self.held: list[ServerLine | Problem] = []

    def feed(self, lines: Iterable[bytes]) -> Iterator[Item]:
        ended = [False]

        def fed() -> Iterator[bytes]:
            yield from lines
            ended[0] = True

        def taken() -> Iterator[ServerLine | Problem]:
            for message in self.messages(fed(), *self.start):
                if ended[0]:  # flushed by the end of the lines: maybe not complete yet
                    self.held.append(message)
                    continue
                self.last = message  # (where it ends is worked out only when asked: resume_point)
                yield message

        yield from checked_integers(self.assembler.feed(taken()))

    def finish(self) -> Iterator[Item]:
        held, self.held = self.held, []
        yield from checked_integers(self.assembler.feed(held))
        yield from checked_integers(self.assembler.finish())
        self.read_to = _after(held[-1]) if held and isinstance(held[-1], ServerLine) else None

    def resume_point(self) -> ParsePoint:
        assembler = self.assembler
        if self.read_to is not None and not assembler.queue:
            return ParsePoint(*self.read_to, None)
        offset, line = self.start if self.last is None else _after(self.last)
        if assembler.queue:  # in order of first byte: the first is the earliest
            pending = assembler.queue[0]
            if pending.first.offset < offset:
                offset, line = pending.first.offset, pending.first.line
        # Yielded records that end before it can no longer matter (later points are not earlier).
        assembler.reach = [r for r in assembler.reach if r[2] > offset]
        for first, first_line, end in reversed(assembler.reach):  # (back over a chain of them)
            if first < offset < end:
                offset, line = first, first_line
        return ParsePoint(offset, line, None)


def _after(message: ServerLine | Problem) -> tuple[int, int]:
    """The offset and line number after a message (a Problem's excerpt may be cut: its own
    start, so that it is read again rather than what follows it skipped)."""
    if isinstance(message, Problem):
        return message.offset, message.line
    return message.offset + len(message.raw), message.line + message.raw.count(b"\n")
