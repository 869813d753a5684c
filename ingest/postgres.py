"""PostgreSQL servers after the session tracker: classification and the gaps pgAudit shows.

Pure Python (no Django). A file of a format whose `DIALECT` is "postgres" (the pgAudit
layouts) goes through `classify_postgres_events` instead of normalize.classify_events, and
the gap finder adds `PgAuditWatch`'s rules; MySQL's stages are untouched. The rules themselves
(what is destructive, anti-forensic) are ingest.dialects.postgres's; docs/architecture.md
"PostgreSQL pgAudit" says why each is so.
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any

from ingest.dialects import postgres as rules
from ingest.events import EventRecord, FlagCorrection, GapRecord, SessionInfo
from ingest.parsers.records import Problem
from ingest.sql import fingerprint
from ingest.sql.secrets import masked_raw, raw_may_hold_secret

__all__ = ["PgAuditWatch", "classify_postgres_events", "clear_cache"]

MAX_COMMANDS = 1_000  # pgAudit entries read from one record (the parser caps them too)


# pgAudit's object types that are relations (its OBJECT_TYPE; a column, an index, a function or
# a schema is named too, and is no table).
RELATIONS = frozenset(
    {"TABLE", "VIEW", "MATERIALIZED VIEW", "FOREIGN TABLE", "PARTITIONED TABLE", "SEQUENCE"}
)
# Statements whose name is a database's or a schema's, never a table's.
_NO_TABLES = frozenset(
    {"CREATE DATABASE", "DROP DATABASE", "ALTER DATABASE", "CREATE SCHEMA", "DROP SCHEMA", "ALTER SCHEMA"}
)


_Entries = tuple[list[list[Any]], tuple[str, ...]]
_NO_ENTRIES: _Entries = ([], ())
# What is worked out once per distinct text and reused (a log repeats them): the entries of a
# `commands` JSON, and a statement's verdict, tables and fingerprint by its plain shape and
# entries. Bounded: each starts again empty when full.
_CACHE_ENTRIES = 20_000
_MAX_KEYED_CHARS = 4096  # longer texts are worked out each time (and are not kept)
_PARSED: dict[str, _Entries] = {}
_JUDGED: dict[tuple[str, str], tuple[rules.Verdict, tuple[str, ...], str]] = {}


def _entries(extra: dict[str, str] | None) -> _Entries:
    """pgAudit's entries of the statement as the parser keeps them (JSON): [substatement id,
    class, command, object type, object name, rows] each; and the commands of them. Shared: not
    to be changed."""
    text = extra.get("commands") if extra else None
    if not text:
        return _NO_ENTRIES
    known = _PARSED.get(text)
    if known is not None:
        return known
    try:
        entries = json.loads(text)
    except ValueError:
        entries = []
    if not isinstance(entries, list):
        entries = []
    entries = [e for e in entries[:MAX_COMMANDS] if isinstance(e, list) and len(e) > 4]
    parsed = (entries, tuple(str(e[2]) for e in entries))
    if len(text) <= _MAX_KEYED_CHARS:
        if len(_PARSED) >= _CACHE_ENTRIES:
            _PARSED.clear()
        _PARSED[text] = parsed
    return parsed


def clear_cache() -> None:
    """Forget every worked-out answer, these and the rules' (tests and benchmarks)."""
    _PARSED.clear()
    _JUDGED.clear()
    rules.clear_cache()


def _judged(sql: str, extra: dict[str, str] | None) -> tuple[rules.Verdict, tuple[str, ...], str]:
    """(verdict, tables, fingerprint) of a statement and its pgAudit entries. By its plain shape
    (rules.plain_shape: literals out) where it has one: the verdict depends on nothing else
    (rules.classify), nor does the fingerprint (every literal `?`), nor do the tables."""
    commands = (extra.get("commands") or "") if extra else ""
    plain = rules.plain_shape(sql) if len(sql) <= _MAX_KEYED_CHARS else None
    if plain is not None:
        known = _JUDGED.get((plain, commands))
        if known is not None:
            return known
    entries, verbs = _entries(extra)
    verdict = rules.classify(sql, verbs)
    judged = (verdict, _tables(entries, verdict.tables, verdict.statement_type), fingerprint(sql))
    if plain is not None and len(commands) <= _MAX_KEYED_CHARS and verdict.statement_type != "UNKNOWN":
        if len(_JUDGED) >= _CACHE_ENTRIES:
            _JUDGED.clear()
        _JUDGED[(plain, commands)] = judged
    return judged


