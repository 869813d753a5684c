"""TABLE_MAP events, decoded by mysql-replication's TableMapEvent fed with our bytes.

The table map says, for the rows events after it, which table a table id is, each column's
type and type metadata, nullability and (with binlog_row_metadata=FULL) names, signedness,
character sets, ENUM/SET values and the primary key. Its optional-metadata TLV parsing is
intricate and the library has it right, so we feed its event class the bytes of our own
reader (a pymysql packet over header + body) and copy what it found into `TableDef`, a small
frozen record of our own that the row walker and decoder use. A table map is decoded once
per distinct body (they repeat before every statement), so the cost stays off the hot path.
"""

from __future__ import annotations

import dataclasses
import struct
from dataclasses import dataclass
from typing import Any

from pymysql.protocol import MysqlPacket
from pymysqlreplication.constants import CHARSET, FIELD_TYPE
from pymysqlreplication.row_event import TableMapEvent

from ingest.binlog.reader import HEADER, TABLE_MAP, Event, Format


@dataclass(slots=True, frozen=True)
class ColumnDef:
    """One column as the table map describes it. `name` is None without FULL metadata."""

    index: int
    type: int  # FIELD_TYPE, with STRING's real type (ENUM, SET) resolved
    name: str | None
    nullable: bool
    unsigned: bool
    charset: str | None  # "utf8mb4", "latin1", "binary", ... (None: unknown: no FULL metadata)
    max_length: int = 0  # CHAR/VARCHAR: bytes
    length_size: int = 0  # BLOB/TEXT/JSON/GEOMETRY: bytes of the length prefix
    size: int = 0  # ENUM/SET: bytes of the stored value
    precision: int = 0  # DECIMAL
    decimals: int = 0
    fsp: int = 0  # TIME2/DATETIME2/TIMESTAMP2 fractional digits
    bits: int = 0  # BIT
    enum_values: tuple[str, ...] = ()
    set_values: tuple[str, ...] = ()
    dimensions: int = 0  # VECTOR: float32 values in one (0: not said; FULL metadata says it)


@dataclass(slots=True, frozen=True)
class TableDef:
    table_id: int
    schema: str
    table: str
    columns: tuple[ColumnDef, ...]
    primary_key: tuple[int, ...]  # column indexes (empty: none or unknown)
    full_metadata: bool  # the map carried column names

    @property
    def name(self) -> str:
        return f"{self.schema}.{self.table}"


class _Control:
    """What the library asks of its control connection while decoding a table map."""

    charset = "utf8mb4"

    def __init__(self, dbms: str) -> None:
        self._dbms = dbms

    def _get_dbms(self) -> str:
        return self._dbms


_OPTIONS: dict[str, Any] = {
    "only_tables": None,
    "ignored_tables": None,
    "only_schemas": None,
    "ignored_schemas": None,
    "freeze_schema": False,
    "ignore_decode_errors": True,
    "verify_checksum": False,
    "optional_meta_data": True,
    "enable_logging": False,
    "use_column_name_cache": False,
    "use_checksum": True,
}


class TableMapError(ValueError):
    pass


def decode_table_map(event: Event, fmt: Format) -> TableDef:
    """The table map in `event`, by way of mysql-replication's TableMapEvent (MySQL 9's VECTOR
    columns by way of `_without_vectors`, since the library does not know them)."""
    if event.type != TABLE_MAP:
        raise TableMapError(f"event at {event.position} is not a table map")
    vectors: dict[int, int] = {}
    if VECTOR.to_bytes(1, "little") in event.body:  # a cheap pre-check: most maps have none
        try:
            body, vectors = _without_vectors(event.body, fmt.post_header_len(TABLE_MAP, 8))
        except (IndexError, ValueError) as e:
            raise TableMapError(f"table map at {event.position} cannot be decoded: {e!r}"[:300]) from e
        event = event._replace(body=body)
    table = _decode_table_map(event, fmt)
    if not vectors:
        return table
    columns = tuple(
        dataclasses.replace(c, type=VECTOR, charset=None, dimensions=vectors[c.index])
        if c.index in vectors
        else c
        for c in table.columns
    )
    return dataclasses.replace(table, columns=columns)


