"""The metadata pass: a binlog file as transactions, statements and row counts, fast.

What ingest stores for every transaction (no row values: those are decoded on demand from
the positions kept here): server id, GTID, file positions, commit time, thread id where the
binlog has one, and per statement its annotate text (or its SQL, for statement-based
events), time, and per table and kind of change the row count and the positions of its rows
events and of the table map they need.

Transaction boundaries, per server flavour (one place):
  - MariaDB: a GTID event opens every group; FL_STANDALONE (DDL and other implicit commits)
    means the group is that GTID and one Query; otherwise it ends at XID or a Query COMMIT
    (or ROLLBACK, when non-transactional changes were logged and the rest rolled back).
  - MySQL 5.6+: a GTID (or ANONYMOUS_GTID) event, then a Query BEGIN ... XID/COMMIT; a DDL is
    GTID + one Query with no BEGIN; XA_PREPARE ends the first half of an XA transaction.
    MySQL 8.0.20+ may compress a transaction into one TRANSACTION_PAYLOAD after its GTID: its
    events are read as if they stood in the file (payload.py). Older MySQL: Query BEGIN opens,
    as without GTIDs.
A statement of rows ends at the rows event flagged STMT_END; the annotate event (MariaDB
ANNOTATE_ROWS, MySQL ROWS_QUERY) before its first table map gives its text.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from ingest.binlog import reader as r
from ingest.binlog.payload import PayloadProblem, inner_events
from ingest.binlog.reader import BinlogProblem, Event, Format
from ingest.binlog.rows import (
    STMT_END,
    RowsError,
    count_partial_rows,
    count_rows,
    header_reader,
    row_counter,
    widths,
)
from ingest.binlog.rows import read_header as rows_header
from ingest.binlog.tables import TableDef, TableMapError, decode_table_map

TEXT_CAP = 65536  # characters of an annotate or query text kept (the length is kept too)

_MARIADB_STANDALONE = 0x01
_MARIADB_GROUP_COMMIT_ID = 0x02
_MARIADB_XA = 0x40 | 0x80
_MARIADB_EXTRA_MULTI_ENGINE = 0x01
_MARIADB_EXTRA_ALTER = 0x04 | 0x08  # COMMIT_ALTER, ROLLBACK_ALTER: a start-alter seq no follows
_MARIADB_EXTRA_THREAD_ID = 0x10  # MariaDB 11.5+ (MDEV-7850): the thread that ran it
_MARIADB_GTID = struct.Struct("<QIB")  # sequence number, domain, flags
_MARIADB_SHIFTS = _MARIADB_GROUP_COMMIT_ID | _MARIADB_XA  # GTID flags with fields before the extra byte


@dataclass(slots=True)
class TableChange:
    """The rows one statement changed in one table, of one kind."""

    table: str  # db.tbl
    change: str  # insert, update, delete
    rows: int
    table_map_position: int  # the TABLE_MAP event the rows events need to be decoded
    positions: list[int] = field(default_factory=list)  # its rows events, in order


@dataclass(slots=True)
class Statement:
    """One statement of a transaction: rows events (`kind` "rows") or a statement-based
    Query event (`kind` "query": DDL, or DML logged as a statement under MIXED/STATEMENT)."""

    kind: str
    position: int  # its first event (annotate, table map, or the query)
    time: int  # server clock, seconds since the epoch: when the statement began
    text: str | None  # annotate text or the query; None when the binlog has none
    text_length: int = 0  # of the full text (text is capped at TEXT_CAP)
    thread_id: int | None = None  # query events carry it
    database: str | None = None  # query events: the current schema
    error_code: int = 0
    changes: list[TableChange] = field(default_factory=list)

    @property
    def rows(self) -> int:
        n = 0
        for c in self.changes:
            n += c.rows
        return n


@dataclass(slots=True)
class Transaction:
    file: str
    server_id: int
    start: int  # position of its first event (GTID or BEGIN)
    end: int = 0  # position just after its last event
    gtid: str | None = None  # MariaDB domain-server-seq or MySQL uuid:n
    thread_id: int | None = None  # MySQL's BEGIN, MariaDB 11.5+ GTID
    commit_time: int = 0  # the commit event's timestamp (seconds since the epoch)
    xid: int | None = None
    ended_by: str = ""  # "xid", "commit", "rollback", "ddl", "xa_prepare", "incomplete"
    statements: list[Statement] = field(default_factory=list)

    @property
    def rows(self) -> int:
        n = 0  # loops, not sum() over generators: this is asked of every transaction stored
        for s in self.statements:
            for c in s.changes:
                n += c.rows
        return n


@dataclass(slots=True, frozen=True)
class BinlogFile:
    """What a file says about itself (first item of a scan)."""

    file: str
    server_version: str
    server_id: int
    created: int  # non-zero: the first file after a server start (its boot time)
    checksum: bool
    in_use: bool


def _text(raw: bytes) -> tuple[str, int]:
    text = raw[: TEXT_CAP * 4].decode("utf-8", "replace")
    return text[:TEXT_CAP], len(raw)


def _text_at(buf: bytes, at: int, end: int) -> tuple[str, int]:
    """`_text` of buf[at:end], slicing no more than the characters kept can take."""
    text = buf[at : min(end, at + TEXT_CAP * 4)].decode("utf-8", "replace")
    return text[:TEXT_CAP], end - at


def _mariadb_gtid(event: Event) -> tuple[str, bool, int | None]:
    """(domain-server-seq, standalone, thread id if the event carries one)."""
    return _mariadb_gtid_at(event.body, 0, len(event.body), event.server_id)


def _mariadb_gtid_at(buf: bytes, at: int, end: int, server_id: int) -> tuple[str, bool, int | None]:
    """`_mariadb_gtid` of the body buf[at:end] (at least 13 bytes, or struct.error)."""
    seq, domain, flags = _MARIADB_GTID.unpack_from(buf, at)
    at += 13
    if flags & _MARIADB_GROUP_COMMIT_ID:
        at += 8
    if flags & _MARIADB_XA and end >= at + 6:
        gtrid, bqual = buf[at + 4], buf[at + 5]
        at += 6 + gtrid + bqual
    thread = None
    if end > at:
        extra = buf[at]
        at += 1
        if extra & _MARIADB_EXTRA_MULTI_ENGINE:
            at += 1
        if extra & _MARIADB_EXTRA_ALTER:
            at += 8
        if extra & _MARIADB_EXTRA_THREAD_ID and end >= at + 4:
            (thread,) = struct.unpack_from("<I", buf, at)
    return f"{domain}-{server_id}-{seq}", bool(flags & _MARIADB_STANDALONE), thread


def _mysql_gtid(event: Event) -> str | None:
    body = event.body
    if event.type == r.ANONYMOUS_GTID or len(body) < 25:
        return None
    sid = body[1:17].hex()
    (gno,) = struct.unpack_from("<q", body, 17)
    return f"{sid[:8]}-{sid[8:12]}-{sid[12:16]}-{sid[16:20]}-{sid[20:]}:{gno}"


def _varlen(body: bytes, at: int) -> tuple[int, int]:
    """MySQL's serialization (libs/mysql/serialization) unsigned integer: the count of trailing
    one bits of the first byte is the count of bytes that follow; the value is the rest, little
    endian (nine bytes when the first is 0xFF)."""
    first = body[at]
    extra = (~first & (first + 1)).bit_length() - 1  # trailing ones
    if extra >= 8:
        return int.from_bytes(body[at + 1 : at + 9], "little"), at + 9
    if at + extra + 1 > len(body):
        raise ValueError("a serialized integer runs past the event")
    return int.from_bytes(body[at : at + extra + 1], "little") >> (extra + 1), at + extra + 1


def _mysql_tagged_gtid(event: Event) -> str:
    """GTID_TAGGED_LOG_EVENT (MySQL 8.4+): a serialized message (format version, size, last
    non-ignorable field id) of numbered fields: 0 flags, 1 the source uuid (16 bytes, each an
    integer), 2 gno (signed: zigzag), 3 the tag (length and text); later fields (commit
    timestamps, ...) are not needed here. The text is `uuid:tag:gno`, as MySQL writes it."""
    body = event.body
    _version, at = _varlen(body, 0)
    _size, at = _varlen(body, at)
    _last, at = _varlen(body, at)
    uuid, gno, tag = b"", None, ""
    while at < len(body):
        field, at = _varlen(body, at)
        if field == 0:
            _flags, at = _varlen(body, at)
        elif field == 1:
            parts = []
            for _ in range(16):
                byte, at = _varlen(body, at)
                parts.append(byte & 0xFF)
            uuid = bytes(parts)
        elif field == 2:
            zigzag, at = _varlen(body, at)
            gno = (zigzag >> 1) ^ -(zigzag & 1)
        elif field == 3:
            length, at = _varlen(body, at)
            tag = body[at : at + min(length, 32)].decode("ascii", "replace")  # tags are <= 32 chars
            at += length
        else:
            break
    if len(uuid) != 16 or gno is None:
        raise ValueError("a tagged GTID without its uuid or number")
    sid = uuid.hex()
    text = f"{sid[:8]}-{sid[8:12]}-{sid[12:16]}-{sid[16:20]}-{sid[20:]}"
    return f"{text}:{tag}:{gno}" if tag else f"{text}:{gno}"


@dataclass(slots=True)
class _Query:
    thread_id: int
    database: str
    error_code: int
    text: str
    length: int


def _query(event: Event, fmt: Format) -> _Query:
    """QUERY_EVENT: thread id u32, exec time u32, db length u8, error u16, status vars
    length u16 (post-header, 13 bytes), then status vars, db, NUL, and the text."""
    body = event.body
    thread, _exec, db_len, error, status_len = struct.unpack_from("<IIBHH", body)
    at = fmt.post_header_len(r.QUERY, 13) + status_len
    database = body[at : at + db_len].decode("utf-8", "replace")
    text, length = _text(body[at + db_len + 1 :])
    return _Query(thread, database, error, text, length)


def scan(
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

    How it is fast (about five events per transaction, hundreds of thousands per file): the
    loop frames the events itself, as `reader.frame` does (a chunk read at a time, each header
    unpacked in place, every CRC32 checked over a view of the buffer), and handles the
    frequent kinds (rows events, MariaDB's GTID and annotate, table maps seen before, XID)
    straight from the buffer by offsets: no `Event`, no slice of the body, no generator step.
    Anything else, and any of those that is not as expected (too short, a table id without
    its map, a layout or count that raises), is made an `Event` and goes through the general
    if-chain below, which states its problems. At the first event the loop cannot frame (a
    cut, a bad length or checksum) the rest of the file is `reader.frame`'s, through the
    if-chain: the problems are stated there, at the same byte.
    """
    head = r.read_head(stream)
    if head is None:
        return
    if isinstance(head, BinlogProblem):
        yield head
        return
    fmt, fde = head
    position = fde.position + fde.size
    # Events for the if-chain before the file's next one: the format description's own (its
    # server id is the file's), a compressed transaction's.
    pending: Iterator[Event | PayloadProblem] | None = None
    if start > 4:
        position = start
        stream.seek(start)
    else:
        pending = iter((fde,))
    tail: Iterator[Event | BinlogProblem] | None = None  # reader.frame's, after a fault
    expand = not fmt.mariadb  # MariaDB writes no TRANSACTION_PAYLOAD

    # table id -> (definition, map position, name, layouts); map body -> (definition, name,
    # layouts); layouts: rows event type -> the last layout of that type's rows (`_layout`).
    maps: dict[int, tuple[TableDef, int, str, dict[int, Any]]] = {}
    decoded: dict[bytes, tuple[TableDef, str, dict[int, Any]]] = {}
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
    # The fast kinds by event type (a list: the cheapest look-up), 0 for the if-chain's. Rows
    # events are fast where their post-header is the usual, with (change, bitmaps, v2) each.
    fast = [0] * 256
    rows_spec: list[tuple[str, int, bool]] = [("", 0, False)] * 256
    for t, change in rows_types.items():
        v2 = t >= r.WRITE_ROWS_V2
        if t != partial and fmt.post_header_len(t, 0) == (10 if v2 else 8):
            fast[t], rows_spec[t] = _ROWS, (change, 2 if change == "update" else 1, v2)
    fast[table_map], fast[xid] = _MAP, _XID
    fast[r.MARIADB_GTID], fast[r.MARIADB_ANNOTATE_ROWS] = _GTID, _ANNOTATE
    if not FAST:
        fast = [0] * 256
    kinds = [0] * 256  # `fast` once the first event has been through the if-chain
    gtid_of = _MARIADB_GTID.unpack_from
    last_domain = last_server = -1
    gtid_prefix = ""
    checksum = fmt.checksum
    smallest = r.HEADER_LEN + r.CHECKSUM_LEN if checksum else r.HEADER_LEN
    largest = r.MAX_EVENT_BYTES
    trailer = r.CHECKSUM_LEN if checksum else 0
    buf, off, have = b"", 0, 0  # buf[off] is the byte at `position`; have = len(buf)
    view = memoryview(buf)
    unpack = _HEAD.unpack_from
    unpack_rest = _HEAD_REST.unpack_from
    rows_id = _ROWS_ID.unpack_from
    xid_of = _XID_NUMBER.unpack_from
    crc32 = zlib.crc32
    read = stream.read
    new = tuple.__new__
    while True:
        if pending is not None:
            e = next(pending, None)
            if e is None:
                pending = None
                continue
        elif tail is not None:
            e = next(tail, None)
            if e is None:
                break
        else:
            # 1. Frame the event at `position` (buf[off]); anything amiss: reader.frame's.
            if have - off < 19:  # a header
                view.release()
                buf, off = r._refill(read, buf[off:], 19), 0
                view, have = memoryview(buf), len(buf)
                if not buf:
                    break
                if have < 19:
                    tail = r.frame(stream, position, checksum, buf[off:])
                    continue
            timestamp, kind, server_id, size = unpack(buf, off)
            if not smallest <= size <= largest:
                tail = r.frame(stream, position, checksum, buf[off:])
                continue
            end = off + size
            if end > have:
                view.release()
                buf, off = r._refill(read, buf[off:], size), 0
                view, have, end = memoryview(buf), len(buf), size
                if end > have:
                    tail = r.frame(stream, position, checksum, buf[off:])
                    continue
            # The CRC32 of an event with its checksum appended is a constant when it is right.
            if checksum and crc32(view[off:end]) != _CRC_RESIDUE:
                tail = r.frame(stream, position, checksum, buf[off:])
                continue
            end -= trailer
            at = off + 19  # the body: buf[at:end]
            here = position
            position += size
            off += size
            # 2. The frequent kinds, from the buffer; `continue` when done, else the if-chain.
            how = kinds[kind]
            if how == _ROWS:
                n = -1
                try:
                    change_kind, images, v2 = rows_spec[kind]
                    low, high, row_flags = rows_id(buf, at)
                    found = maps.get(low | high << 32)
                    if found is not None:
                        table, map_at, table_name, layouts = found
                        p = at + 8
                        if v2:
                            extra = buf[p] | buf[p + 1] << 8
                            p += extra if extra > 2 else 2
                        layout = layouts.get(kind)
                        if layout is None or not buf.startswith(layout[0], p):
                            layout = _layout(buf, here, at, p, end, kind, images, table, fmt, width_of)
                            if layout is not None:
                                layouts[kind] = layout
                        if layout is not None:
                            length, counter = layout[2], layout[1]
                            walk = counter.walk
                            if walk is None:  # made at its first rows
                                n = counter.count(buf, p + length, end)
                            else:
                                n, stop = walk(buf, p + length, end)
                                if stop != end:
                                    n = -1
                except (IndexError, RowsError, struct.error):
                    n = -1  # the if-chain reads it again and states the problem
                if n >= 0:
                    if tx is None:
                        tx = Transaction(name, server_id, here)
                    if stmt is None:
                        if annotate is None:
                            stmt = Statement("rows", here, timestamp, None)
                        else:
                            stmt = Statement("rows", *annotate)
                            annotate = None
                        tx.statements.append(stmt)
                    changes = stmt.changes
                    if not changes:
                        change = TableChange(table_name, change_kind, n, map_at, [here])
                        changes.append(change)
                    else:
                        change = changes[-1]
                        if change.table != table_name or change.change != change_kind:
                            same = (c for c in changes if c.table == table_name and c.change == change_kind)
                            change = next(same, None)
                            if change is None:
                                change = TableChange(table_name, change_kind, 0, map_at)
                                changes.append(change)
                        change.rows += n
                        change.positions.append(here)
                    if row_flags & STMT_END:
                        stmt = None
                    continue
            elif how == _MAP:
                known = decoded.get(buf[at:end])
                if known is not None:
                    table, table_name, layouts = known
                    maps[table.table_id] = (table, here, table_name, layouts)
                    if tx is None:
                        tx = Transaction(name, server_id, here)
                    if stmt is None:
                        if annotate is None:
                            stmt = Statement("rows", here, timestamp, None)
                        else:
                            stmt = Statement("rows", *annotate)
                            annotate = None
                        tx.statements.append(stmt)
                    continue
            elif how == _GTID:
                if tx is None and end - at >= 13:
                    seq, domain, gtid_flags = gtid_of(buf, at)
                    thread = None
                    if gtid_flags & _MARIADB_SHIFTS or (
                        end > at + 13 and buf[at + 13] & _MARIADB_EXTRA_THREAD_ID
                    ):
                        gtid, standalone, thread = _mariadb_gtid_at(buf, at, end, server_id)
                    else:  # the usual: no commit id, XA or thread id to look for
                        if domain != last_domain or server_id != last_server:
                            last_domain, last_server = domain, server_id
                            gtid_prefix = f"{domain}-{server_id}-"
                        gtid, standalone = gtid_prefix + str(seq), gtid_flags & _MARIADB_STANDALONE
                    tx = Transaction(name, server_id, here, 0, gtid, thread, timestamp)
                    began = not standalone
                    continue
            elif how == _ANNOTATE:
                if end - at <= TEXT_CAP:  # no more characters than bytes: nothing to cut
                    annotate = (here, timestamp, buf[at:end].decode("utf-8", "replace"), end - at)
                else:
                    annotate = (here, timestamp, *_text_at(buf, at, end))
                stmt = None
                continue
            elif how == _XID:
                if tx is None:  # outside a transaction it closes nothing
                    continue
                if end - at >= 8:
                    tx.xid = xid_of(buf, at)[0]
                    tx.end, tx.ended_by = position, "xid"
                    if timestamp:
                        tx.commit_time = timestamp
                    done, tx, stmt, annotate, began = tx, None, None, None, False
                    yield done
                    continue
            next_position, flags = unpack_rest(buf, at - 6)  # 13 bytes into the header
            e = new(event_type, (here, timestamp, kind, server_id, size, next_position, flags, buf[at:end]))
        # 3. The if-chain: every kind, and the fast ones the buffer could not settle.
        if type(e) is not event_type:
            if isinstance(e, PayloadProblem):  # the file goes on after it: not the end
                yield BinlogProblem(e.position, e.reason, e.raw)
                continue
            assert isinstance(e, BinlogProblem)
            if tx is not None:
                yield close("incomplete", e.position, 0)
            yield e
            return
        if first:
            first, kinds = False, fast
            yield BinlogFile(name, fmt.server_version, e.server_id, fmt.created, fmt.checksum, fmt.in_use)
        t = e.type
        where = e.position
        if where < 0:  # an event inside a compressed transaction (payload.py): named by its payload
            where = payload_at
        try:
            if t in rows_types:
                if read_header is None:
                    read_header = header_reader(fmt)
                header = read_header(e)
                found = maps.get(header.table_id)
                if found is None:
                    why = f"rows for table id {header.table_id} without its table map"
                    yield BinlogProblem(where, why)
                    continue
                table, map_at, table_name, _layouts = found
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
                    stmt = _new_statement(tx, annotate, e.position, e.timestamp)
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
                known = decoded.get(e.body)
                if known is None:
                    table = decode_table_map(e, fmt)
                    if len(decoded) > 10000:  # bounded: a hostile file with endless new maps
                        decoded.clear()
                        width_of.clear()
                    known = decoded[e.body] = (table, table.name, {})
                table, table_name, layouts = known
                maps[table.table_id] = (table, e.position, table_name, layouts)
                if tx is None:
                    tx = Transaction(file=name, server_id=e.server_id, start=where)
                if stmt is None:
                    stmt = _new_statement(tx, annotate, e.position, e.timestamp)
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
            elif t == r.TRANSACTION_PAYLOAD:  # its events follow it
                payload_at, payload_end = e.position, e.position + e.size
                if expand and e.position >= 0:
                    pending = inner_events(e)
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


