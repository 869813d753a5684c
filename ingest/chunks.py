"""A log's bytes kept in PostgreSQL as zstd-compressed chunks, and each event's raw bytes as a slice.

The reading process keeps the content bytes it hands the parser (`ContentWindow`, fed by
`ingest.tail.FileLines`); the formatter (`ingest.rows.RowFormatter`) checks each event's raw bytes
against it: an event whose raw bytes are exactly the file's bytes at its offset (nearly all: that is
what every file parser yields) is written with no raw bytes of its own, only `raw_length`; the rest
(records assembled from several places, lines cut because they were too long, rows of a live table
or of a binary log: there is no file slice to point at) keep theirs inline in `raw`. Each batch
carries the window's bytes up to where its read got (`take`), so the file's bytes are kept whole
and in order, in chunks of at most CHUNK_BYTES, committed with the events that point into them.
The writer (`store_chunks`) hashes (SHA-256) and compresses (zstd) them and copies them into
`ingest_rawchunk`, keyed by (source file, content offset).

Readers (`RawReader`) fetch the chunks that cover a slice, decompress each once (bulk readers
sort their events by file and offset, so a small cache of the last chunks suffices: bounded
memory), and hand back the bytes exactly as read, NULs and invalid UTF-8 included.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import zstandard

CHUNK_BYTES = 256 * 1024  # of a log's content per chunk, at most
ZSTD_LEVEL = 3  # zstd's default: about 300 MB/s on a log, ratios of 5 to 50
CACHED_CHUNKS = 8  # decompressed chunks a RawReader keeps (2 MiB)
WINDOW_MAX_BYTES = 64 << 20  # content a read keeps for its next batch, at most (see ContentWindow.add)


# -- the reading process: the bytes handed to the parser ------------------------------------------------


class ContentWindow:
    """The content bytes a read handed its parser and that no batch has taken yet.

    Contiguous runs (`add` at the offset where the last one ended); a line not handed over whole
    (cut because it was too long) leaves a hole, and a run starts again after it. Bounded by
    what one batch covers: each batch takes what lies before where its read got to. A read
    that makes no batch for WINDOW_MAX_BYTES (a file of lines that are no events) drops what it
    holds: those bytes are then in no chunk, and an event among them keeps its raw bytes inline."""

    def __init__(self) -> None:
        self._runs: list[tuple[int, list[bytes]]] = []  # (start, pieces), in offset order
        self._end = -1  # where the last run ends
        self._held = 0  # bytes held
        self._joined: list[tuple[int, bytes]] | None = None
        self._pieces: list[bytes] = []  # the last run's pieces (added to by each add: kept at hand)

    def add(self, offset: int, data: bytes) -> None:
        """`data`, read at `offset` (called for every line read: kept short)."""
        size = len(data)
        held = self._held + size
        if held > WINDOW_MAX_BYTES:
            self._runs, held = [], size
        if offset != self._end or not self._runs:
            self._pieces = []
            self._runs.append((offset, self._pieces))
        self._pieces.append(data)
        self._end = offset + size
        self._held = held
        self._joined = None

    def runs(self) -> list[tuple[int, bytes]]:
        """The contiguous runs held, each joined into one bytes object (kept joined until the next add)."""
        if self._joined is None:
            joined = []
            for start, pieces in self._runs:
                data = b"".join(pieces)
                pieces[:] = [data]
                joined.append((start, data))
            self._joined = joined
        return self._joined

    def holds(self, offset: int, raw: bytes) -> bool:
        """Whether `raw` is exactly the content at `offset` (within one run)."""
        for start, data in self.runs():
            if start <= offset and offset + len(raw) <= start + len(data):
                return data.startswith(raw, offset - start)
        return False

    def take(self, upto: int) -> list[tuple[int, bytes]]:
        """The runs' bytes before `upto`, cut into chunks of at most CHUNK_BYTES; dropped from here."""
        taken: list[tuple[int, bytes]] = []
        kept: list[tuple[int, list[bytes]]] = []
        for start, data in self.runs():
            if start >= upto:
                kept.append((start, [data]))
                continue
            cut = min(len(data), upto - start)
            for at in range(0, cut, CHUNK_BYTES):
                taken.append((start + at, data[at : min(at + CHUNK_BYTES, cut)]))
            if cut < len(data):
                kept.append((start + cut, [data[cut:]]))
        self._runs = kept
        self._held = sum(len(pieces[0]) for _, pieces in kept)
        self._joined = None
        if kept:
            self._pieces = kept[-1][1]
        else:
            self._end, self._pieces = -1, []
        return taken


# -- the writer: chunks into PostgreSQL ----------------------------------------------------------------


@dataclass(frozen=True)
class PackedChunk:
    start: int  # content offset of its first byte
    length: int  # bytes of content
    sha256: bytes  # of the content (not of the compressed bytes)
    data: bytes  # zstd

    def described(self) -> list[object]:
        """What a custody link records of it: [start, length, SHA-256 in hex]."""
        return [self.start, self.length, self.sha256.hex()]


def pack(chunks: Iterable[tuple[int, bytes]]) -> list[PackedChunk]:
    """Hash and compress content chunks (start, bytes)."""
    compressor = zstandard.ZstdCompressor(level=ZSTD_LEVEL)
    return [
        PackedChunk(start, len(data), hashlib.sha256(data).digest(), compressor.compress(data))
        for start, data in chunks
        if data
    ]


def unpack(data: bytes) -> bytes:
    """A chunk's content; zstd frames written by `pack` carry their content size."""
    return zstandard.ZstdDecompressor().decompress(bytes(data))


def _cursor() -> Any:
    from django.db import connection  # (the reading process imports this module without Django)

    return connection.cursor()


