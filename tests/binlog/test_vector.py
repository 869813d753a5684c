"""MySQL 9's VECTOR columns (type 242) in row images, the API and flashback.

vector.binlog (MySQL 9.0.1, rust_mysql_common's test data: tests/fixtures/binlog_mysql/
PROVENANCE.md) makes `foo(id SERIAL, vector_column VECTOR(3) NOT NULL)` and `bar(id SERIAL,
vector_column VECTOR(2) NOT NULL, foo TEXT, vector_column2 VECTOR(4) NOT NULL)` (its CREATE TABLE
statements are in the file) and writes rows of both. rust_mysql_common asserts the
dimensionalities its table maps carry: [3] for foo, [2, 4] for bar.
"""

from __future__ import annotations

import contextlib
import json
import re
import struct
from pathlib import Path

from ingest.binlog.flashback import TableInfo, undo_row
from ingest.binlog.images import RowImage, event_images, table_map
from ingest.binlog.metadata import Transaction, scan
from ingest.binlog.payload import expanded
from ingest.binlog.reader import ROWS_CHANGE, TABLE_MAP, BinlogProblem, Event, Format, read_events
from ingest.binlog.rows import RowsDecoder, _vector, read_header
from ingest.binlog.tables import VECTOR, TableDef

SAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "binlog_mysql" / "vector.binlog"


def _f32(x: float) -> float:
    """The float32 nearest to x, as MySQL's STRING_TO_VECTOR stores it."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def _rows() -> list[tuple[TableDef, Event, RowImage]]:
    out, maps, fmt = [], {}, None
    with SAMPLE.open("rb") as f:
        for item in expanded(read_events(f)):
            if isinstance(item, Format):
                fmt = item
            elif isinstance(item, Event) and item.type == TABLE_MAP and fmt is not None:
                table = table_map(item, fmt)
                maps[table.table_id] = table
            elif isinstance(item, Event) and item.type in ROWS_CHANGE and fmt is not None:
                table = maps[read_header(item, fmt).table_id]
                change = ROWS_CHANGE[item.type]
                out += [(table, item, row) for row in event_images(item, fmt, RowsDecoder(table), change)]
    return out


def test_the_table_maps_give_each_vector_column_its_dimensionality() -> None:
    seen = {t.name: [c.dimensions for c in t.columns if c.type == VECTOR] for t, _, _ in _rows()}
    assert seen == {"dtb.foo": [3], "dtb.bar": [2, 4]}  # as rust_mysql_common asserts
    bar = next(t for t, _, _ in _rows() if t.name == "dtb.bar")
    assert [c.name for c in bar.columns] == ["id", "vector_column", "foo", "vector_column2"]
    assert bar.columns[2].charset == "utf8mb4"  # the TEXT's charset, past a VECTOR in the list


def test_vectors_are_lists_of_their_float32_values_json_safe() -> None:
    rows = _rows()
    foo = [row.after for t, _, row in rows if t.name == "dtb.foo" and row.after]
    assert foo[:2] == [
        {"id": 1, "vector_column": [_f32(1.1), _f32(2.2), _f32(3.3)]},
        {"id": 2, "vector_column": [1.0, -1.0, 0.0]},
    ]
    bar = [row.after for t, _, row in rows if t.name == "dtb.bar" and row.after]
    assert bar[0] == {
        "id": 1,
        "vector_column": [_f32(1.1), _f32(2.2)],
        "foo": None,
        "vector_column2": [_f32(1.1), _f32(2.2), _f32(3.3), _f32(4.4)],
    }
    for _, _, row in rows:
        json.dumps(row.as_json(), allow_nan=False)  # numbers only
        for image in (row.before, row.after):
            for c in ("vector_column", "vector_column2"):
                if image and c in image:
                    assert isinstance(image[c], list) and all(isinstance(v, float) for v in image[c])


def test_the_flashback_of_a_deleted_vector_restores_its_bytes_exactly() -> None:
    deleted = [(event, row) for t, event, row in _rows() if row.change == "delete"]
    assert deleted
    for event, row in deleted:
        sql = undo_row(row, TableInfo(("id",)))
        assert sql.startswith("INSERT INTO `dtb`.`bar`")
        vectors = re.findall(r"STRING_TO_VECTOR\('\[([^\]]*)\]'\)", sql)
        assert len(vectors) == 2
        for text in vectors:
            # Each number read back as float32 (what the server does) gives the logged bytes.
            packed = b"".join(struct.pack("<f", float(v)) for v in text.split(","))
            assert len(packed) in (8, 16) and packed in event.body


def test_the_metadata_pass_counts_the_vector_rows_it_can_decode() -> None:
    with SAMPLE.open("rb") as f:
        items = list(scan(f, SAMPLE.name))
    assert not [x for x in items if isinstance(x, BinlogProblem)]
    assert sum(x.rows for x in items if isinstance(x, Transaction)) == len(_rows()) == 10


def test_bytes_that_are_not_a_vector_stay_bytes() -> None:
    one = struct.pack("<f", 1.5)
    assert _vector(one * 3, 3) == [1.5, 1.5, 1.5]
    assert _vector(one * 3, 2) == one * 3  # not the map's dimensionality
    assert _vector(one + b"\x00", 0) == one + b"\x00"  # not whole float32 values
    nan = struct.pack("<f", float("nan"))
    assert _vector(one + nan, 2) == one + nan  # JSON has no NaN, MySQL stores none


def test_a_damaged_vector_table_map_is_a_table_map_error_never_another() -> None:
    from ingest.binlog.tables import TableMapError, decode_table_map

    with SAMPLE.open("rb") as f:
        fmt, maps = None, []
        for item in read_events(f):
            if isinstance(item, Format):
                fmt = item
            elif isinstance(item, Event) and item.type == TABLE_MAP:
                maps.append(item)
    assert fmt is not None and maps
    body = maps[1].body  # bar: two VECTOR columns and a TEXT
    for cut in range(len(body) + 1):
        for flip in (None, cut - 1, cut - 5):
            data = bytearray(body[:cut])
            if flip is not None and 0 <= flip < len(data):
                data[flip] ^= 0xFF
            with contextlib.suppress(TableMapError):
                decode_table_map(maps[1]._replace(body=bytes(data)), fmt)