def _tables(entries: list[list[Any]], named: tuple[str, ...], statement_type: str) -> tuple[str, ...]:
    """The relations pgAudit names first (schema-qualified, as the server resolved them), then
    those the text names that none of its objects is: `orders` is `shop.orders` when pgAudit
    says so, a MERGE's source table is kept, and a TRUNCATE (pgAudit names no relation for it)
    keeps the text's. A schema, column, index or function pgAudit names is no table."""
    if statement_type in _NO_TABLES:
        return ()
    relations = [str(e[4]) for e in entries if e[4] and e[3] in RELATIONS]
    others = {str(e[4]) for e in entries if e[4] and e[3] not in RELATIONS}
    bare = {o.rsplit(".", 1)[-1] for o in relations}
    text = (t for t in named if t not in relations and t not in bare and t not in others)
    return tuple(dict.fromkeys([*relations, *text]))


def classify_postgres_events(
    items: Iterable[EventRecord | Problem], routines: dict[str, list[Any]] | None = None
) -> Iterator[EventRecord | Problem | FlagCorrection]:
    """Statement type, tables, destructive and flags of PostgreSQL events (the tracker's output),
    and `rolled_back` corrections where the log shows the transaction (pgAudit's MISC class).
    `routines` is accepted for the same call as normalize.classify_events and not used: pgAudit
    names what a function's body wrote in the call's own entries."""
    for item in items:
        if isinstance(item, Problem):
            if raw_may_hold_secret(item.raw):
                item.raw = masked_raw(item.raw)
            yield item
            continue
        if item.command == "Query":
            verdict, item.tables, item.fingerprint = _judged(item.sql, item.extra)
            item.statement_type = verdict.statement_type
            item.destructive = verdict.destructive
            if verdict.flags:
                item.flags |= verdict.flags
            if item.extra and item.extra.get("audited") == "no":
                # Only the server's ERROR shows it: pgAudit logged nothing (refused, failed with
                # log_rows, or in an aborted transaction).
                item.flags.add("not_audited")
        elif item.command == "Config" and rules.config_change(item.sql):
            item.flags.add("anti_forensic")
        if item.command == "Connect" and item.extra and "failed" not in item.flags:
            item.session.program = item.session.program or item.extra.get("application")
        yield item
        if (
            item.command == "Query"
            and item.statement_type not in _TRANSACTION_TYPES
            and not item.session.explicit
        ):
            continue  # (nearly every statement: _transaction does nothing with it)
        correction = _transaction(item)
        if correction is not None:
            yield correction


_ROLLBACK_TO = re.compile(r"\bTO\b", re.IGNORECASE)
# The statement types _transaction acts on whether or not a transaction is open.
_TRANSACTION_TYPES = frozenset({"BEGIN", "START", "ROLLBACK", "ABORT", "COMMIT", "END"})


def _rolled_back(session: SessionInfo) -> FlagCorrection | None:
    keys, session.pending = session.pending, []
    session.explicit = session.aborted = False
    return FlagCorrection("rolled_back", keys) if keys else None


def _transaction(event: EventRecord) -> FlagCorrection | None:
    """PostgreSQL's transactions, where the log shows BEGIN/COMMIT/ROLLBACK (pgaudit.log with
    `misc`): the destructive statements of an explicit transaction wait; ROLLBACK (not TO a
    savepoint), a disconnect with it open, or COMMIT after a statement of it failed (the server
    answers ROLLBACK) flags them `rolled_back`. DDL is transactional here: no implicit commit.
    Without `misc` in pgaudit.log none of these is logged, and nothing is flagged."""
    session = event.session
    if event.command == "Quit":
        return _rolled_back(session) if session.explicit else None
    if "failed" in event.flags:  # (an ERROR the server logged without its statement, too)
        if session.explicit:
            session.aborted = True
        return None
    if event.command != "Query":
        return None
    kind = event.statement_type
    if kind in ("BEGIN", "START"):
        session.pending, session.explicit, session.aborted = [], True, False
    elif kind in ("ROLLBACK", "ABORT"):
        if _ROLLBACK_TO.search(event.sql):
            return None
        return _rolled_back(session)
    elif kind in ("COMMIT", "END"):
        if session.aborted:
            return _rolled_back(session)
        session.pending, session.explicit = [], False
    elif event.destructive and session.explicit:
        session.pending.append((event.record_hash(), event.occurred_at))
        del session.pending[:-10_000]  # bounded: a transaction that never ends
    return None


# -- gaps ------------------------------------------------------------------------------------------

