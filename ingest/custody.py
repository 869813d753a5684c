"""Chain of custody: what proves that neither the logs nor the store were altered after the fact.

Two things are recorded as ingestion goes: every file's SHA-256 of the bytes read so far (saved
half-way, `Sha256State`, so each poll hashes only new bytes), and per source a hash chain of
CustodyLinks, numbered in commit order. `ingest.verify` recomputes both (`manage.py
verify_evidence`). Details: docs/architecture.md, "Chain of custody".
"""

from __future__ import annotations

import array
import ctypes
import ctypes.util
import hashlib
import json
import struct
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from django.db import connection
from django.utils import timezone
from psycopg.sql import SQL, Identifier

from ingest.chunks import PackedChunk, with_raw
from ingest.models import CustodyLink
from ingest.rows import EVENT_COLUMNS, STATEMENT_RECORD, stored_copy_line

LINK_VERSION = "auditweb-custody-1"
LINK_VERSION_2 = "auditweb-custody-2"
LINK_VERSION_3 = "auditweb-custody-3"
LINK_HEADS = {1: LINK_VERSION, 2: LINK_VERSION_2, 3: LINK_VERSION_3}
EVENTS_LINK_VERSION = 3  # of the links chain_events appends
ZERO_HASH = bytes(32)
ROW_DIGEST_BYTES = 16  # of each event row's SHA-256: 128 bits, kept per event in links of version 1
ROW_CHECK_BYTES = 4  # of each event row's CRC-32, in links of versions 2 and 3 (the batch has one SHA-256)
HASH_CHUNK = 1 << 20


def row_digest(line: str) -> bytes:
    """What an events link keeps of one event: the SHA-256 prefix of its COPY line as written."""
    return hashlib.sha256(line.encode()).digest()[:ROW_DIGEST_BYTES]


def copy_digests(lines: Sequence[bytes]) -> bytes:
    """row_digest of each COPY line, given as the bytes written (ingest.rows.FormattedBatch.lines)."""
    sha256 = hashlib.sha256
    return b"".join([sha256(line).digest()[:ROW_DIGEST_BYTES] for line in lines])


def row_checks(lines: Sequence[bytes]) -> bytes:
    """What a link of version 2 or 3 keeps of each row to say which differ: its CRC-32, 4 bytes
    big-endian. The rows are sealed by the batch's SHA-256 (`rows_sha256`); these only point."""
    checks = array.array("I", [zlib.crc32(line) for line in lines])
    if checks.itemsize != ROW_CHECK_BYTES:  # (4 on every platform Python supports; said, not assumed)
        return b"".join(c.to_bytes(ROW_CHECK_BYTES, "big") for c in checks)
    if struct.pack("=I", 1) != struct.pack(">I", 1):
        checks.byteswap()
    return checks.tobytes()


# What separates a batch's narrow rows from the statements they name in what a link of version 3
# digests: a line with no tab, which no COPY line of 24 columns is.
_STATEMENTS_MARK = b"statements\n"


def statement_lines(statements: Iterable[tuple[int, bytes]]) -> bytes:
    """The statements a batch's rows name, as a link of version 3 digests them: 24 bytes each,
    the id (8 bytes, big-endian, signed) and the key (16 bytes), in the order of their ids. (A
    key of another length, altered, is found by verification's own check of each key.)"""
    keys = dict(statements)
    pack, key_of = STATEMENT_RECORD.pack, keys.__getitem__
    return b"".join([pack(number, bytes(key_of(number))) for number in sorted(keys)])


def batch_digest(narrow: bytes, statements: Iterable[tuple[int, bytes]] | bytes) -> bytes:
    """What a link of version 3 keeps of a whole batch (`rows_sha256`): the SHA-256 of its narrow
    COPY lines as copied, in id order, then of the (id, key) of each statement they name. A
    statement's key is 16 bytes of the SHA-256 of its values (ingest.rows.statement_key), so this seals
    the text, type, tables... of every statement too: ingest.verify makes each key again.
    `statements` as bytes: those records made already (statement_lines' form, in the order of
    their ids: a formatted batch's `statement_keys`), digested as they are."""
    digest = hashlib.sha256(narrow)
    digest.update(_STATEMENTS_MARK)
    digest.update(statements if isinstance(statements, bytes) else statement_lines(statements))
    return digest.digest()


# -- a SHA-256 that can be saved and resumed ---------------------------------------------------------

