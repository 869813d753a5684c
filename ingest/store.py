"""The store writer: batches of normalized events into PostgreSQL with binary COPY.

Idempotent: a batch is first copied straight into the event table (the fast
path). If any of its records is stored already, the unique index on the record
hash refuses the COPY; the batch is then copied into a staging table and
inserted with ON CONFLICT DO NOTHING, which stores only the new ones. After one
such conflict the writer stays on the slow path for the rest of the file.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime

import psycopg
from django.db import connection, transaction
from django.db.models import Q
from psycopg.sql import SQL, Identifier

from ingest.alerts import KIND_SQL, WORTH_SQL, AlertLine, event_alert_kind, raise_event_alerts
from ingest.custody import append_link, chain_events, event_key
from ingest.events import Event, FlagCorrection, SessionInfo, session_id_of
from ingest.partitions import ensure_event_partitions, month_of
from ingest.textsafe import displayable, unstorable

EVENT_COLUMNS = (
    "occurred_at", "server", "connection_id", "user", "host", "ip", "database", "command",
    "statement_type", "tables", "destructive", "flags", "sql", "fingerprint", "rows_affected",
    "status", "raw", "line", "byte_offset", "record_hash", "ingest_run_id", "session_id", "source_file_id",
    "attribution", "definer",
)  # fmt: skip
_COLUMN_LIST = ", ".join(f'"{c}"' for c in EVENT_COLUMNS)
_COLUMNS = SQL(", ").join(map(Identifier, EVENT_COLUMNS))  # the same, for psycopg.sql

# Bounds of what one event row may hold: a log line can be any length (hostile input).
MAX_SQL_CHARS = 1_000_000
MAX_FIELD_CHARS = {"user": 200, "host": 300, "ip": 64, "database": 200, "command": 40, "status": 40}

_SESSION_UPSERT = """
INSERT INTO ingest_session
    (id, key, server, boot, connection_id, "user", host, ip, database, program, os_user, started_at,
     ended_at, attributed, previous_id, opened_time, opened_hash)
SELECT * FROM unnest(
    %s::int8[], %s::varchar[], %s::varchar[], %s::varchar[], %s::int8[], %s::varchar[], %s::varchar[],
    %s::varchar[], %s::varchar[], %s::varchar[], %s::varchar[], %s::timestamptz[], %s::timestamptz[],
    %s::bool[], %s::int8[], %s::timestamptz[], %s::bytea[])
ON CONFLICT (key) DO UPDATE SET
    -- What we learn later about a session fills gaps; it never overwrites what a Connect said.
    "user" = COALESCE(ingest_session."user", EXCLUDED."user"),
    host = COALESCE(ingest_session.host, EXCLUDED.host),
    ip = COALESCE(ingest_session.ip, EXCLUDED.ip),
    database = COALESCE(ingest_session.database, EXCLUDED.database),
    program = COALESCE(ingest_session.program, EXCLUDED.program),
    os_user = COALESCE(ingest_session.os_user, EXCLUDED.os_user),
    started_at = COALESCE(ingest_session.started_at, EXCLUDED.started_at),
    ended_at = GREATEST(ingest_session.ended_at, EXCLUDED.ended_at),
    attributed = ingest_session.attributed OR EXCLUDED.attributed,
    previous_id = COALESCE(ingest_session.previous_id, EXCLUDED.previous_id),
    opened_time = COALESCE(ingest_session.opened_time, EXCLUDED.opened_time),
    opened_hash = COALESCE(ingest_session.opened_hash, EXCLUDED.opened_hash)
