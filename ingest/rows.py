"""The COPY row format: how a normalized event becomes one line of PostgreSQL's text COPY format.

Pure formatting, no database. Each event is formatted once, as the narrow row the writer
(ingest.store) copies into `ingest_event_row`, pointing to its statement in the statement
dictionary (`ingest_statement`, issue 22). The custody chain (ingest.custody) digests those lines
as they were copied, and ingest.verify makes them again from the stored columns
(stored_narrow_line). stored_copy_line makes the wide line of every column that links of
versions 1 and 2 digested, for those links.
"""

from __future__ import annotations

import hashlib
import re
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from operator import itemgetter
from typing import Any, overload

# ingest.alerts and ingest.partitions load Django (the alert kinds are the Alert model's), but the
# two things taken from them here, event_alert_kind and month_of, are plain functions.
from ingest.alerts import event_alert_kind
from ingest.chunks import ContentWindow
from ingest.events import EventRecord, SessionInfo, session_id_of
from ingest.partitions import month_of
from ingest.textsafe import displayable, unstorable

EVENT_COLUMNS = (
    "occurred_at", "server", "connection_id", "user", "host", "ip", "database", "command",
    "statement_type", "tables", "destructive", "flags", "sql", "fingerprint", "rows_affected",
    "status", "raw", "line", "byte_offset", "record_hash", "ingest_run_id", "session_id", "source_file_id",
    "attribution", "definer", "raw_length",
)  # fmt: skip

# The narrow row's columns (ingest_event_row), in the order of RowFormatter's narrow lines: the
# statement's id last, so that the writer can renumber a statement in a batch (ingest.store).
ROW_COLUMNS = (
    "occurred_at", "server", "connection_id", "user", "host", "ip", "command", "statement_type", "tables",
    "destructive", "flags", "rows_affected", "status", "raw", "line", "byte_offset", "record_hash",
    "ingest_run_id", "session_id", "source_file_id", "attribution", "definer", "raw_length", "statement_id",
)  # fmt: skip

# Bounds of what one event row may hold: a log line can be any length (hostile input).
MAX_SQL_CHARS = 1_000_000
MAX_FIELD_CHARS = {"user": 200, "host": 300, "ip": 64, "database": 200, "command": 40, "status": 40}


@overload
def _bounded(value: str, limit: int) -> str: ...
@overload
def _bounded(value: str | None, limit: int) -> str | None: ...
def _bounded(value: str | None, limit: int) -> str | None:
    if value is None:
        return None
    if unstorable(value):  # NUL, a lone surrogate: the raw bytes keep them (ingest.textsafe)
        value = displayable(value)
    return value if len(value) <= limit else value[: limit - 1] + "…"


# PostgreSQL's text COPY format, written by hand: psycopg's per-value dumpers (arrays above
# all) cost more than the rest of ingestion together. Every value from a log is escaped here.
NULL = "\\N"
_COPY_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})
_NEEDS_ESCAPE = re.compile(r"[\\\t\n\r]")


def _copy_text(value: str | None) -> str:
    """A text value for COPY: NULL, or backslash, tab, newline and CR escaped (NUL is gone already)."""
    if value is None:
        return NULL
    return value.translate(_COPY_ESCAPES) if _NEEDS_ESCAPE.search(value) else value


# Raw bytes that are printable ASCII with tabs, line ends and NULs (nearly every log record: its
# fields are tab-separated, it ends in a newline, and some clients end statements with a NUL) go
# to COPY as bytea's escape format, about their own length: a backslash doubled, a tab, newline,
# CR or NUL as an octal escape (each of those backslashes doubled again for COPY). The rest go
# as hex, twice their length. Half the bytes for PostgreSQL to read and decode, and for the pipe
# and the row digests.
_ESCAPABLE = re.compile(rb"[\x00\t\n\r\x20-\x7e]*")
_CONTROL_OR_BACKSLASH = re.compile(r"[\\\x00\t\n\r]")


def _copy_bytea(raw: bytes) -> str:
    """A bytea value for COPY: the bytes themselves in the escape format when they are printable
    ASCII, tabs, line ends and NULs (see above), else `\\x` and hex."""
    if _ESCAPABLE.fullmatch(raw):
        text = raw.decode("ascii")
        if _CONTROL_OR_BACKSLASH.search(text) is None:
            return text
        return (
            text.replace("\\", "\\\\\\\\")
            .replace("\t", "\\\\011")
            .replace("\n", "\\\\012")
            .replace("\r", "\\\\015")
            .replace("\x00", "\\\\000")
        )
    return "\\\\x" + raw.hex()


