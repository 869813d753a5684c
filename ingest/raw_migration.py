"""Migration 0024: the raw bytes of events stored inline before issue 22, moved into chunks of their
file's content (ingest.chunks), and back when it is undone. Apart from ingest.chunks because it needs
Django and the custody chain, which the reading process, importing ingest.chunks, must not load."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

from django.db import connection

from ingest.chunks import CHUNK_BYTES, RawReader, store_chunks
from ingest.custody import append_link

# -- migration 0024: the raw bytes of events stored before, into chunks -----------------------------------

MOVE_PAGE = 5_000  # events looked at per query
MOVE_BYTES = 16 << 20  # raw bytes fetched per query, at most


class _Runs:
    """The content an ordered walk over a file's stored events puts together: consecutive events
    whose bytes follow each other make one run; a hole (bytes that were no event) starts another."""

    def __init__(self) -> None:
        self.start, self.data = 0, bytearray()

    def place(self, offset: int, raw: bytes) -> bool:
        """Whether the event's bytes are now in the run (appended, or there already). False for
        bytes after a hole (flush, then place again) and for bytes over others that differ or
        were flushed already (those keep their bytes inline)."""
        end = self.start + len(self.data)
        if offset < end:
            inside = bool(self.data) and offset >= self.start and offset + len(raw) <= end
            return inside and self.data.startswith(raw, offset - self.start)
        if offset > end and self.data:
            return False
        if not self.data:
            self.start = offset
        self.data += raw
        return True

    def flush(self) -> list[tuple[int, bytes]]:
        """The run so far as chunks; the next run continues where it ended."""
        data, start = bytes(self.data), self.start
        self.start, self.data = start + len(data), bytearray()
        return [(start + at, data[at : at + CHUNK_BYTES]) for at in range(0, len(data), CHUNK_BYTES)]


def move_inline_raw() -> int:
    """Move the raw bytes of events stored with them inline (before migration 0024) into chunks of
    their file's content, where they are slices of it; set every such event's `raw_length`. In
    pages (bounded memory); each page's chunks are chained (a link of version 2 with no events,
    which verify_evidence checks like any other). Returns how many events' bytes moved.

    The events' own links (version 1) keep verifying: their rows are made again with the bytes
    read back from the chunks (ingest.verify)."""
    moved = 0
    with connection.cursor() as cur:
        cur.execute(
            "SELECT f.id, f.source_id FROM ingest_sourcefile f WHERE EXISTS (SELECT 1 FROM ingest_event e"
            " WHERE e.source_file_id = f.id AND e.raw_length IS NULL) ORDER BY f.id"
        )
        files = cur.fetchall()
    for file_id, source_id in files:
        runs, into_chunks = _Runs(), []
        # One pass over the file's events in offset order (a server-side cursor: bounded memory).
        with connection.chunked_cursor() as walk:
            walk.execute(
                "SELECT id, byte_offset, octet_length(raw) FROM ingest_event"
                " WHERE source_file_id = %s AND raw_length IS NULL ORDER BY byte_offset, id",
                [file_id],
            )
            while page := walk.fetchmany(MOVE_PAGE):
                for group in _by_bytes(page):
                    with connection.cursor() as cur:
                        cur.execute(
                            "SELECT id, raw FROM ingest_event WHERE id = ANY(%s)", [[r[0] for r in group]]
                        )
                        raws = {i: bytes(raw) for i, raw in cur.fetchall()}
                    for event_id, offset, _ in group:
                        raw = raws[event_id]
                        if not runs.place(offset, raw):
                            moved += _move(
                                connection, file_id, source_id, runs.flush(), into_chunks, append_link
                            )
                            into_chunks = []
                            if not runs.place(offset, raw):  # over other bytes: it keeps its own
                                continue
                        into_chunks.append(event_id)
                    if len(runs.data) >= MOVE_BYTES:
                        moved += _move(connection, file_id, source_id, runs.flush(), into_chunks, append_link)
                        into_chunks = []
        moved += _move(connection, file_id, source_id, runs.flush(), into_chunks, append_link)
        with connection.cursor() as cur:  # the rest keep their bytes inline, and say how many
            cur.execute(
                "UPDATE ingest_event SET raw_length = octet_length(raw)"
                " WHERE source_file_id = %s AND raw_length IS NULL",
                [file_id],
            )
    return moved


def _by_bytes(page: list[tuple[int, int, int]]) -> Iterator[list[tuple[int, int, int]]]:
    group: list[tuple[int, int, int]] = []
    size = 0
    for row in page:
        if group and size + row[2] > MOVE_BYTES:
            yield group
            group, size = [], 0
        group.append(row)
        size += row[2]
    if group:
        yield group


def _move(
    connection: Any,
    file_id: int,
    source_id: int,
    chunks: list[tuple[int, bytes]],
    event_ids: list[int],
    append_link: Any,
) -> int:
    """Store chunks, chain them, and drop the inline bytes of the events they hold."""
    if not event_ids:
        return 0
    stored = store_chunks(file_id, chunks)
    if stored:
        append_link(
            source_id=source_id,
            kind="events",
            source_file_id=file_id,
            id_after=0,
            id_last=0,
            offset_min=0,
            offset_max=0,
            version=2,
            rows_sha256=hashlib.sha256(b"").digest(),
            chunks=[c.described() for c in stored],
        )
    if len(stored) != len([c for c in chunks if c[1]]):  # (none there before: an old store has none)
        raise RuntimeError(f"chunks of source file #{file_id} were there already: not moved")
    with connection.cursor() as cur:
        cur.execute(
            "UPDATE ingest_event SET raw_length = octet_length(raw), raw = NULL WHERE id = ANY(%s)",
            [event_ids],
        )
    return len(event_ids)


def restore_inline_raw() -> None:
    """Migration 0024 undone: every event's raw bytes inline again (from its chunks)."""
    reader = RawReader()
    with connection.cursor() as cur:
        cur.execute(
            "SELECT id, source_file_id, byte_offset, raw_length FROM ingest_event WHERE raw IS NULL"
            " ORDER BY source_file_id, byte_offset"
        )
        rows = cur.fetchall()
    for event_id, file_id, offset, length in rows:
        with connection.cursor() as cur:
            cur.execute(
                "UPDATE ingest_event SET raw = %s WHERE id = %s",
                [reader.read(file_id, offset, length), event_id],
            )
