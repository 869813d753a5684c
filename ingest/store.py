"""The store writer: batches of normalized events into PostgreSQL with COPY.

Each batch's statements are added to the statement dictionary (ingest_statement) first, those
that are new only, and its events copied as narrow rows into ingest_event_row (issue 22).

Exactly once is the callers' (issue 22, item 3): each read commits its checkpoint with its rows,
and a file read before under any name is recognised by its content (ingest.identity), so a
batch holds only events the store does not. There is no unique index to refuse a repeat.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db import connection, transaction
from django.db.models import Q
from psycopg.errors import UniqueViolation
from psycopg.sql import SQL, Identifier

from ingest.alerts import KIND_SQL, WORTH_SQL
from ingest.chunks import PackedChunk, store_chunks
from ingest.custody import append_link, chain_events, event_key
from ingest.events import EventRecord, FlagCorrection, session_id_of
from ingest.models import Event, SourceFile
from ingest.normalize import _SESSION_SWITCHES
from ingest.partitions import ensure_event_partitions
from ingest.rows import (
    ROW_COLUMNS,
    STATEMENT_COLUMNS,
    STATEMENT_RECORD,
    FormattedBatch,
    RowFormatter,
    statement_id,
)
from ingest.sql import log_switches

_COLUMN_LIST = ", ".join(f'"{c}"' for c in ROW_COLUMNS)
_COLUMNS = SQL(", ").join(map(Identifier, ROW_COLUMNS))  # the same, for psycopg.sql
_STATEMENT_COLUMNS = SQL(", ").join(map(Identifier, STATEMENT_COLUMNS))

# The statements of a round of EventWriter._add_in_rounds, copied into a table of the session's own
# (emptied at each commit), then added under the id each tries now: one whose id is taken already
# is not, and is looked at again.
_STATEMENT_STAGING = """
CREATE TEMPORARY TABLE IF NOT EXISTS ingest_statement_staging
    (LIKE ingest_statement INCLUDING DEFAULTS) ON COMMIT DELETE ROWS;
