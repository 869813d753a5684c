"""The metadata pass as it was before its events were read from the read buffer (main at
156abbe): one `Event` per event from `reader.read_events` through `payload.expanded`, each
handled by the if-chain below. Kept as the oracle `metadata.scan` is compared with
(test_reference_pass.py): same transactions, statements, changes, positions and problems.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import BinaryIO

from ingest.binlog import reader as r
from ingest.binlog.metadata import (
    _NOTHING_FOR_ROWS,
    BinlogFile,
    Statement,
    TableChange,
    Transaction,
    _mariadb_gtid,
    _mysql_gtid,
    _mysql_tagged_gtid,
    _not_read,
    _query,
    _text,
)
from ingest.binlog.payload import PayloadProblem, expanded
from ingest.binlog.reader import BinlogProblem, Event, Format
from ingest.binlog.rows import STMT_END, RowsError, count_partial_rows, count_rows, header_reader, widths
from ingest.binlog.tables import TableDef, TableMapError, decode_table_map


def reference_scan(
    stream: BinaryIO, name: str, *, start: int = 0
) -> Iterator[BinlogFile | Transaction | BinlogProblem]:
    """The file's transactions in order (a `BinlogFile` first; problems where they occur).

    `start`: a transaction boundary to resume from (a followed file: where the last poll
    stopped); the format description at position 4 is read first all the same.

    Steps, per event:
      1. GTID / BEGIN open a transaction; XID, COMMIT, ROLLBACK and a DDL close it;
      2. annotate events give the next statement its text;
      3. table maps are remembered by table id (decoded once per distinct body);
      4. rows events add their row count to the open statement's (table, change); the
         STMT_END flag closes the statement.
    """
    fmt: Format | None = None
    maps: dict[int, tuple[TableDef, int, str]] = {}  # table id -> (definition, map position, name)
    decoded: dict[bytes, TableDef] = {}
    width_of: dict[int, tuple[int, ...]] = {}  # id(TableDef) -> value widths
    tx: Transaction | None = None
    began = False  # inside BEGIN ... COMMIT (or a non-standalone MariaDB group)
    stmt: Statement | None = None
    annotate: tuple[int, int, str, int] | None = None  # position, time, text, length
    first = True
    payload_at = payload_end = 0  # the TRANSACTION_PAYLOAD whose inner events are being read
    reported: set[int] = set()  # event types told once per file as not read

    def close(how: str, at: int, when: int) -> Transaction:
        nonlocal tx, stmt, annotate, began
        assert tx is not None
        tx.end, tx.ended_by = at, how
        if when:
            tx.commit_time = when
        done, tx, stmt, annotate, began = tx, None, None, None, False
        return done

    # Event types as locals: this loop runs once per event (hundreds of thousands per file).
    gtid_types = (r.MARIADB_GTID, r.MYSQL_GTID, r.ANONYMOUS_GTID, r.MYSQL_GTID_TAGGED)
    query, xid, table_map, partial = r.QUERY, r.XID, r.TABLE_MAP, r.PARTIAL_UPDATE_ROWS
    annotate_types = (r.MARIADB_ANNOTATE_ROWS, r.ROWS_QUERY)
    rows_types = r.ROWS_CHANGE
    event_type = Event
    read_header = None
    for e in expanded(r.read_events(stream, start=start)):
        if type(e) is not event_type:
            if isinstance(e, Format):
                fmt = e
                continue
            if isinstance(e, PayloadProblem):  # the file goes on after it: not the end
                yield BinlogProblem(e.position, e.reason, e.raw)
                continue
            assert isinstance(e, BinlogProblem)
            if tx is not None:
                yield close("incomplete", e.position, 0)
            yield e
            return
        assert fmt is not None
        if first:
            first = False
            yield BinlogFile(name, fmt.server_version, e.server_id, fmt.created, fmt.checksum, fmt.in_use)
        t = e.type
        where = e.position
        if where < 0:  # an event inside a compressed transaction (payload.py): named by its payload
            where = payload_at
        try:
            if t in rows_types:  # first: the most frequent event
                if read_header is None:
                    read_header = header_reader(fmt)
                header = read_header(e)
                found = maps.get(header.table_id)
                if found is None:
                    why = f"rows for table id {header.table_id} without its table map"
                    yield BinlogProblem(where, why)
                    continue
                table, map_at, table_name = found
                w = width_of.get(id(table))
                if w is None:
                    w = width_of[id(table)] = widths(table)
                if t == partial:
                    n = count_partial_rows(e.body, header, table)
                else:
                    n = count_rows(e.body, header, w)
                if tx is None:
                    tx = Transaction(file=name, server_id=e.server_id, start=where)
                if stmt is None:
                    stmt = _new_statement(tx, annotate, e)
                    annotate = None
                change = stmt.changes[-1] if stmt.changes else None
                if change is None or change.table != table_name or change.change != header.change:
                    change = next(
                        (c for c in stmt.changes if c.table == table_name and c.change == header.change), None
                    )
                    if change is None:
                        change = TableChange(table_name, header.change, 0, map_at)
                        stmt.changes.append(change)
                change.rows += n
                change.positions.append(e.position)
                if header.flags & STMT_END:
                    stmt = None
            elif t in gtid_types:
                if tx is not None:
                    yield BinlogProblem(where, "a transaction without its commit event", b"")
                    yield close("incomplete", where, 0)
                tx = Transaction(file=name, server_id=e.server_id, start=where, commit_time=e.timestamp)
                if t == r.MARIADB_GTID:
                    tx.gtid, standalone, tx.thread_id = _mariadb_gtid(e)
                    began = not standalone
                elif t == r.MYSQL_GTID_TAGGED:
                    try:
                        tx.gtid = _mysql_tagged_gtid(e)
                    except (ValueError, IndexError) as err:
                        why = f"tagged GTID (MySQL 8.4+) not decoded: {err}"[:300]
                        yield BinlogProblem(where, why, e.body[:2048])
                else:
                    tx.gtid = _mysql_gtid(e)
            elif t == table_map:
                table = decoded.get(e.body)
                if table is None:
                    table = decode_table_map(e, fmt)
                    if len(decoded) > 10000:  # bounded: a hostile file with endless new maps
                        decoded.clear()
                        width_of.clear()
                    decoded[e.body] = table
                maps[table.table_id] = (table, e.position, table.name)
                if tx is None:
                    tx = Transaction(file=name, server_id=e.server_id, start=where)
                if stmt is None:
                    stmt = _new_statement(tx, annotate, e)
                    annotate = None
            elif t in annotate_types:
                raw = e.body if t == r.MARIADB_ANNOTATE_ROWS else e.body[1:]  # MySQL: a length byte
                text, length = _text(raw)
                annotate = (e.position, e.timestamp, text, length)
                stmt = None
            elif t == xid:
                if tx is not None:
                    tx.xid = struct.unpack_from("<Q", e.body)[0]
                    yield close("xid", e.position + e.size if e.position >= 0 else payload_end, e.timestamp)
            elif t == query:
                end = e.position + e.size if e.position >= 0 else payload_end
                q = _query(e, fmt)
                verb = q.text.strip().upper()
                if verb == "BEGIN" or verb.startswith("XA START"):
                    if tx is None:
                        tx = Transaction(file=name, server_id=e.server_id, start=where)
                    tx.thread_id = q.thread_id
                    began = True
                elif verb in ("COMMIT", "ROLLBACK") and tx is not None:
                    yield close(verb.lower(), end, e.timestamp)
                else:
                    if tx is None:
                        tx = Transaction(file=name, server_id=e.server_id, start=where)
                    s = Statement("query", e.position, e.timestamp, q.text, q.length, q.thread_id,
                                  q.database or None, q.error_code)  # fmt: skip
                    tx.statements.append(s)
                    stmt = None
                    if not began:
                        yield close("ddl", end, e.timestamp)
            elif t == r.TRANSACTION_PAYLOAD:  # expanded(): its events follow it
                payload_at, payload_end = e.position, e.position + e.size
            elif t == r.XA_PREPARE and tx is not None:  # MySQL: the first half of an XA transaction
                end = e.position + e.size if e.position >= 0 else payload_end
                yield close("xa_prepare", end, e.timestamp)
            elif t in r.MARIADB_COMPRESSED:
                why = f"compressed event (type {t}) not decoded: its rows are not counted"
                yield BinlogProblem(where, why)
            elif t in (r.ROTATE, r.STOP) and tx is not None:
                yield BinlogProblem(where, "the file ends inside a transaction")
                yield close("incomplete", where, 0)
            elif t not in _NOTHING_FOR_ROWS and t not in (r.ROTATE, r.STOP) and t not in reported:
                reported.add(t)
                yield BinlogProblem(where, _not_read(t, e.flags))
        except (struct.error, IndexError, KeyError, RowsError, TableMapError, ValueError) as err:
            why = f"event of type {t} cannot be decoded: {err}"[:300]
            yield BinlogProblem(where, why, e.body[:2048])
    if tx is not None:
        yield BinlogProblem(
            tx.start, "the file ends inside a transaction (cut short, or still being written)"
        )
        yield close("incomplete", tx.start, 0)


def _new_statement(tx: Transaction, annotate: tuple[int, int, str, int] | None, e: Event) -> Statement:
    if annotate is not None:
        position, when, text, length = annotate
        s = Statement("rows", position, when, text, length)
    else:
        s = Statement("rows", e.position, e.timestamp, None)
    tx.statements.append(s)
    return s