FAST = True  # the frequent kinds read from the buffer (tests turn it off: the if-chain alone)
_ROWS, _MAP, _GTID, _ANNOTATE, _XID = 1, 2, 3, 4, 5  # how the loop reads a kind (0: the if-chain)
_HEAD = struct.Struct("<IBII")  # an event header's timestamp, type, server id and size
_HEAD_REST = struct.Struct("<IH")  # and, 13 bytes in, its next position and flags
_CRC_RESIDUE = 0x2144DF1C  # zlib.crc32(data + crc32(data) as 4 bytes little endian), any data
_ROWS_ID = struct.Struct("<IHH")  # a rows event's table id (6 bytes, little endian) and flags
_XID_NUMBER = struct.Struct("<Q")


def _layout(
    buf: bytes, position: int, at: int, p: int, end: int, kind: int, images: int, table: TableDef,
    fmt: Format, width_of: dict[int, tuple[int, ...]],
) -> tuple[bytes, Any, int] | None:  # fmt: skip
    """For the rows event whose body is buf[at:end] (its column count at `p`): the bytes of its
    column count and columns-present bitmaps, the row counter of that layout of `table` and
    the bytes' length (None where the header is not the plain kind: a count of 251 columns or more)."""
    columns = buf[p]
    if columns >= 251:
        return None
    key = buf[p : p + 1 + ((columns + 7) >> 3) * images]
    header = rows_header(Event(position, 0, kind, 0, 0, 0, 0, buf[at:end]), fmt)
    if header.rows_at != p + len(key) - at:
        return None
    w = width_of.get(id(table))
    if w is None:
        w = width_of[id(table)] = widths(table)
    counter = row_counter(header, w)
    return None if counter.empty else (key, counter, len(key))  # no column present: the if-chain's