_PRINTABLE = re.compile(rb"[\x20-\x7e]*")


def _legacy_copy_bytea(raw: bytes) -> str:
    """How _copy_bytea wrote raw bytes before issue 22 (tabs, line ends, NULs as hex): the custody
    chain's digests of events written then are of that line (ingest.verify tries both)."""
    if _PRINTABLE.fullmatch(raw):
        text = raw.decode("ascii")
        return text.replace("\\", "\\\\\\\\") if "\\" in text else text
    return "\\\\x" + raw.hex()


def _copy_array(items: Iterable[str]) -> str:
    """A text[] literal for COPY: every element double-quoted, its quotes and backslashes escaped."""
    quoted = ",".join('"' + item.replace("\\", "\\\\").replace('"', '\\"') + '"' for item in items)
    return _copy_text("{" + quoted + "}")


def statement_key_head(
    database: str | None, statement_type: str, tables: Sequence[str], destructive: bool, fingerprint: str
) -> bytes:
    """What statement_key hashes before the statement's text: every other value, each prefixed by
    its length, each followed by `|`. The same for every text of one shape (RowFormatter hashes it
    once per shape, and each text of it from a copy of that hash)."""
    text = "|".join(
        (
            "-" if database is None else f"{len(database)}:{database}",
            f"{len(statement_type)}:{statement_type}",
            f"{len(tables)}:" + "".join(f"{len(t)}:{t}" for t in tables),
            "t" if destructive else "f",
            f"{len(fingerprint)}:{fingerprint}",
            "",
        )
    )
    return text.encode("utf-8", "surrogatepass")


def statement_key(
    database: str | None,
    statement_type: str,
    tables: Sequence[str],
    destructive: bool,
    fingerprint: str,
    sql: str,
) -> bytes:
    """A statement's key in the dictionary: the first 16 bytes of the SHA-256 of every value it
    holds, each but the last prefixed by its length, joined by `|` (statement_key_head, then the
    text). The same as the SQL function ingest_statement_key (migration 0025), which the view's
    triggers and the migration use."""
    head = statement_key_head(database, statement_type, tables, destructive, fingerprint)
    return hashlib.sha256(head + sql.encode("utf-8", "surrogatepass")).digest()[:16]


def statement_id(key: bytes, attempt: int = 0) -> int:
    """A statement's id: its key's first 8 bytes (a signed 64-bit integer); should that belong to
    another statement already, those of SHA-256(key, attempt) for attempt 1, 2... As the SQL
    function ingest_statement_id (migration 0025)."""
    head = key if attempt == 0 else hashlib.sha256(key + attempt.to_bytes(4, "big")).digest()
    return int.from_bytes(head[:8], "big", signed=True)


# A new statement for the dictionary: (id, key, database, statement_type, tables, destructive,
# fingerprint, sql), the values as the event's wide line has them.
StatementRow = tuple[int, bytes, str | None, str, list[str], bool, str, str]

# The columns of a statement's COPY line (ingest_statement), in the order of FormattedBatch's
# `statement_copy`: the id first, so that the writer can give a statement another id.
STATEMENT_COLUMNS = ("id", "key", "database", "statement_type", "tables", "destructive", "fingerprint", "sql")
# A statement's id (8 bytes, big-endian, signed) and key (16 bytes): FormattedBatch's
# `statement_keys`, and what a custody link of version 3 digests of each (ingest.custody).
STATEMENT_RECORD = struct.Struct(">q16s")


def _statement_copy_lines(statements: Iterable[StatementRow]) -> bytes:
    """The statements' COPY lines (STATEMENT_COLUMNS), one a line: the values as they are stored,
    escaped as the narrow rows' are (the key as bytea's hex). Made in the parsing process, once
    a statement per batch: what repeats from one statement to the next (its database, type,
    tables, destructive and fingerprint: the shape of a statement whose literals differ) is
    escaped once per batch."""
    heads: dict[tuple[object, ...], str] = {}
    lines: list[str] = []
    append = lines.append
    needs_escape, escapes = _NEEDS_ESCAPE.search, _COPY_ESCAPES
    for number, key, database, statement_type, tables, destructive, fingerprint, sql in statements:
        shape = (database, statement_type, destructive, fingerprint, *tables)
        head = heads.get(shape)
        if head is None:
            head = heads[shape] = (
                f"{_copy_text(database)}\t{_copy_text(statement_type)}\t{_copy_array(tables)}"
                f"\t{'t' if destructive else 'f'}\t{_copy_text(fingerprint)}\t"
            )
        text = sql.translate(escapes) if needs_escape(sql) else sql  # (_copy_text: sql is never None)
        append(f"{number}\t\\\\x{key.hex()}\t{head}{text}\n")
    return "".join(lines).encode()


