"""MySQL 8.0.20+ compressed transactions: TRANSACTION_PAYLOAD events, expanded.

With `binlog_transaction_compression=ON` MySQL writes a transaction as its GTID event followed
by one TRANSACTION_PAYLOAD event whose body is a small header of fields (each a length-coded
type, a length-coded size and a length-coded value: 1 payload size, 2 compression type (0 zstd,
255 none), 3 uncompressed size; 0 ends the header) and then the compressed events of the
transaction (Query BEGIN, table maps, rows events, XID), each with a v4 header and no
checksum of its own.

An event inside a payload has no position in the file, so it gets an *address*: a negative
number made of the payload event's position and the event's byte offset in the uncompressed
payload (`inner_address`). Addresses are stored where positions are (the rows events of a table
change); `read_event` reads the event at a position or an address, and `read_inner` the event
at an address, decompressing as a stream: memory stays
bounded by one event, and reading the events of one payload in order decompresses it once.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

import zstandard

from ingest.binlog import reader as r
from ingest.binlog.reader import (
    HEADER,
    HEADER_LEN,
    MAX_EVENT_BYTES,
    BinlogError,
    BinlogProblem,
    Event,
    Format,
)

_OFFSET_BITS = 31  # an uncompressed payload above 2 GiB is refused (MySQL's own limit is 1 GiB)
_ZSTD, _NONE = 0, 255


def inner_address(payload_position: int, offset: int) -> int:
    """The address of the event `offset` bytes into the payload at `payload_position`."""
    return -((payload_position << _OFFSET_BITS) | offset) - 1


def split_address(address: int) -> tuple[int, int]:
    """(payload position, offset) of an inner address (the inverse of `inner_address`)."""
    value = -(address + 1)
    return value >> _OFFSET_BITS, value & ((1 << _OFFSET_BITS) - 1)


@dataclass(slots=True, frozen=True)
class PayloadProblem:
    """A payload whose events could not be read (the file around it still can be)."""

    position: int
    reason: str
    raw: bytes = b""


@dataclass(slots=True, frozen=True)
class _Header:
    compression: int
    uncompressed_size: int
    data_at: int  # offset of the compressed events in the body


def _lenenc(body: bytes, at: int) -> tuple[int, int]:
    if at >= len(body):
        raise BinlogError("a transaction payload header cut short")
    first = body[at]
    if first < 251:
        return first, at + 1
    width = {252: 2, 253: 3, 254: 8}.get(first)
    if width is None or at + 1 + width > len(body):
        raise BinlogError("bad length-coded integer in a transaction payload header")
    return int.from_bytes(body[at + 1 : at + 1 + width], "little"), at + 1 + width


def _header(body: bytes) -> _Header:
    compression, uncompressed, at = _ZSTD, 0, 0
    for _ in range(64):  # a handful of fields; a hostile header cannot loop for long
        kind, at = _lenenc(body, at)
        if kind == 0:
            return _Header(compression, uncompressed, at)
        length, at = _lenenc(body, at)
        if at + length > len(body):
            raise BinlogError("a transaction payload header field runs past the event")
        value = _lenenc(body[at : at + length], 0)[0] if length and kind in (2, 3) else 0
        if kind == 2:
            compression = value
        elif kind == 3:
            uncompressed = value
        at += length
    raise BinlogError("a transaction payload header without its end mark")


class _Stream:
    """The uncompressed bytes of one payload, read forward."""

    def __init__(self, event: Event) -> None:
        head = _header(event.body)
        if head.uncompressed_size >= 1 << _OFFSET_BITS:
            raise BinlogError(f"a transaction payload of {head.uncompressed_size} bytes uncompressed")
        data = event.body[head.data_at :]
        self.size = head.uncompressed_size
        self.offset = 0
        if head.compression == _NONE:
            self._data: bytes | None = data
            self._reader = None
        elif head.compression == _ZSTD:
            self._data = None
            self._reader = zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True)
        else:
            raise BinlogError(f"transaction payload compressed with unknown algorithm {head.compression}")

    def read(self, n: int) -> bytes:
        if self._data is not None:
            chunk = self._data[self.offset : self.offset + n]
        else:
            assert self._reader is not None
            parts, want = [], n
            while want > 0:
                part = self._reader.read(want)
                if not part:
                    break
                parts.append(part)
                want -= len(part)
            chunk = b"".join(parts)
        self.offset += len(chunk)
        return chunk

    def next_event(self, payload_position: int) -> Event | None:
        """The next inner event, None at the end; BinlogError where the bytes are not events."""
        at = self.offset
        header = self.read(HEADER_LEN)
        if not header:
            return None
        if len(header) < HEADER_LEN:
            raise BinlogError(f"an event header cut short {at} bytes into the payload")
        timestamp, kind, server_id, size, next_position, flags = HEADER.unpack(header)
        if size < HEADER_LEN or size > MAX_EVENT_BYTES or (self.size and at + size > self.size):
            raise BinlogError(f"an event of {size} bytes {at} bytes into a payload of {self.size}")
        body = self.read(size - HEADER_LEN)
        if len(body) < size - HEADER_LEN:
            raise BinlogError(f"an event cut short {at} bytes into the payload")
        address = inner_address(payload_position, at)
        return Event(address, timestamp, kind, server_id, size, next_position, flags, body)


def events(payload: Event) -> Iterator[Event]:
    """The events inside one TRANSACTION_PAYLOAD event, in order (BinlogError on bad bytes,
    zstandard.ZstdError on a corrupt frame)."""
    stream = _Stream(payload)
    while (inner := stream.next_event(payload.position)) is not None:
        if inner.type == r.TRANSACTION_PAYLOAD:
            raise BinlogError("a transaction payload inside a transaction payload")
        yield inner
    if stream.size and stream.offset != stream.size:
        raise BinlogError(f"the payload holds {stream.offset} bytes, its header says {stream.size}")


def expanded(
    items: Iterable[Event | Format | BinlogProblem],
) -> Iterator[Event | Format | BinlogProblem | PayloadProblem]:
    """`items` (from `reader.read_events`) with every TRANSACTION_PAYLOAD event followed by the
    events it holds; one that cannot be expanded is followed by a `PayloadProblem` instead
    (after the inner events read before the fault)."""
    it = iter(items)
    for item in it:
        yield item
        if isinstance(item, Format) and item.mariadb:  # MariaDB writes no TRANSACTION_PAYLOAD
            yield from it
            return
        if isinstance(item, Event) and item.type == r.TRANSACTION_PAYLOAD:
            yield from inner_events(item)


def inner_events(payload: Event) -> Iterator[Event | PayloadProblem]:
    """The events a TRANSACTION_PAYLOAD event holds, then a `PayloadProblem` if it could not
    be read to its end (after the inner events read before the fault)."""
    try:
        yield from events(payload)
    except Exception as e:  # zstandard raises its own error kinds on hostile frames
        why = f"compressed transaction not fully read: {e}"[:300]
        yield PayloadProblem(payload.position, why, payload.body[:2048])


_local = threading.local()  # per thread: (payload body, its position, its stream) last read


def read_event(stream: BinaryIO, position: int, fmt: Format) -> Event:
    """The event at a stored position: a file position, or an address inside a payload."""
    return read_inner(stream, position, fmt) if position < 0 else r.read_event_at(stream, position, fmt)


def read_inner(stream: BinaryIO, address: int, fmt: Format) -> Event:
    """The event at an inner address (row images on demand). Reading the events of one payload
    in order reuses one decompression stream; going back starts it again."""
    position, offset = split_address(address)
    payload = r.read_event_at(stream, position, fmt)
    if payload.type != r.TRANSACTION_PAYLOAD:
        raise BinlogError(f"no transaction payload at {position}")
    cursor: tuple[bytes, int, _Stream] | None = getattr(_local, "cursor", None)
    try:
        if cursor is None or cursor[0] != payload.body or cursor[1] != position or cursor[2].offset > offset:
            cursor = (payload.body, position, _Stream(payload))
        inner = cursor[2]
        while inner.offset < offset:
            if inner.next_event(position) is None:
                break
        found = inner.next_event(position) if inner.offset == offset else None
    except Exception as e:
        _local.cursor = None
        raise BinlogError(f"payload at {position}: {e}") from e
    if found is None:
        _local.cursor = None
        raise BinlogError(f"no event {offset} bytes into the payload at {position}")
    _local.cursor = cursor
    return found
