"""Incremental pulls of Oracle's UNIFIED_AUDIT_TRAIL over SQL (python-oracledb, thin mode).

No Django: the caller hands in a DB-API connection and a watermark (or None), and gets
LogRecords and the watermark to keep after each one. The trail has no byte offsets, and in
queued mode (the default) a record reaches the view up to the flush interval (about 3 s) after
its EVENT_TIMESTAMP_UTC, later under load: every pull reads again from the newest time it saw
minus an overlap window, and skips the rows it already yielded by their natural key (DBID,
INSTANCE_ID, SESSIONID, ENTRY_ID, STATEMENT_ID, EVENT_TIMESTAMP_UTC), kept in the watermark for
that window. A pull reads at most `max_rows` rows (the next pull goes on from there).
Usage, the account and its limits: docs/architecture.md, "Oracle Unified Auditing".
"""

from __future__ import annotations

import hashlib
import json
from collections import deque
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from ingest.parsers.oracle_audit import MAX_RECORD_BYTES, NATURAL_KEY, row_record
from ingest.parsers.records import PROBLEM_EXCERPT_BYTES, LogRecord, Problem, ServerStart, out_of_range

__all__ = ["QUERY", "OraclePuller", "connect", "row_bytes"]

# The documented columns, oldest first and in a total order (the natural key breaks ties), at
# most :max_rows of them (FETCH FIRST: 12c and later, as Unified Auditing is).
QUERY = (
    "SELECT EVENT_TIMESTAMP_UTC, EVENT_TIMESTAMP, DBID, INSTANCE_ID, SESSIONID, ENTRY_ID, "
    "STATEMENT_ID, AUDIT_TYPE, DBUSERNAME, CURRENT_USER, DBPROXY_USERNAME, OS_USERNAME, "
    "USERHOST, TERMINAL, CLIENT_PROGRAM_NAME, AUTHENTICATION_TYPE, ACTION_NAME, RETURN_CODE, "
    "OBJECT_SCHEMA, OBJECT_NAME, SQL_TEXT, SQL_BINDS, SCN, TRANSACTION_ID, "
    "UNIFIED_AUDIT_POLICIES, SYSTEM_PRIVILEGE_USED, CLIENT_IDENTIFIER, OS_PROCESS FROM "
    "UNIFIED_AUDIT_TRAIL WHERE EVENT_TIMESTAMP_UTC >= :since ORDER BY EVENT_TIMESTAMP_UTC, "
    "DBID, INSTANCE_ID, SESSIONID, ENTRY_ID, STATEMENT_ID FETCH FIRST :max_rows ROWS ONLY"
)
# Earliest time for a first pull: "everything the trail still holds".
_EPOCH = datetime(1970, 1, 1)