TRUNCATE ingest_statement_staging
"""
_STATEMENT_FROM_STAGING = """
INSERT INTO ingest_statement SELECT * FROM ingest_statement_staging ORDER BY id ON CONFLICT (id) DO NOTHING
"""
_STATEMENT_KEYS = "SELECT id, key FROM ingest_statement WHERE id = ANY(%s::int8[])"
_LAST_COLUMN = re.compile(rb"\t(-?[0-9]+)\n")  # a narrow line's statement id (values hold no newline)
_STATEMENT_ATTEMPTS = 64  # ids tried per statement: a 64-bit id taken already is rare enough
_STATEMENT_CACHE_SIZE = 200_000  # statements whose ids this process knows are committed

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


# The alerts of a batch just copied: its rows are those of this file, in the batch's offsets,
# with ids the sequence gave its COPY (after `nextval` before it, up to `currval` after it; other
# writers' rows may fall between, but none of this file's offsets: ingest.identity).
_RAISE_ALERTS = f"""
INSERT INTO ingest_alert (kind, server, event_time, event_hash, event_id)
SELECT {KIND_SQL}, server, occurred_at, record_hash, id FROM ingest_event_row
WHERE id > %s AND id <= %s AND source_file_id = %s AND byte_offset BETWEEN %s AND %s AND {WORTH_SQL}
ORDER BY id
"""  # noqa: S608  (constants of ingest.alerts)

# A correction's events whose times lie within this of each other are looked up together.
CORRECTION_WINDOW = timedelta(seconds=60)

COPY_CHUNK_BYTES = 1 << 20  # of a batch's COPY lines (ingest.rows) sent to PostgreSQL in one write


# Switch-offs looked at, newest first, when a statement switches a log back on.
SWITCHES_LOOKED_AT = 200


def switched_off_before(condition: dict[str, Any]) -> bool:
    """Whether the account or session of `condition` (a FlagCorrection's `if_switched_off`) switched
    one of its log kinds off earlier on the same server, in any source, and did not switch it back
    on since (a switch back on by them is flagged `anti_forensic` too, so it is among the events
    looked at). Session-only switches (sql_log_bin, sql_log_off) count for the same session only."""
    user, session = condition.get("user"), str(condition["session"])
    session_id = session_id_of(session)
    who = Q(session_id=session_id) | Q(user=user) if user is not None else Q(session_id=session_id)
    rows = Event.objects.filter(who, server=condition["server"], flags__contains=["anti_forensic"])
    if condition.get("at"):
        rows = rows.filter(occurred_at__lte=datetime.fromisoformat(str(condition["at"])))
    kinds = set(condition["kinds"])
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
        self.source_file_id = source_file_id
        self.ingest_run_id = ingest_run_id
        self._source_id: int | None = None
        # Statement keys whose ids are known to be in the dictionary (committed), and their ids.
        self._statement_ids: dict[bytes, int] = {}

    @property
    def source_id(self) -> int:
        """The source whose custody chain records what this writer stores."""
        if self._source_id is None:
            self._source_id = SourceFile.objects.values_list("source_id", flat=True).get(
                pk=self.source_file_id
            )
        return self._source_id

    def write(self, events: Sequence[EventRecord]) -> int:
        """Store the events that are not stored yet; return how many were new."""
        return self.write_formatted(self.formatter.format(events))

    def write_formatted(self, batch: FormattedBatch) -> int:
        """Store a formatted batch's events that are not stored yet, and the content chunks they
        point into; return how many events were new."""
        chunks = store_chunks(self.source_file_id, batch.chunks) if batch.chunks else []
        if not batch.count:
            if chunks:  # content with no event in it (a log's header, lines that were problems)
                self._chain([], 0, 0, (0, 0), chunks=chunks)
            return 0
        ensure_event_partitions(batch.months)
        self._upsert_sessions(batch.sessions)
        narrow, named = self._add_statements(batch)
        # COPY returns no ids: the batch's rows get ids after this one (and up to the sequence's
        # value after the COPY, in the order of the lines), which its link records.
        id_after = self._event_id("nextval")
        self._copy("ingest_event_row", narrow)
        last = self._event_id("currval")
        if batch.alerts:
            with connection.cursor() as cur:
                cur.execute(_RAISE_ALERTS, [id_after, last, self.source_file_id, *batch.offsets])
        lines = narrow.splitlines(keepends=True)
        statements = named.items() if isinstance(named, dict) else named
        self._chain(lines, id_after, last, batch.offsets, narrow, statements, chunks)
        return batch.count

    def _add_statements(self, batch: FormattedBatch) -> tuple[bytes, bytes | dict[int, bytes]]:
        """Add the batch's statements the dictionary does not hold yet; return its narrow rows,
        with the id of any statement that is stored under another id than the one they name,
        and the (id, key) of each statement they name (which the custody chain digests): the
        batch's own records when no statement moved, else the stored ids and their keys.

        A key's ids are tried in order (statement_id(key, 0), (key, 1)...); its statement is
        under the first that is free or holds the key (statements are never deleted).
        1. Statements this process saw committed are known already. The others named by their
           first id (nearly all: the formatter names a later one only for a key whose first id
           it gave another key) are looked up by id: an id that holds its key is found; the
           free ones are copied into the dictionary in one COPY of their lines as the parsing
           process made them, in the order of their ids, in a savepoint. A writer adding the
           same statement at the same time makes this COPY wait for it to commit, and then
           fail: the savepoint takes back what it copied, and those go to step 2.
        2. The rest (an id held by another key: rare, a 64-bit id taken; a later id named;
           a COPY that failed) are added round by round as _add_in_rounds says.
        The rows name each statement's id as the formatter guessed it, and are renumbered for
        one found under another.
        """
        known = self._statement_ids
        named = list(STATEMENT_RECORD.iter_unpack(batch.statement_keys))  # (id, key), by id
        stored: dict[int, int] = {}  # a named id -> the id its statement is stored under, where not it
        found: dict[bytes, int] = {}  # keys added or found in the dictionary by this batch
        looked_up: list[int] = []  # indexes in `named` of the statements looked up by id
        careful: list[int] = []  # those left to step 2
        for index, (number, key) in enumerate(named):
            at = known.get(key)
            if at is not None:
                if at != number:
                    stored[number] = at
            elif number == statement_id(key):  # its first id
                looked_up.append(index)
            else:
                careful.append(index)
        lines: list[bytes] = []  # the statements' COPY lines, split only when some are not copied
        if looked_up:
            with connection.cursor() as cur:
                held = self._held(cur, [named[index][0] for index in looked_up])
            free: list[int] = []
            for index in looked_up:
                number, key = named[index]
                holder = held.get(number)
                if holder is None:
                    free.append(index)
                elif holder == key:
                    found[key] = number
                else:
                    careful.append(index)
            if free:
                if len(free) == len(named):  # every statement new (a log of distinct texts)
                    data = batch.statement_copy
                else:
                    lines = batch.statement_copy.split(b"\n")
                    data = b"".join([lines[index] + b"\n" for index in free])
                try:
                    with transaction.atomic():  # a savepoint: a failed COPY leaves the batch as it was
                        self._copy_statements(data)
                except UniqueViolation:  # another writer added one of them meanwhile (and committed)
                    careful += free
                else:
                    found.update(named[index][::-1] for index in free)
        if careful:
            lines = lines or batch.statement_copy.split(b"\n")
            added = self._add_in_rounds({named[i][1]: lines[i].partition(b"\t")[2] for i in careful})
            found.update(added)
            for index in careful:
                number, key = named[index]
                if added[key] != number:
                    stored[number] = added[key]
        narrow = batch.narrow
        statements: bytes | dict[int, bytes] = batch.statement_keys
        if stored:
            # The statement id is the last column of each line: renumbered where it moved.
            def renumbered(match: re.Match[bytes]) -> bytes:
                number = int(match[1])
                return b"\t%d\n" % stored.get(number, number)

            narrow = _LAST_COLUMN.sub(renumbered, narrow)
            statements = {stored.get(number, number): key for number, key in named}
        if len(known) > _STATEMENT_CACHE_SIZE:
            known.clear()
        if found:  # known once committed: a batch rolled back takes its statements along
            transaction.on_commit(lambda: known.update(found))
        return narrow, statements

    def _add_in_rounds(self, pending: dict[bytes, bytes]) -> dict[bytes, int]:
        """Add these statements (their keys, and their COPY lines after the id) under the first
        of each key's ids that is free or holds the key; return the id of each. Each round:
        1. Read the keys under the ids tried now: an id that holds its key is found; one that
           holds another key sends its key to its next id.
        2. Insert the statements whose id is free (ON CONFLICT DO NOTHING, in the order of their
           ids: a writer adding the same statement at the same time waits for the other to
           commit, and concurrent writers lock alike), and read them back as in 1.
        """
        attempts = dict.fromkeys(pending, 0)
        found: dict[bytes, int] = {}
        with connection.cursor() as cur:
            for _ in range(_STATEMENT_ATTEMPTS):
                if not attempts:
                    break
                trying: dict[int, bytes] = {}
                for key, attempt in sorted(attempts.items()):
                    # (two keys trying one id in the same round: the second waits for the next)
                    trying.setdefault(statement_id(key, attempt), key)
                held = self._held(cur, list(trying))
                free = sorted(number for number in trying if number not in held)
                if free:
                    # The lines with the ids tried, through a table of this session's own: COPY
                    # cannot skip an id another writer holds, INSERT ... ON CONFLICT can.
                    cur.execute(_STATEMENT_STAGING)
                    self._copy_statements(
                        b"".join([b"%d\t%s\n" % (number, pending[trying[number]]) for number in free]),
                        table="ingest_statement_staging",
                    )
                    cur.execute(_STATEMENT_FROM_STAGING)
                    held.update(self._held(cur, free))
                for number, key in trying.items():
                    if held[number] == key:
                        found[key] = number
                        del attempts[key]
                    else:
                        attempts[key] += 1
            else:
                raise RuntimeError(f"no free statement id for {len(attempts)} statements")
        return found

    @staticmethod
    def _held(cur: Any, numbers: list[int]) -> dict[int, bytes]:
        """The keys of the statements under these ids (those that exist). The ids go as an
        array literal: psycopg's dumping of a list, element by element, cost five times more."""
        cur.execute(_STATEMENT_KEYS, ["{" + ",".join(map(str, numbers)) + "}"])
        return {number: bytes(key) for number, key in cur.fetchall()}

    def _copy_statements(self, data: bytes, table: str = "ingest_statement") -> None:
        """COPY statement lines (STATEMENT_COLUMNS) into the dictionary (or the staging table)."""
        raw_cursor = connection.connection.cursor()  # the psycopg cursor: Django's has no COPY
        statement = SQL("COPY {} ({}) FROM STDIN").format(Identifier(table), _STATEMENT_COLUMNS)
        with raw_cursor.copy(statement) as copy:
            copy.write(data)

    def apply_corrections(self, corrections: Sequence[FlagCorrection]) -> None:
        """Add each correction's flag to its events, stored now or before (idempotent)."""
        for c in corrections:
            if c.if_switched_off is not None and not switched_off_before(c.if_switched_off):
                continue
            changed = self._flag_events(c.flag, c.keys)
            if changed:  # the chain of the events' source says which gained the flag, and when
                self._chain_flag(c.flag, changed)

    @staticmethod
    def _flag_events(flag: str, keys: Sequence[tuple[bytes, datetime | None]]) -> list[tuple[Any, ...]]:
        """Add `flag` to the events of these (record hash, time) keys that lack it; return their
        (time, record hash, source file). No index is kept on the record hash (it would cost
        every stored row): the events are found by time, through the BRIN index and the
        partitions, a window of keys close in time per statement (a transaction's keys are)."""
        timed = sorted((t, h) for h, t in keys if t is not None)
        untimed = [h for h, t in keys if t is None]
        changed: list[tuple[Any, ...]] = []
        windows: list[list[tuple[datetime, bytes]]] = []
        for key in timed:
            if windows and key[0] - windows[-1][-1][0] <= CORRECTION_WINDOW:
                windows[-1].append(key)
            else:
                windows.append([key])
        with connection.cursor() as cur:
            for window in windows:
                cur.execute(
                    "UPDATE ingest_event_row SET flags = array_append(flags, %s)"
                    " WHERE occurred_at BETWEEN %s AND %s AND (occurred_at, record_hash) IN"
                    " (SELECT * FROM unnest(%s::timestamptz[], %s::bytea[]))"
                    " AND NOT (%s = ANY(flags)) RETURNING occurred_at, record_hash, source_file_id",
                    [flag, window[0][0], window[-1][0], [t for t, _ in window], [h for _, h in window], flag],
                )
                changed += cur.fetchall()
            if untimed:  # (only the DEFAULT partition holds events of no time)
                cur.execute(
                    "UPDATE ingest_event_row SET flags = array_append(flags, %s)"
                    " WHERE occurred_at IS NULL AND record_hash = ANY(%s) AND NOT (%s = ANY(flags))"
                    " RETURNING occurred_at, record_hash, source_file_id",
                    [flag, untimed, flag],
                )
                changed += cur.fetchall()
        return changed

    def _chain_flag(self, flag: str, changed: list[tuple[datetime | None, bytes, int]]) -> None:
        sources = dict(
            SourceFile.objects.filter(pk__in={f for _, _, f in changed}).values_list("pk", "source_id")
        )
        for source_id in sorted(set(sources.values())):
            keys = sorted(event_key(t, h) for t, h, f in changed if sources[f] == source_id)
            append_link(source_id=source_id, kind="flags", flag=flag, keys=keys)

    def _upsert_sessions(self, sessions: list[tuple[int, *tuple[object, ...]]]) -> None:
        # In the order of their ids: workers storing ranges of one backlog at once upsert some
        # of the same sessions, and rows locked in one order cannot deadlock.
        sessions = sorted(sessions, key=lambda row: row[0])
        columns: list[list[object]] = [list(column) for column in zip(*sessions, strict=True)]
        with connection.cursor() as cur:
            cur.execute(_SESSION_UPSERT, columns)

    def _copy(self, table: str, data: bytes) -> None:
        raw_cursor = connection.connection.cursor()  # the psycopg cursor: Django's has no COPY
        statement = SQL("COPY {} ({}) FROM STDIN").format(Identifier(table), _COLUMNS)
        view = memoryview(data)
        with raw_cursor.copy(statement) as copy:
            # (COPY's messages need not end at a line: the server reads one stream.)
            for start in range(0, len(view), COPY_CHUNK_BYTES):
                copy.write(view[start : start + COPY_CHUNK_BYTES])

    def _event_id(self, function: str) -> int:
        """nextval or currval of the events' id sequence (`function` is one of those two names)."""
        statement = {
            "nextval": "SELECT nextval(pg_get_serial_sequence('ingest_event_row', 'id'))",
            "currval": "SELECT currval(pg_get_serial_sequence('ingest_event_row', 'id'))",
        }[function]
        with connection.cursor() as cur:
            cur.execute(statement)
            return cur.fetchone()[0]

    def _chain(
        self,
        lines: Sequence[bytes],
        id_after: int,
        id_last: int,
        offsets: tuple[int, int],
        copy: bytes | None = None,
        statements: Iterable[tuple[int, bytes]] | bytes = (),
        chunks: Sequence[PackedChunk] = (),
    ) -> None:
        chain_events(
            source_id=self.source_id,
            source_file_id=self.source_file_id,
            ingest_run_id=self.ingest_run_id,
            lines=lines,
            id_after=id_after,
            id_last=id_last,
            offsets=offsets,
            copy=copy,
            statements=statements,
            chunks=chunks,
        )
