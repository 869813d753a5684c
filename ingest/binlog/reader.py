"""Binary log files, event by event: framing, checksums and positions (no decoding of rows).

A binlog file is the magic `\\xfebin` followed by events. Every event starts with a 19-byte
header (v4: timestamp, type, server id, size, next position, flags); the first event is the
FORMAT_DESCRIPTION_EVENT, which says whether each event ends with a CRC32 and how long each
type's post-header is. We read one event at a time from a binary stream, so memory stays
flat in the file's size; a truncated or corrupt file ends with a `BinlogProblem` naming the
byte position, never an exception or a hang.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO, NamedTuple

MAGIC = b"\xfebin"
HEADER = struct.Struct("<IBIIIH")  # timestamp, type, server_id, event_size, next_position, flags
HEADER_LEN = 19
CHECKSUM_LEN = 4
_CRC = struct.Struct("<I")
# A server refuses events above max_allowed_packet (1 GiB at most); anything larger is corruption.
MAX_EVENT_BYTES = 1 << 30

# Event type codes (MySQL's Log_event_type and MariaDB's own above 160).
QUERY = 2
STOP = 3
ROTATE = 4
INTVAR = 5
FORMAT_DESCRIPTION = 15
XID = 16
TABLE_MAP = 19
WRITE_ROWS_V1, UPDATE_ROWS_V1, DELETE_ROWS_V1 = 23, 24, 25
ROWS_QUERY = 29  # MySQL's text of the statement behind the rows (binlog_rows_query_log_events)
MYSQL_GTID = 33
ANONYMOUS_GTID = 34
PREVIOUS_GTIDS = 35
WRITE_ROWS_V2, UPDATE_ROWS_V2, DELETE_ROWS_V2 = 30, 31, 32
PARTIAL_UPDATE_ROWS = 39
TRANSACTION_PAYLOAD = 40  # MySQL 8.0.20+ binlog_transaction_compression: zstd (payload.py)
# Read by the metadata pass for what they say about transactions, or named in its problems.
RAND, USER_VAR = 13, 14
BEGIN_LOAD_QUERY, EXECUTE_LOAD_QUERY = 17, 18
INCIDENT, HEARTBEAT, IGNORABLE = 26, 27, 28
TRANSACTION_CONTEXT, VIEW_CHANGE, XA_PREPARE = 36, 37, 38
HEARTBEAT_V2 = 41
MYSQL_GTID_TAGGED = 42  # MySQL 8.4+ GTID with a tag
IGNORABLE_F = 0x80  # LOG_EVENT_IGNORABLE_F: a reader that does not know the type may skip it
MARIADB_ANNOTATE_ROWS = 160
MARIADB_BINLOG_CHECKPOINT = 161
MARIADB_GTID = 162
MARIADB_GTID_LIST = 163
MARIADB_START_ENCRYPTION = 164
MARIADB_COMPRESSED = frozenset(range(165, 172))  # log_bin_compress: QUERY and ROWS, zlib

ROWS_CHANGE = {
    WRITE_ROWS_V1: "insert",
    WRITE_ROWS_V2: "insert",
    UPDATE_ROWS_V1: "update",
    UPDATE_ROWS_V2: "update",
    PARTIAL_UPDATE_ROWS: "update",
    DELETE_ROWS_V1: "delete",
    DELETE_ROWS_V2: "delete",
}


def recognise(head: bytes) -> bool:
    """A binlog file begins with these four bytes and nothing else does among our formats."""
    return head[:4] == MAGIC


class Event(NamedTuple):
    """One event as written: where it is and its body (header and checksum stripped).

    A named tuple: immutable, and the reader makes one per event with `tuple.__new__`, at a
    third of a frozen dataclass's cost (there are hundreds of thousands per file)."""

    position: int  # byte offset of its header in the file
    timestamp: int  # seconds since the epoch, when the statement began (server clock)
    type: int
    server_id: int
    size: int  # header + body + checksum, as the header says
    next_position: int  # as the header says (0 in some relay logs)
    flags: int
    body: bytes


@dataclass(slots=True, frozen=True)
class Format:
    """What the FORMAT_DESCRIPTION_EVENT says about the rest of the file."""

    binlog_version: int
    server_version: str
    created: int  # seconds since the epoch; non-zero only in the first file after a server start
    checksum: bool
    post_header: bytes  # post-header length per event type (index type - 1)
    in_use: bool  # LOG_EVENT_BINLOG_IN_USE_F: the server had not closed the file (yet or crashed)

    @property
    def mariadb(self) -> bool:
        return "mariadb" in self.server_version.lower()

    def post_header_len(self, event_type: int, default: int) -> int:
        index = event_type - 1
        return self.post_header[index] if 0 <= index < len(self.post_header) else default


@dataclass(slots=True, frozen=True)
class BinlogProblem:
    """Bytes we could not read as an event: stored and shown like a parser's Problem."""

    position: int
    reason: str
    raw: bytes = b""  # at most 2 KiB of the offending bytes


