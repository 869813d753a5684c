"""Session tracking and classification: parser records in, normalized events out.

Pure Python (no Django), so every rule here is testable on bytes alone:

    general_log.parse(lines) -> SessionTracker(...).process(items) -> classify_events(events)

The tracker is the only stateful stage. Its state (the open connections of the
current server boot) is a plain dict, so a checkpoint can save and restore it.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any

from ingest.events import EventRecord, FlagCorrection, GapRecord, SessionInfo
from ingest.oracle import OracleWatch, classify_oracle_events
from ingest.parsers.general_log import COMMANDS as GENERAL_LOG_COMMANDS
from ingest.parsers.records import PROBLEM_EXCERPT_BYTES, Item, LogRecord, Problem, ServerStart
from ingest.postgres import PgAuditWatch, classify_postgres_events
from ingest.sql import classify, log_switches, use_database
from ingest.sql.prepared import deallocated_name, executed_name, prepared_text
from ingest.sql.routines import called_procedure, dropped_procedure, procedure_definition
from ingest.sql.secrets import mask_secrets, masked_raw, raw_may_hold_secret
from ingest.textsafe import unstorable

# Commands whose argument is a statement the server ran (or prepared).
STATEMENT_COMMANDS = frozenset({"Query", "Execute", "Prepare"})
# Outcomes that are no failure: unknown (most formats never say) or success.
OK_STATUSES = frozenset({None, "ok", "0"})
# server_audit's TABLE events name one table each: "Table READ", "Table WRITE", ...
TABLE_EVENT_PREFIX = "Table "
RENAME_TABLE_EVENT = "Table RENAME"  # its object is "old|newdb.new"


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


# What a record says about who and where: text PostgreSQL must be able to hold (see unstorable_problem).
_SESSION_FIELDS = ("user", "host", "ip", "database", "command", "status")


# Command names the parsers write themselves (the general log's, ingest.parsers.general_log), which
# PostgreSQL stores as they are: a record naming only one of these needs no test (unstorable_problem).
_STORABLE_COMMANDS = frozenset(GENERAL_LOG_COMMANDS)


def unstorable_problem(record: LogRecord) -> Problem | None:
    """The problem of a record whose session data holds what PostgreSQL text cannot (a NUL byte,
    a lone UTF-16 surrogate from a JSON `\\ud800`): its event is stored with those characters
    left out (ingest.textsafe.displayable), its raw bytes keep them, and this says so, where the
    operator looks. None for a record without any (nearly all)."""
    if (
        record.user is None
        and record.host is None
        and record.ip is None
        and record.database is None
        and record.status is None
        and not record.extra
        and record.command in _STORABLE_COMMANDS
    ):
        return None  # a statement of a general log: nothing but its command, a name it knows
    # Nearly every record: its fields together hold neither (one test, not one a field).
    joined = f"{record.user}{record.host}{record.ip}{record.database}{record.command}{record.status}"
    extra = record.extra
    if extra:
        try:  # (every value is text, nearly always: joined at once, not tested one by one)
            joined += "".join(extra.values())
        except TypeError:
            joined += "".join(v for v in extra.values() if isinstance(v, str))
    if (joined.isascii() and "\x00" not in joined) or not unstorable(joined):
        return None  # (unstorable's first answer, without the call)
    fields = [name for name in _SESSION_FIELDS if (v := getattr(record, name)) and unstorable(v)]
    fields += [key for key, v in record.extra.items() if isinstance(v, str) and unstorable(v)]
    if not fields:
        return None
    values = [getattr(record, f) if f in _SESSION_FIELDS else record.extra[f] for f in fields]
    what = " and ".join(
        kind
        for kind, found in (
            ("a NUL byte", any("\x00" in v for v in values)),
            ("a lone UTF-16 surrogate", any(unstorable(v.replace("\x00", "")) for v in values)),
        )
        if found
    )
    reason = f"{what} in {', '.join(fields)}: shown without it; the raw bytes keep it"
    return Problem(record.line, record.offset, record.raw[:PROBLEM_EXCERPT_BYTES], reason)


def decode_sql(argument: bytes) -> str:
    """Searchable text of a statement. PostgreSQL text cannot hold NUL; raw keeps it."""
    return argument.decode("utf-8", "replace").replace("\x00", "")


# The statement texts of the last records, by their bytes (statement_text): a log repeats its
# statements verbatim (pings, COMMIT, SET NAMES, an application's same query with the same
# values; mariadb-slap's 200,000 records hold a few dozen texts). Bounded in entries and in the
# length of each: a log of ever-new statements pays one dict miss a record.
_TEXTS: dict[bytes, tuple[str, bool, str | None, str | None]] = {}
_TEXTS_MAX = 4096
_TEXT_MAX_BYTES = 1024


def statement_text(argument: bytes) -> tuple[str, bool, str | None, str | None]:
    """The event's `sql` for a record's argument: decoded (decode_sql), its secrets masked
    (secrets.mask_secrets); whether any were; and what the text does to the tracker as a Query
    (_command_effects): the database a USE switches to, and the head ("FLUSH", "SET G", ...,
    "SHUTD") of a statement that may reopen or switch off the log, else None. The same answer
    for the same bytes, so the answers of recent arguments are remembered (and their text is one
    object, whose hash the classifier's caches reuse)."""
    known = _TEXTS.get(argument)
    if known is not None:
        return known
    return new_statement_text(argument)


def new_statement_text(argument: bytes) -> tuple[str, bool, str | None, str | None]:
    """statement_text for an argument not remembered (mysql_stages has looked), remembered now."""
    sql = argument.decode("utf-8", "replace")  # decode_sql, written out
    if "\x00" in sql:
        sql = sql.replace("\x00", "")
    masked = mask_secrets(sql)
    if masked[:1] in _NO_EFFECT_STARTS:  # INSERT, DELETE, CALL...: neither a USE nor a head below
        known = (masked, masked is not sql, None, None)
    else:
        head = (masked[:5] if masked[:1] not in _BLANK else masked[:12].lstrip()[:5]).upper()
        known = (masked, masked is not sql, use_database(masked), head if head in _REOPENER_HEADS else None)
    if len(argument) <= _TEXT_MAX_BYTES:
        if len(_TEXTS) >= _TEXTS_MAX:
            _TEXTS.clear()  # cheaper here than evicting one by one
        _TEXTS[argument] = known
    return known


# A banner's verdicts (see SessionTracker._weigh): what the records after it show.
REOPEN, RESTART, UNDECIDED = "reopen", "restart", "undecided"
# Records held after a banner while the evidence is weighed; past this, it stays undecided.
HOLD_MAX = 10_000
# A Connect after a banner this far below the highest id before it means ids started over
# (Connects are logged after authentication, so a few come out of id order within a boot).
ID_ORDER_SLACK = 8
# The commands that name who a connection is (SessionTracker._event's full path).
_CONNECT_COMMANDS = frozenset({"Connect", "Change user"})
# Commands that reopen the log they are written in (FLUSH LOGS, logrotate's postrotate).
_FLUSH_LOGS = re.compile(r"^\s*FLUSH\b.*\bLOGS\b", re.IGNORECASE | re.DOTALL)
# How those statements and the ones that switch logging off begin (a cheap test before the regexes).
_BLANK = frozenset(" \t\r\n")
_REOPENER_HEADS = frozenset({"FLUSH", "SET G", "SET @", "SET L", "SET S", "UNINS", "SHUTD"})
# ASCII characters a statement that is a USE (use_database: u, a comment, a bracket or a blank
# first) or has one of those heads (f, s, u or a blank first) cannot begin with. Not the others:
# a character outside ASCII may upper-case to one of the heads' letters (U+017F to S).
_NO_EFFECT_STARTS = frozenset(chr(i) for i in range(128)) - frozenset("fFsSuU/#-( \t\r\n")


def _session_state(s: SessionInfo) -> dict[str, Any]:
    """A session as plain data, for a checkpoint (see SessionTracker.to_state)."""
    return {
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
        "attribution": s.attribution,
        "connect_file": s.connect_file,
        "carried": s.carried,
        "run": s.run,
        "previous": s.previous,
        "stale": list(s.stale) if s.stale else None,
        "opened": [s.opened[0], s.opened[1].hex()] if s.opened else None,
        "change": dict(s.change) if s.change else None,
        "last_qid": s.last_qid,
        "body": _body_state(s.body),
        "qid_definer": list(s.qid_definer) if s.qid_definer else None,
        "qid_tables": [list(t) for t in s.qid_tables],
        "autocommit": s.autocommit,
        "explicit": s.explicit,
        "aborted": s.aborted,
        "pending": [[h.hex(), t.isoformat() if t else None] for h, t in s.pending],
        # Copies: the state is of this moment, not of what follows.
        "statements": copy.deepcopy(s.statements),
    }


def _body_state(body: list[tuple[int, bytes, datetime | None]]) -> list[list[Any]]:
    """A session's query ids as plain data (_session_state): up to 1,000 a session, made at every
    cut, and the statements of one second share one time object (SessionTracker._utc): each time
    is formatted once for the run of entries that share it."""
    out: list[list[Any]] = []
    last: datetime | None = None
    text: str | None = None
    for q, h, t in body:
        if t is not last:
            last, text = t, t.isoformat() if t else None
        out.append([q, h.hex(), text])
    return out


def _when(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


def _session_from(server: str, c: dict[str, Any]) -> SessionInfo:
    """The session `c` describes (see _session_state)."""
    started = datetime.fromisoformat(c["started_at"]) if c["started_at"] else None
    opened, stale = c.get("opened"), c.get("stale")
    return SessionInfo(
        key=c["key"],
        server=server,
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
        attribution=c.get("attribution", "connect" if c["attributed"] else "unattributed"),
        connect_file=c.get("connect_file"),
        carried=c.get("carried", False),
        run=c.get("run", 1),
        previous=c.get("previous"),
        stale=(stale[0], stale[1]) if stale else None,
        opened=(opened[0], bytes.fromhex(opened[1])) if opened else None,
        change=dict(c["change"]) if c.get("change") else None,
        last_qid=c.get("last_qid", 0),
        body=[
            (q, bytes.fromhex(h), datetime.fromisoformat(t) if t else None) for q, h, t in c.get("body", [])
        ],
        qid_definer=c.get("qid_definer"),
        qid_tables=[list(t) for t in c.get("qid_tables", [])],
        autocommit=c.get("autocommit", True),
        explicit=c.get("explicit", False),
        aborted=c.get("aborted", False),
        pending=[
            (bytes.fromhex(h), datetime.fromisoformat(t) if t else None) for h, t in c.get("pending", [])
        ],
        statements=dict(c.get("statements", {})),
    )


class Settle:
    """Fed to SessionTracker.process where the input pauses (the end of a file that may grow): a
    banner still held is decided now with what was read, so that every record read is stored."""


SETTLE = Settle()


class SessionTracker:
    """Attributes each record to its session: the account, host and current database.

    A session is one account's run on one connection of one server boot: (server, boot,
    connection id), and a change of user starts the next run ("~2", "~3"...). Who ran a
    statement comes from the record itself where the format names the account on every record
    (`record`), else from the connection's Connect or Change user (`connect`, or
    `connect_earlier_file` when that was read in an earlier file); a connection whose Connect is
    not in the logs is `unattributed`: we never guess who it was.

    A start banner inside a general log is written at a restart but also when the log is
    reopened in the same boot (logging switched on again, FLUSH LOGS at a rotation). The records
    after it are held until they show which (see _weigh); where they cannot, the connections
    open before it keep their account, marked `inferred_reopen`, with the evidence in the gap.
    """

    def __init__(self, server: str, tz: tzinfo = UTC, dialect: str = "mysql") -> None:
        self.server = server
        self.tz = tz  # zone of naive (server local) timestamps
        # The server's SQL dialect (ingest.parsers.dialect_of, set by the reader of each file):
        # "postgres" changes what a start banner and a connection id prove (_weigh, _connect).
        self.dialect = dialect
        self.boot: str | None = None  # label of the current boot, set at its first record
        self.boot_is_restart = False  # whether the current boot began with a banner we saw
        self.connections: dict[int | None, SessionInfo] = {}
        self.last_time: datetime | None = None
        self.max_connect_id = 0  # highest connection id a Connect had in this boot
        self.max_id = 0  # highest connection id any record had in this boot
        self.file: object = None  # the file being read (its label: a SourceFile id)
        # The connection that last switched logging off or flushed the logs, and the line.
        self.reopener: list[Any] | None = None
        # An undecided banner's highest id before it: a later Connect may still decide it.
        self.undecided_max: int | None = None
        self._utc_in: datetime = datetime.min  # the last time converted by _utc, and its result
        self._utc_out: datetime | None = None
        # The server's stored procedures seen created: name -> [destructive, [tables], definer].
        self.routines: dict[str, list[Any]] = {}
        # A banner whose verdict is pending, and the records held after it.
        self._banner: ServerStart | None = None
        self._held: list[LogRecord | Problem] = []
        self._evidence: list[str] = []
        self._max_before = 0
        self._context: list[Any] | None = None
        self._corrections: list[FlagCorrection] = []  # learnt by the last record (_query_ids)
        # The time of the last record _query_ids hashed, and its ISO text (EventRecord.record_hash's).
        self._hashed_in: datetime | None = None
        self._hashed_out = "-"

    # -- checkpoint support -------------------------------------------------

    def to_state(self) -> dict[str, Any]:
        # A banner still held is outside the state: the pipeline cuts before it (see holding).
        return {
            "boot": self.boot,
            "boot_is_restart": self.boot_is_restart,
            "last_time": self.last_time.isoformat() if self.last_time else None,
            "max_connect_id": self.max_connect_id,
            "max_id": self.max_id,
            "reopener": list(self.reopener) if self.reopener else None,
            "undecided_max": self.undecided_max,
            # A copy: the classifier goes on adding to the live one after this moment.
            "routines": {name: list(known) for name, known in self.routines.items()},
            "connections": [_session_state(s) for s in self.connections.values()],
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
        self.max_id = state.get("max_id", self.max_connect_id)
        self.reopener = state.get("reopener")
        self.undecided_max = state.get("undecided_max")
        self.routines = dict(state.get("routines", {}))
        self.connections = {}
        for c in state["connections"]:
            self.connections[c["connection_id"]] = _session_from(self.server, c)

    @property
    def holding(self) -> bool:
        """Whether a banner's records are held: no cut may be made (its state is not complete)."""
        return self._banner is not None

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

    def _key(self, connection_id: int | None, run: int = 1) -> str:
        base = f"{self.server}/{self.boot}/{connection_id if connection_id is not None else '-'}"
        return base if run == 1 else f"{base}~{run}"

    def _session(self, connection_id: int | None, when: datetime | None) -> SessionInfo:
        if self.boot is None:
            # The boot the log began in: we know only that it was running by then.
            self.boot = "before-" + _boot_stamp(when)
        session = self.connections.get(connection_id)
        if session is None:
            session = SessionInfo(
                key=self._key(connection_id),
                server=self.server,
                boot=self.boot,
                connection_id=connection_id,
            )
            self.connections[connection_id] = session
        return session

    def _new_boot(self, when: datetime | None) -> None:
        """Ids started over: every open connection is gone, and nothing carries over."""
        self.connections.clear()
        self.boot = _boot_stamp(when)
        self.boot_is_restart = True
        self.max_connect_id = self.max_id = 0
        self.reopener = None
        self.undecided_max = None

    def process(self, items: Iterable[Item | Settle]) -> Iterator[EventRecord | Problem | FlagCorrection]:
        """Turn parser items into events, in log order.

        1. A start banner with nothing before it begins the log's first boot. A banner after
           records is held with the records after it until they tell reopen from restart
           (_weigh), or until HOLD_MAX of them or the end of the input; then _settle.
        2. Connect and Change user (re)define who the connection is.
        3. Init DB and USE change the current database *after* their own event.
        """
        for item in items:
            if type(item) is LogRecord and self._banner is None:  # the common case, first
                when = item.occurred_at
                # (Records of one second share one time object: converted once, by _utc.)
                yield self._event(item, self._utc_out if when is self._utc_in else self._utc(when))
                if self._corrections:
                    yield from self._corrections
                    self._corrections = []
                if (problem := unstorable_problem(item)) is not None:
                    yield problem
                continue
            yield from self._step(item)
        yield from self.finish()

    def finish(self) -> list[EventRecord | Problem | FlagCorrection]:
        """What the end of the input decides: a banner still held is settled as undecided."""
        return list(self._settle(None)) if self._banner is not None else []

    def _step(self, item: Item | Settle) -> list[EventRecord | Problem | FlagCorrection]:
        """process() for one item of any kind (the short path of a plain record aside)."""
        if isinstance(item, Settle):
            return list(self._settle(None)) if self._banner is not None else []
        if isinstance(item, ServerStart):
            out = list(self._settle(None)) if self._banner is not None else []  # a second banner
            if self.boot is None and not self.connections:
                # The log begins here: a boot we see start, with nothing to carry over.
                self._banner, self._held, self._evidence = item, [], []
                self._max_before = 0
                return out
            self._banner, self._held = item, []
            self._max_before = max(self.max_id, self.max_connect_id)
            self._evidence = []
            self._context = self.reopener  # what the log shows just before the banner
            return out
        if self._banner is not None:
            self._held.append(item)
            if isinstance(item, Problem):
                return []
            if self.boot is None and not self.connections:
                return list(self._settle(RESTART))  # the first boot of the log
            verdict = self._weigh(item, len(self._held) == 1)
            if verdict is not None or len(self._held) >= HOLD_MAX:
                return list(self._settle(verdict))
            return []
        if isinstance(item, Problem):
            return [item]
        out: list[EventRecord | Problem | FlagCorrection] = [self._event(item, self._utc(item.occurred_at))]
        if self._corrections:
            out += self._corrections
            self._corrections = []
        if (problem := unstorable_problem(item)) is not None:
            out.append(problem)
        return out

    def _weigh(self, record: LogRecord, first: bool) -> str | None:
        """What one record held after a banner shows: REOPEN, RESTART or nothing decisive yet.

        Decisive: the first record carries the time of the second before the banner (old layout:
        the process that wrote that time is still running: no restart); a new connection with an
        id above every id before it (ids went on); a new connection reusing an id still open, or
        far below the highest (ids started over). A connection open before the banner that speaks
        after it is evidence, not proof: a server that restarted with logging off, then switched
        on, can have reached that id again.
        """
        cid = record.connection_id
        if self.dialect == "postgres":
            # The postmaster writes `starting PostgreSQL` only when it starts; a new log file
            # (rotation, logging_collector) begins with no banner.
            self._evidence.append("PostgreSQL writes its start line only when the server starts")
            return RESTART
        if self.dialect == "oracle":
            # The trail's STARTUP record is the instance starting; in queued mode (the default)
            # what was still queued in the SGA when it went down was never written.
            self._evidence.append(
                "Oracle writes a STARTUP record only when the instance starts; in queued mode the audit"
                " records still queued in the SGA when it stopped (up to the flush interval, about 3 s,"
                " or a full queue) are lost if it crashed or was shut down with ABORT"
            )
            return RESTART
        if first and record.raw[:1] in (b"\t", b" "):
            self._evidence.append(
                f"its first record (line {record.line}) prints no time: it is in the second last"
                " printed before the banner, so the process that printed that time did not restart"
            )
            return REOPEN
        if record.command == "Connect" and record.status not in ("denied",) and cid is not None:
            if cid > self._max_before:
                self._evidence.append(
                    f"connection {cid} logged in after it (line {record.line}), above {self._max_before},"
                    " the highest connection id before it: ids went on"
                )
                return REOPEN
            used_before = self.connections.get(cid)
            if used_before is not None or cid + ID_ORDER_SLACK < self._max_before:
                why = "an id used before it" if used_before is not None else "ids started over"
                self._evidence.append(
                    f"connection {cid} logged in after it (line {record.line}) with {why}"
                    f" (highest before it: {self._max_before})"
                )
                return RESTART
        elif cid in self.connections and self.connections[cid].attributed:
            note = (
                f"connection {cid}, open before it, ran a record after it (line {record.line})"
                " without logging in again"
            )
            if self.reopener and self.reopener[0] == cid:
                note += f" (it had {self.reopener[2]} at line {self.reopener[1]})"
            if note not in self._evidence and len(self._evidence) < 20:
                self._evidence.append(note)
        return None

    def _settle(self, verdict: str | None) -> Iterator[EventRecord | Problem | FlagCorrection]:
        """Decide the held banner and yield it and its held records as events."""
        banner, held, evidence = self._banner, self._held, self._evidence
        self._banner, self._held, self._evidence = None, [], []
        assert banner is not None
        first = next((r for r in held if isinstance(r, LogRecord)), None)
        when = self._utc(first.occurred_at) if first is not None else self.last_time
        if verdict is None:
            verdict = UNDECIDED
        if self.boot is None and not self.connections:
            # The log's first boot: the banner is where its log begins.
            self.boot = _boot_stamp(when)
            self.boot_is_restart = True
            note = ""
        elif verdict == RESTART:
            self._new_boot(when)
            note = "the server restarted: " + "; ".join(evidence)
        elif verdict == REOPEN:
            self.undecided_max = None
            for s in self.connections.values():
                s.carried = False
            note = "the log was reopened, the server went on: " + "; ".join(evidence)
        else:
            self.undecided_max = self._max_before
            carried = [
                s
                for s in self.connections.values()
                if s.attributed and s.connection_id is not None and s.ended_at is None
            ]
            for s in carried:
                s.carried = True
            note = (
                "the log was reopened or the server restarted; the records after it do not say which"
                + (": " + "; ".join(evidence) if evidence else "")
                + (
                    f". The {len(carried)} connection(s) open before it keep their account, marked"
                    " inferred_reopen"
                    if carried
                    else ""
                )
            )
        if note and self._context:
            cid, line, what = self._context
            note += f". Before it, connection {cid} {what} at line {line}"
        self.reopener = None
        event = self._start_event(banner, when)
        event.note = f"{verdict}|{note}" if note else ""
        yield event
        for item in held:
            if isinstance(item, Problem):
                yield item
            else:
                yield self._event(item, self._utc(item.occurred_at))
                if self._corrections:
                    yield from self._corrections
                    self._corrections = []
                if (problem := unstorable_problem(item)) is not None:
                    yield problem

    def _start_event(self, banner: ServerStart, when: datetime | None) -> EventRecord:
        session = self._session(None, when)
        return EventRecord(
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

    def _connect(self, record: LogRecord, when: datetime | None) -> None:
        """A successful Connect: a new connection under this id, whatever came before it."""
        cid = record.connection_id
        if _jumped_back(cid, self.max_connect_id) and self.dialect == "mysql":
            # (PostgreSQL's session numbers are start time and pid: no order within a second;
            # Oracle's SESSIONID comes from a cached sequence: RAC instances take turns.)
            # Ids only grow within a boot: a new connection far below the highest one
            # means the server restarted where the log shows no banner (audit logs
            # write none, or the log was off then). Its open connections are gone.
            self._new_boot(when)
        elif self.undecided_max is not None and cid is not None:
            # A banner the records after it could not decide: a later login still can.
            open_before = self.connections.get(cid)
            if cid > self.undecided_max:
                self.undecided_max = None  # ids went on: the reopen is proven from here on
                for s in self.connections.values():
                    s.carried = False
            elif (open_before is not None and open_before.carried) or (
                cid + ID_ORDER_SLACK < self.undecided_max
            ):
                self._new_boot(when)
        self.connections.pop(cid, None)
        self.max_connect_id = max(self.max_connect_id, cid or 0)

    def _change_user(self, old: SessionInfo) -> SessionInfo:
        """The change of user `old` logged last took effect: its session ends and the next one
        (linked) begins, as the change named it, at the change's time."""
        change = old.change
        assert change is not None
        old.change = None
        when = _when(change["when"])
        old.ended_at = when
        user = change["user"]
        new = SessionInfo(
            key=self._key(old.connection_id, old.run + 1),
            server=self.server,
            boot=old.boot,
            connection_id=old.connection_id,
            user=user,
            host=change["host"],
            ip=change["ip"],
            database=change["database"],
            program=old.program,
            os_user=old.os_user,
            started_at=when,
            attributed=user is not None,
            attribution="connect" if user is not None else "unattributed",
            connect_file=change["file"],
            run=old.run + 1,
            previous=old.key,
            stale=(old.user, old.host) if old.attributed else None,
            opened=(change["opened"][0], bytes.fromhex(change["opened"][1])),
        )
        self.connections[old.connection_id] = new
        return new

    def _statement(self, record: LogRecord, when: datetime | None, session: SessionInfo) -> EventRecord:
        """_event for the record nearly every line of a general log is: a statement (or Quit, Init
        DB...) on a connection already seen, naming no account, no outcome and no details, with no
        change of user pending. The same rules as _event's, with the branches that cannot apply
        left out: the account, host and database are the session's."""
        cid = record.connection_id
        if cid is not None and cid > self.max_id:
            self.max_id = cid
        flags: set[str] = set()
        if not session.attributed:
            flags.add("unattributed")
            attribution = "unattributed"
        elif session.carried:
            attribution = "inferred_reopen"
        elif session.attribution == "connect" and session.connect_file != self.file:
            attribution = "connect_earlier_file"
        else:
            attribution = session.attribution
        if when is None:
            flags.add("time_unknown")
        text = statement_text(record.argument)
        masked = text[0]
        if text[1]:
            flags.add("secret_masked")
        user = session.user
        event = EventRecord(
            when, self.server, session, cid, user, session.host, session.ip,
            record.database or session.database, record.command, masked, record.raw, record.line,
            record.offset, "", (), False, flags, "", record.rows_affected, None, attribution, None, "",
            None, record.extra,
        )  # fmt: skip
        if session.opened is None and session.attribution == "record" and user is not None:
            session.opened = (when.isoformat() if when else None, event.record_hash())
        if record.command != "Query" or text[2] is not None or text[3] is not None:
            self._command_effects(record.command, session, event, False, text)
        return event

    def _named(self, record: LogRecord, when: datetime | None, session: SessionInfo) -> EventRecord:
        """_event for the record nearly every line of an audit log is: a statement (or a table
        opened, a Quit...) that succeeded, on a connection already seen and attributed, naming the
        account the connection already has, with no change of user pending and no stale account.
        The same rules as _event's, with the branches that cannot apply left out: the account,
        host and IP are the record's (attribution `record`), no definer (the account is the
        connection's), and nothing of the session changes but its client details, the query ids
        and what the command does."""
        cid = record.connection_id
        if cid is not None and cid > self.max_id:
            self.max_id = cid
        extra = record.extra
        if extra:
            # The client's details, where the format gives them (audit logs' connection attributes).
            session.program = session.program or extra.get("program_name")
            session.os_user = session.os_user or extra.get("os_user") or extra.get("os_login")
        flags: set[str] = set()
        if when is None:
            flags.add("time_unknown")
        text = statement_text(record.argument)
        if text[1]:
            flags.add("secret_masked")
        if extra and "cut" in extra:
            flags.add("cut")  # a line longer than INGEST_MAX_LINE_BYTES: see ingest.reading
        user = record.user
        event = EventRecord(
            when, self.server, session, cid, user, record.host, record.ip,
            record.database or session.database, record.command, text[0], record.raw, record.line,
            record.offset, "", (), False, flags, "", record.rows_affected, record.status, "record", None,
            "", record_counter(record) if extra else None, extra,
        )  # fmt: skip
        if session.opened is None and session.attribution == "record":
            session.opened = (when.isoformat() if when else None, event.record_hash())
        qid = extra.get("query_id") if extra else None
        if qid is not None and qid.isascii() and qid.isdigit():
            self._query_ids(session, event, int(qid))
        self._command_effects(record.command, session, event, False, text)
        return event

    def _event(self, record: LogRecord, when: datetime | None) -> EventRecord:
        command = record.command
        cid = record.connection_id
        session = self.connections.get(cid)
        if (
            session is not None
            and record.user is None
            and record.status is None
            and not record.extra
            and session.change is None
            and session.stale is None
            and command not in _CONNECT_COMMANDS
        ):
            return self._statement(record, when, session)
        if (
            session is not None
            and record.user is not None
            and record.user == session.user
            and record.host == session.host
            and session.attributed
            and record.status in OK_STATUSES
            and session.change is None
            and session.stale is None
            and command not in _CONNECT_COMMANDS
        ):
            return self._named(record, when, session)
        return self._full(record, when)

    def _full(self, record: LogRecord, when: datetime | None) -> EventRecord:
        """_event for any record (the short paths, _statement and _named, take most)."""
        command = record.command
        cid = record.connection_id
        failed = record.status not in OK_STATUSES
        if cid is not None and cid > self.max_id:
            self.max_id = cid
        if command == "Connect" and not failed:
            self._connect(record, when)
        # (Read again: a Connect or a new boot just replaced it.)
        session = self.connections.get(cid) or self._session(cid, when)
        extra = record.extra
        refused_change = False
        if session.change is not None:
            # The record after a Change user tells whether it took: an "Access denied" there (the
            # general log and the table write the attempt first) means the server refused it and
            # the connection goes on as before; anything else, that it took.
            if command == "Connect" and failed:
                session.change, refused_change = None, True
            else:
                session = self._change_user(session)
        flags: set[str] = set()
        opens = False
        changing = command == "Change user" and not failed
        if command != "Connect":
            pass
        elif not failed:
            if record.user is not None:
                session.user, session.host, session.ip = record.user, record.host, record.ip
                session.database = record.database or None
                session.attributed, session.attribution = True, "connect"
                session.connect_file, session.carried = self.file, False
                opens = True
            session.started_at = when
        elif not refused_change:
            # A refused login owns nothing: what runs under this id later is the next login's.
            session.user = session.host = session.ip = None
            session.attributed, session.attribution, session.carried = False, "unattributed", False
        stale = False
        definer = None
        if record.user is not None and not failed and command not in ("Connect", "Change user"):
            account = (record.user, record.host)
            stale = session.stale is not None and account == session.stale
            if not session.attributed and not stale:
                # Formats that name the account on every record (tables, audit logs).
                session.user, session.host, session.ip = record.user, record.host, record.ip
                session.attributed, session.attribution = True, "record"
                session.connect_file, session.carried = self.file, False
            elif (
                session.attributed
                and not stale
                and account != (session.user, session.host)
                and command.startswith(TABLE_EVENT_PREFIX)
            ):
                # server_audit names the account a table is opened as: inside a SQL SECURITY
                # DEFINER routine (or view), its definer. The caller is still the actor.
                definer = f"{record.user}@{record.host or ''}"
                stale = True
        if extra and not failed:
            # The client's details, where the format gives them (audit logs' connection attributes).
            session.program = session.program or extra.get("program_name")
            session.os_user = session.os_user or extra.get("os_user") or extra.get("os_login")
        # Who ran this record: its own account where the format names one on every record (audit
        # logs, table rows), unless it is the account before a change of user that a format goes
        # on naming (server_audit's QUERY records) or a routine's definer; else its session's. A
        # refused login names who tried. After a change of user the session's database is believed.
        database = record.database or session.database
        if changing:
            # The change names the account it changes to (nobody, in 10.11's server_audit).
            user, host, ip = record.user, record.host, record.ip
            attribution = "record" if record.user is not None else "unattributed"
            if record.user is None:
                flags.add("unattributed")
        elif (
            record.user is not None
            and not stale
            and (
                session.stale is None
                or failed
                or opens
                or (record.user, record.host) == (session.user, session.host)
            )
        ):
            user, host, ip = record.user, record.host, record.ip
            attribution = "record"
        else:
            user, host, ip = session.user, session.host, session.ip
            if session.stale is not None:
                database = session.database
            if not session.attributed:
                flags.add("unattributed")
                attribution = "unattributed"
            elif session.carried:
                attribution = "inferred_reopen"
            elif record.user is not None:
                attribution = "record" if session.attribution == "record" else "connect"
            elif session.attribution == "connect" and session.connect_file != self.file:
                attribution = "connect_earlier_file"
            else:
                attribution = session.attribution
        if failed:
            flags.add("failed")
        if when is None:
            flags.add("time_unknown")
        # Secrets are masked before anything reads the statement (classifier, tracker, gaps,
        # store); the raw bytes keep them, sealed for custody and shown to no one but an admin
        # who reveals them (`secret_masked` says so).
        text = statement_text(record.argument)
        masked = text[0]
        if text[1]:
            flags.add("secret_masked")
        if extra and "cut" in extra:
            flags.add("cut")  # a line longer than INGEST_MAX_LINE_BYTES: see ingest.reading
        # Positional, in the field order of EventRecord: keywords cost twice the construction, and
        # this runs for every record of every log.
        event = EventRecord(
            when, self.server, session, cid, user, host, ip, database, command, masked, record.raw,
            record.line, record.offset, "", (), False, flags, "", record.rows_affected, record.status,
            attribution, definer, "", record_counter(record) if extra else None, extra,
        )  # fmt: skip
        if opens or (session.opened is None and session.attribution == "record" and user is not None):
            session.opened = (when.isoformat() if when else None, event.record_hash())
        if changing:
            session.change = {
                "user": record.user,
                "host": record.host,
                "ip": record.ip,
                "database": record.database or None,
                "when": when.isoformat() if when else None,
                "file": self.file,
                "opened": [when.isoformat() if when else None, event.record_hash().hex()],
            }
        qid = extra.get("query_id") if extra else None
        if qid is not None and qid.isascii() and qid.isdigit() and not failed:
            self._query_ids(session, event, int(qid))
        self._command_effects(command, session, event, failed, text)
        return event

    def _command_effects(
        self,
        command: str,
        session: SessionInfo,
        event: EventRecord,
        failed: bool,
        text: tuple[str, bool, str | None, str | None],
    ) -> None:
        """What a record's command does to its session and to the log after it (after the event:
        Init DB and USE change the database of the statements that follow, not their own). `text`
        is the record's statement_text: what its text does, worked out once for the same bytes."""
        if command == "Query":
            _, _, new_db, head = text
            if new_db:
                session.database = new_db
            if head is None:
                return  # nearly every statement
            if head == "SHUTD":
                self.reopener = [event.connection_id, event.line, "asked the server to shut down"]
            elif not failed:
                sql = event.sql
                if _FLUSH_LOGS.match(sql):
                    self.reopener = [event.connection_id, event.line, "flushed the logs"]
                elif _LOGGING_OFF.search(sql):
                    self.reopener = [event.connection_id, event.line, "switched logging off"]
        elif command == "Init DB":
            session.database = event.sql.strip() or None
        elif command == "Refresh":
            self.reopener = [event.connection_id, event.line, "flushed the logs"]
        elif command == "Shutdown":
            self.reopener = [event.connection_id, event.line, "asked the server to shut down"]
        elif command == "Quit":
            session.ended_at = event.occurred_at

    def _query_ids(self, session: SessionInfo, event: EventRecord, qid: int) -> None:
        """Audit logs that number statements (server_audit's query id): routine bodies and the
        current database after a change of user.

        1. server_audit logs a statement when it ends, so the statements a CALL ran come before
           the CALL's record, with higher query ids. A statement logged with a query id below one
           already seen on its connection ran those after it: they are flagged `in_routine`
           (a correction: they are yielded already), and the definer they ran as is the CALL's.
        2. After a change of user its QUERY records name a wrong database, and the right one is
           unknown; a table record names the database of a table the statement names without one.
        """
        if event.command.startswith(TABLE_EVENT_PREFIX):
            if event.definer:
                session.qid_definer = [qid, event.definer]
            if session.stale is not None and event.database and len(session.qid_tables) < 64:
                session.qid_tables.append([qid, event.database, event.sql.split("|", 1)[0]])
        elif event.command == "Query":
            if session.qid_definer and session.qid_definer[0] == qid:
                event.definer = session.qid_definer[1]
            if session.stale is not None and session.database is None and session.qid_tables:
                tables = [(d, n) for q, d, n in session.qid_tables if q == qid]
                found = _database_of_bare_tables(event.sql, tables)
                if found:
                    session.database = event.database = found
            if qid < session.last_qid:
                inside = [(h, t) for q, h, t in session.body if q > qid]
                if inside:
                    self._corrections.append(FlagCorrection("in_routine", inside))
                    if event.definer is None and session.qid_definer and session.qid_definer[0] > qid:
                        event.definer = session.qid_definer[1]
                session.body = [b for b in session.body if b[0] <= qid]
            session.qid_tables = []
        when = event.occurred_at
        if when is not self._hashed_in:  # (records of one second share one time object)
            self._hashed_in, self._hashed_out = when, when.isoformat() if when else "-"
        session.body.append((qid, event.record_hash(self._hashed_out), when))
        if len(session.body) > 1000:
            del session.body[:500]
        session.last_qid = max(session.last_qid, qid)


def _database_of_bare_tables(sql: str, tables: list[tuple[str, str]]) -> str | None:
    """The database of the table records' tables that the statement names without a database (the
    current database), when they agree; None when none is named bare or they disagree."""
    text = sql.lower()
    found: set[str] = set()
    for database, name in tables:
        needle = name.lower()
        start = text.find(needle)
        while start >= 0:
            before = text[max(0, start - 2) : start].rstrip('`"')[-1:]
            if before != ".":
                found.add(database)
                break
            start = text.find(needle, start + len(needle))
    return found.pop() if len(found) == 1 else None


# Statements that commit the open transaction before they run (MySQL "implicit commit"):
# DDL, account management, LOCK TABLES... A BEGIN does too (it starts a new transaction).
_IMPLICIT_COMMIT = re.compile(
    r"^(?:CREATE|ALTER|DROP|RENAME|TRUNCATE|GRANT|REVOKE|SET\x20PASSWORD|LOCK\x20TABLES"
    r"|UNLOCK\x20TABLES|LOAD\x20INDEX|ANALYZE|OPTIMIZE|REPAIR|FLUSH|INSTALL|UNINSTALL|BEGIN|START)"
)
# What a statement type does to the open transaction (_transactions): nothing but maybe wait in it,
# roll it back, commit it, commit it and open the next (BEGIN), commit it implicitly, or maybe
# switch autocommit (SET). Worked out once a type (_transaction_kind): there are a few dozen.
_TX_NONE, _TX_ROLLBACK, _TX_COMMIT, _TX_BEGIN, _TX_IMPLICIT, _TX_SET = range(6)
_TX_KINDS: dict[str, int] = {}
_AUTOCOMMIT = re.compile(r"autocommit\s*=\s*(?P<value>0|1|on|off|true|false)\b", re.IGNORECASE)
_ROLLBACK_TO = re.compile(r"\bTO\b", re.IGNORECASE)


def _transaction_kind(kind: str) -> int:
    """What statements of this type do to the open transaction (the _TX_ codes), remembered."""
    known = _TX_KINDS.get(kind)
    if known is None:
        if len(_TX_KINDS) > 4096:  # (types come from the classifier: bounded, but not by us)
            _TX_KINDS.clear()
        if kind == "ROLLBACK":
            known = _TX_ROLLBACK
        elif kind == "COMMIT":
            known = _TX_COMMIT
        elif _IMPLICIT_COMMIT.match(kind):
            known = _TX_BEGIN if kind in ("BEGIN", "START TRANSACTION") else _TX_IMPLICIT
        elif kind == "SET":
            known = _TX_SET
        else:
            known = _TX_NONE
        _TX_KINDS[kind] = known
    return known


def _rollback(session: SessionInfo) -> FlagCorrection | None:
    keys, session.pending = session.pending, []
    session.explicit = False
    return FlagCorrection("rolled_back", keys) if keys else None


def _transactions(event: EventRecord) -> FlagCorrection | None:
    """Follow the session's transaction through this event; a correction when it rolls back.

    Data-changing statements run inside a transaction (BEGIN ... or autocommit off) wait
    in the session's `pending` list. COMMIT, an implicit commit (DDL, BEGIN, turning
    autocommit on) clears the list; ROLLBACK, a disconnect or a change of user with the
    transaction open (the server rolls it back) flags them `rolled_back`. ROLLBACK TO
    SAVEPOINT undoes an unknown part: nothing is flagged. A statement the log says failed
    changed nothing. A server restart drops the list without a verdict (the banner may be
    a log reopening, after which the transaction goes on unseen).
    """
    command = event.command
    if command != "Query" and command != "Execute":
        if command == "Quit" or command == "Change user":
            return _rollback(event.session)
        return None
    if "failed" in event.flags:
        return None
    kind = _TX_KINDS.get(event.statement_type)
    if kind is None:
        kind = _transaction_kind(event.statement_type)
    session = event.session
    if kind == _TX_NONE:
        pass
    elif kind == _TX_ROLLBACK:
        if _ROLLBACK_TO.search(event.sql):
            return None
        return _rollback(session)
    elif kind == _TX_COMMIT:
        session.pending, session.explicit = [], False
        return None
    elif kind != _TX_SET:
        session.pending = []
        session.explicit = kind == _TX_BEGIN
        return None
    elif m := _AUTOCOMMIT.search(event.sql):
        on = m["value"].lower() in ("1", "on", "true")
        if on:  # turning autocommit on commits what is open
            session.pending, session.explicit = [], False
        session.autocommit = on
        return None
    if event.destructive and (session.explicit or not session.autocommit):
        session.pending.append((event.record_hash(), event.occurred_at))
    return None


_ROUTINE_TYPES = frozenset({"CREATE PROCEDURE", "DROP PROCEDURE", "CALL"})


def _routine(event: EventRecord, routines: dict[str, list[Any]]) -> None:
    """Learn procedures from CREATE/DROP PROCEDURE; mark a CALL with what its body does and, for
    SQL SECURITY DEFINER (the default), the account it runs as (`definer`; the caller stays the
    actor). A DEFINER clause names that account; without one it is the account that created it."""
    if "failed" in event.flags:
        return
    kind = event.statement_type
    if kind == "CREATE PROCEDURE":
        found = procedure_definition(event.sql, event.database)
        if found:
            name, routine = found
            definer = routine.definer
            if definer is None and event.user is not None and "unattributed" not in event.flags:
                definer = f"{event.user}@{event.host or ''}"
            routines[name] = [
                routine.destructive,
                list(routine.tables),
                definer if routine.security != "INVOKER" else None,
            ]
    elif kind == "DROP PROCEDURE":
        name = dropped_procedure(event.sql, event.database)
        if name:
            routines.pop(name, None)
    elif kind == "CALL":
        name = called_procedure(event.sql, event.database)
        if name in routines:
            destructive, tables, *definer = routines[name]
            event.destructive = event.destructive or destructive
            event.tables = tuple(dict.fromkeys([*event.tables, *tables]))
            event.definer = definer[0] if definer else None


_PREPARED_TYPES = frozenset({"PREPARE", "EXECUTE", "DEALLOCATE PREPARE"})


def _prepared(event: EventRecord) -> None:
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


def _table_event_tables(command: str, obj: str, database: str | None) -> list[str]:
    """The tables a server_audit TABLE event names, each qualified with the event's database.

    The object is one table, or for RENAME "old|newdb.new" (the old name in the record's
    database, the new one qualified by the plugin): both tables, old first. Only a RENAME
    is split: "|" may be part of a quoted table name.
    """
    names = obj.split("|", 1) if command == RENAME_TABLE_EVENT else [obj]
    return [name if "." in name or not database else f"{database}.{name}" for name in names if name]


def classify_events(
    items: Iterable[EventRecord | Problem],
    routines: dict[str, list[Any]] | None = None,
) -> Iterator[EventRecord | Problem | FlagCorrection]:
    """Fill in statement type, tables, destructive and flags from the SQL; follow transactions
    and say (with a FlagCorrection after the event that decides it) which events were rolled back.
    A problem's excerpt is cut where a secret may begin (secrets.masked_raw)."""
    for item in items:
        if type(item) is not EventRecord:  # (exactly: neither class has subclasses)
            if type(item) is Problem and raw_may_hold_secret(item.raw):
                item.raw = masked_raw(item.raw)
            yield item
            continue
        correction = _classified(item, routines)
        yield item
        if correction is not None:
            yield correction


def _classified(item: EventRecord, routines: dict[str, list[Any]] | None) -> FlagCorrection | None:
    """classify_events for one event: its classification, and its transaction's correction (to be
    passed on after it) when it rolls one back."""
    command = item.command
    if command in STATEMENT_COMMANDS:
        c = classify(item.sql, item.database)
        item.statement_type = c.statement_type
        item.tables = c.tables
        item.fingerprint = c.fingerprint
        if c.flags:
            item.flags |= c.flags
        if command == "Prepare":
            # Preparing runs nothing; the Execute that follows is what changes data.
            item.flags.add("prepared")
        else:
            item.destructive = c.destructive
            if command == "Execute":
                item.flags.add("prepared")
            if routines is not None and item.statement_type in _ROUTINE_TYPES:
                _routine(item, routines)
            if command == "Query" and item.statement_type in _PREPARED_TYPES:
                _prepared(item)
    elif command.startswith(TABLE_EVENT_PREFIX):
        # A table the server opened for the statement before it: evidence of access,
        # counted once as destructive on the statement, not again on each table.
        if item.sql:
            item.tables = _table_event_tables(command, item.sql, item.database)
        item.statement_type = command.upper()
    return _transactions(item)


def classifier_for(dialect: str) -> Callable[..., Iterator[EventRecord | Problem | FlagCorrection]]:
    """The classification stage for a server of this SQL dialect (ingest.parsers.dialect_of):
    PostgreSQL's (ingest.postgres), Oracle's (ingest.oracle), else MySQL's and MariaDB's
    (classify_events). Chosen once
    per file, so MySQL's events pass through no test of it."""
    if dialect == "oracle":
        return classify_oracle_events
    return classify_postgres_events if dialect == "postgres" else classify_events


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
        if n is None:
            return None
        # (A file's records share one series: its key is made once, and its hash kept with it.)
        if series != _SERIES_OF[2]:
            _SERIES_OF[2], _SERIES_OF[3] = series, "record " + series[:64]
        return (_SERIES_OF[3], n)
    ident = extra.get("id")
    when = record.occurred_at
    if ident is not None and extra.get("layout") == "mysql-enterprise" and when is not None:
        n = _number(ident)
        if n is None:
            return None
        # (Records of one second share one time object: its series key is made once.)
        if when is not _SERIES_OF[0]:
            _SERIES_OF[0], _SERIES_OF[1] = when, "id " + when.isoformat()
        return (_SERIES_OF[1], n)
    return None


# What record_counter read last, and the series it made of it: a MySQL Enterprise record's time
# and its series, a RECORD's text after the number and its series.
_SERIES_OF: list[Any] = [None, "", None, ""]


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
        # The last event's time and its ISO text (records of one second share one time object).
        self._iso_in: datetime | None = None
        self._iso_out: str | None = None
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

    def next_in_series(self, event: EventRecord) -> bool:
        """see() for the record nearly every one is, done here: the number after the highest of the
        series last seen, with no hole waiting. Whether it was that record (else see() takes it;
        nothing was changed). The same state as see() leaves: the series stays the last one, its
        highest number and time are this record's, and there is nothing to decide."""
        key, n = event.counter  # type: ignore[misc]  # (the caller asked: an event with a counter)
        known = self.series.get(key)
        if known is None or n != known[0] + 1 or self.holes or next(reversed(self.series)) != key:
            return False
        when = event.occurred_at
        if when is not self._iso_in:
            self._iso_in, self._iso_out = when, when.isoformat() if when else None
        self.counted += 1
        known[0], known[1] = n, self._iso_out
        return True

    def see(self, event: EventRecord) -> Iterator[GapRecord]:
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
                    yield GapRecord(
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

    def decide(self, *, everything: bool) -> Iterator[GapRecord]:
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
            yield GapRecord("sequence", _time(first[5]), _time(first[6]), line, offset, detail)


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

    def see(self, event: EventRecord) -> FlagCorrection | None:
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
    def _same(kind: str, who: list[Any], event: EventRecord) -> bool:
        if who[1] == event.session.key:
            return True
        return kind not in _SESSION_SWITCHES and who[0] is not None and who[0] == event.user


class GapFinder:
    """Finds where the log shows that recording stopped, as GapRecord items after the event that shows it.

    - logging switched off (SET GLOBAL general_log = OFF, log_output = 'NONE',
      server_audit_logging = OFF, an audit plugin unloaded): from that statement to the next
      record (when logging came back); open (no end) while nothing follows;
    - a start banner, as the tracker judged it from the records after it (log_reopened in the
      same boot, restart, or log_opened when they cannot tell), or connection ids starting over
      (a restart): from the last record before to the first after, unless a logging-off gap
      covers it already;
    - the clock going backwards (more than a second): from the later time to the earlier.
    - records missing where the format numbers its records densely (CounterWatch): "sequence".
    It also flags switching a log back on by whoever switched it off (ReenableWatch).
    State (for the next file of the same server) is plain data: see to_state.
    """

    def __init__(self, dialect: str = "mysql") -> None:
        self.last_time: datetime | None = None
        self.boot: str | None = None
        self.off: tuple[datetime | None, int, int, str] | None = None  # (time, line, offset, sql)
        self.counters = CounterWatch()
        self.reenable = ReenableWatch()
        # The server's SQL dialect (set by the reader of each file, like the tracker's): a
        # PostgreSQL log is read by PgAuditWatch's rules instead of the MySQL ones.
        self.dialect = dialect
        self.pgaudit = PgAuditWatch()
        self.oracle = OracleWatch()

    def to_state(self) -> dict[str, Any]:
        off = self.off
        return {
            "last_time": self.last_time.isoformat() if self.last_time else None,
            "boot": self.boot,
            "off": [off[0].isoformat() if off[0] else None, off[1], off[2], off[3]] if off else None,
            "counters": self.counters.to_state(),
            "switched_off": self.reenable.to_state(),
            "pgaudit": self.pgaudit.to_state(),
            "oracle": self.oracle.to_state(),
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
        self.pgaudit.load_state(state.get("pgaudit", {}))
        self.oracle.load_state(state.get("oracle", {}))

    def process(self, items: Iterable[Any]) -> Iterator[Any]:
        if self.dialect == "postgres":
            yield from self._process_postgres(items)
            return
        if self.dialect == "oracle":
            yield from self._process_oracle(items)
            return
        for item in items:
            if not isinstance(item, EventRecord):
                yield item
                continue
            after = self.after(item)
            yield item
            if after:
                yield from after
        yield from self.finish()

    def after(self, event: EventRecord) -> list[Any] | None:
        """What the MySQL rules find in one event, to be passed on after it (it is flagged, if it
        switches a log back on, before it is): the correction of that flag, gaps, counter gaps."""
        # (Each test first where it is cheap: this runs for every event of every log.)
        if event.statement_type in _SWITCH_TYPES:
            correction = self.reenable.see(event)
            found: list[Any] | None = [correction] if correction is not None else None
        else:
            found = None
        gaps = self._see(event)
        if gaps:
            found = gaps if found is None else found + gaps
        if event.counter is not None and not self.counters.next_in_series(event):
            counted = list(self.counters.see(event))
            if counted:
                found = counted if found is None else found + counted
        return found

    def finish(self) -> list[Any]:
        """What the end of a MySQL read finds: the holes still open, and a logging-off gap nothing
        closed in this file."""
        found: list[Any] = list(self.counters.decide(everything=True))  # no late record comes
        gap = self.open_gap()
        if gap is not None:  # nothing recorded after it in this file
            self.off = None
            found.append(gap)
        return found

    def _process_postgres(self, items: Iterable[Any]) -> Iterator[Any]:
        """A PostgreSQL log: restarts and the clock as for any log (_see), and pgAudit's switches
        (PgAuditWatch); no record counter, no switching back on (ReenableWatch)."""
        see, watch = self._see, self.pgaudit.see
        for item in items:
            if type(item) is not EventRecord:
                yield item
                continue
            yield item
            found = see(item)  # (MySQL's switches match no PostgreSQL statement)
            more = watch(item)  # (both asked before either's gaps are passed on)
            if found:
                yield from found
            if more:
                yield from more
        gap = self.open_gap()
        if gap is not None and not self.pgaudit.reported:  # nothing recorded after it in this file
            # Stored open once; it stays open in the state, so that the next file of the server
            # (a restart, a reload) can close it (ingest.commit closes the open row).
            self.pgaudit.reported = True
            yield gap

    def _process_oracle(self, items: Iterable[Any]) -> Iterator[Any]:
        """An Oracle trail: restarts (its STARTUP records) and the clock as for any log (_see), and
        auditing reduced or purged (OracleWatch); no record counter, no MySQL switches."""
        for item in items:
            if not isinstance(item, EventRecord):
                yield item
                continue
            yield item
            found = self._see(item) or []  # (MySQL's switches match no Oracle statement)
            found += self.oracle.see(item)
            yield from found
        # Nothing re-enabled these in this file or pull: stored open. The state keeps them, so
        # that a later pull (or file of the same source) closes them (commit._close_gap).
        yield from self.oracle.open_gaps()

    def open_gap(self) -> GapRecord | None:
        """The logging-off gap nothing has closed yet, as it stands now (the state keeps it, so a
        record read later closes it: a followed file reports it at the end of each read)."""
        if self.dialect == "postgres":
            return self.pgaudit.open_gap()
        if self.off is None:
            return None
        when, line, offset, sql = self.off
        return GapRecord("logging_off", when, None, line, offset, f"logging switched off by {sql[:200]!r}")

    def _see(self, event: EventRecord) -> list[GapRecord] | None:
        when = event.occurred_at
        boot = event.session.boot
        last = self.last_time
        if (
            # Nearly every event: no switch-off before it, the same boot, no banner, its time is
            # the last one (records of one second share one time object) or not far before it.
            self.off is None
            and boot == self.boot
            and event.command != "Server start"
            and (when is last or when is None or last is None or not when < last - _BACKWARDS)
        ):
            found = None
        else:
            found = self._found(event)
        # Only a SET or an UNINSTALL switches a log off, alone or among several statements: a
        # cheap test first (_LOGGING_OFF, tried at every character, cost more than the rest).
        flags = event.flags
        if (
            event.command in ("Query", "Execute")
            and (event.statement_type in _SWITCH_TYPES or "multi_statement" in flags or "unparsed" in flags)
            and "failed" not in flags
            and _LOGGING_OFF.search(event.sql)
        ):
            self.off = (when, event.line, event.offset, event.sql)
        self.boot = boot
        if when is not None:
            self.last_time = when
        return found

    def _found(self, event: EventRecord) -> list[GapRecord]:
        """The gaps an event shows (_see, once it is known that it may show one)."""
        found: list[GapRecord] = []
        when = event.occurred_at
        new_boot = self.boot is not None and event.session.boot != self.boot
        banner = event.command == "Server start" and event.note
        if self.off is not None:
            off_time, line, offset, sql = self.off
            self.off = None
            found.append(
                GapRecord(
                    "logging_off", off_time, when, line, offset, f"logging switched off by {sql[:200]!r}"
                )
            )
            if banner and not event.note.startswith(REOPEN):
                # Switched off, then a restart, or a banner nothing decided: the off gap covers the
                # time, but not that fact, nor the evidence an inferred attribution rests on.
                verdict, detail = event.note.split("|", 1)
                reason = "restart" if verdict == RESTART else "log_opened"
                found.append(GapRecord(reason, off_time, when, event.line, event.offset, detail[:1000]))
        elif banner:
            # The tracker weighed what follows the banner: reopen, restart, or neither proven.
            verdict, detail = event.note.split("|", 1)
            reason = {REOPEN: "log_reopened", RESTART: "restart"}.get(verdict, "log_opened")
            found.append(GapRecord(reason, self.last_time, when, event.line, event.offset, detail[:1000]))
        elif new_boot and event.command != "Server start":
            detail = "the server restarted: connection ids started over"
            found.append(GapRecord("restart", self.last_time, when, event.line, event.offset, detail))
        elif (
            when is not None
            and when is not self.last_time  # (records of one second share one time object)
            and self.last_time is not None
            and when < self.last_time - _BACKWARDS
        ):
            detail = f"the clock went back from {self.last_time.isoformat()} to {when.isoformat()}"
            found.append(GapRecord("time_backwards", self.last_time, when, event.line, event.offset, detail))
        return found


def mysql_stages(
    items: Iterable[Item | Settle], tracker: SessionTracker, gaps: GapFinder
) -> Iterator[EventRecord | Problem | FlagCorrection | GapRecord]:
    """`gaps.process(classify_events(tracker.process(items), tracker.routines))` for a MySQL or
    MariaDB log, in one loop: the same items in the same order, and every stage done with an item
    before the next is taken from `items` (where ingest.tail may make a cut). One frame resumed a
    record instead of three, and the record nearly every line of a general log is (a statement on
    a known connection) goes through the stages' short paths with no test repeated."""
    routines, server = tracker.routines, tracker.server
    texts, new_text, classified, see = _TEXTS, new_statement_text, _classified, gaps._see
    for item in items:
        if type(item) is LogRecord and tracker._banner is None:
            when = item.occurred_at
            when = tracker._utc_out if when is tracker._utc_in else tracker._utc(when)
            cid = item.connection_id
            session = tracker.connections.get(cid)
            command = item.command
            if (
                session is not None
                and item.user is None
                and item.status is None
                and not item.extra
                and session.change is None
                and session.stale is None
                and command not in _CONNECT_COMMANDS
            ):
                # 1. The tracker: SessionTracker._statement, written out (it learns no corrections).
                if cid is not None and cid > tracker.max_id:
                    tracker.max_id = cid
                flags: set[str] = set()
                if not session.attributed:
                    flags.add("unattributed")
                    attribution = "unattributed"
                elif session.carried:
                    attribution = "inferred_reopen"
                elif session.attribution == "connect" and session.connect_file != tracker.file:
                    attribution = "connect_earlier_file"
                else:
                    attribution = session.attribution
                if when is None:
                    flags.add("time_unknown")
                text = texts.get(item.argument) or new_text(item.argument)
                sql = text[0]
                if text[1]:
                    flags.add("secret_masked")
                user = session.user
                database = item.database or session.database
                event = EventRecord(
                    when, server, session, cid, user, session.host, session.ip, database, command, sql,
                    item.raw, item.line, item.offset, "", (), False, flags, "", item.rows_affected, None,
                    attribution, None, "", None, item.extra,
                )  # fmt: skip
                if session.opened is None and session.attribution == "record" and user is not None:
                    session.opened = (when.isoformat() if when else None, event.record_hash())
                if command != "Query" or text[2] is not None or text[3] is not None:
                    tracker._command_effects(command, session, event, False, text)
                # 2. Classification and the transaction (_classified), a Query's way written out.
                if command == "Query":
                    c = classify(sql, database)
                    kind = event.statement_type = c.statement_type
                    event.tables = c.tables
                    event.fingerprint = c.fingerprint
                    if c.flags:
                        flags |= c.flags
                    event.destructive = c.destructive
                    if kind in _ROUTINE_TYPES:
                        _routine(event, routines)
                    elif kind in _PREPARED_TYPES:
                        _prepared(event)
                    if _TX_KINDS.get(kind) == _TX_NONE and "failed" not in flags:
                        correction = None
                        if event.destructive and (session.explicit or not session.autocommit):
                            session.pending.append((event.record_hash(), when))
                    else:
                        correction = _transactions(event)
                else:
                    correction = classified(event, routines)
                    kind = event.statement_type
                # 3. The gap finder (GapFinder.after: the event has no record counter).
                found = gaps.after(event) if kind in _SWITCH_TYPES else see(event)
                yield event
                if found:
                    yield from found
                if correction is not None:
                    yield correction
                if (
                    item.host is None
                    and item.ip is None
                    and item.database is None
                    and command in _STORABLE_COMMANDS
                ):
                    continue  # unstorable_problem's first answer
                outs: list[Any] = []
                if (problem := unstorable_problem(item)) is not None:
                    outs.append(problem)
            else:
                outs = [tracker._event(item, when)]
                if tracker._corrections:
                    outs += tracker._corrections
                    tracker._corrections = []
                if (problem := unstorable_problem(item)) is not None:
                    outs.append(problem)
        else:
            outs = tracker._step(item)
        yield from _classified_and_gaps(outs, routines, gaps)
    yield from _classified_and_gaps(tracker.finish(), routines, gaps)
    yield from gaps.finish()


def _classified_and_gaps(
    outs: list[Any], routines: dict[str, list[Any]], gaps: GapFinder
) -> Iterator[EventRecord | Problem | FlagCorrection | GapRecord]:
    """The tracker's outputs for one item through classify_events and GapFinder.process."""
    for out in outs:
        if type(out) is EventRecord:
            correction = _classified(out, routines)
            found = gaps.after(out)
            yield out
            if found:
                yield from found
            if correction is not None:
                yield correction
            continue
        if type(out) is Problem and raw_may_hold_secret(out.raw):
            out.raw = masked_raw(out.raw)
        yield out