_COPY_UNESCAPES = {"\\\\": "\\", "\\t": "\t", "\\n": "\n", "\\r": "\r"}
_COPY_ESCAPE = re.compile(r"\\[\\tnr]")
_ARRAY_ITEM = re.compile(r'"((?:[^"\\]|\\.)*)"')
_ARRAY_ESCAPE = re.compile(r"\\(.)")


def _copy_value(field: str) -> str | None:
    """The inverse of _copy_text."""
    if field == NULL:
        return None
    return _COPY_ESCAPE.sub(lambda m: _COPY_UNESCAPES[m[0]], field) if "\\" in field else field


def _statement_row(line: str) -> StatementRow:
    """The inverse of _statement_copy_lines: the values a statement's COPY line holds."""
    number, key, database, statement_type, tables, destructive, fingerprint, sql = line.split("\t")
    literal = _copy_value(tables) or "{}"
    return (
        int(number),
        bytes.fromhex(key[3:]),
        _copy_value(database),
        _copy_value(statement_type) or "",
        [_ARRAY_ESCAPE.sub(r"\1", item) for item in _ARRAY_ITEM.findall(literal)],
        destructive == "t",
        _copy_value(fingerprint) or "",
        _copy_value(sql) or "",
    )


@dataclass
class FormattedBatch:
    """A batch of events in PostgreSQL's COPY text format, with what the store needs besides.

    Plain data (picklable): the parsing process makes it, the writing process stores it. The
    COPY lines travel as one UTF-8 buffer, not a list of strings: a buffer crosses the pipe as
    one copy of its bytes, where thousands of strings were pickled and unpickled one by one,
    and it is what COPY sends anyway. The statements the rows name travel the same way (as
    COPY lines of the dictionary and as packed (id, key) records), not as tuples of values.
    """

    # The narrow rows (ROW_COLUMNS of ingest_event_row), one COPY line per event, each ending in
    # a newline (which no value holds). The writer copies them as they are; the custody chain
    # digests them (links of version 3).
    narrow: bytes
    count: int  # how many lines (events) `narrow` holds
    sessions: list[tuple[int, *tuple[object, ...]]]  # session rows to upsert, id first (_session_row)
    months: set[date]  # the months the events fall in: their partitions must exist
    # How many of its events raise an alert: the writer raises them from the rows its COPY stored,
    # with their ids (ingest.store), and asks only when there are any.
    alerts: int = 0
    offsets: tuple[int, int] = (0, 0)  # the smallest and largest byte offset of its events
    # The file's content its read got through, as (offset, bytes) of at most CHUNK_BYTES each
    # (ingest.chunks): the events written without raw bytes of their own point into these.
    chunks: list[tuple[int, bytes]] = field(default_factory=list)
    # The distinct statements the rows name, each under the id its rows name (statement_id(key),
    # or a later attempt's when this formatter gave that id to another key), in the order of
    # their ids: their COPY lines of ingest_statement (STATEMENT_COLUMNS, one a line, each
    # ending in a newline), which the writer copies as they are for those the dictionary
    # lacks; and their ids and keys, STATEMENT_RECORD each, line for line, which the writer
    # looks up and the custody link digests as they are (ingest.custody.statement_lines).
    statement_copy: bytes = b""
    statement_keys: bytes = b""

    @property
    def lines(self) -> list[bytes]:
        """The COPY lines, newline included. Values hold no raw newline or CR (_copy_text escapes
        them), so each line ends at the first."""
        return self.narrow.splitlines(keepends=True)

    @property
    def rows(self) -> list[str]:
        """The COPY lines as text, newline included."""
        return [line.decode() for line in self.lines]

    @property
    def statements(self) -> list[StatementRow]:
        """The statements the rows name, as values (read back from `statement_copy`)."""
        # (split at newlines only: a value may hold U+2028 and the like, which splitlines cuts at)
        return [_statement_row(line) for line in self.statement_copy.decode().split("\n")[:-1]]


