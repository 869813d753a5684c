"""Session tracking and classification: parser records in, normalized events out.

Pure Python (no Django), so every rule here is testable on bytes alone:

    parse_general_log(lines) -> SessionTracker(...).process(items) -> classify_events(events)

The tracker is the only stateful stage. Its state (the open connections of the
current server boot) is a plain dict, so a checkpoint can save and restore it.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any

from ingest.events import Event, FlagCorrection, Gap, SessionInfo
from ingest.parsers.records import Item, LogRecord, Problem, ServerStart
from ingest.sql import classify, log_switches, use_database
from ingest.sql.prepared import deallocated_name, executed_name, prepared_text
from ingest.sql.routines import called_procedure, dropped_procedure, procedure_definition

# Commands whose argument is a statement the server ran (or prepared).
STATEMENT_COMMANDS = frozenset({"Query", "Execute", "Prepare"})
# Outcomes that are no failure: unknown (most formats never say) or success.
OK_STATUSES = frozenset({None, "ok", "0"})
# server_audit's TABLE events name one table each: "Table READ", "Table WRITE", ...
TABLE_EVENT_PREFIX = "Table "


def _jumped_back(connection_id: int | None, highest: int) -> bool:
    """Whether a Connect's id is so far below the boot's highest that ids started over.

    Connects are logged after authentication, so a few come out of id order; a restart
    sends ids back near 1. Far below means below half of the highest and more than 64 under
    it (a small server that restarts before reaching id 64 is not recognised this way).
    """
    if connection_id is None or not highest:
        return False
    return connection_id + max(64, highest // 2) < highest


def _boot_stamp(when: datetime | None) -> str:
    return when.strftime("%Y%m%dT%H%M%SZ") if when else "unknown"


def decode_sql(argument: bytes) -> str:
    """Searchable text of a statement. PostgreSQL text cannot hold NUL; raw keeps it."""
    return argument.decode("utf-8", "replace").replace("\x00", "")


class SessionTracker:
    """Attributes each record to its connection: user, host and current database.

    A session is (server, boot, connection id). The user and host come from the
    connection's Connect (or Change user) record; the current database from
    Connect, Init DB and USE. A connection whose Connect is not in the log is
    `unattributed`: we never guess who it was.
    """

    def __init__(self, server: str, tz: tzinfo = UTC) -> None:
        self.server = server
        self.tz = tz  # zone of naive (server local) timestamps
        self.boot: str | None = None  # label of the current boot, set at its first record
        self.boot_is_restart = False  # whether the current boot began with a banner we saw
        self.connections: dict[int | None, SessionInfo] = {}
        self.last_time: datetime | None = None
        self.max_connect_id = 0  # highest connection id a Connect had in this boot
        self._utc_in: datetime = datetime.min  # the last time converted by _utc, and its result
        self._utc_out: datetime | None = None
        # The server's stored procedures seen created: name -> [destructive, [tables]].
        self.routines: dict[str, list[Any]] = {}

    # -- checkpoint support -------------------------------------------------

    def to_state(self) -> dict[str, Any]:
        return {
            "boot": self.boot,
            "boot_is_restart": self.boot_is_restart,
            "last_time": self.last_time.isoformat() if self.last_time else None,
            "max_connect_id": self.max_connect_id,
            # A copy: the classifier goes on adding to the live one after this moment.
            "routines": {name: list(known) for name, known in self.routines.items()},
            "connections": [
                {
                    "key": s.key,
                    "boot": s.boot,
                    "connection_id": s.connection_id,
                    "user": s.user,
                    "host": s.host,
                    "ip": s.ip,
                    "database": s.database,
                    "program": s.program,
                    "os_user": s.os_user,
                    "started_at": s.started_at.isoformat() if s.started_at else None,
                    "attributed": s.attributed,
                    "autocommit": s.autocommit,
                    "explicit": s.explicit,
                    "pending": [[h.hex(), t.isoformat() if t else None] for h, t in s.pending],
                    # Copies, as above: the state is of this moment, not of what follows.
                    "statements": copy.deepcopy(s.statements),
                }
                for s in self.connections.values()
            ],
        }

    @classmethod
    def from_state(cls, server: str, tz: tzinfo, state: dict[str, Any]) -> SessionTracker:
        tracker = cls(server, tz)
        tracker.load_state(state)
        return tracker

    def load_state(self, state: dict[str, Any]) -> None:
        """Become the tracker `state` describes (see to_state): its boot, time and open sessions."""
        self.boot = state["boot"]
        self.boot_is_restart = state["boot_is_restart"]
        self.last_time = datetime.fromisoformat(state["last_time"]) if state["last_time"] else None
        self.max_connect_id = state.get("max_connect_id", 0)
        self.routines = dict(state.get("routines", {}))
        self.connections = {}
        for c in state["connections"]:
            started = datetime.fromisoformat(c["started_at"]) if c["started_at"] else None
            self.connections[c["connection_id"]] = SessionInfo(
                key=c["key"],
                server=self.server,
                boot=c["boot"],
                connection_id=c["connection_id"],
                user=c["user"],
                host=c["host"],
                ip=c["ip"],
                database=c["database"],
                program=c.get("program"),
                os_user=c.get("os_user"),
                started_at=started,
                attributed=c["attributed"],
                autocommit=c.get("autocommit", True),
                explicit=c.get("explicit", False),
                pending=[
                    (bytes.fromhex(h), datetime.fromisoformat(t) if t else None)
                    for h, t in c.get("pending", [])
                ],
                statements=dict(c.get("statements", {})),
            )

    # -- the stage -----------------------------------------------------------

    def _utc(self, when: datetime | None) -> datetime | None:
        if when is None:
            # The parser carries printed times forward itself; None means the log gave no
            # usable time (before the first one, or an impossible one): unknown, not guessed.
            return None
        if when == self._utc_in and (when.tzinfo is None) == (self._utc_in.tzinfo is None):
            return self._utc_out  # logs print many records in the same second: convert once
        converted = (when.replace(tzinfo=self.tz) if when.tzinfo is None else when).astimezone(UTC)
        self._utc_in, self._utc_out = when, converted
        self.last_time = converted
        return converted

    def _session(self, connection_id: int | None, when: datetime | None) -> SessionInfo:
        if self.boot is None:
            # The boot the log began in: we know only that it was running by then.
            self.boot = "before-" + _boot_stamp(when)
        session = self.connections.get(connection_id)
        if session is None:
            session = SessionInfo(
                key=f"{self.server}/{self.boot}/{connection_id if connection_id is not None else '-'}",
                server=self.server,
                boot=self.boot,
                connection_id=connection_id,
            )
            self.connections[connection_id] = session
        return session

    def process(self, items: Iterable[Item]) -> Iterator[Event | Problem]:
        """Turn parser items into events, in log order.

        1. A server start banner ends every open connection: thread ids start over.
           The new boot is named by the time of its first record.
        2. Connect and Change user (re)define who the connection is.
        3. Init DB and USE change the current database *after* their own event.
        """
        banner: ServerStart | None = None
        for item in items:
            if isinstance(item, Problem):
                yield item
                continue
            if isinstance(item, ServerStart):
                self.connections.clear()
                self.max_connect_id = 0
                self.boot = None
                self.boot_is_restart = True
                banner = item
                continue
            when = self._utc(item.occurred_at)
            if banner is not None:
                # The boot's label is the time of its first record; the banner itself
                # carries no time, so it is stored at that time, flagged as approximate.
                self.boot = _boot_stamp(when)
                yield self._start_event(banner, when)
                banner = None
            yield self._event(item, when)
        if banner is not None:
            if self.boot is None:
                self.boot = _boot_stamp(self.last_time)
            yield self._start_event(banner, self.last_time)

    def _start_event(self, banner: ServerStart, when: datetime | None) -> Event:
        session = self._session(None, when)
        return Event(
            occurred_at=when,
            server=self.server,
            session=session,
            connection_id=None,
            user=None,
            host=None,
            ip=None,
            database=None,
            command="Server start",
            sql=banner.version,
            raw=banner.raw,
            line=banner.line,
            offset=banner.offset,
            flags={"time_approximate"},
        )

    def _event(self, record: LogRecord, when: datetime | None) -> Event:
        command = record.command
        failed = record.status not in OK_STATUSES
        if command == "Connect" and not failed:
            if _jumped_back(record.connection_id, self.max_connect_id):
                # Ids only grow within a boot: a new connection far below the highest one
                # means the server restarted where the log shows no banner (audit logs
                # write none, or the log was off then). Its open connections are gone.
                self.connections.clear()
                self.boot = _boot_stamp(when)
                self.boot_is_restart = True
                self.max_connect_id = 0
            # A Connect begins a new connection under this id, whatever came before.
            self.connections.pop(record.connection_id, None)
            self.max_connect_id = max(self.max_connect_id, record.connection_id or 0)
        session = self._session(record.connection_id, when)
        flags: set[str] = set()
        if command in ("Connect", "Change user") and not failed:
            if record.user is not None:
                session.user, session.host, session.ip = record.user, record.host, record.ip
                session.database = record.database or None
                session.attributed = True
            elif command == "Change user":
                # The log says the account changed but not to whom (MariaDB 10.11's
                # server_audit writes CHANGEUSER with empty fields): unknown from here on.
                session.user = session.host = session.ip = None
                session.attributed = False
            if command == "Connect":
                session.started_at = when
        elif record.user is not None and not session.attributed and not failed:
            # Formats that name the account on every record (tables, audit logs).
            session.user, session.host, session.ip = record.user, record.host, record.ip
            session.attributed = True
        if not failed:
            # The client's details, where the format gives them (audit logs' connection attributes).
            session.program = session.program or record.extra.get("program_name")
            session.os_user = session.os_user or record.extra.get("os_user") or record.extra.get("os_login")
        # Who ran this record: the record's own account where the format names one on every
        # record (audit logs, table rows), else its connection's. A refused login names
        # who tried.
        if record.user is not None:
            user, host, ip = record.user, record.host, record.ip
        else:
            user, host, ip = session.user, session.host, session.ip
            if not session.attributed:
                flags.add("unattributed")
        if failed:
            flags.add("failed")
        if when is None:
            flags.add("time_unknown")
        event = Event(
            occurred_at=when,
            server=self.server,
            session=session,
            connection_id=record.connection_id,
            user=user,
            host=host,
            ip=ip,
            database=record.database or session.database,
            command=command,
            sql=decode_sql(record.argument),
            raw=record.raw,
            line=record.line,
            offset=record.offset,
            flags=flags,
            rows_affected=record.rows_affected,
            status=record.status,
            counter=record_counter(record),
        )
        if command == "Init DB":
            session.database = event.sql.strip() or None
        elif command == "Query":
            new_db = use_database(event.sql)
            if new_db:
                session.database = new_db
        elif command == "Quit":
            session.ended_at = when
        return event


# Statements that commit the open transaction before they run (MySQL "implicit commit"):
# DDL, account management, LOCK TABLES... A BEGIN does too (it starts a new transaction).
_IMPLICIT_COMMIT = re.compile(
    r"^(?:CREATE|ALTER|DROP|RENAME|TRUNCATE|GRANT|REVOKE|SET\x20PASSWORD|LOCK\x20TABLES"
    r"|UNLOCK\x20TABLES|LOAD\x20INDEX|ANALYZE|OPTIMIZE|REPAIR|FLUSH|INSTALL|UNINSTALL|BEGIN|START)"
)
_AUTOCOMMIT = re.compile(r"autocommit\s*=\s*(?P<value>0|1|on|off|true|false)\b", re.IGNORECASE)
_ROLLBACK_TO = re.compile(r"\bTO\b", re.IGNORECASE)


def _rollback(session: SessionInfo) -> FlagCorrection | None:
    keys, session.pending = session.pending, []
    session.explicit = False
    return FlagCorrection("rolled_back", keys) if keys else None


def _transactions(event: Event) -> FlagCorrection | None:
    """Follow the session's transaction through this event; a correction when it rolls back.

    Data-changing statements run inside a transaction (BEGIN ... or autocommit off) wait
    in the session's `pending` list. COMMIT, an implicit commit (DDL, BEGIN, turning
    autocommit on) clears the list; ROLLBACK, a disconnect or a change of user with the
    transaction open (the server rolls it back) flags them `rolled_back`. ROLLBACK TO
    SAVEPOINT undoes an unknown part: nothing is flagged. A statement the log says failed
    changed nothing. A server restart drops the list without a verdict (the banner may be
    a log reopening, after which the transaction goes on unseen).
    """
    session = event.session
    if event.command in ("Quit", "Change user"):
        return _rollback(session)
    if event.command not in ("Query", "Execute") or "failed" in event.flags:
        return None
    kind = event.statement_type
    if kind == "ROLLBACK":
        if _ROLLBACK_TO.search(event.sql):
            return None
        return _rollback(session)
    if kind == "COMMIT":
        session.pending, session.explicit = [], False
    elif _IMPLICIT_COMMIT.match(kind):
        session.pending = []
        session.explicit = kind in ("BEGIN", "START TRANSACTION")
    elif kind == "SET" and (m := _AUTOCOMMIT.search(event.sql)):
        on = m["value"].lower() in ("1", "on", "true")
        if on:  # turning autocommit on commits what is open
            session.pending, session.explicit = [], False
        session.autocommit = on
    elif event.destructive and (session.explicit or not session.autocommit):
        session.pending.append((event.record_hash(), event.occurred_at))
    return None


_ROUTINE_TYPES = frozenset({"CREATE PROCEDURE", "DROP PROCEDURE", "CALL"})


def _routine(event: Event, routines: dict[str, list[Any]]) -> None:
    """Learn procedures from CREATE/DROP PROCEDURE; mark a CALL with what its body does."""
    if "failed" in event.flags:
        return
    kind = event.statement_type
    if kind == "CREATE PROCEDURE":
        found = procedure_definition(event.sql, event.database)
        if found:
            routines[found[0]] = [found[1].destructive, list(found[1].tables)]
    elif kind == "DROP PROCEDURE":
        name = dropped_procedure(event.sql, event.database)
        if name:
            routines.pop(name, None)
    elif kind == "CALL":
        name = called_procedure(event.sql, event.database)
        if name in routines:
            destructive, tables = routines[name]
            event.destructive = event.destructive or destructive
            event.tables = tuple(dict.fromkeys([*event.tables, *tables]))


_PREPARED_TYPES = frozenset({"PREPARE", "EXECUTE", "DEALLOCATE PREPARE"})


def _prepared(event: Event) -> None:
    """SQL PREPARE / EXECUTE / DEALLOCATE PREPARE: the session remembers what it prepared, and
    an EXECUTE does what its PREPARE says (destructive, tables, flags), flagged `prepared`.

    The audit logs show only the EXECUTE; the general log also writes the statement run as an
    `Execute` record, which is classified on its own text. An EXECUTE whose PREPARE is not in
    the logs (or was `FROM @variable`) stays `prepared` with nothing more known.
    """
    statements = event.session.statements
    ok = "failed" not in event.flags
    if event.statement_type == "DEALLOCATE PREPARE":
        name = deallocated_name(event.sql)
        if name and ok:
            statements.pop(name, None)
        return
    event.flags.add("prepared")
    if event.statement_type == "PREPARE":
        found = prepared_text(event.sql)
        if found and ok:
            name, text = found
            statements.pop(name, None)  # a PREPARE of a known name replaces it
            if text is not None:
                c = classify(text, event.database)
                statements[name] = [c.destructive, list(c.tables), sorted(c.flags)]
        return
    name = executed_name(event.sql)
    known = statements.get(name) if name else None
    if known:
        destructive, tables, flags = known
        event.destructive = event.destructive or destructive
        event.tables = tuple(dict.fromkeys([*event.tables, *tables]))
        event.flags.update(flags)


def classify_events(
    items: Iterable[Event | Problem],
    routines: dict[str, list[Any]] | None = None,
) -> Iterator[Event | Problem | FlagCorrection]:
    """Fill in statement type, tables, destructive and flags from the SQL; follow transactions
    and say (with a FlagCorrection after the event that decides it) which events were rolled back."""
    for item in items:
        if isinstance(item, Event) and item.command.startswith(TABLE_EVENT_PREFIX):
            # A table the server opened for the statement before it: evidence of access,
            # counted once as destructive on the statement, not again on each table.
            if item.sql:
                name = item.sql if "." in item.sql or not item.database else f"{item.database}.{item.sql}"
                item.tables = [name]
            item.statement_type = item.command.upper()
        elif isinstance(item, Event) and item.command in STATEMENT_COMMANDS:
            c = classify(item.sql, item.database)
            item.statement_type = c.statement_type
            item.tables = c.tables
            item.fingerprint = c.fingerprint
            item.flags |= c.flags
            if item.command == "Prepare":
                # Preparing runs nothing; the Execute that follows is what changes data.
                item.flags.add("prepared")
            else:
                item.destructive = c.destructive
                if item.command == "Execute":
                    item.flags.add("prepared")
                if routines is not None and item.statement_type in _ROUTINE_TYPES:
                    _routine(item, routines)
                if item.command == "Query" and item.statement_type in _PREPARED_TYPES:
                    _prepared(item)
        yield item
        if isinstance(item, Event):
            correction = _transactions(item)
            if correction is not None:
                yield correction


# Statements that stop the log being read from recording (for every session): a gap follows.
_LOGGING_OFF = re.compile(
    r"""
    \b(?:general_log|server_audit_logging)\s*=\s*'?(?:0|off|false)\b  # general log, server_audit
    | \blog_output\s*=\s*'?none\b                                  # neither file nor table
    | \baudit_log_disable\s*=\s*'?(?:1|on|true)\b                   # MySQL Enterprise / Percona
    | \buninstall\s+(?:plugin|soname)\b[^;]*audit                  # an audit plugin unloaded
    """,
    re.IGNORECASE | re.VERBOSE,
)
# Times printed with second precision may repeat; further back than this is a clock jump.
_BACKWARDS = timedelta(seconds=1)


# -- missing records, proven by the log's own counter ---------------------------------------------

# Records may reach the file a little out of the order of their numbers (the number is taken
# before the write lock): a number missing is a gap only once this many more records of the log
# went by without it, or the read ended.
SEQUENCE_WINDOW = 64
_MAX_SERIES = 8  # series followed at once (a series is one file opening, or one second)
_MAX_HOLES = 256  # holes waiting for late records; the oldest is decided first
_MAX_NUMBER_DIGITS = 19


def _number(text: str) -> int | None:
    return int(text) if text.isascii() and text.isdigit() and len(text) <= _MAX_NUMBER_DIGITS else None


def record_counter(record: LogRecord) -> tuple[str, int] | None:
    """The record's place in a counter the format keeps dense, as (series, number); None if none.

    - Percona audit_log (`RECORD`, all four layouts), MySQL Enterprise XML and Percona's
      audit_log_filter (`RECORD_ID`): "<number>_<time>". The number goes up by one for each
      record written; the plugin starts it over (at the file's size) when it opens a file, and
      the time then changes: within one time, numbers are consecutive. (audit_log_filter writes
      each record's own second as the time and numbers on across seconds; reading only within
      one second misses nothing that is not missing.)
    - MySQL Enterprise JSON (and audit_log_filter JSON): `id` with `timestamp`: "enumerates
      events with the same timestamp value": within one second, consecutive.
    server_audit's query id and McAfee's `query-id` are the server's query counter: not dense.
    """
    extra = record.extra
    text = extra.get("record") or extra.get("record_id")
    if text is not None:
        number, sep, series = text.partition("_")
        n = _number(number) if sep else None
        return ("record " + series[:64], n) if n is not None else None
    ident = extra.get("id")
    if ident is not None and extra.get("layout") == "mysql-enterprise" and record.occurred_at is not None:
        n = _number(ident)
        return ("id " + record.occurred_at.isoformat(), n) if n is not None else None
    return None


def _series_words(key: str) -> str:
    kind, _, value = key.partition(" ")
    if kind == "record":
        return f"record numbers of the run marked {value!r}"
    return f"record ids of the second {value}"


def _iso(when: datetime | None) -> str | None:
    return when.isoformat() if when else None


def _time(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


class CounterWatch:
    """Finds records missing from a log whose format numbers its records densely (record_counter).

    Within one series, a number more than one above the highest seen opens a hole; a late record
    (out of order) fills it; a hole still open SEQUENCE_WINDOW records later, or when the read
    ends, is a gap of reason "sequence" at the record after it, from the time of the record
    before it to that record's. A number far below the highest (more than the window) is the
    counter going back within a series: records moved, or files of different runs joined.
    State is plain data (to_state), so a followed source and a shared-out range resume it.
    """

    def __init__(self) -> None:
        self.counted = 0  # records with a counter seen
        self.series: dict[str, list[Any]] = {}  # key -> [highest number, its time (ISO)]
        # [key, first missing, last missing, number before, number after, time before (ISO),
        #  time after (ISO), line, offset, counted when found]
        self.holes: list[list[Any]] = []

    def to_state(self) -> dict[str, Any]:
        return {
            "counted": self.counted,
            "series": [[k, *v] for k, v in self.series.items()],
            "holes": [list(h) for h in self.holes],
        }

    def load_state(self, state: dict[str, Any]) -> None:
        self.counted = state.get("counted", 0)
        self.series = {k: [high, when] for k, high, when in state.get("series", [])}
        self.holes = [list(h) for h in state.get("holes", [])]

    def see(self, event: Event) -> Iterator[Gap]:
        if event.counter is None:
            return
        key, n = event.counter
        self.counted += 1
        when = _iso(event.occurred_at)
        known = self.series.pop(key, None)
        self.series[key] = [n, when]
        if known is not None:
            high, high_time = known
            if n > high + 1:
                self.holes.append(
                    [key, high + 1, n - 1, high, n, high_time, when, event.line, event.offset, self.counted]
                )
            elif n <= high:
                self.series[key] = known  # the highest stays, unless the counter went back
                if not self._fill(key, n) and n + SEQUENCE_WINDOW < high:
                    self.series[key] = [n, when]
                    detail = (
                        f"the log's counter went back from {high} to {n} ({_series_words(key)}):"
                        " records were moved, or logs of different runs were joined"
                    )
                    yield Gap(
                        "sequence", _time(high_time), event.occurred_at, event.line, event.offset, detail
                    )
        while len(self.series) > _MAX_SERIES:
            del self.series[next(iter(self.series))]
        yield from self.decide(everything=len(self.holes) > _MAX_HOLES)

    def _fill(self, key: str, n: int) -> bool:
        """A late record: take its number out of the hole it is in. Whether it was in one."""
        for i, h in enumerate(self.holes):
            if h[0] == key and h[1] <= n <= h[2]:
                if h[1] == h[2]:
                    del self.holes[i]
                elif n == h[1]:
                    h[1] += 1
                elif n == h[2]:
                    h[2] -= 1
                else:
                    self.holes.insert(i + 1, [*h[:1], n + 1, *h[2:]])
                    h[2] = n - 1
                return True
        return False

    def decide(self, *, everything: bool) -> Iterator[Gap]:
        """The holes no late record can fill any more, as gaps: one per record that shows them."""
        due = [h for h in self.holes if everything or self.counted - h[9] >= SEQUENCE_WINDOW]
        if not due:
            return
        self.holes = [h for h in self.holes if h not in due]
        shown: dict[tuple[int, int], list[list[Any]]] = {}
        for h in due:
            shown.setdefault((h[7], h[8]), []).append(h)
        for (line, offset), holes in shown.items():
            first = holes[0]
            count = sum(h[2] - h[1] + 1 for h in holes)
            numbers = ", ".join(str(h[1]) if h[1] == h[2] else f"{h[1]}-{h[2]}" for h in holes[:8])
            detail = (
                f"{count} record(s) missing: the log's counter goes from {first[3]} to {first[4]}"
                f" ({_series_words(first[0])}; missing: {numbers}). Deleted from the log, lost by"
                " the server (a crash, or a buffer that drops records when full), or unreadable"
                " (see this file's problems)"
            )
            yield Gap("sequence", _time(first[5]), _time(first[6]), line, offset, detail)


# -- logging switched back on by whoever switched it off -------------------------------------------

# Variables only the session itself can switch (SET SESSION): the same session must switch it back.
_SESSION_SWITCHES = frozenset({"sql_log_bin", "sql_log_off"})
_SWITCH_TYPES = frozenset({"SET", "INSTALL PLUGIN", "INSTALL SONAME", "UNINSTALL PLUGIN", "UNINSTALL SONAME"})
_MAX_SWITCHERS = 64  # per log kind: who switched it off and has not switched it back on


class ReenableWatch:
    """Flags `anti_forensic` the statement that switches a log back on (SET GLOBAL general_log = ON,
    log_output back from NONE, server_audit_logging = ON, audit_log_disable = OFF, sql_log_bin = 1,
    an audit plugin installed again) when the same account or session switched it off before:
    both ends of the act show. Within one source it remembers who switched what off (state);
    for a switch-off in another source of the server it sends a conditional FlagCorrection
    that the store checks (store.apply_corrections). Another account switching a log back on
    stays unflagged: an operator repairing what a culprit did is no culprit.
    """

    def __init__(self) -> None:
        self.off: dict[str, list[list[Any]]] = {}  # kind -> [[user, session key], ...]

    def to_state(self) -> dict[str, Any]:
        return {kind: [list(w) for w in who] for kind, who in self.off.items()}

    def load_state(self, state: dict[str, Any]) -> None:
        self.off = {kind: [list(w) for w in who] for kind, who in state.items()}

    def see(self, event: Event) -> FlagCorrection | None:
        """Remember a switch-off; flag a switch back on (before the event is passed on)."""
        if (
            event.statement_type not in _SWITCH_TYPES
            or event.command not in ("Query", "Execute")
            or "failed" in event.flags
        ):
            return None
        unmatched: list[str] = []
        for kind, on in log_switches(event.sql):
            who = self.off.setdefault(kind, [])
            if not on:
                who.append([event.user, event.session.key])
                del who[:-_MAX_SWITCHERS]
                continue
            closing = [w for w in who if self._same(kind, w, event)]
            if closing:
                event.flags.add("anti_forensic")
                self.off[kind] = [w for w in who if w not in closing]
            else:
                unmatched.append(kind)
        if not unmatched or "anti_forensic" in event.flags:
            return None
        condition = {
            "server": event.server,
            "kinds": unmatched,
            "user": event.user,
            "session": event.session.key,
            "at": _iso(event.occurred_at),
        }
        return FlagCorrection("anti_forensic", [(event.record_hash(), event.occurred_at)], condition)

    @staticmethod
    def _same(kind: str, who: list[Any], event: Event) -> bool:
        if who[1] == event.session.key:
            return True
        return kind not in _SESSION_SWITCHES and who[0] is not None and who[0] == event.user


class GapFinder:
    """Finds where the log shows that recording stopped, as Gap items after the event that shows it.

    - logging switched off (SET GLOBAL general_log = OFF, log_output = 'NONE',
      server_audit_logging = OFF, an audit plugin unloaded): from that statement to the next
      record (when logging came back); open (no end) while nothing follows;
    - a start banner (a restart, or logging switched on again: the banner cannot tell) or
      connection ids starting over (a restart): from the last record before to the first
      after, unless a logging-off gap covers it already;
    - the clock going backwards (more than a second): from the later time to the earlier.
    - records missing where the format numbers its records densely (CounterWatch): "sequence".
    It also flags switching a log back on by whoever switched it off (ReenableWatch).
    State (for the next file of the same server) is plain data: see to_state.
    """

    def __init__(self) -> None:
        self.last_time: datetime | None = None
        self.boot: str | None = None
        self.off: tuple[datetime | None, int, int, str] | None = None  # (time, line, offset, sql)
        self.counters = CounterWatch()
        self.reenable = ReenableWatch()

    def to_state(self) -> dict[str, Any]:
        off = self.off
        return {
            "last_time": self.last_time.isoformat() if self.last_time else None,
            "boot": self.boot,
            "off": [off[0].isoformat() if off[0] else None, off[1], off[2], off[3]] if off else None,
            "counters": self.counters.to_state(),
            "switched_off": self.reenable.to_state(),
        }

    def load_state(self, state: dict[str, Any]) -> None:
        self.last_time = datetime.fromisoformat(state["last_time"]) if state.get("last_time") else None
        self.boot = state.get("boot")
        off = state.get("off")
        self.off = (
            (datetime.fromisoformat(off[0]) if off[0] else None, off[1], off[2], off[3]) if off else None
        )
        self.counters.load_state(state.get("counters", {}))
        self.reenable.load_state(state.get("switched_off", {}))

    def process(self, items: Iterable[Any]) -> Iterator[Any]:
        for item in items:
            if not isinstance(item, Event):
                yield item
                continue
            correction = self.reenable.see(item)  # may flag it: before it is passed on
            yield item
            if correction is not None:
                yield correction
            yield from self._see(item)
            yield from self.counters.see(item)
        yield from self.counters.decide(everything=True)  # the read ended: no late record comes
        if self.off is not None:  # nothing recorded after it in this file
            when, line, offset, sql = self.off
            self.off = None
            yield Gap("logging_off", when, None, line, offset, f"logging switched off by {sql[:200]!r}")

    def _see(self, event: Event) -> Iterator[Gap]:
        when = event.occurred_at
        new_boot = self.boot is not None and event.session.boot != self.boot
        if self.off is not None:
            off_time, line, offset, sql = self.off
            self.off = None
            yield Gap("logging_off", off_time, when, line, offset, f"logging switched off by {sql[:200]!r}")
        elif new_boot and event.command == "Server start":
            # A start banner is written at start-up, but also when logging is switched on
            # again or the log reopened: the banner alone cannot tell which.
            detail = "the server restarted, or logging was switched on again"
            yield Gap("log_opened", self.last_time, when, event.line, event.offset, detail)
        elif new_boot:
            detail = "the server restarted: connection ids started over"
            yield Gap("restart", self.last_time, when, event.line, event.offset, detail)
        elif when is not None and self.last_time is not None and when < self.last_time - _BACKWARDS:
            detail = f"the clock went back from {self.last_time.isoformat()} to {when.isoformat()}"
            yield Gap("time_backwards", self.last_time, when, event.line, event.offset, detail)
        if (
            event.command in ("Query", "Execute")
            and "failed" not in event.flags
            and _LOGGING_OFF.search(event.sql)
        ):
            self.off = (when, event.line, event.offset, event.sql)
        self.boot = event.session.boot
        if when is not None:
            self.last_time = when
