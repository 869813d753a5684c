"""The NDJSON and CSV exports, built by PostgreSQL and streamed out of `COPY ... TO STDOUT`: many
times faster than building lines in Python (docs/architecture.md, "The REST API")."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
from django.db import connection
from django.db.models import QuerySet
from psycopg.abc import Buffer
from psycopg.pq import TransactionStatus
from psycopg.sql import SQL

from ingest.models import BinlogFile, Event
from investigations.reports.text import FORMULA_STARTS

ECS_VERSION = "8.11.0"
CHUNK_BYTES = 256 * 1024  # lines are handed to the web server in pieces of about this size
WORK_MEM = "64MB"  # for the export's sort (PostgreSQL's default, 4 MB, spills sooner to disk)

# The event's columns the inner query selects (the filter's WHERE applies to them).
COLUMNS = (
    "id", "occurred_at", "server", "session_id", "connection_id", "user", "host", "ip", "database",
    "command", "statement_type", "tables", "destructive", "flags", "sql", "fingerprint",
    "rows_affected", "status", "source_file_id", "line", "byte_offset", "attribution", "definer",
)  # fmt: skip

# Each line is JSON text put together in SQL: constant parts as literals, each value through
# to_json (which escapes it) or ::text. One json_build_object per object cost about 1 us per
# field in type look-ups, and ECS has sixteen objects a line; this is about twice as fast.


def _obj(*pairs: tuple[str, str]) -> str:
    """SQL for the JSON text of an object: (key, SQL giving the value's JSON text) pairs."""
    parts = []
    for n, (key, value) in enumerate(pairs):
        assert key.isidentifier() or key == "@timestamp"  # constants of this module, nothing quoted
        parts.append(f"'{'{' if n == 0 else ','}\"{key}\":' || {value}")
    return "(" + " || ".join(parts) + " || '}')"


def _str(column: str) -> str:
    return f"COALESCE(to_json({column})::text, 'null')"


def _num(column: str) -> str:
    return f"COALESCE({column}::text, 'null')"


def _const(text: str) -> str:
    assert "'" not in text and "\\" not in text  # a constant JSON text of this module
    return f"'{text}'"


_TIME = """COALESCE('"' || to_char(e.occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
    || '"', 'null')"""
_ARRAY = "COALESCE(array_to_json({})::text, '[]')"
_BOOL = "CASE WHEN {} THEN 'true' ELSE 'false' END"
_FILE = "COALESCE(f.path_json, 'null')"
_SOURCE = _obj(("file", _FILE), ("sha256", "COALESCE(f.sha256_json, 'null')"), ("line", _num("e.line")),
               ("offset", _num("e.byte_offset")))  # fmt: skip
_SESSION = "COALESCE(s.key_json, 'null')"
_ATTRIBUTION = _str("NULLIF(e.attribution, '')")  # "": stored before attribution was recorded
_CLIENT = """COALESCE(s.client_json, '{"program":null,"os_user":null}')"""

# `rows_changed` as investigations.query.binlog.rows_changed_of decides it, for each event: the rows of
# the binlog statements linked to it; null where it is only a candidate; 0 where a binlog file of
# its server spans its time; else null. Used only when binlogs are stored (`binlogs_stored`): the
# three index probes an event would otherwise cost an export of millions for nothing.
ROWS_CHANGED = """COALESCE(
    (SELECT sum(b.rows)::text FROM ingest_binlogstatement b WHERE b.event_id = e.id),
    CASE WHEN e.occurred_at IS NULL
            OR EXISTS (SELECT 1 FROM ingest_binlogstatement b WHERE b.candidates @> ARRAY[e.id]::bigint[])
        THEN 'null'
        WHEN EXISTS (SELECT 1 FROM ingest_binlogfile bf WHERE bf.server = e.server
            AND bf.first_time <= e.occurred_at AND e.occurred_at < bf.last_time + interval '1 second')
        THEN '0'
        ELSE 'null' END)"""
NO_ROWS_CHANGED = "'null'"


def binlogs_stored() -> bool:
    return BinlogFile.objects.exists()


def plain(binlogs: bool) -> str:
    """SQL for one event's JSON line as /api/v1/events/ shows it (EventSerializer, its order)."""
    rows_changed = ROWS_CHANGED if binlogs else NO_ROWS_CHANGED
    return _obj(
        ("id", _num("e.id")), ("occurred_at", _TIME), ("server", _str("e.server")), ("session", _SESSION),
        ("user", _str('e."user"')), ("host", _str("e.host")), ("ip", _str("e.ip")),
        ("connection_id", _num("e.connection_id")), ("database", _str("e.database")),
        ("command", _str("e.command")), ("statement_type", _str("e.statement_type")),
        ("tables", _ARRAY.format("e.tables")), ("destructive", _BOOL.format("e.destructive")),
        ("flags", _ARRAY.format("e.flags")), ("sql", _str("e.sql")),
        ("sql_length", _num("char_length(e.sql)")),
        ("fingerprint", _str("e.fingerprint")), ("rows_affected", _num("e.rows_affected")),
        ("status", _str("e.status")),
        ("source", _SOURCE), ("client", _CLIENT), ("attribution", _ATTRIBUTION),
        ("definer", _str("e.definer")), ("rows_changed", rows_changed),
    )  # fmt: skip


# The same event in Elastic Common Schema names (README "ECS field names" lists the mapping);
# what ECS has no field for stays under `auditweb`, named as /api/v1/events/ names it. An empty
# user, host or ip is left out, as ECS wants absent rather than empty values.
ECS_AUDITWEB_FIELDS = (
    "session", "connection_id", "database", "command", "statement_type", "tables", "destructive",
    "flags", "fingerprint", "rows_affected", "status", "source", "client", "attribution", "definer",
    "rows_changed",
)  # fmt: skip
_NAMED = """'{"name":' || to_json(e."user")::text || '}'"""
# `client`: address, ip and user, each only when known.
_CLIENT_ECS = (
    """'{' || concat_ws(',',
    CASE WHEN e.host <> '' THEN '"address":' || to_json(e.host)::text END,
    CASE WHEN e.ip <> '' THEN '"ip":' || to_json(e.ip)::text END,
    CASE WHEN e."user" <> '' THEN '"user":' || """
    + _NAMED
    + """ END) || '}'"""
)
# Flags are stored sorted, but a later correction (rolled_back) appends: sort when there are two+
# (by a PARALLEL SAFE function, investigations/migrations/0009: a subquery here kept the export
# out of PostgreSQL's parallel workers).
_TAGS = """CASE WHEN cardinality(e.flags) < 2 THEN COALESCE(array_to_json(e.flags)::text, '[]')
    ELSE array_to_json(auditweb_sorted_flags(e.flags))::text END"""
_OUTCOME = """CASE WHEN e.status IS NULL THEN '"unknown"' WHEN e.status = 'ok' THEN '"success"'
    ELSE '"failure"' END"""


def ecs(binlogs: bool) -> str:
    """SQL for one event's JSON line in ECS names."""
    rows_changed = ROWS_CHANGED if binlogs else NO_ROWS_CHANGED
    return _obj(
        ("@timestamp", _TIME),
        ("ecs", _const('{"version":"' + ECS_VERSION + '"}')),
        ("message", _str("e.sql")),
        ("event", _obj(
            ("kind", _const('"event"')), ("category", _const('["database"]')),
            ("type", """CASE WHEN e.destructive THEN '["change"]' ELSE '["access"]' END"""),
            ("action", _str("COALESCE(NULLIF(e.statement_type, ''), e.command)")),
            ("outcome", _OUTCOME), ("id", "'\"' || e.id || '\"'"), ("dataset", _const('"auditweb.events"')),
        )),
        ("service", _obj(("type", _const('"mysql"')), ("name", _str("e.server")))),
        ("user", f"""CASE WHEN e."user" <> '' THEN {_NAMED} ELSE '{{}}' END"""),
        ("client", _CLIENT_ECS),
        ("related", _obj(
            ("user", """CASE WHEN e."user" <> '' THEN '[' || to_json(e."user")::text || ']' ELSE '[]' END"""),
            ("ip", """CASE WHEN e.ip <> '' THEN '[' || to_json(e.ip)::text || ']' ELSE '[]' END"""),
        )),
        ("log", _obj(("file", _obj(("path", _FILE))), ("offset", _num("e.byte_offset")))),
        ("tags", _TAGS),
        ("auditweb", _obj(
            ("session", _SESSION), ("connection_id", _num("e.connection_id")),
            ("database", _str("e.database")), ("command", _str("e.command")),
            ("statement_type", _str("e.statement_type")), ("tables", _ARRAY.format("e.tables")),
            ("destructive", _BOOL.format("e.destructive")), ("flags", _ARRAY.format("e.flags")),
            ("fingerprint", _str("e.fingerprint")), ("rows_affected", _num("e.rows_affected")),
            ("status", _str("e.status")), ("source", _SOURCE), ("client", _CLIENT),
            ("attribution", _ATTRIBUTION), ("definer", _str("e.definer")), ("rows_changed", rows_changed),
        )),
    )  # fmt: skip


# The session's and the file's JSON pieces, made once per session and file rather than once per
# event (a hash join builds them with its table of sessions or files).
_JOINS = """LEFT JOIN (SELECT id, to_json(key)::text AS key_json, '{"program":'
        || COALESCE(to_json(program)::text, 'null') || ',"os_user":'
        || COALESCE(to_json(os_user)::text, 'null') || '}' AS client_json
    FROM ingest_session) s ON s.id = e.session_id
LEFT JOIN (SELECT id, to_json(path)::text AS path_json, to_json(sha256)::text AS sha256_json
    FROM ingest_sourcefile) f ON f.id = e.source_file_id"""

# The same pieces for a few events looked up by key (the alerts feed): made for those events'
# sessions and files only (the joins above would make them for every session of the store).
_JOINS_FEW = """LEFT JOIN LATERAL (SELECT to_json(key)::text AS key_json, '{"program":'
        || COALESCE(to_json(program)::text, 'null') || ',"os_user":'
        || COALESCE(to_json(os_user)::text, 'null') || '}' AS client_json
    FROM ingest_session WHERE id = e.session_id) s ON true
LEFT JOIN LATERAL (SELECT to_json(path)::text AS path_json, to_json(sha256)::text AS sha256_json
    FROM ingest_sourcefile WHERE id = e.source_file_id) f ON true"""

# Oldest first; events whose time is unknown last (as they were read). LEFT joins: an event is
# never dropped for a missing row beside it.
_EXPORT = """COPY (
    SELECT {line} FROM ({events}) AS e
    {joins}
    ORDER BY e.occurred_at ASC NULLS LAST, e.id
) TO STDOUT WITH (FORMAT csv, QUOTE E'\\x01', DELIMITER E'\\x02')"""


# The same events as CSV rows, for spreadsheets (the explorer's "CSV" button): columns named as
# /api/v1/events/ names the fields, the source flattened. Every text cell that a spreadsheet would
# run as a formula gets a leading apostrophe, as the case reports' CSV does (reports.text.csv_cell,
# whose FORMULA_STARTS this shares); COPY's CSV format quotes what needs quoting.
_FORMULA_CHARS = "ARRAY[" + ", ".join(f"chr({ord(c)})" for c in FORMULA_STARTS) + "]"


def _cell(value: str) -> str:
    """SQL for a text cell neutralised against formulas."""
    return f"CASE WHEN left({value}, 1) = ANY({_FORMULA_CHARS}) THEN chr(39) || {value} ELSE {value} END"


CSV_COLUMNS = (
    ("id", "e.id"),
    ("occurred_at", """to_char(e.occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')"""),
    ("server", _cell("e.server")), ("session", _cell("s.key")), ("user", _cell('e."user"')),
    ("host", _cell("e.host")), ("ip", _cell("e.ip")), ("connection_id", "e.connection_id"),
    ("database", _cell("e.database")), ("command", _cell("e.command")),
    ("statement_type", _cell("e.statement_type")), ("tables", _cell("array_to_string(e.tables, ' ')")),
    ("destructive", "CASE WHEN e.destructive THEN 'yes' ELSE 'no' END"),
    ("flags", _cell("array_to_string(e.flags, ' ')")), ("sql", _cell("e.sql")),
    ("rows_affected", "e.rows_affected"), ("status", _cell("e.status")),
    ("source_file", _cell("f.path")), ("source_sha256", "f.sha256"), ("source_line", "e.line"),
    ("source_offset", "e.byte_offset"), ("attribution", _cell("NULLIF(e.attribution, '')")),
    ("definer", _cell("e.definer")),
)  # fmt: skip
_CSV_JOINS = """LEFT JOIN ingest_session s ON s.id = e.session_id
LEFT JOIN ingest_sourcefile f ON f.id = e.source_file_id"""
_EXPORT_CSV = """COPY (
    SELECT {columns} FROM ({events}) AS e
    {joins}
    ORDER BY e.occurred_at ASC NULLS LAST, e.id
) TO STDOUT WITH (FORMAT csv, HEADER true)"""
CSV_BOM = "\ufeff".encode()  # spreadsheets then read the file as UTF-8


_BY_IDS = """SELECT e.id, {line} FROM ingest_event e
{joins}
WHERE e.id = ANY(%s::bigint[])"""


def events_as_api(ids: list[int]) -> dict[int, dict[str, Any]]:
    """The events of these ids as /api/v1/events/ shows them: PostgreSQL builds each as the export
    builds its lines (the same JSON), so a page of the alerts feed costs no Django model and no
    serializer per event (they were most of a poll's time). Found through the events' id index."""
    if not ids:
        return {}
    line = plain(binlogs_stored())
    statement = SQL(_BY_IDS).format(line=SQL(line), joins=SQL(_JOINS_FEW))
    with connection.cursor() as cursor:
        cursor.execute(statement.as_string(connection.connection), [ids])
        rows = cursor.fetchall()
    return {event_id: orjson.loads(text) for event_id, text in rows}


def export_lines(events: QuerySet[Event], schema: str) -> Iterator[bytes]:
    """NDJSON (`schema` auditweb or ecs) or CSV (`schema` csv) of these events, oldest first, in
    pieces of CHUNK_BYTES.

    1. The filter's queryset, reduced to COLUMNS, is the inner query; the JSON joins the rest.
    2. No time limit (an export of millions runs for minutes) and more memory to sort; both reset.
    3. A client that goes away closes this generator: psycopg cancels the COPY and drains it, so
       the connection stays reusable.
    """
    inner, params = events.order_by().values(*COLUMNS).query.sql_with_params()
    if schema == "csv":
        columns = ", ".join(f'{sql} AS "{name}"' for name, sql in CSV_COLUMNS)
        statement = _EXPORT_CSV.format(columns=columns, joins=_CSV_JOINS, events=inner)
        yield CSV_BOM
    else:
        binlogs = binlogs_stored()
        line = ecs(binlogs) if schema == "ecs" else plain(binlogs)
        statement = _EXPORT.format(line=line, joins=_JOINS, events=inner)
    connection.ensure_connection()
    with connection.connection.cursor() as cursor:
        cursor.execute(
            "SELECT set_config('statement_timeout', '0', false), set_config('work_mem', %s, false)",
            [WORK_MEM],
        )
        try:
            with cursor.copy(statement, params) as copy:
                pending: list[Buffer] = []
                size = 0
                for row in copy:  # one line each (bytes psycopg owns: safe to keep)
                    pending.append(row)
                    size += len(row)
                    if size >= CHUNK_BYTES:
                        yield b"".join(pending)
                        pending, size = [], 0
                if pending:
                    yield b"".join(pending)
        finally:
            if connection.connection.info.transaction_status != TransactionStatus.INERROR:
                cursor.execute("RESET statement_timeout")
                cursor.execute("RESET work_mem")