def _session_row(s: SessionInfo) -> tuple[int, *tuple[object, ...]]:
    return (
        session_id_of(s.key), s.key, s.server, s.boot, s.connection_id, _bounded(s.user, 200),
        _bounded(s.host, 300), _bounded(s.ip, 64), _bounded(s.database, 200), _bounded(s.program, 200),
        _bounded(s.os_user, 200), s.started_at, s.ended_at, s.attributed,
        session_id_of(s.previous) if s.previous else None,
        datetime.fromisoformat(s.opened[0]) if s.opened and s.opened[0] else None,
        s.opened[1] if s.opened else None,
    )  # fmt: skip


_FORMATTED_CACHE_SIZE = 50_000  # entries in each of RowFormatter's caches
_NO_FLAGS: frozenset[str] = frozenset()


class RowFormatter:
    """Turns events into narrow COPY lines. Pure: no database; session ids come from their keys,
    statement ids from their keys (statement_id)."""

    def __init__(self, *, source_file_id: int, ingest_run_id: int | None) -> None:
        self._run_id = NULL if ingest_run_id is None else str(ingest_run_id)
        self._source_file_id = str(source_file_id)
        self._alerting = 0  # events of the batch being formatted that raise an alert
        # Formatted COPY fields, by what they were formatted from (see _row).
        self._who: dict[tuple[object, ...], str] = {}
        self._flags: dict[frozenset[str], tuple[str, str | None, str | None]] = {}
        self._status: dict[str, str] = {}
        # Statements, each an entry (database, type, tables, destructive, fingerprint, the
        # columns type to destructive as formatted, the id as formatted, the row for the
        # dictionary, the first five values as a tuple: the statement's shape): the last entry
        # made or found for each text, checked value by value (no tuple to build and hash for a
        # text seen); and those that a text's later entry replaced there, by (shape, text). Every
        # entry made is in one of the two until `_made` passes _FORMATTED_CACHE_SIZE. Before,
        # every entry was kept by (shape, text) too: a tuple and a dict entry more for each new
        # text, and more for the garbage collector to go through (measured).
        self._by_text: dict[str, tuple[Any, ...]] = {}
        self._replaced: dict[tuple[object, ...], tuple[Any, ...]] = {}
        self._made = 0  # entries made since the last start afresh
        self._shapes: dict[tuple[object, ...], tuple[Any, ...]] = {}  # what a shape makes (_shape)
        self._named: dict[int, bytes] = {}  # the keys of the ids named (two keys, two ids)
        self._batch_statements: dict[int, StatementRow] = {}
        # Per session key: the formatted run, session and file columns.
        self._session_ids: dict[str, str] = {}
        self._last_time: datetime | None = None
        self._last_iso = NULL  # the COPY field of _last_time
        self._hash_server: str | None = None
        # The record hash's BLAKE2b over its input up to the offset, for _last_time and _hash_server.
        self._hash_head = hashlib.blake2b(digest_size=16)
        self._months: set[date] = set()  # the months of the batch being formatted
        # The content the read handed its parser (ingest.tail.FileLines), when it is a file's:
        # events whose raw bytes are a slice of it are written with their length only.
        self.window: ContentWindow | None = None
        self._slices_end = 0  # where the bytes of the last batch's slices end (see _rows)

    def format(self, events: Sequence[EventRecord], upto: int | None = None) -> FormattedBatch:
        """The events as COPY lines; with a window, the content chunks up to `upto` (where the
        read got: a resume point, the end of the file) and at least to the end of the bytes of
        every event written as a slice (whose bytes must be committed with it)."""
        for cache in (self._who, self._flags, self._status, self._session_ids, self._shapes):
            if len(cache) > _FORMATTED_CACHE_SIZE:  # a log of ever-new values: start afresh
                cache.clear()
        if self._made > _FORMATTED_CACHE_SIZE:  # the statements too (and the ids they named)
            self._made = 0
            self._by_text.clear()
            self._replaced.clear()
            self._named.clear()
        sessions = {e.session.key: e.session for e in events}
        self._months = set()
        self._last_time = None  # (each batch's months are found again by _row)
        self._last_iso = NULL
        self._hash_server = None
        self._batch_statements = {}
        self._alerting = 0
        narrow = "".join(self._rows(events)).encode()
        statements = sorted(self._batch_statements.values(), key=itemgetter(0))
        pack = STATEMENT_RECORD.pack
        offsets = [e.offset for e in events]
        chunks: list[tuple[int, bytes]] = []
        if self.window is not None:
            # Never short of the bytes of an event written as a slice: they go with its batch.
            chunks = self.window.take(max(upto or 0, self._slices_end))
        return FormattedBatch(
            narrow=narrow,
            count=len(events),
            sessions=[_session_row(s) for s in sessions.values()],
            months=self._months,
            alerts=self._alerting,
            offsets=(min(offsets), max(offsets)) if offsets else (0, 0),
            chunks=chunks,
            # The statements in the order of their ids, as the writer and the custody link take them.
            statement_copy=_statement_copy_lines(statements),
            statement_keys=b"".join([pack(row[0], row[1]) for row in statements]),
        )

    def _time(self, occurred: datetime | None, server: str) -> None:
        """A new time object (or server): its COPY field, its month, the record hash's start."""
        self._last_time, self._hash_server = occurred, server
        if occurred is None:
            self._last_iso, when = NULL, "-"
        else:
            self._last_iso = when = occurred.isoformat()
            # The month (partition) of each new time only: per event it cost a tenth of _row.
            self._months.add(month_of(occurred))
        # EventRecord.record_hash's input up to the offset (its values must stay those it makes),
        # hashed once: each event's hash goes on from a copy of it.
        head = f"{server}\x00{when}\x00".encode("utf-8", "surrogateescape")
        self._hash_head = hashlib.blake2b(head, digest_size=16)

    def _rows(self, events: Sequence[EventRecord]) -> list[str]:
        """One narrow COPY line per event (ROW_COLUMNS, see _copy_text); counts those that raise an alert.

        What repeats from one event to the next is formatted once and looked up after that:
        who (server ... ip), the statement (its id, type, tables and destructive), the flags
        and the alert they raise, the status, the run, session and file columns. The time's
        field, month and the record hash's head are made again only when the time object
        changes (the tracker hands consecutive records of one second one object). The record
        hash is EventRecord.record_hash's: BLAKE2b-128 of server, time, offset and raw bytes.
        """
        who_of, flags_of, status_of, sessions = self._who, self._flags, self._status, self._session_ids
        by_text = self._by_text
        batch_statements = self._batch_statements
        window = self.window
        # The content the events may be slices of: nearly always one run (ingest.chunks).
        runs = window.runs() if window is not None else []
        run_start, run = runs[0] if len(runs) == 1 else (-1, b"")
        slices_end = 0
        # What _time made for the last time object and server (format started them afresh).
        last_time, hash_server = self._last_time, self._hash_server
        when, hash_head = self._last_iso, self._hash_head
        lines: list[str] = []
        append = lines.append
        for e in events:
            sql, flags = e.sql, e.flags
            if len(sql) > MAX_SQL_CHARS:
                sql, flags = sql[:MAX_SQL_CHARS], flags | {"sql_truncated"}
            occurred, server = e.occurred_at, e.server
            if occurred is not last_time or server is not hash_server:
                self._time(occurred, server)
                last_time, hash_server, when, hash_head = occurred, server, self._last_iso, self._hash_head
            raw, offset = e.raw, e.offset
            digest = hash_head.copy()
            digest.update(b"%d\x00" % offset)
            digest.update(raw)  # (not copied into one bytes object with the offset)
            hash_hex = digest.hexdigest()
            who_key = (server, e.connection_id, e.user, e.host, e.ip, e.command)
            who = who_of.get(who_key)
            if who is None:
                who = who_of[who_key] = self._format_who(e)
            # The statement: the last one of this text, if its values are the event's.
            destructive = e.destructive
            found = by_text.get(sql)
            if found is None:  # a text new to the formatter (since it last started afresh)
                found = by_text[sql] = self._statement(e, sql, None)
            elif (
                found[0] != e.database
                or found[1] != e.statement_type
                or found[2] != e.tables
                or found[3] is not destructive
                or found[4] != e.fingerprint
            ):
                found = by_text[sql] = self._statement(e, sql, found)
            row = found[7]
            batch_statements[row[0]] = row
            flag_set = frozenset(flags) if flags else _NO_FLAGS
            flagged = flags_of.get(flag_set)
            if flagged is None:
                flagged = flags_of[flag_set] = self._format_flags(flag_set)
            status = e.status
            if status is None:
                status_field = NULL
            else:
                status_field = status_of.get(status)
                if status_field is None:
                    status_field = status_of[status] = _copy_text(_bounded(status, 40))
            session = sessions.get(e.session.key)
            if session is None:
                session = sessions[e.session.key] = (
                    f"{self._run_id}\t{session_id_of(e.session.key)}\t{self._source_file_id}"
                )
            # A slice of the file's content: only its length (the bytes go in the batch's chunks).
            if (run_start >= 0 and offset >= run_start and run.startswith(raw, offset - run_start)) or (
                len(runs) > 1 and window is not None and window.holds(offset, raw)
            ):
                raw_field = NULL
                if offset + len(raw) > slices_end:
                    slices_end = offset + len(raw)
            else:
                raw_field = _copy_bytea(raw)
            if (flagged[2] if destructive else flagged[1]) is not None:  # it raises an alert
                self._alerting += 1
            rows = NULL if e.rows_affected is None else e.rows_affected
            definer = NULL if e.definer is None else _copy_text(_bounded(e.definer, 300))
            append(
                f"{when}\t{who}\t{found[5]}\t{flagged[0]}\t{rows}\t{status_field}\t{raw_field}\t{e.line}"
                f"\t{offset}\t\\\\x{hash_hex}\t{session}\t{e.attribution or 'unattributed'}\t{definer}"
                f"\t{len(raw)}\t{found[6]}\n"
            )
        self._slices_end = slices_end
        return lines

    def _statement(self, e: EventRecord, sql: str, replaced: tuple[Any, ...] | None) -> tuple[Any, ...]:
        """The event's statement's entry (see __init__), found or made. `replaced`: the text's
        entry in _by_text, with other values (which the caller replaces there), or None when the
        text is new to the formatter (it has no entry, so there is none to look for).

        A text new to the formatter (nearly every event of a log of ever-new literals) costs a
        look-up of its shape (its values but the text, see _shape) and the SHA-256 of its text
        alone, from a copy of the hash of its shape's head: the same key as statement_key."""
        tables = e.tables if isinstance(e.tables, tuple) else tuple(e.tables)
        destructive = e.destructive
        shape_values = (e.database, e.statement_type, tables, destructive, e.fingerprint)
        if replaced is not None:
            self._replaced[replaced[8], sql] = replaced
            found = self._replaced.get((shape_values, sql))
            if found is not None:
                return found
        shape = self._shapes.get(shape_values)
        if shape is None:
            shape = self._shapes[shape_values] = self._shape(*shape_values)
        stored_database, stored_type, stored_tables, fingerprint, columns, head = shape
        digest = head.copy()
        digest.update(sql.encode("utf-8", "surrogatepass"))
        key = digest.digest()[:16]
        number, attempt = statement_id(key), 0
        while self._named.setdefault(number, key) != key:  # (its first id is another key's)
            attempt += 1
            number = statement_id(key, attempt)
        row = (number, key, stored_database, stored_type, stored_tables, destructive, fingerprint, sql)
        self._made += 1
        return (*shape_values, columns, str(number), row, shape_values)

    @staticmethod
    def _shape(
        database: str | None,
        statement_type: str,
        tables: tuple[str, ...],
        destructive: bool,
        fingerprint: str,
    ) -> tuple[Any, ...]:
        """What a statement's values but its text make: the values as the store holds them
        (bounded as the columns are; one list of tables shared by the rows of every text of the
        shape, which nothing changes), the columns type to destructive as formatted, and the
        SHA-256 state over its key's head (statement_key_head)."""
        stored_database = _bounded(database, 200)
        stored_type = _bounded(statement_type, 60)
        stored_tables = [t if len(t) <= 400 else _bounded(t, 400) for t in tables]
        fingerprint = fingerprint.replace("\x00", "") if "\x00" in fingerprint else fingerprint
        head = hashlib.sha256(
            statement_key_head(stored_database, stored_type, stored_tables, destructive, fingerprint)
        )
        columns = "\t".join(
            (_copy_text(stored_type), _copy_array(stored_tables), "t" if destructive else "f")
        )
        return stored_database, stored_type, stored_tables, fingerprint, columns, head

    @staticmethod
    def _format_flags(flags: frozenset[str]) -> tuple[str, str | None, str | None]:
        """The flags column, and the alert an event with them raises when not destructive and when."""
        return _copy_array(sorted(flags)), event_alert_kind(False, flags), event_alert_kind(True, flags)

    @staticmethod
    def _format_who(e: EventRecord) -> str:
        """server ... command of the narrow row."""
        return "\t".join(
            (
                _copy_text(e.server),
                NULL if e.connection_id is None else str(e.connection_id),
                _copy_text(_bounded(e.user, 200)),
                _copy_text(_bounded(e.host, 300)),
                _copy_text(_bounded(e.ip, 64)),
                _copy_text(_bounded(e.command, 40)),
            )
        )