# OpenSSL's SHA256_CTX (<openssl/sha.h>, unchanged since 0.9.8): h[8], Nl, Nh, data[16], num, md_len,
# all 32-bit. Saved little-endian, whatever the machine, so a state moves between workers.
_CTX_NATIVE = struct.Struct("=8I2I16I2I")
_CTX_SAVED = struct.Struct("<8I2I16I2I")
_libcrypto: Any = None


def _crypto() -> Any:
    """libcrypto's low-level SHA-256 (the one hashlib uses, with the same CPU instructions).
    hashlib cannot save a computation half-way; this can, as the bytes of its context."""
    global _libcrypto
    if _libcrypto is None:
        name = ctypes.util.find_library("crypto") or "libcrypto.so.3"
        try:
            lib = ctypes.CDLL(name)
            functions = (lib.SHA256_Init, lib.SHA256_Update, lib.SHA256_Final)
        except (OSError, AttributeError) as e:
            raise RuntimeError(
                f"AuditWeb needs OpenSSL's libcrypto with SHA256_Init to hash files ({e})"
            ) from e
        for f in functions:
            f.restype = ctypes.c_int
        lib.SHA256_Init.argtypes = [ctypes.c_void_p]
        lib.SHA256_Update.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
        lib.SHA256_Final.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
        _libcrypto = lib
    return _libcrypto


class Sha256State:
    """SHA-256 over a stream of bytes that can be saved (`saved()`, 112 bytes) and resumed later
    from what was saved, in another process; `hexdigest()` does not end the computation."""

    def __init__(self, saved: bytes | None = None) -> None:
        self._ctx = ctypes.create_string_buffer(_CTX_NATIVE.size)
        if saved is None:
            _crypto().SHA256_Init(self._ctx)
            return
        fields = _CTX_SAVED.unpack(bytes(saved))
        num, md_len = fields[-2], fields[-1]
        if md_len != 32 or num >= 64:
            raise ValueError("not a saved SHA-256 state")
        self._ctx.raw = _CTX_NATIVE.pack(*fields)

    def update(self, data: bytes) -> None:
        if data:
            _crypto().SHA256_Update(self._ctx, data, len(data))

    @property
    def length(self) -> int:
        """Bytes hashed so far."""
        fields = _CTX_NATIVE.unpack(self._ctx.raw)
        return ((fields[9] << 32) | fields[8]) >> 3

    def saved(self) -> bytes:
        return _CTX_SAVED.pack(*_CTX_NATIVE.unpack(self._ctx.raw))

    def copy(self) -> Sha256State:
        return Sha256State(self.saved())

    def hexdigest(self) -> str:
        ctx = ctypes.create_string_buffer(self._ctx.raw, _CTX_NATIVE.size)
        out = ctypes.create_string_buffer(32)
        _crypto().SHA256_Final(out, ctx)
        return out.raw.hex()


class FileHasher:
    """Brings a file's SHA-256 (of its content from byte 0) up to an offset, hashing only what was
    not hashed before. `read_at(offset, n)` returns up to n content bytes from offset."""

    def __init__(self, saved: bytes | None, hashed_bytes: int, read_at: Callable[[int, int], bytes]) -> None:
        state = Sha256State(saved) if saved is not None else None
        if state is None or state.length != hashed_bytes:
            state = Sha256State()  # no saved computation (a file read before there was one): from 0
        self.state = state
        self.read_at = read_at

    @property
    def hashed(self) -> int:
        return self.state.length

    def advance(self, upto: int) -> bool:
        """Hash the content up to `upto`; False when there was nothing new (or it could not be read)."""
        before = self.state.length
        position = before
        while position < upto:
            chunk = self.read_at(position, min(HASH_CHUNK, upto - position))
            if not chunk:  # shorter than it was: the next poll sees why (ingest.checkpoints)
                break
            self.state.update(chunk)
            position += len(chunk)
        return position > before


# -- the chain ----------------------------------------------------------------------------------------

LINK_FIELDS = (
    "source_id", "seq", "kind", "committed_at", "source_file_id", "ingest_run_id", "id_after",
    "id_last", "offset_min", "offset_max", "event_count", "row_digests", "flag", "keys",
    "file_bytes", "file_sha256", "file_scope",
)  # fmt: skip
# Links of versions 2 and 3 (issue 22) hash these too: the batch's rows as one digest, its content
# chunks. (Version 3 digests the narrow rows and their statements; version 2 the wide lines.)
LINK_FIELDS_2 = (*LINK_FIELDS, "version", "rows_sha256", "chunks")