# Events read and passed over on purpose: they change no rows and carry nothing a row
# statement needs (auto-increment and RAND seeds, user variables: the statement-based
# context; GTID sets; heartbeats; group replication's view changes; the FDE repeated in
# relay logs; MySQL's commit-order context; MariaDB's checkpoints and GTID lists).
_NOTHING_FOR_ROWS = frozenset({
    r.INTVAR, r.RAND, r.USER_VAR, r.FORMAT_DESCRIPTION, r.PREVIOUS_GTIDS, r.HEARTBEAT, r.IGNORABLE,
    r.TRANSACTION_CONTEXT, r.VIEW_CHANGE, r.HEARTBEAT_V2, r.MARIADB_BINLOG_CHECKPOINT,
    r.MARIADB_GTID_LIST,
})  # fmt: skip

_NOT_READ = {
    r.INCIDENT: "incident event: the server says changes are missing from the binary log here",
    r.MARIADB_START_ENCRYPTION: "the rest of the file is encrypted (encrypt_binlog): not read",
    r.BEGIN_LOAD_QUERY: "LOAD DATA logged as a statement: its rows are not in the binary log",
    r.EXECUTE_LOAD_QUERY: "LOAD DATA logged as a statement: its rows are not in the binary log",
}


def _not_read(event_type: int, flags: int) -> str:
    """Why an event of a type the pass does not read is passed over (told once per file)."""
    why = _NOT_READ.get(event_type)
    if why is None:
        why = f"event type {event_type} not read"
        if flags & r.IGNORABLE_F:
            why += " (flagged ignorable by the server: no rows in it)"
    return why + "; later events of this type in the file are not reported"


def _new_statement(
    tx: Transaction, annotate: tuple[int, int, str, int] | None, position: int, when: int
) -> Statement:
    if annotate is not None:
        position, when, text, length = annotate
        s = Statement("rows", position, when, text, length)
    else:
        s = Statement("rows", position, when, None)
    tx.statements.append(s)
    return s


def scan_file(path: str) -> list[BinlogFile | Transaction | BinlogProblem]:
    """Convenience for tests and tools: the whole scan of one file as a list."""
    with open(path, "rb") as f:
        return list(scan(f, path.rsplit("/", 1)[-1]))
