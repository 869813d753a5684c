"""Row images on demand: the rows of one statement's table change, decoded from positions.

The metadata pass keeps, for each (statement, table, change), the position of the table map
and of each rows event; here those few events are read again and their rows decoded, so
ingest never decodes a value and the event page decodes only what it shows.

Column names come from the table map (binlog_row_metadata=FULL) or, without it, from a
`TableSchema` (a CREATE TABLE) by position; failing both a column is named `@1`, `@2`...
as mysqlbinlog does. What an image lacks under other row images: with
binlog_row_image=MINIMAL the before image holds only the primary key (every column when
there is none) and the after image only the columns the statement set; with NOBLOB,
unchanged BLOB/TEXT columns are left out. A column missing from an image is missing from
its dict (never None, which means NULL), and `RowImage.complete` says whether any is;
`RowImage.note` says why where the binlog held something of the column it could not use (a
partial JSON update whose diff cannot be applied).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

from ingest.binlog.metadata import TableChange
from ingest.binlog.payload import read_event
from ingest.binlog.reader import PARTIAL_UPDATE_ROWS, BinlogError, Event, Format, read_format
from ingest.binlog.rows import (
    RowsDecoder,
    Value,
    count_partial_rows,
    count_rows,
    json_value,
    read_header,
    widths,
)
from ingest.binlog.schema import TableSchema
from ingest.binlog.tables import TableDef, decode_table_map


@dataclass(slots=True, frozen=True)
class RowImage:
    table: str  # db.tbl
    change: str  # insert, update, delete
    before: dict[str, Value] | None
    after: dict[str, Value] | None
    complete: bool  # every column is in each image it has (binlog_row_image=FULL)
    note: str = ""  # why a column the binlog holds something of is missing (a partial JSON update)

    def as_json(self) -> dict[str, Any]:
        """The API's row: {"table", "change", "before", "after"} with JSON-safe values, and
        "note" where the row has one."""
        row = {
            "table": self.table,
            "change": self.change,
            "before": None if self.before is None else {k: json_value(v) for k, v in self.before.items()},
            "after": None if self.after is None else {k: json_value(v) for k, v in self.after.items()},
        }
        if self.note:
            row["note"] = self.note
        return row


def named_table(table: TableDef, schema: TableSchema | None) -> TableDef:
    """`table` with names and charsets filled in from `schema` where the map has none."""
    if schema is None or len(schema.columns) != len(table.columns):
        return table
    columns = []
    for c, s in zip(table.columns, schema.columns, strict=True):
        columns.append(dataclasses.replace(c, name=c.name or s.name, charset=c.charset or s.charset))
    names = [c.name for c in columns]
    primary = table.primary_key or tuple(names.index(n) for n in schema.primary_key if n in names)
    return dataclasses.replace(table, columns=tuple(columns), primary_key=primary)


def table_of(stream: BinaryIO, change: TableChange, fmt: Format | None = None) -> TableDef:
    fmt = fmt or read_format(stream)
    return table_map(read_event(stream, change.table_map_position, fmt), fmt)


# Decoded table maps, by what their decoding depends on: the server kind and post-header
# lengths of the file's format, and the map's bytes (which begin with its table id). Each
# transaction writes its maps again, mostly the same bytes, and decoding one through
# mysql-replication costs more than decoding a small change's rows: so once per distinct map.
# Bounded in entries and in bytes (a hostile file can hold endless distinct maps).
MAPS_MAX = 1024
MAPS_BYTES_MAX = 16 << 20
_maps: dict[tuple[bool, bytes, bytes], TableDef] = {}
_maps_bytes = [0]


def table_map(event: Event, fmt: Format) -> TableDef:
    """The TABLE_MAP event decoded (`decode_table_map`), from the cache when met before."""
    key = (fmt.mariadb, fmt.post_header, event.body)
    found = _maps.get(key)
    if found is None:
        found = decode_table_map(event, fmt)
        if len(_maps) >= MAPS_MAX or _maps_bytes[0] + len(event.body) > MAPS_BYTES_MAX:
            _maps.clear()
            _maps_bytes[0] = 0
        _maps[key] = found
        _maps_bytes[0] += len(event.body)
    return found


def row_images(
    stream: BinaryIO,
    change: TableChange,
    *,
    schema: TableSchema | None = None,
    fmt: Format | None = None,
    skip: int = 0,
) -> Iterator[RowImage]:
    """The rows of `change`, in the order the server changed them, after the first `skip` (a
    page further on: whole rows events before it are counted, not decoded)."""
    fmt = fmt or read_format(stream)
    table = named_table(table_of(stream, change, fmt), schema)
    value_widths = widths(table) if skip else ()
    decoder = RowsDecoder(table)
    for position in change.positions:
        event = read_event(stream, position, fmt)
        if event.type not in (23, 24, 25, 30, 31, 32, 39):
            raise BinlogError(f"no rows event at {position}")
        if skip:
            header = read_header(event, fmt)
            if event.type == PARTIAL_UPDATE_ROWS:
                n = count_partial_rows(event.body, header, table)
            else:
                n = count_rows(event.body, header, value_widths)
            if n <= skip:
                skip -= n
                continue
        for image in event_images(event, fmt, decoder, change.change):
            if skip:
                skip -= 1
                continue
            yield image


def event_images(event: Event, fmt: Format, decoder: RowsDecoder, change: str) -> Iterator[RowImage]:
    """The rows of one rows event, decoded whole by the decoder of its table (named)."""
    table = decoder.table
    names = [c.name or f"@{c.index + 1}" for c in table.columns]
    for before, after, in_before, in_after, note in decoder.noted(event, fmt):
        yield RowImage(
            table.name,
            change,
            _image(names, before, in_before),
            _image(names, after, in_after),
            all(in_before) and all(in_after),
            note,
        )


def _image(
    names: list[str], values: list[Value] | None, present: tuple[bool, ...]
) -> dict[str, Value] | None:
    if values is None:
        return None
    return {n: v for n, v, here in zip(names, values, present, strict=True) if here}