# RESET pgaudit.log (or RESET ALL), and SET pgaudit.log TO DEFAULT, which is the same.
_RESET_AUDIT_RE = re.compile(
    r"\A\s*(?:RESET\s+(?:ALL\b|pgaudit\.log\b)"
    r"|SET\s+(?:SESSION\s+|LOCAL\s+)?pgaudit\.log\s*(?:=|\bTO\b)\s*DEFAULT\s*;?\s*\Z)",
    re.IGNORECASE,
)
# A session's `SET [SESSION|LOCAL] pgaudit.log = '...'` (or TO, or one bare word), and its classes.
_SET_AUDIT_RE = re.compile(
    r"\A\s*SET\s+(?:SESSION\s+|LOCAL\s+)?pgaudit\.log\s*(?:=|\bTO\b)\s*"
    r"(?:'(?P<value>[^'\n]{0,1000})'|(?P<word>(?!DEFAULT\b)[A-Za-z_]{1,40}))\s*;?\s*\Z",
    re.IGNORECASE,
)
_CONFIG_RE = re.compile(
    r'\Aparameter "pgaudit\.log" (?:changed to "(?P<value>[^"\n]{0,4096})"'
    r"|(?P<removed>removed from configuration file, reset to default))\Z"
)
# The statement types whose text PgAuditWatch.see reads (SET pgaudit.log, RESET...).
_SETTING_TYPES = frozenset({"SET", "RESET"})
_MAX_SESSIONS = 10_000  # sessions whose last time is remembered (the oldest is forgotten first)


def _iso(when: datetime | None) -> str | None:
    return when.isoformat() if when else None