class BinlogError(ValueError):
    """Raised by `read_event_at` where the event at a stored position cannot be read."""


def _parse_format(body: bytes, flags: int, event_size: int) -> Format:
    """The FDE body: version u16, server version (50 bytes, NUL padded), created u32, header
    length u8, the post-header lengths, and (5.6.1+ / MariaDB 5.3+) a checksum algorithm byte
    followed by the FDE's own CRC32."""
    if len(body) < 57:
        raise BinlogError("format description event too short")
    version, server, created, _header_len = struct.unpack_from("<H50sIB", body)
    server_version = server.split(b"\0", 1)[0].decode("ascii", "replace")
    rest = body[57:]
    # With a checksum algorithm byte, the event ends with alg (1) + CRC (4, always present
    # in the FDE of a server that knows checksums, even when alg is 0 = off).
    checksum = False
    post_header = rest
    if _knows_checksums(server_version) and len(rest) >= 5:
        alg = rest[-5]
        checksum = alg == 1
        post_header = rest[:-5]
    return Format(version, server_version, created, checksum, bytes(post_header), bool(flags & 1))


def _knows_checksums(server_version: str) -> bool:
    """MySQL 5.6.1+ and MariaDB 5.3+ write the checksum algorithm into the FDE."""
    digits = server_version.split("-", 1)[0].split(".")
    try:
        major, minor, patch = (
            int("".join(c for c in d if c.isdigit()) or 0) for d in [*digits, "0", "0"][:3]
        )
    except ValueError:
        return False
    if "mariadb" in server_version.lower():
        return (major, minor) >= (5, 3)
    return (major, minor, patch) >= (5, 6, 1)


def read_events(stream: BinaryIO, *, start: int = 0) -> Iterator[Event | Format | BinlogProblem]:
    """Every event of a binlog file, in order; first the file's `Format`, then `Event`s.

    `start`: a position to resume from (0 or 4: the beginning). The FDE at position 4 is
    always read first, since it says how the rest is framed. A problem ends the iteration:
    after a bad length nothing further can be framed with confidence.
    """
    head = read_head(stream)
    if head is None:
        return
    if isinstance(head, BinlogProblem):
        yield head
        return
    fmt, first = head
    yield fmt
    position = first.position + first.size
    if start > 4:
        position = start
        stream.seek(start)
    else:
        yield first
    yield from frame(stream, position, fmt.checksum)


def read_head(stream: BinaryIO) -> tuple[Format, Event] | BinlogProblem | None:
    """The magic and the format description event at position 4 (its CRC32 checked and
    stripped): the file's `Format` and that event, the problem that stops the file from being
    read, or None for a file of the magic alone."""
    stream.seek(0)
    magic = stream.read(4)
    if magic != MAGIC:
        return BinlogProblem(0, "not a binary log: the file does not begin with \\xfebin", magic)
    first = _read_one(stream, 4, None)
    if first is None or isinstance(first, BinlogProblem):
        return first
    if first.type != FORMAT_DESCRIPTION:
        return BinlogProblem(4, f"the first event is of type {first.type}, not a format description")
    try:
        fmt = _parse_format(first.body, first.flags, first.size)
    except BinlogError as e:
        return BinlogProblem(4, str(e), first.body[:2048])
    if fmt.checksum:  # the FDE body read above still holds its CRC32: check and strip it
        first = _checked(first)
        if isinstance(first, BinlogProblem):
            return first
    return fmt, first


def frame(
    stream: BinaryIO, position: int, checksum: bool, buffered: bytes = b""
) -> Iterator[Event | BinlogProblem]:
    """The events from `position` on (framed as the format description says: `checksum`);
    a problem is the last item. The bytes from `position` are `buffered` and then what the
    stream reads from where it is (no seek: a stored file is hashed as it is read, in order).

    The file is read a chunk at a time and each header unpacked in place, so an event costs
    one unpack, one CRC32 over a view of the buffer (zlib, in C) and one slice for its body.
    `metadata.scan` frames the same way in its own loop, and hands the rest of the file to
    this generator at the first event it does not frame itself (a cut, a bad length or CRC).
    """
    buf, off, have = buffered, 0, len(buffered)  # buf[off] is the byte at `position`
    view = memoryview(buf)
    unpack = HEADER.unpack_from
    unpack_crc = _CRC.unpack_from
    crc32 = zlib.crc32
    read = stream.read
    new = tuple.__new__
    smallest = HEADER_LEN + CHECKSUM_LEN if checksum else HEADER_LEN
    while True:
        if have - off < HEADER_LEN:
            view.release()
            buf, off = _refill(read, buf[off:], HEADER_LEN), 0
            view, have = memoryview(buf), len(buf)
            if have < HEADER_LEN:
                if buf:
                    why = f"truncated: {have} bytes of an event header at the end"
                    yield BinlogProblem(position, why, buf)
                return
        timestamp, kind, server_id, size, next_position, flags = unpack(buf, off)
        if not smallest <= size <= MAX_EVENT_BYTES:
            if size >= HEADER_LEN and checksum and size <= MAX_EVENT_BYTES:
                why = "corrupt: an event too short for its checksum"
            else:
                why = f"corrupt: an event header says the event has {size} bytes"
            yield BinlogProblem(position, why, buf[off : off + HEADER_LEN])
            return
        end = off + size
        if end > have:
            view.release()
            buf, off = _refill(read, buf[off:], size), 0
            view, have, end = memoryview(buf), len(buf), size
            if end > have:
                yield BinlogProblem(
                    position,
                    f"truncated: the event needs {size} bytes, the file has {have} left"
                    " (a file copied while the server wrote it, or cut short)",
                    buf[:2048],
                )
                return
        if checksum:
            end -= CHECKSUM_LEN
            if crc32(view[off:end]) != unpack_crc(buf, end)[0]:
                body = buf[off + HEADER_LEN : end + CHECKSUM_LEN]
                checked = _checked(
                    Event(position, timestamp, kind, server_id, size, next_position, flags, body)
                )
                yield checked  # the problem, or an FDE's in-use exception
                if isinstance(checked, BinlogProblem):
                    return
                position += size
                off += size
                continue
        yield new(
            Event,
            (position, timestamp, kind, server_id, size, next_position, flags, buf[off + HEADER_LEN : end]),
        )
        position += size
        off += size