# Numbers the next link of a source and locks its head row until the transaction ends: a
# second writer of the same source waits here, and then sees the link this one appended.
_LOCK_HEAD = """
INSERT INTO ingest_custodyhead (source_id, seq, hash) VALUES (%s, 0, %s)
ON CONFLICT (source_id) DO UPDATE SET seq = ingest_custodyhead.seq
RETURNING seq, hash
"""


def link_hash(prev_hash: bytes, values: Mapping[str, Any]) -> bytes:
    """The hash of a link: SHA-256 of the previous link's hash and of this link's fields, each
    written as `name=value` on its own line (row digests by their SHA-256). Version 2 adds its
    own fields after the others, under its own first line (version 3: the same fields)."""
    version = values.get("version") or 1
    lines = [LINK_HEADS[version]]
    for name in LINK_FIELDS if version == 1 else LINK_FIELDS_2:
        value = values[name]
        if name == "row_digests":
            value = hashlib.sha256(bytes(value)).hexdigest()
        elif name == "rows_sha256":
            value = bytes(value).hex()
        elif name in ("keys", "chunks"):
            value = json.dumps(value, separators=(",", ":"))
        elif isinstance(value, datetime):
            value = value.isoformat()
        elif value is None:
            value = "-"
        lines.append(f"{name}={value}")
    return hashlib.sha256(bytes(prev_hash) + "\n".join(lines).encode()).digest()


def _insert_link(fields: Sequence[str]) -> str:
    values = ", ".join("%s::jsonb" if n in ("keys", "chunks") else "%s" for n in fields)
    return f"INSERT INTO ingest_custodylink ({', '.join(fields)}, prev_hash, hash) VALUES ({values}, %s, %s)"  # noqa: S608 - column names are this module's constants


# A link of version 1 names only its columns: migration 0012 appends links to a table without
# those of version 2.
_INSERT_LINK = {1: _insert_link(LINK_FIELDS), 2: _insert_link(LINK_FIELDS_2), 3: _insert_link(LINK_FIELDS_2)}


def append_link(*, source_id: int, kind: str, **fields: Any) -> int:
    """Append a link to the source's chain in the current transaction; returns its number.
    Plain SQL (no model), so that migration 0012 can call it too."""
    if not connection.in_atomic_block:
        raise RuntimeError("custody links are appended inside the transaction of what they record")
    with connection.cursor() as cur:
        cur.execute(_LOCK_HEAD, [source_id, ZERO_HASH])
        seq, prev = cur.fetchone()
    values: dict[str, Any] = {
        "source_file_id": None, "ingest_run_id": None, "id_after": None, "id_last": None,
        "offset_min": None, "offset_max": None, "event_count": 0, "row_digests": b"", "flag": "",
        "keys": [], "file_bytes": None, "file_sha256": "", "file_scope": "", "version": 1,
        "rows_sha256": b"", "chunks": [],
    }  # fmt: skip
    values.update(fields, source_id=source_id, seq=seq + 1, kind=kind, committed_at=timezone.now())
    values["hash"] = link_hash(bytes(prev), values)
    with connection.cursor() as cur:
        names = LINK_FIELDS if values["version"] == 1 else LINK_FIELDS_2
        row = [json.dumps(values[n]) if n in ("keys", "chunks") else values[n] for n in names]
        cur.execute(_INSERT_LINK[values["version"]], [*row, bytes(prev), values["hash"]])
        cur.execute(
            "UPDATE ingest_custodyhead SET seq = %s, hash = %s WHERE source_id = %s",
            [seq + 1, values["hash"], source_id],
        )
    return seq + 1


def chain_events(
    *,
    source_id: int,
    source_file_id: int,
    ingest_run_id: int | None,
    lines: Sequence[bytes],
    id_after: int,
    id_last: int,
    offsets: tuple[int, int],
    copy: bytes | None = None,
    statements: Iterable[tuple[int, bytes]] | bytes = (),
    chunks: Sequence[PackedChunk] = (),
) -> None:
    """Record a batch of events just stored (a link of version 3): the SHA-256 of their narrow
    COPY lines as copied, in id order (`copy`: those lines joined, when the caller has them so),
    and of the (id, key) of the statements they name (or their records, see batch_digest); a
    CRC-32 of each line, the ids they got, and the content chunks stored with them."""
    append_link(
        source_id=source_id,
        kind="events",
        source_file_id=source_file_id,
        ingest_run_id=ingest_run_id,
        id_after=id_after,
        id_last=id_last,
        offset_min=offsets[0],
        offset_max=offsets[1],
        event_count=len(lines),
        row_digests=row_checks(lines),
        version=EVENTS_LINK_VERSION,
        rows_sha256=batch_digest(b"".join(lines) if copy is None else copy, statements),
        chunks=[c.described() for c in chunks],
    )


