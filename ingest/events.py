"""The normalized event: what the store keeps for one statement or connection event.

Pure Python: the session tracker builds these from parser records, the classifier
fills in what the statement does, and the store writer copies them to PostgreSQL.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


def session_id_of(key: str) -> int:
    """The database id of the session with this key: a 63-bit hash of it, the same in every
    process, so that events can be formatted for the store before it has seen the session."""
    value = int.from_bytes(hashlib.blake2b(key.encode("utf-8", "surrogateescape"), digest_size=8).digest())
    return (value & 0x7FFF_FFFF_FFFF_FFFF) or 1


@dataclass(slots=True)
class SessionInfo:
    """What we know of one connection (one session) of one server boot."""

    key: str
    server: str
    boot: str
    connection_id: int | None
    user: str | None = None
    host: str | None = None
    ip: str | None = None
    database: str | None = None
    program: str | None = None  # client program (audit logs' connection attributes)
    os_user: str | None = None  # the client's operating-system user
    started_at: datetime | None = None  # time of its Connect, when the log has it
    ended_at: datetime | None = None  # time of its Quit
    attributed: bool = False  # True once a Connect (or equivalent) told us who it is
    # How the account is known (see normalize.SessionTracker): "connect" (its Connect or Change
    # user), "record" (the records name it), "unattributed"; and in which file it was read.
    attribution: str = "unattributed"
    connect_file: object = None
    # The account is known from before a log reopening the log could not prove (a banner neither
    # reopen nor restart by the evidence): its statements are attributed `inferred_reopen`.
    carried: bool = False
    # A change of user ends a session and starts the next on the same connection: run 1, 2...,
    # the key of the run before, and the account the records of a format that goes on naming
    # the old one after it (server_audit's QUERY records) must not be believed for.
    run: int = 1
    previous: str | None = None
    stale: tuple[str | None, str | None] | None = None
    # The Connect or Change user record that named the account: (time as ISO text, record hash).
    opened: tuple[str | None, bytes] | None = None
    # A Change user logged and not yet known to have taken (a refusal follows it): whom it names
    # (user, host, ip, database), when, in which file, and its record's identity.
    change: dict[str, Any] | None = None
    # Audit logs that number statements (normalize.SessionTracker._query_ids): the highest query
    # id seen, the records since the last statement as (query id, record hash, time), the definer
    # a table record of a query id named, and (query id, database, table) of table records.
    last_qid: int = 0
    body: list[tuple[int, bytes, datetime | None]] = field(default_factory=list)
    qid_definer: list[Any] | None = None
    qid_tables: list[list[Any]] = field(default_factory=list)
    # Transactions (see normalize.Transactions): autocommit as the session set it (the
    # server default, on, until it says otherwise), whether a BEGIN is open, and the
    # data-changing events of the open transaction as (record hash, time) pairs.
    autocommit: bool = True
    explicit: bool = False
    pending: list[tuple[bytes, datetime | None]] = field(default_factory=list)
    # SQL-level prepared statements of the session (PREPARE name FROM '...'), by lower-case
    # name: [destructive, tables, flags] of the statement text (see normalize._prepared).
    statements: dict[str, list[Any]] = field(default_factory=dict)
    # PostgreSQL: a statement of the open transaction failed, so the whole transaction is rolled
    # back however it ends (COMMIT of an aborted transaction is a ROLLBACK).
    aborted: bool = False


@dataclass(slots=True)
class GapRecord:
    """A stretch of time the log itself shows was not recorded (see normalize.find_gaps)."""

    reason: str  # "logging_off", "restart", "time_backwards", "sequence", ...
    started_at: datetime | None  # the last time recorded before it
    ended_at: datetime | None  # the first time recorded after it; None: not (yet) resumed
    line: int  # the record that shows it: the one that switched logging off, or the first after
    offset: int
    detail: str


@dataclass(slots=True)
class FlagCorrection:
    """A flag learnt about events already yielded (maybe already stored): e.g. `rolled_back`
    once their transaction ends in ROLLBACK. Keys are (record hash, time) pairs."""

    flag: str
    keys: list[tuple[bytes, datetime | None]]
    # A condition only the store can check, or None. `if_switched_off` (server, kinds, user,
    # session, at): logging switched back on gets `anti_forensic` only if the same account or
    # session switched that log off before, in any source of the server (store.apply_corrections).
    if_switched_off: dict[str, Any] | None = None


@dataclass(slots=True)
class EventRecord:
    occurred_at: datetime | None  # aware, UTC; None when the log never said when
    server: str
    session: SessionInfo  # the connection this event belongs to (its key: server/boot/id)
    connection_id: int | None
    user: str | None
    host: str | None
    ip: str | None
    database: str | None  # the current schema when the statement ran
    command: str
    sql: str  # searchable text: decoded, NUL bytes removed (the raw bytes keep them)
    raw: bytes
    line: int
    offset: int
    statement_type: str = ""
    tables: tuple[str, ...] = ()
    destructive: bool = False
    flags: set[str] = field(default_factory=set)
    fingerprint: str = ""
    rows_affected: int | None = None
    status: str | None = None
    # How the account is known: record, connect, connect_earlier_file, inferred_reopen,
    # unattributed ("" only for events stored before AuditWeb recorded it).
    attribution: str = "unattributed"
    definer: str | None = None  # the account a SQL SECURITY DEFINER routine's body runs as
    # What the tracker concluded from the records after a start banner (reopen, restart or
    # neither) and why: the gap finder turns it into the banner's gap. Not stored with the event.
    note: str = ""
    # The log's own record counter, where the format has a dense one: (series, number). See
    # normalize.record_counter and GapFinder (gaps of reason "sequence").
    counter: tuple[str, int] | None = None
    # The format's details of the record (LogRecord.extra, the same dict, not a copy): a
    # dialect's classifier reads them (ingest.postgres: pgAudit's entries, each naming its
    # object and type). Not stored with the event.
    extra: dict[str, str] | None = None

    def record_hash(self, when: str | None = None) -> bytes:
        """The identity of this record for de-duplication.

        Built from the server, the time, the byte offset and the raw bytes: the same
        file ingested twice (or a rotated or gzipped copy of it) yields the same
        hashes, while identical statements at other offsets stay distinct.
        """
        if when is None:  # callers that have the time formatted already pass it
            when = self.occurred_at.isoformat() if self.occurred_at else "-"
        head = f"{self.server}\x00{when}\x00{self.offset}\x00".encode("utf-8", "surrogateescape")
        return hashlib.blake2b(head + self.raw, digest_size=16).digest()