# MySQL 9's VECTOR column (type 242): a length-prefixed value like a BLOB's, holding float32
# values little-endian; its table map metadata is the length prefix's size, one byte as a
# BLOB's, and FULL row metadata adds a field (13) with each VECTOR column's dimensionality.
VECTOR = 242
_VECTOR_DIMENSIONALITY = 13


def _without_vectors(body: bytes, post_header: int) -> tuple[bytes, dict[int, int]]:
    """The map's body with each VECTOR column given as a BLOB (the same metadata, and a
    character column as VECTOR is in the charset lists) and the dimensionality field taken out,
    as mysql-replication reads it; and {column index: dimensions (0: not said)} of the VECTOR
    columns. (Without a VECTOR column, the body unchanged and {}.)"""
    at = post_header
    at += 1 + body[at] + 1  # schema name, length-prefixed and NUL-ended
    at += 1 + body[at] + 1  # table name
    count, at = _lenenc(body, at)
    types_at = at
    types = body[at : at + count]
    if len(types) < count:
        raise ValueError("column types past the end")
    vectors = [i for i, t in enumerate(types) if t == VECTOR]
    if not vectors:
        return body, {}
    at += count
    meta_length, at = _lenenc(body, at)
    at += meta_length + (count + 7) // 8  # metadata, then the nullability bitmap
    if at > len(body):
        raise ValueError("table map metadata past the end")
    kept, dimensions = bytearray(body[:at]), dict.fromkeys(vectors, 0)
    for i in vectors:
        kept[types_at + i] = FIELD_TYPE.BLOB
    while at < len(body):  # optional metadata: type, length-coded length, value
        start = at
        kind = body[at]
        length, at = _lenenc(body, at + 1)
        if at + length > len(body):
            raise ValueError("optional metadata past the end")
        if kind == _VECTOR_DIMENSIONALITY:
            value, k, found = body[at : at + length], 0, []
            while k < len(value):
                n, k = _lenenc(value, k)
                found.append(n)
            dimensions.update(zip(vectors, found, strict=False))
        else:
            kept += body[start : at + length]
        at += length
    return bytes(kept), dimensions


def _lenenc(data: bytes, at: int) -> tuple[int, int]:
    first = data[at]
    if first < 251:
        return first, at + 1
    width = {252: 2, 253: 3, 254: 8}.get(first)
    if width is None or at + 1 + width > len(data):
        raise ValueError("bad length-coded integer")
    return int.from_bytes(data[at + 1 : at + 1 + width], "little"), at + 1 + width