"""


# The slow path: a batch some of whose events are stored already. _COLUMN_LIST is a constant.
_INSERT_NEW = f"""
WITH new AS (
    INSERT INTO ingest_event ({_COLUMN_LIST}) SELECT {_COLUMN_LIST} FROM event_staging
    ORDER BY line ON CONFLICT DO NOTHING
    RETURNING id, server, occurred_at, record_hash, destructive, flags, line
), alerts AS (
    INSERT INTO ingest_alert (kind, server, event_time, event_hash)
    SELECT {KIND_SQL}, server, occurred_at, record_hash FROM new WHERE {WORTH_SQL} ORDER BY line
)
SELECT id, record_hash FROM new ORDER BY id
"""  # noqa: S608


def _bounded(value: str | None, limit: int) -> str | None:
    if value is None:
        return None
    if unstorable(value):  # NUL, a lone surrogate: the raw bytes keep them (ingest.textsafe)
        value = displayable(value)
    return value if len(value) <= limit else value[: limit - 1] + "…"


# PostgreSQL's text COPY format, written by hand: psycopg's per-value dumpers (arrays above
# all) cost more than the rest of ingestion together. Every value from a log is escaped here.
NULL = "\\N"
COPY_CHUNK_ROWS = 2000
_COPY_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})
_NEEDS_ESCAPE = re.compile(r"[\\\t\n\r]")


def _copy_text(value: str | None) -> str:
    """A text value for COPY: NULL, or backslash, tab, newline and CR escaped (NUL is gone already)."""
    if value is None:
        return NULL
    return value.translate(_COPY_ESCAPES) if _NEEDS_ESCAPE.search(value) else value


# Raw bytes that are printable ASCII (most log records) go to COPY as bytea's escape format,
# their own length; the rest as hex, twice theirs. Less for PostgreSQL to read and decode.
_PRINTABLE = re.compile(rb"[\x20-\x7e]*")


def _copy_bytea(raw: bytes) -> str:
    """A bytea value for COPY: the bytes themselves when printable (a backslash doubled for bytea,
    and each of those doubled again for COPY), else `\\x` and hex."""
    if _PRINTABLE.fullmatch(raw):
        text = raw.decode("ascii")
        return text.replace("\\", "\\\\\\\\") if "\\" in text else text
    return "\\\\x" + raw.hex()


def _copy_array(items: Iterable[str]) -> str:
    """A text[] literal for COPY: every element double-quoted, its quotes and backslashes escaped."""
    quoted = ",".join('"' + item.replace("\\", "\\\\").replace('"', '\\"') + '"' for item in items)
    return _copy_text("{" + quoted + "}")


@dataclass
class FormattedBatch:
    """A batch of events in PostgreSQL's COPY text format, with what the store needs besides.

    Plain data (picklable): the parsing process makes it, the writing process stores it.
    """

    rows: list[str]  # one COPY line per event
    sessions: list[tuple[object, ...]]  # session rows to upsert (see _session_row)
    months: set[date]  # the months the events fall in: their partitions must exist
    alerts: list[AlertLine] = field(default_factory=list)  # events that raise an alert (ingest.alerts)
    offsets: tuple[int, int] = (0, 0)  # the smallest and largest byte offset of its events


def _session_row(s: SessionInfo) -> tuple[object, ...]:
    return (
        session_id_of(s.key), s.key, s.server, s.boot, s.connection_id, _bounded(s.user, 200),
        _bounded(s.host, 300), _bounded(s.ip, 64), _bounded(s.database, 200), _bounded(s.program, 200),
        _bounded(s.os_user, 200), s.started_at, s.ended_at, s.attributed,
        session_id_of(s.previous) if s.previous else None,
        datetime.fromisoformat(s.opened[0]) if s.opened and s.opened[0] else None,
        s.opened[1] if s.opened else None,
    )  # fmt: skip


_FORMATTED_CACHE_SIZE = 50_000  # entries in each of RowFormatter's caches


class RowFormatter:
    """Turns events into COPY lines. Pure: no database; session ids come from their keys."""

    def __init__(self, *, source_file_id: int, ingest_run_id: int | None) -> None:
        self._run_id = NULL if ingest_run_id is None else str(ingest_run_id)
        self._source_file_id = str(source_file_id)
        # Formatted COPY fields, by what they were formatted from (see _row).
        self._who: dict[tuple[object, ...], str] = {}
        self._what: dict[tuple[object, ...], tuple[str, str, str, str | None]] = {}
        self._alerts: list[AlertLine] = []
        self._session_ids: dict[str, str] = {}
        self._last_time: datetime | None = None
        self._last_iso: str | None = None

    def format(self, events: Sequence[Event]) -> FormattedBatch:
        for cache in (self._who, self._what, self._session_ids):
            if len(cache) > _FORMATTED_CACHE_SIZE:  # a log of ever-new values: start afresh
                cache.clear()
        sessions = {e.session.key: e.session for e in events}
        self._alerts = []
        return FormattedBatch(
            rows=[self._row(e) for e in events],
            sessions=[_session_row(s) for s in sessions.values()],
            months={month_of(e.occurred_at) for e in events if e.occurred_at is not None},
            alerts=self._alerts,
            offsets=(min(e.offset for e in events), max(e.offset for e in events)) if events else (0, 0),
        )

    def _row(self, e: Event) -> str:
        """One line of PostgreSQL's text COPY format for the event (see _copy_text).

        The columns that repeat from one event to the next are formatted once and looked up
        after that: who and where (server ... command), what the statement is (type, tables,
        destructive, flags, fingerprint), the status and the session id.
        """
        sql = e.sql if len(e.sql) <= MAX_SQL_CHARS else e.sql[:MAX_SQL_CHARS]
        flags = e.flags | {"sql_truncated"} if sql is not e.sql else e.flags
        occurred = e.occurred_at
        if occurred is None:
            when = NULL
        elif occurred is self._last_time:  # the tracker hands consecutive records one object
            when = self._last_iso  # type: ignore[assignment]
        else:
            when = self._last_iso = occurred.isoformat()
            self._last_time = occurred
        key = (e.server, e.connection_id, e.user, e.host, e.ip, e.database, e.command)
        who = self._who.get(key)
        if who is None:
            who = self._who[key] = self._format_who(e)
        tables = e.tables if isinstance(e.tables, tuple) else tuple(e.tables)
        what_key = (e.statement_type, tables, e.destructive, frozenset(flags), e.fingerprint, e.status)
        what = self._what.get(what_key)
        if what is None:
            what = self._what[what_key] = self._format_what(e, tables, flags)
        session_id = self._session_ids.get(e.session.key)
        if session_id is None:
            session_id = self._session_ids[e.session.key] = str(session_id_of(e.session.key))
        rows = NULL if e.rows_affected is None else str(e.rows_affected)
        record_hash = e.record_hash(None if when is NULL else when)
        definer = NULL if e.definer is None else _copy_text(_bounded(e.definer, 300))
        hash_hex = record_hash.hex()
        if what[3] is not None:  # the alert it raises, as a line of COPY (ingest.alerts)
            self._alerts.append(f"{what[3]}\t{_copy_text(e.server)}\t{when}\t\\\\x{hash_hex}\n")
        return (
            f"{when}\t{who}\t{what[0]}\t{_copy_text(sql)}\t{what[1]}\t{rows}\t{what[2]}\t{_copy_bytea(e.raw)}"
            f"\t{e.line}\t{e.offset}\t\\\\x{hash_hex}\t{self._run_id}\t{session_id}\t{self._source_file_id}"
            f"\t{e.attribution or 'unattributed'}\t{definer}\n"
        )

    @staticmethod
    def _format_what(e: Event, tables: tuple[str, ...], flags: set[str]) -> tuple[str, str, str, str | None]:
        """The columns of what the statement is, in three runs around `sql` and `rows_affected`:
        (statement_type ... flags), fingerprint, status; and the alert such a statement raises."""
        fingerprint = e.fingerprint.replace("\x00", "") if "\x00" in e.fingerprint else e.fingerprint
        head = "\t".join(
            (
                _copy_text(_bounded(e.statement_type, 60)),
                _copy_array(t if len(t) <= 400 else _bounded(t, 400) for t in tables),  # type: ignore[misc]
                "t" if e.destructive else "f",
                _copy_array(sorted(flags)),
            )
        )
        alert = event_alert_kind(e.destructive, flags)
        return head, _copy_text(fingerprint), _copy_text(_bounded(e.status, 40)), alert

    @staticmethod
    def _format_who(e: Event) -> str:
        return "\t".join(
            (
                _copy_text(e.server),
                NULL if e.connection_id is None else str(e.connection_id),
                _copy_text(_bounded(e.user, 200)),
                _copy_text(_bounded(e.host, 300)),
                _copy_text(_bounded(e.ip, 64)),
                _copy_text(_bounded(e.database, 200)),
                _copy_text(_bounded(e.command, 40)),
            )
        )


# Where each column sits in a COPY line (for the lines of a batch's new events, on the slow path).
_RECORD_HASH_FIELD = EVENT_COLUMNS.index("record_hash")


def stored_copy_line(row: dict[str, object], flags: list[str]) -> str:
    """The COPY line RowFormatter wrote for an event, made again from its stored columns (`flags`
    as they were written, without those added later): the custody chain's digest of each event
    is of this line (ingest.custody, ingest.verify). Keep it in step with RowFormatter._row."""
    occurred = row["occurred_at"]
    when = NULL if occurred is None else occurred.isoformat()  # type: ignore[attr-defined]

    def number(value: object) -> str:
        return NULL if value is None else str(value)

    return (
        "\t".join(
            (
                when,
                _copy_text(row["server"]),  # type: ignore[arg-type]
                number(row["connection_id"]),
                *(
                    _copy_text(row[c])
                    for c in ("user", "host", "ip", "database", "command", "statement_type")
                ),  # type: ignore[arg-type]
                _copy_array(row["tables"]),  # type: ignore[arg-type]
                "t" if row["destructive"] else "f",
                _copy_array(flags),
                _copy_text(row["sql"]),  # type: ignore[arg-type]
                _copy_text(row["fingerprint"]),  # type: ignore[arg-type]
                number(row["rows_affected"]),
                _copy_text(row["status"]),  # type: ignore[arg-type]
                _copy_bytea(bytes(row["raw"])),  # type: ignore[arg-type]
                number(row["line"]),
                number(row["byte_offset"]),
                "\\\\x" + bytes(row["record_hash"]).hex(),  # type: ignore[arg-type]
                number(row["ingest_run_id"]),
                number(row["session_id"]),
                number(row["source_file_id"]),
                # Events stored before attribution was recorded were written without these two.
                *(
                    (_copy_text(row["attribution"]), _copy_text(row["definer"]))  # type: ignore[arg-type]
                    if row["attribution"]
                    else ()
                ),
            )
        )
        + "\n"
    )


# Switch-offs looked at, newest first, when a statement switches a log back on.
SWITCHES_LOOKED_AT = 200


def switched_off_before(condition: dict[str, object]) -> bool:
    """Whether the account or session of `condition` (a FlagCorrection's `if_switched_off`) switched
    one of its log kinds off earlier on the same server, in any source, and did not switch it back
    on since (a switch back on by them is flagged `anti_forensic` too, so it is among the events
    looked at). Session-only switches (sql_log_bin, sql_log_off) count for the same session only."""
    from ingest.models import Event as EventRow
    from ingest.normalize import _SESSION_SWITCHES
    from ingest.sql import log_switches

    user, session = condition.get("user"), str(condition["session"])
    session_id = session_id_of(session)
    who = Q(session_id=session_id) | Q(user=user) if user is not None else Q(session_id=session_id)
    rows = EventRow.objects.filter(who, server=condition["server"], flags__contains=["anti_forensic"])
    if condition.get("at"):
        rows = rows.filter(occurred_at__lte=datetime.fromisoformat(str(condition["at"])))
    kinds = set(condition["kinds"])  # type: ignore[call-overload]
    decided: set[str] = set()
    for sql, row_session in rows.order_by("-occurred_at", "-id").values_list("sql", "session_id")[
        :SWITCHES_LOOKED_AT
    ]:
        for kind, on in log_switches(sql):
            if kind not in kinds or kind in decided:
                continue
            if kind in _SESSION_SWITCHES and row_session != session_id:
                continue
            if not on:
                return True
            decided.add(kind)  # switched back on by them since: that act is closed already
    return False


class EventWriter:
    """Writes batches for one source file and ingest run. Call `write` inside a transaction."""

    def __init__(self, *, source_file_id: int, ingest_run_id: int | None) -> None:
        self.formatter = RowFormatter(source_file_id=source_file_id, ingest_run_id=ingest_run_id)
        self.slow_path = False
        self.source_file_id = source_file_id
        self.ingest_run_id = ingest_run_id
        self._source_id: int | None = None

    @property
    def source_id(self) -> int:
        """The source whose custody chain records what this writer stores."""
        if self._source_id is None:
            from ingest.models import SourceFile

            self._source_id = SourceFile.objects.values_list("source_id", flat=True).get(
                pk=self.source_file_id
            )
        return self._source_id

    def write(self, events: Sequence[Event]) -> int:
        """Store the events that are not stored yet; return how many were new."""
        return self.write_formatted(self.formatter.format(events))

    def write_formatted(self, batch: FormattedBatch) -> int:
        """Store a formatted batch's events that are not stored yet; return how many were new."""
        if not batch.rows:
            return 0
        ensure_event_partitions(batch.months)
        self._upsert_sessions(batch.sessions)
        if not self.slow_path:
            # COPY returns no ids: the batch's rows get ids after this one (and up to the
            # sequence's value after the COPY, in the order of the lines), which its link records.
            id_after = self._event_id("nextval")
            try:
                with transaction.atomic():
                    self._copy("ingest_event", batch.rows)
            except psycopg.errors.UniqueViolation:
                self.slow_path = True
            except Exception as e:  # Django wraps driver errors; look at the cause.
                if not isinstance(e.__cause__, psycopg.errors.UniqueViolation):
                    raise
                self.slow_path = True
            else:
                raise_event_alerts(batch.alerts)
                self._chain(batch.rows, id_after, self._event_id("currval"), batch.offsets)
                return len(batch.rows)
        return self._insert_new(batch)

    def apply_corrections(self, corrections: Sequence[FlagCorrection]) -> None:
        """Add each correction's flag to its events, stored now or before (idempotent)."""
        for c in corrections:
            if c.if_switched_off is not None and not switched_off_before(c.if_switched_off):
                continue
            # The unique index leads with the time: give it the times (and partition pruning too).
            timed = [(h, t) for h, t in c.keys if t is not None]
            untimed = [h for h, t in c.keys if t is None]
            changed: list[tuple[datetime | None, bytes, int]] = []
            with connection.cursor() as cur:
                if timed:
                    cur.execute(
                        "UPDATE ingest_event SET flags = array_append(flags, %s)"
                        " WHERE (occurred_at, record_hash) IN"
                        " (SELECT * FROM unnest(%s::timestamptz[], %s::bytea[]))"
                        " AND NOT (%s = ANY(flags)) RETURNING occurred_at, record_hash, source_file_id",
                        [c.flag, [t for _, t in timed], [h for h, _ in timed], c.flag],
                    )
                    changed += cur.fetchall()
                if untimed:
                    cur.execute(
                        "UPDATE ingest_event SET flags = array_append(flags, %s)"
                        " WHERE occurred_at IS NULL AND record_hash = ANY(%s) AND NOT (%s = ANY(flags))"
                        " RETURNING occurred_at, record_hash, source_file_id",
                        [c.flag, untimed, c.flag],
                    )
                    changed += cur.fetchall()
            if changed:  # the chain of the events' source says which gained the flag, and when
                self._chain_flag(c.flag, changed)

    def _chain_flag(self, flag: str, changed: list[tuple[datetime | None, bytes, int]]) -> None:
        from ingest.models import SourceFile

        sources = dict(
            SourceFile.objects.filter(pk__in={f for _, _, f in changed}).values_list("pk", "source_id")
        )
        for source_id in sorted(set(sources.values())):
            keys = sorted(event_key(t, h) for t, h, f in changed if sources[f] == source_id)
            append_link(source_id=source_id, kind="flags", flag=flag, keys=keys)

    def _upsert_sessions(self, sessions: list[tuple[object, ...]]) -> None:
        # In the order of their ids: workers storing ranges of one backlog at once upsert some
        # of the same sessions, and rows locked in one order cannot deadlock.
        sessions = sorted(sessions, key=lambda row: row[0])  # type: ignore[arg-type, return-value]
        columns: list[list[object]] = [list(column) for column in zip(*sessions, strict=True)]
        with connection.cursor() as cur:
            cur.execute(_SESSION_UPSERT, columns)

    def _copy(self, table: str, rows: list[str]) -> None:
        raw_cursor = connection.connection.cursor()  # the psycopg cursor: Django's has no COPY
        statement = SQL("COPY {} ({}) FROM STDIN").format(Identifier(table), _COLUMNS)
        with raw_cursor.copy(statement) as copy:
            for start in range(0, len(rows), COPY_CHUNK_ROWS):
                copy.write("".join(rows[start : start + COPY_CHUNK_ROWS]).encode())

    def _event_id(self, function: str) -> int:
        """nextval or currval of the events' id sequence (`function` is one of those two names)."""
        statement = {
            "nextval": "SELECT nextval(pg_get_serial_sequence('ingest_event', 'id'))",
            "currval": "SELECT currval(pg_get_serial_sequence('ingest_event', 'id'))",
        }[function]
        with connection.cursor() as cur:
            cur.execute(statement)
            return cur.fetchone()[0]

    def _chain(self, rows: Sequence[str], id_after: int, id_last: int, offsets: tuple[int, int]) -> None:
        chain_events(
            source_id=self.source_id,
            source_file_id=self.source_file_id,
            ingest_run_id=self.ingest_run_id,
            rows=rows,
            id_after=id_after,
            id_last=id_last,
            offsets=offsets,
        )

    def _insert_new(self, batch: FormattedBatch) -> int:
        with connection.cursor() as cur:
            staging = SQL(
                "CREATE TEMP TABLE IF NOT EXISTS event_staging ON COMMIT DELETE ROWS AS"
                " SELECT {} FROM ingest_event WITH NO DATA"
            ).format(_COLUMNS)
            cur.execute(staging.as_string(connection.connection))
            cur.execute("TRUNCATE event_staging")
        self._copy("event_staging", batch.rows)
        with connection.cursor() as cur:
            # _COLUMN_LIST is a constant of this module, not input.
            # Only the events new to the store raise alerts: those the insert returns.
            cur.execute(_INSERT_NEW)
            new = cur.fetchall()
        if new:
            # The chain records the new events' lines, in the order of their ids.
            by_hash = {
                row.split("\t", _RECORD_HASH_FIELD + 1)[_RECORD_HASH_FIELD][3:]: row for row in batch.rows
            }
            rows = [by_hash[bytes(record_hash).hex()] for _, record_hash in new]
            self._chain(rows, new[0][0] - 1, new[-1][0], batch.offsets)
        return len(new)
