"""Incremental pulls of `mysql.general_log` from a live server (log_output=TABLE).

No Django: the caller hands in a DB-API connection and a watermark (or None), and gets
LogRecords and the watermark to store after each one. A table has no byte offsets, so the
watermark keeps an overlap window and the hashes of its rows: chained pulls yield each row
exactly once. Usage, the watermark and its limit: docs/architecture.md, "The live general_log table".
"""

from __future__ import annotations

import re
import ssl
from collections import deque
from collections.abc import Generator, Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from ingest.parsers.general_log_table import canonical_row, row_hash, row_record
from ingest.parsers.records import LogRecord, Problem, out_of_range

__all__ = ["QUERY", "TABLE", "Puller", "pull"]

TABLE = "mysql.general_log"
# The columns as bytes where they are text (the argument may hold anything), newest last.
QUERY = (
    "SELECT event_time, CAST(user_host AS BINARY), thread_id, server_id,"
    " CAST(command_type AS BINARY), CAST(argument AS BINARY)"
    " FROM {table} WHERE event_time >= %s ORDER BY event_time"
)
# `db.table`, plain identifiers only: the name is put into the query as is.
_TABLE_NAME = re.compile(r"(?P<db>[A-Za-z0-9_$]{1,64})\.(?P<table>[A-Za-z0-9_$]{1,64})")
# Seconds the server waits for the client to take the next part of the streamed result.
_NET_WRITE_TIMEOUT = 3600
# Earliest time a TIMESTAMP can hold: "everything" for a first pull.
_EPOCH = datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC)


def _parse_time(text: str) -> datetime:
    t = datetime.fromisoformat(text)
    return t if t.tzinfo is not None else t.replace(tzinfo=UTC)