def stored_narrow_line(row: dict[str, Any], flags: list[str]) -> str:
    """The narrow COPY line RowFormatter wrote for an event, made again from its stored columns
    (ROW_COLUMNS of ingest_event_row; `flags` as they were written, without those added later):
    what links of version 3 digest (ingest.custody, ingest.verify). Keep it in step with
    RowFormatter._rows."""
    occurred = row["occurred_at"]

    def number(value: object) -> str:
        return NULL if value is None else str(value)

    return (
        "\t".join(
            (
                NULL if occurred is None else occurred.isoformat(),
                _copy_text(row["server"]),
                number(row["connection_id"]),
                *(_copy_text(row[c]) for c in ("user", "host", "ip", "command", "statement_type")),
                _copy_array(row["tables"]),
                "t" if row["destructive"] else "f",
                _copy_array(flags),
                number(row["rows_affected"]),
                _copy_text(row["status"]),
                NULL if row["raw"] is None else _copy_bytea(bytes(row["raw"])),
                number(row["line"]),
                number(row["byte_offset"]),
                "\\\\x" + bytes(row["record_hash"]).hex(),
                number(row["ingest_run_id"]),
                number(row["session_id"]),
                number(row["source_file_id"]),
                _copy_text(row["attribution"]),
                _copy_text(row["definer"]),
                number(row["raw_length"]),
                number(row["statement_id"]),
            )
        )
        + "\n"
    )


