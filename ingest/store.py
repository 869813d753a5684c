"""The store writer: batches of normalized events into PostgreSQL with binary COPY.

Idempotent: a batch is first copied straight into the event table (the fast
path). If any of its records is stored already, the unique index on the record
hash refuses the COPY; the batch is then copied into a staging table and
inserted with ON CONFLICT DO NOTHING, which stores only the new ones. After one
such conflict the writer stays on the slow path for the rest of the file.
"""

from __future__ import annotations

from collections.abc import Sequence

import psycopg
from django.db import connection, transaction

from ingest.events import Event, SessionInfo
from ingest.partitions import ensure_event_partitions, month_of

EVENT_COLUMNS = (
    "occurred_at", "server", "connection_id", "user", "host", "ip", "database", "command",
    "statement_type", "tables", "destructive", "flags", "sql", "fingerprint", "rows_affected",
    "status", "raw", "line", "byte_offset", "record_hash", "ingest_run_id", "session_id", "source_file_id",
)  # fmt: skip
EVENT_TYPES = (
    "timestamptz", "varchar", "int8", "varchar", "varchar", "varchar", "varchar", "varchar",
    "varchar", "varchar[]", "bool", "varchar[]", "text", "text", "int8",
    "varchar", "bytea", "int8", "int8", "bytea", "int8", "int8", "int8",
)  # fmt: skip
_COLUMN_LIST = ", ".join(f'"{c}"' for c in EVENT_COLUMNS)

# Bounds of what one event row may hold: a log line can be any length (hostile input).
MAX_SQL_CHARS = 1_000_000
MAX_FIELD_CHARS = {"user": 200, "host": 300, "ip": 64, "database": 200, "command": 40, "status": 40}

_SESSION_UPSERT = """
INSERT INTO ingest_session
    (key, server, boot, connection_id, "user", host, ip, database, started_at, ended_at, attributed)
SELECT * FROM unnest(
    %s::varchar[], %s::varchar[], %s::varchar[], %s::int8[], %s::varchar[], %s::varchar[],
    %s::varchar[], %s::varchar[], %s::timestamptz[], %s::timestamptz[], %s::bool[])
ON CONFLICT (key) DO UPDATE SET
    -- What we learn later about a session fills gaps; it never overwrites what a Connect said.
    "user" = COALESCE(ingest_session."user", EXCLUDED."user"),
    host = COALESCE(ingest_session.host, EXCLUDED.host),
    ip = COALESCE(ingest_session.ip, EXCLUDED.ip),
    database = COALESCE(ingest_session.database, EXCLUDED.database),
    started_at = COALESCE(ingest_session.started_at, EXCLUDED.started_at),
    ended_at = GREATEST(ingest_session.ended_at, EXCLUDED.ended_at),
    attributed = ingest_session.attributed OR EXCLUDED.attributed
RETURNING key, id
"""


def _bounded(value: str | None, limit: int) -> str | None:
    if value is None:
        return None
    value = value.replace("\x00", "")
    return value if len(value) <= limit else value[: limit - 1] + "…"


class EventWriter:
    """Writes batches for one source file and ingest run. Call `write` inside a transaction."""

    def __init__(self, *, source_file_id: int, ingest_run_id: int | None) -> None:
        self.source_file_id = source_file_id
        self.ingest_run_id = ingest_run_id
        self.session_ids: dict[str, int] = {}
        self.slow_path = False

    def write(self, events: Sequence[Event]) -> int:
        """Store the events that are not stored yet; return how many were new."""
        if not events:
            return 0
        ensure_event_partitions({month_of(e.occurred_at) for e in events if e.occurred_at is not None})
        self._upsert_sessions({e.session.key: e.session for e in events}.values())
        rows = [self._row(e) for e in events]
        if not self.slow_path:
            try:
                with transaction.atomic():
                    self._copy("ingest_event", rows)
                return len(rows)
            except psycopg.errors.UniqueViolation:
                self.slow_path = True
            except Exception as e:  # Django wraps driver errors; look at the cause.
                if not isinstance(e.__cause__, psycopg.errors.UniqueViolation):
                    raise
                self.slow_path = True
        return self._insert_new(rows)

    def _upsert_sessions(self, sessions: Sequence[SessionInfo] | object) -> None:
        sessions = list(sessions)  # type: ignore[call-overload]
        columns: list[list[object]] = [[] for _ in range(11)]
        for s in sessions:
            values = (
                s.key, s.server, s.boot, s.connection_id, _bounded(s.user, 200), _bounded(s.host, 300),
                _bounded(s.ip, 64), _bounded(s.database, 200), s.started_at, s.ended_at, s.attributed,
            )  # fmt: skip
            for column, value in zip(columns, values, strict=True):
                column.append(value)
        with connection.cursor() as cur:
            cur.execute(_SESSION_UPSERT, columns)
            self.session_ids.update(dict(cur.fetchall()))

    def _row(self, e: Event) -> tuple[object, ...]:
        sql = e.sql if len(e.sql) <= MAX_SQL_CHARS else e.sql[:MAX_SQL_CHARS]
        flags = sorted(e.flags | {"sql_truncated"}) if sql is not e.sql else sorted(e.flags)
        return (
            e.occurred_at,
            e.server,
            e.connection_id,
            _bounded(e.user, 200),
            _bounded(e.host, 300),
            _bounded(e.ip, 64),
            _bounded(e.database, 200),
            _bounded(e.command, 40),
            e.statement_type,
            list(e.tables),
            e.destructive,
            flags,
            sql,
            e.fingerprint.replace("\x00", ""),
            e.rows_affected,
            _bounded(e.status, 40),
            e.raw,
            e.line,
            e.offset,
            e.record_hash(),
            self.ingest_run_id,
            self.session_ids[e.session.key],
            self.source_file_id,
        )

    def _copy(self, table: str, rows: list[tuple[object, ...]]) -> None:
        raw_cursor = connection.connection.cursor()  # the psycopg cursor: Django's has no COPY
        with raw_cursor.copy(f"COPY {table} ({_COLUMN_LIST}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(EVENT_TYPES)
            for row in rows:
                copy.write_row(row)

    def _insert_new(self, rows: list[tuple[object, ...]]) -> int:
        with connection.cursor() as cur:
            staging = f"SELECT {_COLUMN_LIST} FROM ingest_event WITH NO DATA"  # noqa: S608 - a constant
            cur.execute("CREATE TEMP TABLE IF NOT EXISTS event_staging ON COMMIT DELETE ROWS AS " + staging)
            cur.execute("TRUNCATE event_staging")
        self._copy("event_staging", rows)
        with connection.cursor() as cur:
            # _COLUMN_LIST is a constant of this module, not input.
            insert = f"INSERT INTO ingest_event ({_COLUMN_LIST}) SELECT {_COLUMN_LIST} FROM event_staging"  # noqa: S608
            cur.execute(insert + " ORDER BY line ON CONFLICT DO NOTHING")
            return cur.rowcount