def _value(value: Any) -> Any:
    """A column's value as the JSON of the raw row holds it: LOBs read, RAW as hex (as SQLcl
    prints TRANSACTION_ID), numbers as numbers, times as ISO text (UTC, naive as fetched)."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else str(value)
    if isinstance(value, datetime):
        return value.replace(tzinfo=None).isoformat(timespec="microseconds")
    if isinstance(value, bytes | bytearray):
        return bytes(value).hex().upper()
    read = getattr(value, "read", None)
    if callable(read):  # a LOB the driver did not fetch as text
        return str(read())
    return str(value)


def row_bytes(columns: list[str], row: tuple[Any, ...]) -> tuple[bytes, dict[str, Any]]:
    """The raw bytes kept for a pulled row (its record of evidence: the row as SQLcl's JSON
    export writes a row, lower-case keys in the query's order) and its values."""
    values = {name.lower(): _value(v) for name, v in zip(columns, row, strict=True)}
    return json.dumps(values, ensure_ascii=False, separators=(",", ":")).encode(
        "utf-8", "surrogateescape"
    ), values


def _key(values: dict[str, Any]) -> str:
    """The natural key of a row, hashed (the watermark keeps these)."""
    text = "\x00".join(str(values.get(k.lower())) for k in NATURAL_KEY)
    return hashlib.blake2b(text.encode("utf-8", "surrogateescape"), digest_size=12).hexdigest()


class OraclePuller:
    """One pull of new rows after `watermark`; `watermark` is the one to keep afterwards."""

    def __init__(
        self,
        conn: Any,
        watermark: dict[str, Any] | None,
        *,
        chunk: int = 1000,
        overlap: float = 30.0,
        max_rows: int = 50_000,
        max_seen: int = 50_000,
    ) -> None:
        """`overlap`: seconds re-read on every pull (queued mode's flush interval is 3 s by
        default; a busy instance or a RAC node flushing late needs more)."""
        self.conn = conn
        self.chunk = chunk
        self.overlap = timedelta(seconds=overlap)
        self.max_rows = max_rows
        self.max_seen = max_seen
        watermark = watermark or {}
        self._time = datetime.fromisoformat(watermark["time"]) if watermark.get("time") else None
        self._old_seen: set[str] = set(watermark.get("seen") or ())
        self._was_full = bool(watermark.get("full"))
        self._window: deque[tuple[datetime, str]] = deque()  # (time, key) of rows read, oldest first
        self._complete = False
        self.rows_read = 0
        self.rows_new = 0
        self.full = False  # the pull stopped at max_rows: more may be waiting

    @property
    def since(self) -> datetime:
        """Where this pull reads from: the newest time seen minus the overlap; the newest time
        itself after a pull that stopped at max_rows (else a window holding more than max_rows
        rows would be read again for ever: the overlap is then re-read by the next pull that is
        not full, from its own newest time)."""
        if self._time is None:
            return _EPOCH.replace(tzinfo=UTC)
        return self._time if self._was_full else self._time - self.overlap

    @property
    def watermark(self) -> dict[str, Any]:
        """JSON-serialisable state after every record yielded so far: the newest time, and the
        keys of the rows read in the overlap window before it."""
        if self._time is None:
            return {"time": None, "seen": [], "full": False}
        horizon = self._time - self.overlap
        seen = [k for t, k in self._window if t >= horizon][-self.max_seen :]
        if not self._complete:
            seen = sorted(set(seen) | self._old_seen)  # stopped half-way: the old window may lie ahead
        full = self._complete and self.full
        return {"time": self._time.isoformat(), "seen": sorted(set(seen)), "full": full}

    def records(self) -> Iterator[LogRecord | ServerStart | Problem]:
        """Every row not yet pulled, oldest first.

        1. Send QUERY with :since (newest time seen minus the overlap, UTC, naive as the view's
           TIMESTAMP holds it) and :max_rows.
        2. Read the rows by `fetchmany(chunk)`; key each by its natural key.
        3. Skip a row whose key the previous watermark holds; else remember it, move the newest
           time on, and yield its record (raw: the row as JSON, see row_bytes).
        """
        since = self.since.astimezone(UTC).replace(tzinfo=None)
        cursor = self.conn.cursor()
        try:
            cursor.execute(QUERY, {"since": since, "max_rows": self.max_rows})
            columns = [d[0].upper() for d in cursor.description]
            while True:
                rows = cursor.fetchmany(self.chunk)
                if not rows:
                    break
                for row in rows:
                    self.rows_read += 1
                    raw, values = row_bytes(columns, row)
                    key = _key(values)
                    # A row has no byte position: its natural key (hashed, 60 bits) stands for
                    # one, the same in every pull, so that its gaps and record hash are too.
                    position = int(key[:15], 16)
                    item = row_record(values, line=1, offset=position, raw=raw)
                    when = getattr(item, "occurred_at", None)
                    if len(raw) > MAX_RECORD_BYTES:  # a huge CLOB: the row is a problem, kept in part
                        reason = f"row longer than {MAX_RECORD_BYTES} bytes ({len(raw)})"
                        item = Problem(1, position, raw[:PROBLEM_EXCERPT_BYTES], reason)
                    if when is not None:
                        when = when if when.tzinfo else when.replace(tzinfo=UTC)
                        self._window.append((when, key))
                        if self._time is None or when > self._time:
                            self._time = when
                            horizon = when - self.overlap
                            while self._window and self._window[0][0] < horizon:
                                self._window.popleft()
                    if key in self._old_seen:
                        continue
                    self.rows_new += 1
                    if isinstance(item, LogRecord):
                        item.extra["row_key"] = key
                        problem = out_of_range(item)
                        yield item
                        if problem is not None:
                            yield problem
                        continue
                    yield item
            self.full = self.rows_read >= self.max_rows
            self._complete = True
        finally:
            cursor.close()


def connect(dsn: str, password: str | None = None, *, timeout: float = 10) -> Any:
    """A python-oracledb connection in thin mode (no Oracle client libraries) from
    `oracle://user@host:port/service_name`; the password from the environment
    (ingest.mysql_table.source_password) wins over one in the DSN. `?tls=verify` connects over
    TCPS with the server's certificate checked (python-oracledb's ssl_server_dn_match)."""
    import oracledb  # only a live Oracle pull loads the driver

    parts = urlsplit(dsn)
    if parts.scheme != "oracle":
        raise ValueError(f"not an oracle:// DSN: {parts.scheme or dsn!r}")
    options = {key: values[-1] for key, values in parse_qs(parts.query).items()}
    tls = options.get("tls", "")
    if tls not in ("", "verify"):
        raise ValueError(f"tls={tls!r}: the only value is verify")
    service = parts.path.lstrip("/")
    if not service:
        raise ValueError("the DSN names no service: oracle://user@host:1521/SERVICE_NAME")
    params = oracledb.ConnectParams(
        host=parts.hostname or "127.0.0.1",
        port=parts.port or (2484 if tls else 1521),
        service_name=service,
        protocol="tcps" if tls else "tcp",
        ssl_server_dn_match=bool(tls),
        tcp_connect_timeout=timeout,
    )
    conn = oracledb.connect(
        user=unquote(parts.username or ""),
        password=password if password is not None else unquote(parts.password or ""),
        params=params,
    )
    assert conn.thin, "python-oracledb must run in thin mode"
    conn.call_timeout = 600_000  # ms: a pull that hangs fails instead of holding the worker
    # SQL_TEXT and SQL_BINDS are CLOBs: fetched as text (bounded by the parser's field cap).
    conn.outputtypehandler = _lobs_as_text
    return conn


def _lobs_as_text(cursor: Any, metadata: Any) -> Any:
    import oracledb  # only a live Oracle pull loads the driver

    if metadata.type_code is oracledb.DB_TYPE_CLOB:
        return cursor.var(oracledb.DB_TYPE_LONG, arraysize=cursor.arraysize)
    return None