def event_key(occurred_at: datetime | None, record_hash: bytes) -> list[str | None]:
    """An event's identity in a flags link: [time in ISO 8601 or null, record hash in hex]."""
    return [occurred_at.isoformat() if occurred_at else None, bytes(record_hash).hex()]


def chain_file_hash(
    *, source_id: int, source_file_id: int, file_bytes: int, sha256: str, scope: str = "content"
) -> None:
    """Record a file's SHA-256 so far (scope "content") or as an upload arrived ("received")."""
    append_link(
        source_id=source_id,
        kind="file",
        source_file_id=source_file_id,
        file_bytes=file_bytes,
        file_sha256=sha256,
        file_scope=scope,
    )


def link_of_event(*, event_id: int, source_file_id: int, byte_offset: int) -> Any:
    """The events link whose batch holds this event (None for events stored before the chain)."""
    return (
        CustodyLink.objects.filter(
            source_file_id=source_file_id,
            kind__in=[CustodyLink.Kind.EVENTS, CustodyLink.Kind.ADOPTED],
            id_after__lt=event_id,
            id_last__gte=event_id,
            offset_min__lte=byte_offset,
            offset_max__gte=byte_offset,
        )
        .select_related("source")
        .first()
    )


def adopt_stored_events(batch: int = 20_000) -> int:
    """Seal the events stored before the chain existed (migration 0012): for each file, its events
    as they are now, in batches, as `adopted` links. Edits, insertions and deletions after this are
    found like any other; what happened to them before cannot be known. Returns how many events."""
    sealed = 0
    with connection.cursor() as cur:
        # (Migration 0012 runs before the table had raw_length: raw bytes were all inline then.)
        present = {c.name for c in connection.introspection.get_table_description(cur, "ingest_event")}
        columns = SQL(", ").join(Identifier(c) for c in ("id", *EVENT_COLUMNS) if c in present)
        cur.execute(
            "SELECT f.source_id, e.source_file_id, max(e.id) FROM ingest_event e"
            " JOIN ingest_sourcefile f ON f.id = e.source_file_id GROUP BY 1, 2 ORDER BY 1, 2"
        )
        files = cur.fetchall()
    for source_id, file_id, last_id in files:
        after = 0
        while after < last_id:
            with connection.cursor() as cur:
                cur.execute(
                    SQL(
                        "SELECT {} FROM ingest_event WHERE source_file_id = %s AND id > %s AND id <= %s"
                        " ORDER BY id LIMIT %s"
                    )
                    .format(columns)
                    .as_string(connection.connection),
                    [file_id, after, last_id, batch],
                )
                names = [c.name for c in cur.description]
                rows = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
            if not rows:
                break
            upto = rows[-1]["id"] if len(rows) == batch else last_id
            for row, filled in zip(rows, with_raw([{**r} for r in rows]), strict=True):
                row["raw_bytes"] = filled["raw"]
            append_link(
                source_id=source_id,
                kind="adopted",
                source_file_id=file_id,
                id_after=after,
                id_last=upto,
                offset_min=min(r["byte_offset"] for r in rows),
                offset_max=max(r["byte_offset"] for r in rows),
                event_count=len(rows),
                row_digests=b"".join(
                    row_digest(stored_copy_line(r, list(r["flags"]), version=1)) for r in rows
                ),
            )
            sealed += len(rows)
            after = upto
    with connection.cursor() as cur:  # and the file hashes recorded before the chain
        cur.execute(
            "SELECT source_id, id, hashed_bytes, sha256, size, received_sha256 FROM ingest_sourcefile"
            " WHERE (sha256 <> '' AND hashed_bytes > 0) OR received_sha256 <> '' ORDER BY source_id, id"
        )
        files = cur.fetchall()
    for source_id, file_id, hashed, sha256, size, received in files:
        if sha256 and hashed:
            chain_file_hash(source_id=source_id, source_file_id=file_id, file_bytes=hashed, sha256=sha256)
        if received:
            chain_file_hash(
                source_id=source_id,
                source_file_id=file_id,
                file_bytes=size,
                sha256=received,
                scope="received",
            )
    return sealed