def stored_copy_line(
    row: dict[str, Any], flags: list[str], *, legacy_raw: bool = False, version: int = 2
) -> str:
    """The COPY line RowFormatter wrote for an event, made again from its stored columns (`flags`
    as they were written, without those added later): the custody chain's digest of each event
    is of this line (ingest.custody, ingest.verify). Keep it in step with RowFormatter._row.
    `legacy_raw`: the raw bytes as written before issue 22 (_legacy_copy_bytea). `version` 1:
    the line of a link written before raw bytes went into chunks (the bytes themselves, from
    `raw_bytes` when they have moved since, and no length); 2: the columns as they are stored."""
    occurred = row["occurred_at"]
    if version == 1:
        bytea = _legacy_copy_bytea if legacy_raw else _copy_bytea
        raw_field = bytea(bytes(row["raw_bytes"] if row.get("raw_bytes") is not None else row["raw"]))
        length: tuple[str, ...] = ()
    else:
        raw_field = NULL if row["raw"] is None else _copy_bytea(bytes(row["raw"]))
        length = (NULL if row["raw_length"] is None else str(row["raw_length"]),)
    when = NULL if occurred is None else occurred.isoformat()

    def number(value: object) -> str:
        return NULL if value is None else str(value)

    return (
        "\t".join(
            (
                when,
                _copy_text(row["server"]),
                number(row["connection_id"]),
                *(
                    _copy_text(row[c])
                    for c in ("user", "host", "ip", "database", "command", "statement_type")
                ),
                _copy_array(row["tables"]),
                "t" if row["destructive"] else "f",
                _copy_array(flags),
                _copy_text(row["sql"]),
                _copy_text(row["fingerprint"]),
                number(row["rows_affected"]),
                _copy_text(row["status"]),
                raw_field,
                number(row["line"]),
                number(row["byte_offset"]),
                "\\\\x" + bytes(row["record_hash"]).hex(),
                number(row["ingest_run_id"]),
                number(row["session_id"]),
                number(row["source_file_id"]),
                # Events stored before attribution was recorded were written without these two.
                *((_copy_text(row["attribution"]), _copy_text(row["definer"])) if row["attribution"] else ()),
                *length,
            )
        )
        + "\n"
    )