class Puller:
    """One pull of new rows after `watermark`; `watermark` is the one to keep afterwards."""

    def __init__(
        self,
        conn: Any,
        watermark: dict[str, Any] | None,
        *,
        chunk: int = 5000,
        overlap: float = 2.0,
        max_seen: int = 50_000,
        table: str = TABLE,
    ) -> None:
        """`table` is another table of the same columns (a copy of the log, or a test's)."""
        m = _TABLE_NAME.fullmatch(table)
        if m is None:
            raise ValueError(f"not a db.table name: {table!r}")
        self.query = QUERY.format(table=f"`{m['db']}`.`{m['table']}`")
        self.conn = conn
        self.chunk = chunk
        self.overlap = timedelta(seconds=overlap)
        self.max_seen = max_seen
        watermark = watermark or {}
        self._since = _parse_time(watermark["since"]) if watermark.get("since") else None
        self._time = _parse_time(watermark["time"]) if watermark.get("time") else None
        self._old_seen: set[str] = set(watermark.get("seen") or ())
        self._met: set[str] = set()  # hashes of _old_seen read again in this pull
        self._window: deque[tuple[datetime, str]] = deque()  # (event_time, hash), oldest first
        self._complete = False
        self.rows_read = 0  # rows the query returned, skipped ones included
        self.rows_new = 0  # records yielded

    # -- the watermark -------------------------------------------------------------------

    @property
    def watermark(self) -> dict[str, Any]:
        """JSON-serialisable state after every record yielded so far (docs/architecture.md: the watermark)."""
        if self._time is None:
            return {"time": None, "since": None, "seen": []}
        since = self._time - self.overlap
        if self._since is not None and since < self._since:
            since = self._since  # rows before the old `since` have no hash kept: never re-read
        window = [(t, h) for t, h in self._window if t >= since]
        if len(window) > self.max_seen:
            since = window[len(window) - self.max_seen][0]
            window = [(t, h) for t, h in window if t >= since]
        seen = {h for _, h in window}
        if not self._complete:
            # Stopped half-way: hashes of the old window not read again yet may lie ahead.
            seen |= self._old_seen - self._met
        return {"time": self._time.isoformat(), "since": since.isoformat(), "seen": sorted(seen)}

    # -- the rows ------------------------------------------------------------------------

    def records(self) -> Iterator[LogRecord | Problem]:
        """Every row not yet pulled, oldest first, as a LogRecord.

        1. Read from `since` (or from the start) in event_time order.
        2. Number identical rows of one timestamp (0, 1, ...) and hash each.
        3. Remember the hash in the window (to skip it next time); skip the row if the
           previous watermark saw it; otherwise update the state, then yield it.
        """
        import pymysql.cursors  # only a live pull loads PyMySQL: ingest.models imports this module

        since = self._since or _EPOCH
        cursor = self.conn.cursor(pymysql.cursors.SSCursor)
        try:
            cursor.execute("SET time_zone = '+00:00'")
            cursor.execute("SET SESSION net_write_timeout = %s", (_NET_WRITE_TIMEOUT,))
            cursor.execute(self.query, (since.astimezone(UTC).replace(tzinfo=None).isoformat(sep=" "),))
            twins: dict[bytes, int] = {}
            twins_time: datetime | None = None
            horizon = timedelta(0)
            while True:
                rows = cursor.fetchmany(self.chunk)
                if not rows:
                    break
                for event_time, user_host, thread_id, server_id, command, argument in rows:
                    when = event_time.replace(tzinfo=UTC)
                    argument = bytes(argument)
                    raw = canonical_row(when, user_host, thread_id, server_id, command, argument)
                    if when != twins_time:
                        twins, twins_time = {}, when
                    twin = twins.get(raw, 0)
                    twins[raw] = twin + 1
                    h = row_hash(raw, twin)
                    self.rows_read += 1
                    self._window.append((when, h))
                    if self._time is None or when > self._time:
                        self._time = when
                        horizon = when - self.overlap
                        while self._window[0][0] < horizon and len(self._window) > 1:
                            self._window.popleft()
                    if h in self._old_seen:
                        self._met.add(h)
                        continue
                    record = row_record(
                        when, user_host, thread_id, server_id, command, argument, offset=twin, raw=raw
                    )
                    record.extra["row_hash"] = h
                    self.rows_new += 1
                    # thread_id is BIGINT UNSIGNED: above 2^63 it is a problem of this row.
                    problem = out_of_range(record)
                    yield record
                    if problem is not None:
                        yield problem
            self._complete = True
        finally:
            cursor.close()


def pull(
    conn: Any,
    watermark: dict[str, Any] | None,
    *,
    chunk: int = 5000,
    overlap: float = 2.0,
    table: str = TABLE,
) -> Generator[LogRecord, None, dict[str, Any]]:
    """The records of one pull; the generator's return value is the final watermark
    (`watermark = yield from pull(...)`). A caller that may stop half-way needs the
    watermark after each record: use a Puller."""
    puller = Puller(conn, watermark, chunk=chunk, overlap=overlap, table=table)
    yield from puller.records()
    return puller.watermark


# Only variables with this prefix may hold a source's password: a source's `password_env` is chosen
# by an admin, and any other name (SECRET_KEY, DATABASE_URL...) would hand the worker's own secrets
# to whatever server the DSN names.
PASSWORD_ENV_PREFIX = "AUDITWEB_SOURCE_"
PASSWORD_ENV_DEFAULT = "AUDITWEB_SOURCE_MYSQL_PASSWORD"
# The name the default had before: still read when the new one is not set (a deployment's .env).
_PASSWORD_ENV_LEGACY = "AUDITWEB_MYSQL_PASSWORD"
_PASSWORD_ENV_NAME = re.compile(r"AUDITWEB_SOURCE_[A-Z0-9_]{1,84}")
# Authentication plugins that hand the password to the server as it is: mysql_clear_password
# (LDAP/PAM accounts) and MariaDB's dialog (PAM). A server the DSN names could ask for them.
CLEAR_TEXT_PLUGINS = ("mysql_clear_password", "dialog")