def _time(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


def logs_writes(value: str) -> bool:
    """Whether a pgaudit.log value records writes: it names `write` or `all`, not `-write`."""
    classes = {c.strip().lower() for c in value.split(",")}
    return bool(classes & {"write", "all"}) and "-write" not in classes


class PgAuditWatch:
    """Where a PostgreSQL log shows that pgAudit did not record, as gaps of reason logging_off.

    For the whole server:
    - `parameter "pgaudit.log" changed to "none"` (a reload after ALTER SYSTEM or an edited
      postgresql.conf), or `parameter "pgaudit.log" removed from configuration file, reset to
      default` (ALTER SYSTEM RESET where postgresql.conf does not set it: pgAudit's default is
      none) opens it. The server's own lines (connections, errors) go on meanwhile, so the next
      record does not close it, unlike MySQL's logs switched off. It ends at the next change to
      another value, or, after a restart (which reads the files again and logs no change), at
      the last start before the first statement pgAudit records again (open until then).
    For one session:
    - `RESET pgaudit.log` (or RESET ALL), or a `SET pgaudit.log` to a value that logs writes:
      pgAudit logs a SET after it ran, under the new setting, so a `SET pgaudit.log = 'none'`
      never reaches the log while the statement that ends it does. The gap runs from that
      session's last record before it: what the session ran between may be missing (a session
      that set a setting it never changed shows the same line: the detail says "may").
    - a logged `SET pgaudit.log` to a value without writes (`'misc_set'`: logged, since the new
      value logs SETs) opens one for that session; its next RESET or SET of pgaudit.log to
      writes, a write pgAudit records, or its end (the setting ends with the session) ends it.
    State (to_state) is plain data, kept in the gap finder's.
    """

    def __init__(self) -> None:
        self.off: list[Any] | None = None  # [time, line, offset] of the change to "none"
        self.started: str | None = None  # the last server start since, while off
        self.reported = False  # the open gap was stored open at the end of a file
        # session key -> its last time (kept as is: made text only for the state)
        self.last: OrderedDict[str, datetime | None] = OrderedDict()
        self.quiet: dict[str, list[Any]] = {}  # session key -> [time, line, offset, value] of its SET

    def to_state(self) -> dict[str, Any]:
        return {
            "off": list(self.off) if self.off else None,
            "started": self.started,
            "reported": self.reported,
            "last": [(key, _iso(when)) for key, when in self.last.items()],
            "quiet": [[k, *v] for k, v in self.quiet.items()],
        }

    def load_state(self, state: dict[str, Any]) -> None:
        self.off = list(state["off"]) if state.get("off") else None
        self.started = state.get("started")
        self.reported = bool(state.get("reported"))
        self.last = OrderedDict((k, _time(v)) for k, v in state.get("last", []))
        self.quiet = {q[0]: list(q[1:]) for q in state.get("quiet", [])}

    def open_gap(self) -> GapRecord | None:
        """The server-wide gap nothing has closed yet, as it stands now (open: no end)."""
        if self.off is None:
            return None
        when, line, offset = self.off
        return GapRecord("logging_off", _time(when), None, line, offset, _OFF_DETAIL)

    def _config(self, event: EventRecord) -> list[GapRecord]:
        m = _CONFIG_RE.match(event.sql)
        if m is None:
            return []
        value = "none" if m["removed"] else m["value"].strip().lower()
        when = event.occurred_at
        if value in ("none", "") and self.off is None:
            self.off, self.started, self.reported = [_iso(when), event.line, event.offset], None, False
        elif value not in ("none", "") and self.off is not None:
            started, line, offset = self.off
            self.off, self.started = None, None
            return [GapRecord("logging_off", _time(started), when, line, offset, _OFF_DETAIL)]
        return []

    def see(self, event: EventRecord) -> list[GapRecord]:
        if event.command == "Config":
            return self._config(event)
        if event.command == "Server start":
            if self.off is not None:
                self.started = _iso(event.occurred_at)
            self.quiet.clear()  # (every session ended with the server)
            return []
        if (
            event.command == "Query"
            and self.off is None
            and event.connection_id is not None
            and event.statement_type not in _SETTING_TYPES
            and (not self.quiet or event.session.key not in self.quiet)
        ):
            # Most records: a statement that is no SET or RESET, in a session not set quiet, while
            # the server logs. What the rules below do with it: its session's last time.
            self._saw(event.session.key, event.occurred_at)
            return []
        found: list[GapRecord] = []
        audited = event.command == "Query" and bool(event.extra and event.extra.get("audit_type"))
        if audited and self.off is not None and self.started is not None:
            # The server started again since pgaudit.log went to none, and pgAudit records: the
            # start read a configuration that logs (a restart logs no `changed to` line).
            started, line, offset = self.off
            found.append(
                GapRecord(
                    "logging_off", _time(started), _time(self.started), line, offset, _OFF_DETAIL + _RESTARTED
                )
            )
            self.off, self.started = None, None
        key = event.session.key
        if event.connection_id is None:
            return found
        when = event.occurred_at
        ok = event.command == "Query" and "failed" not in event.flags
        quiet = self.quiet.get(key)
        m = _SET_AUDIT_RE.match(event.sql) if ok and event.statement_type == "SET" else None
        setting = None if m is None else m["value"] if m["value"] is not None else m["word"]
        reset = (
            ok and event.statement_type in ("RESET", "SET") and _RESET_AUDIT_RE.match(event.sql) is not None
        )
        if quiet is not None and (
            reset
            or (setting is not None and logs_writes(setting))
            or (audited and "WRITE" in (event.extra or {}).get("classes", "").split(","))
            or event.command == "Quit"
        ):
            del self.quiet[key]
            began, line, offset, value = quiet
            found.append(
                GapRecord(
                    "logging_off",
                    _time(began),
                    when,
                    line,
                    offset,
                    f"{event.user or 'this session'} set pgaudit.log = '{value[:100]}' (no writes) for"
                    " its session: pgAudit recorded none of its writes until"
                    + (" it ended" if event.command == "Quit" else " this record"),
                )
            )
        elif setting is not None and not logs_writes(setting):
            self.quiet[key] = [_iso(when), event.line, event.offset, setting]
        elif quiet is None and (reset or setting is not None):
            before = self.last.get(key)
            what = "reset pgaudit.log" if reset else "set pgaudit.log back to record writes"
            found.append(
                GapRecord(
                    "logging_off",
                    before,
                    when,
                    event.line,
                    event.offset,
                    f"{event.user or 'this session'} {what}: pgAudit logs a SET after it ran, so"
                    " a `SET pgaudit.log = 'none'` before it is never in the log; what this session ran"
                    " since its record before may be missing",
                ),
            )
        if event.command == "Quit":
            self.last.pop(key, None)
            return found
        self._saw(key, when)
        if len(self.quiet) > _MAX_SESSIONS:  # (bounded: sessions that never end)
            self.quiet.pop(next(iter(self.quiet)))
        return found

    def _saw(self, key: str, when: datetime | None) -> None:
        """The session's last time is `when`; the session least recently seen goes first."""
        last = self.last
        last[key] = when
        last.move_to_end(key)
        if len(last) > _MAX_SESSIONS:
            last.popitem(last=False)


_RESTARTED = (
    "; the server started again with a configuration that logs (a restart writes no `changed to`"
    " line: the first statement pgAudit recorded after it shows it)"
)
_OFF_DETAIL = (
    'the server reloaded pgaudit.log = "none": pgAudit recorded no statement of any session until'
    " it changed again (the server's own lines, connections and errors, went on)"
)