def _decode_table_map(event: Event, fmt: Format) -> TableDef:
    # The library reads a network packet: an OK byte, the 19-byte header, the body and a
    # checksum it skips; it stops its optional-metadata loop 4 bytes before the end.
    size = 19 + len(event.body) + 4
    header = HEADER.pack(event.timestamp, event.type, event.server_id, size, event.next_position, event.flags)
    packet = MysqlPacket(b"\x00" + header + event.body + b"\0\0\0\0", "utf8")
    dbms = "mariadb" if fmt.mariadb else "mysql"
    table_map: dict[int, Any] = {}
    wrapper_header = packet.read(20)
    del wrapper_header
    try:
        parsed = TableMapEvent(
            _Wrapper(packet, event, size), size - 23, table_map, _Control(dbms),
            post_header_lengths=list(fmt.post_header), **_OPTIONS,
        )  # fmt: skip
    except Exception as e:  # the library raises many kinds on hostile bytes: all mean "corrupt"
        raise TableMapError(f"table map at {event.position} cannot be decoded: {e!r}"[:300]) from e
    meta = parsed.optional_metadata
    names = list(meta.column_name_list or [])
    charsets = _charsets(parsed, dbms)
    nullable = parsed.null_bitmask
    primary = sorted({*(meta.simple_primary_key_list or []), *(meta.primary_keys_with_prefix or {})})
    # Signedness is in the optional metadata under binlog_row_metadata=MINIMAL too (MySQL 8),
    # but the library applies it to its columns only when the map also carries names.
    unsigned = list(meta.unsigned_column_list or [])
    columns = []
    for i, c in enumerate(parsed.columns):
        null_bit = bool(nullable[i // 8] & (1 << (i % 8))) if i // 8 < len(nullable) else True
        bits = getattr(c, "bits", 0)
        columns.append(
            ColumnDef(
                index=i,
                type=c.type,
                name=names[i] if i < len(names) else None,
                nullable=null_bit,
                unsigned=bool(c.unsigned) or (i < len(unsigned) and bool(unsigned[i])),
                charset=charsets.get(i),
                max_length=getattr(c, "max_length", 0),
                length_size=getattr(c, "length_size", 0),
                size=getattr(c, "size", 0) if c.type in (FIELD_TYPE.ENUM, FIELD_TYPE.SET) else 0,
                precision=getattr(c, "precision", 0),
                decimals=getattr(c, "decimals", 0),
                fsp=getattr(c, "fsp", 0),
                bits=bits,
                enum_values=tuple((c.enum_values or [""])[1:]),
                set_values=tuple(c.set_values or ()),
            )
        )
    return TableDef(parsed.table_id, parsed.schema, parsed.table, tuple(columns), tuple(primary),
                    full_metadata=len(names) == len(columns) and bool(columns))  # fmt: skip


class _Wrapper:
    """The few BinLogPacketWrapper duties TableMapEvent relies on, over a pymysql packet."""

    def __init__(self, packet: MysqlPacket, event: Event, size: int) -> None:
        self.packet = packet
        self.read_bytes = 0
        self.event_type = event.type
        self.timestamp = event.timestamp
        self.event_size = size

    def read(self, n: float) -> bytes:
        n = int(n)
        self.read_bytes += n
        data = self.packet.read(n)
        if len(data) < n:
            raise TableMapError("table map ends early")
        return data

    def advance(self, n: int) -> None:
        self.read(n)

    def read_uint8(self) -> int:
        return self.read(1)[0]

    def read_length_coded_binary(self) -> int | None:
        first = self.read(1)[0]
        if first < 251:
            return first
        if first == 251:
            return None
        width = {252: 2, 253: 3, 254: 8}[first]
        return int.from_bytes(self.read(width), "little")

    def read_variable_length_string(self) -> bytes:
        length = shift = 0
        while True:
            byte = self.read(1)[0]
            length |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80 or shift > 35:
                break
        return self.read(length)

    def bytes_to_read(self) -> int:
        return len(self.packet._data) - self.packet._position


def _charsets(parsed: TableMapEvent, dbms: str) -> dict[int, str]:
    """Column index -> character set name, from the collation ids of the optional metadata."""
    meta = parsed.optional_metadata
    out: dict[int, str] = {}
    text = [i for i, c in enumerate(parsed.columns) if TableMapEvent._is_character_column(c.type, dbms)]
    for i, collation in zip(text, meta.charset_collation_list or [], strict=False):
        found = CHARSET.charsets.by_id(collation, dbms) or CHARSET.charsets.by_id(collation, "mysql")
        if found is not None:
            out[i] = found.name
    enum_set = [i for i, c in enumerate(parsed.columns) if c.type in (FIELD_TYPE.ENUM, FIELD_TYPE.SET)]
    for i, collation in zip(enum_set, meta.enum_and_set_collation_list or [], strict=False):
        found = CHARSET.charsets.by_id(collation, dbms) or CHARSET.charsets.by_id(collation, "mysql")
        if found is not None:
            out[i] = found.name
    return out


def table_id_of(body: bytes, fmt: Format, event_type: int) -> int:
    """The table id at the start of a TABLE_MAP or rows event's post-header (6 bytes since
    MySQL 5.1.4; 4 when the post-header is 6 or 8 bytes long for the old v1 layouts)."""
    if fmt.post_header_len(event_type, 8) == 6:
        return struct.unpack_from("<I", body)[0]
    return int.from_bytes(body[:6], "little")