CHUNK = 1 << 18  # bytes read at a time: memory stays about twice this plus the largest event


def _refill(read: Any, rest: bytes, need: int) -> bytes:
    """`rest` and what follows it in the file, at least `need` bytes unless the file ends."""
    parts, have = [rest], len(rest)
    while have < need or len(parts) == 1:
        more = read(max(CHUNK, need - have))
        if not more:
            break
        parts.append(more)
        have += len(more)
    return b"".join(parts)


def _checked(event: Event) -> Event | BinlogProblem:
    """`event` with the CRC32 at the end of its body verified and removed."""
    body, crc = event.body[:-CHECKSUM_LEN], event.body[-CHECKSUM_LEN:]
    header = HEADER.pack(event.timestamp, event.type, event.server_id, event.size, event.next_position,
                         event.flags)  # fmt: skip
    expected = zlib.crc32(body, zlib.crc32(header)).to_bytes(4, "little")
    if expected != crc and event.type == FORMAT_DESCRIPTION and event.flags & 1:
        # The server computes the FDE's checksum with LOG_EVENT_BINLOG_IN_USE_F clear and sets
        # the flag in place while the file is open: a file copied in use has it set.
        clean = HEADER.pack(event.timestamp, event.type, event.server_id, event.size, event.next_position,
                            event.flags & ~1)  # fmt: skip
        expected = zlib.crc32(body, zlib.crc32(clean)).to_bytes(4, "little")
    if expected != crc:
        return BinlogProblem(event.position, "checksum mismatch: the event is corrupt", header + body[:2029])
    return Event(event.position, event.timestamp, event.type, event.server_id, event.size,
                 event.next_position, event.flags, body)  # fmt: skip


def _read_one(stream: BinaryIO, position: int, fmt: Format | None) -> Event | BinlogProblem | None:
    """The event at `position` (the stream is there), None at a clean end of file."""
    header = stream.read(HEADER_LEN)
    if not header:
        return None
    if len(header) < HEADER_LEN:
        why = f"truncated: {len(header)} bytes of an event header at the end"
        return BinlogProblem(position, why, header)
    timestamp, kind, server_id, size, next_position, flags = HEADER.unpack(header)
    if size < HEADER_LEN or size > MAX_EVENT_BYTES:
        return BinlogProblem(position, f"corrupt: an event header says the event has {size} bytes", header)
    body = stream.read(size - HEADER_LEN)
    if len(body) < size - HEADER_LEN:
        return BinlogProblem(
            position,
            f"truncated: the event needs {size} bytes, the file has {HEADER_LEN + len(body)} left"
            " (a file copied while the server wrote it, or cut short)",
            (header + body)[:2048],
        )
    event = Event(position, timestamp, kind, server_id, size, next_position, flags, body)
    if fmt is not None and fmt.checksum:
        if size < HEADER_LEN + CHECKSUM_LEN:
            return BinlogProblem(position, "corrupt: an event too short for its checksum", header)
        return _checked(event)
    return event


def read_format(stream: BinaryIO) -> Format:
    """The file's format description (for reading events at stored positions)."""
    head = read_head(stream)
    if isinstance(head, BinlogProblem):
        raise BinlogError(f"at {head.position}: {head.reason}")
    if head is None:
        raise BinlogError("no format description event")
    return head[0]


def read_event_at(stream: BinaryIO, position: int, fmt: Format) -> Event:
    """The one event at a position the metadata pass stored (row images on demand). Stored
    positions may also be addresses inside a compressed transaction: `payload.read_event`."""
    stream.seek(position)
    event = _read_one(stream, position, fmt)
    if event is None:
        raise BinlogError(f"no event at {position}: the file ends there")
    if isinstance(event, BinlogProblem):
        raise BinlogError(f"at {position}: {event.reason}")
    return event