_INSERT_CHUNKS = """
INSERT INTO ingest_rawchunk (source_file_id, start, length, sha256, data)
SELECT %s, * FROM unnest(%s::int8[], %s::int4[], %s::bytea[], %s::bytea[])
ON CONFLICT (source_file_id, start) DO NOTHING
RETURNING start
"""


def store_chunks(source_file_id: int, chunks: Iterable[tuple[int, bytes]]) -> list[PackedChunk]:
    """Store a batch's content chunks; returns those new to the store (a chunk at the same place,
    from an earlier read of the same bytes, is kept as it is)."""
    packed = pack(chunks)
    if not packed:
        return []
    with _cursor() as cur:
        cur.execute(
            _INSERT_CHUNKS,
            [
                source_file_id,
                [c.start for c in packed],
                [c.length for c in packed],
                [c.sha256 for c in packed],
                [c.data for c in packed],
            ],
        )
        new = {row[0] for row in cur.fetchall()}
    return [c for c in packed if c.start in new]


# -- readers --------------------------------------------------------------------------------------------

_COVERING = """
SELECT start, length, data FROM ingest_rawchunk
WHERE source_file_id = %s AND start < %s AND start > %s ORDER BY start
"""


class RawReader:
    """Reads events' raw bytes from their chunks, decompressing each chunk once while it is among
    the last CACHED_CHUNKS used (bulk readers go in file and offset order)."""

    def __init__(self) -> None:
        self._cache: OrderedDict[tuple[int, int], bytes] = OrderedDict()
        self._lengths: dict[tuple[int, int], int] = {}

    def _chunks(self, file_id: int, offset: int, end: int) -> Iterator[tuple[int, bytes]]:
        """The chunks that may hold content in [offset, end), in offset order: those cached, or
        fetched (a chunk holds at most CHUNK_BYTES, so none starting before offset - CHUNK_BYTES)."""
        cached = sorted(
            (start, data)
            for (f, start), data in self._cache.items()
            if f == file_id and start < end and start + len(data) > offset
        )
        position = offset
        for start, data in cached:
            if start > position:
                break
            position = max(position, start + len(data))
        if position >= end:
            yield from cached
            return
        with _cursor() as cur:
            cur.execute(_COVERING, [file_id, end, offset - CHUNK_BYTES])
            rows = cur.fetchall()
        for start, length, data in rows:
            if start + length <= offset:
                continue
            content = self._cache.get((file_id, start))
            if content is None:
                content = unpack(data)
                self._cache[(file_id, start)] = content
                while len(self._cache) > CACHED_CHUNKS:
                    self._cache.popitem(last=False)
            yield start, content

    def pieces(self, file_id: int, offset: int, length: int) -> Iterator[bytes]:
        """The content [offset, offset + length) of the file's chunks, a chunk's part at a time.
        Raises MissingBytes where no chunk holds a byte of it."""
        position, end = offset, offset + length
        for start, content in self._chunks(file_id, offset, end):
            if start > position:
                break
            if start + len(content) <= position:
                continue
            upto = min(end, start + len(content))
            yield content[position - start : upto - start]
            position = upto
            if position >= end:
                return
        if position < end:
            raise MissingBytes(file_id, position, end)

    def read(self, file_id: int, offset: int, length: int) -> bytes:
        return b"".join(self.pieces(file_id, offset, length))

    def raw_of(self, row: dict[str, object]) -> bytes:
        """An event's raw bytes from a row of its columns (raw, raw_length, source_file_id, byte_offset)."""
        inline = row.get("raw")
        if inline is not None:
            return bytes(inline)  # type: ignore[arg-type]  # a bytes-like column value
        if row.get("raw_length") is None:  # neither inline nor a slice: a row not made by ingestion
            file_id, offset = int(row["source_file_id"]), int(row["byte_offset"])  # type: ignore[arg-type]  # ints
            raise MissingBytes(file_id, offset, offset)
        file_id, offset = int(row["source_file_id"]), int(row["byte_offset"])  # type: ignore[arg-type]  # ints
        return self.read(file_id, offset, int(row["raw_length"]))  # type: ignore[arg-type]  # an int


class MissingBytes(LookupError):
    """Content an event points at that no chunk in the store holds (deleted or never stored)."""

    def __init__(self, file_id: int, start: int, end: int) -> None:
        said = f"bytes {start}-{end - 1}" if end > start else f"the bytes at {start} (no length is stored)"
        super().__init__(f"no chunk of source file #{file_id} holds {said}")
        self.file_id, self.start, self.end = file_id, start, end


def with_raw(rows: list[dict[str, object]], reader: RawReader | None = None) -> list[dict[str, object]]:
    """Rows of events with `raw` filled in from their chunks where it is not inline, read in file and
    offset order (each chunk decompressed once); a row whose bytes are gone keeps `raw` None and
    gets `raw_missing`."""
    reader = reader or RawReader()
    order = sorted(
        (r for r in rows if r.get("raw") is None),
        key=lambda r: (r["source_file_id"], r["byte_offset"]),
    )
    for row in order:
        try:
            row["raw"] = reader.raw_of(row)
        except MissingBytes as e:
            row["raw_missing"] = str(e)
    return rows


def fill_raw(events: Iterable[Any], reader: RawReader | None = None) -> None:
    """Read the raw bytes of these Event objects that live in chunks, in file and offset order (each
    chunk decompressed once), so that `event.raw` reads no more."""
    reader = reader or RawReader()
    wanted = [e for e in events if e.raw_inline is None and "_raw" not in e.__dict__]
    for e in sorted(wanted, key=lambda e: (e.source_file_id, e.byte_offset)):
        try:
            e.__dict__["_raw"] = reader.read(e.source_file_id, e.byte_offset, e.raw_length or 0)
        except MissingBytes:  # (event.raw says so when read)
            continue