def password_env_problem(name: str) -> str | None:
    """Why `name` may not name the variable holding a source's password (None: it may)."""
    if name and _PASSWORD_ENV_NAME.fullmatch(name) is None:
        return (
            f"Name a variable that starts with {PASSWORD_ENV_PREFIX} (upper-case letters, digits and _), "
            f"e.g. {PASSWORD_ENV_DEFAULT}: only those may hold a source's password."
        )
    return None


def source_password(name: str, environ: Mapping[str, str]) -> str | None:
    """The password a source's `password_env` names, from `environ` (the worker's environment);
    None when it names none. Raises ValueError for a name outside PASSWORD_ENV_PREFIX (a row made
    before the rule, or written past the form), without reading it."""
    if not name:
        return None
    problem = password_env_problem(name)
    if problem is not None:
        raise ValueError(f"password_env {name!r} refused: {problem}")
    value = environ.get(name)
    if value is None and name == PASSWORD_ENV_DEFAULT:
        value = environ.get(_PASSWORD_ENV_LEGACY)
    return value


class ClearTextRefused:
    """PyMySQL's handler (auth_plugin_map) of a plugin that would send the password in clear: it
    refuses, so the server never gets it. Used unless the connection is TLS with a verified
    certificate (`?tls=verify`); opportunistic TLS protects nothing from the server itself."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def _refuse(self) -> None:
        import pymysql  # only a live pull loads PyMySQL: ingest.models imports this module

        raise pymysql.err.OperationalError(
            2059,
            "the server asked for the password in clear text (mysql_clear_password or dialog); "
            "AuditWeb sends it only over TLS with a verified certificate (add ?tls=verify to the DSN)",
        )

    def authenticate(self, pkt: Any) -> Any:
        self._refuse()

    def prompt(self, echo: bool, prompt: bytes) -> bytes:  # dialog's questions
        self._refuse()
        return b""


def connect(dsn: str, password: str | None = None, *, timeout: float = 10, read_timeout: float = 600) -> Any:
    """A PyMySQL connection from `mysql://user[:password]@host[:port]` or
    `mysql://user@localhost?unix_socket=/run/mysqld/mysqld.sock`. A `password` given here
    (from the environment, say) wins over one in the DSN.

    `?tls=verify` asks for TLS with the server's certificate and host name checked against the
    system's CAs (or `&tls_ca=/path/ca.pem`); only then may the server have the password in
    clear text (CLEAR_TEXT_PLUGINS). Without it, PyMySQL still encrypts when the server offers
    TLS, but the server is not authenticated, and clear-text plugins are refused."""
    import pymysql  # only a live pull loads PyMySQL: ingest.models imports this module

    parts = urlsplit(dsn)
    if parts.scheme not in ("mysql", "mariadb"):
        raise ValueError(f"not a mysql:// DSN: {parts.scheme or dsn!r}")
    options = {key: values[-1] for key, values in parse_qs(parts.query).items()}
    kwargs: dict[str, Any] = {
        "user": unquote(parts.username or ""),
        "password": password if password is not None else unquote(parts.password or ""),
        "connect_timeout": timeout,
        "read_timeout": read_timeout,
        "autocommit": True,
    }
    tls = options.get("tls", "")
    if tls not in ("", "verify"):
        raise ValueError(f"tls={tls!r}: the only value is verify")
    if tls == "verify":
        # A context of our own: PyMySQL's options check no host name unless a CA file is given.
        kwargs["ssl"] = ssl.create_default_context(cafile=options.get("tls_ca") or None)
    else:
        kwargs["auth_plugin_map"] = dict.fromkeys(CLEAR_TEXT_PLUGINS, ClearTextRefused)
    if options.get("unix_socket"):
        kwargs["unix_socket"] = options["unix_socket"]
    else:
        kwargs["host"] = parts.hostname or "127.0.0.1"
        kwargs["port"] = parts.port or 3306
    return pymysql.connect(**kwargs)
