"""Rows events: counting their rows fast (metadata pass) and decoding them (on demand).

Our own decoding, not mysql-replication's RowsEvent, because the library's values are not
exact enough for evidence and flashback: it decodes latin1 as Python's cp1252 (which
rejects five bytes MariaDB's latin1 maps), turns zero dates into None (indistinguishable
from NULL), BIT into text, and decodes text without a known charset as UTF-8. Here a value
is exactly what the server stored: integers as int, DECIMAL as `Decimal`, temporal types
as text in the server's own notation, text decoded by the column's charset, binary (and
text we cannot decode) as bytes. `json_value` makes any of them JSON-safe.

Layout of a rows event body: table id (6), flags (2), [v2: extra-data length (2) and
data], column count (length-coded), columns-present bitmap (and a second one for the after
image of an UPDATE), then the rows: each a null bitmap over the present columns followed by
the present non-null values.
"""

from __future__ import annotations

import base64
import math
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from pymysqlreplication.constants import FIELD_TYPE as T

from ingest.binlog.jsonb import (
    JsonDiffError,
    apply_json_diff,
    describe_diff,
    json_document,
    json_dump,
    json_text,
    read_json_diff,
)
from ingest.binlog.reader import (
    DELETE_ROWS_V2,
    PARTIAL_UPDATE_ROWS,
    ROWS_CHANGE,
    UPDATE_ROWS_V2,
    WRITE_ROWS_V2,
    Event,
    Format,
)
from ingest.binlog.tables import VECTOR, ColumnDef, TableDef

STMT_END = 0x0001  # the last rows event of a statement

Value = int | float | Decimal | str | bytes | list[float] | None  # a list: a VECTOR


class RowsError(ValueError):
    """A rows event that does not fit its table map (corrupt, or a map we misread)."""


@dataclass(slots=True)  # not frozen: made for every rows event, and frozen ones are slow to make
class RowsHeader:
    table_id: int
    flags: int
    change: str  # insert, update, delete
    columns: int
    present: bytes  # columns-present bitmap (before image for UPDATE)
    present_after: bytes | None  # UPDATE: the after image's bitmap
    rows_at: int  # offset of the first row in the body


def read_header(event: Event, fmt: Format) -> RowsHeader:
    body = event.body
    v2 = event.type in (WRITE_ROWS_V2, UPDATE_ROWS_V2, DELETE_ROWS_V2, PARTIAL_UPDATE_ROWS)
    post = fmt.post_header_len(event.type, 10 if v2 else 8)
    if post == 6:  # MySQL 5.1.0-5.1.3: 4-byte table id
        table_id, flags = struct.unpack_from("<IH", body)
    else:
        table_id = int.from_bytes(body[:6], "little")
        (flags,) = struct.unpack_from("<H", body, 6)
    at = post
    if v2 and post >= 10:
        (extra,) = struct.unpack_from("<H", body, 8)
        at = 8 + max(extra, 2)
    columns, at = _lenenc(body, at)
    width = (columns + 7) // 8
    present = body[at : at + width]
    at += width
    present_after = None
    change = ROWS_CHANGE[event.type]
    if change == "update":
        present_after = body[at : at + width]
        at += width
    if at > len(body):
        raise RowsError(f"rows event at {event.position} ends inside its header")
    return RowsHeader(table_id, flags, change, columns, present, present_after, at)


def header_reader(fmt: Format) -> Callable[[Event], RowsHeader]:
    """`read_header` for the events of one file, faster: the post-header length per type and
    the layout part of the header (column count, columns-present bitmaps), which every rows
    event of a statement repeats, are looked up rather than parsed again. Headers with a
    length-coded column count of more than one byte, or an unusual post-header, are read by
    `read_header`."""
    posts: dict[int, int] = {}
    layouts: dict[tuple[int, int, bytes], tuple[str, int, bytes, bytes | None, int]] = {}

    def read(event: Event) -> RowsHeader:
        t, body = event.type, event.body
        post = posts.get(t)
        if post is None:
            v2 = t in (WRITE_ROWS_V2, UPDATE_ROWS_V2, DELETE_ROWS_V2, PARTIAL_UPDATE_ROWS)
            post = posts[t] = fmt.post_header_len(t, 10 if v2 else 8)
        if post == 8:
            at = 8
        elif post == 10:
            at = 8 + max(body[8] | body[9] << 8, 2)
        else:
            return read_header(event, fmt)
        columns = body[at]
        if columns >= 251:
            return read_header(event, fmt)
        images = 2 if ROWS_CHANGE[t] == "update" else 1
        end = at + 1 + ((columns + 7) >> 3) * images
        key = (t, at, body[at:end])
        layout = layouts.get(key)
        if layout is None:
            header = read_header(event, fmt)
            layout = (header.change, header.columns, header.present, header.present_after, header.rows_at)
            if len(layouts) >= _LAYOUTS_MAX:  # bounded: a hostile file with endless layouts
                layouts.clear()
            layouts[key] = layout
        change, columns, present, present_after, rows_at = layout
        table_id = int.from_bytes(body[:6], "little")
        return RowsHeader(table_id, body[6] | body[7] << 8, change, columns, present, present_after, rows_at)

    return read


def _lenenc(body: bytes, at: int) -> tuple[int, int]:
    first = body[at]
    if first < 251:
        return first, at + 1
    width = {252: 2, 253: 3, 254: 8}.get(first)
    if width is None:
        raise RowsError("bad length-coded integer")
    return int.from_bytes(body[at + 1 : at + 1 + width], "little"), at + 1 + width


# -- walking (the metadata pass: how many rows, without decoding a value) ------------------

_FIXED = {
    T.TINY: 1, T.SHORT: 2, T.INT24: 3, T.LONG: 4, T.LONGLONG: 8, T.FLOAT: 4, T.DOUBLE: 8,
    T.YEAR: 1, T.DATE: 3, T.NEWDATE: 3, T.TIME: 3, T.DATETIME: 8, T.TIMESTAMP: 4,
}  # fmt: skip
_DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)


def _decimal_size(precision: int, scale: int) -> int:
    whole = precision - scale
    return (whole // 9) * 4 + _DIG2BYTES[whole % 9] + (scale // 9) * 4 + _DIG2BYTES[scale % 9]


def value_width(c: ColumnDef) -> int:
    """Bytes of a value: > 0 fixed, < 0 a length prefix of that many bytes."""
    t = c.type
    if t in _FIXED:
        return _FIXED[t]
    if t == T.NEWDECIMAL:
        return _decimal_size(c.precision, c.decimals)
    if t == T.DATETIME2:
        return 5 + (c.fsp + 1) // 2
    if t == T.TIMESTAMP2:
        return 4 + (c.fsp + 1) // 2
    if t == T.TIME2:
        return 3 + (c.fsp + 1) // 2
    if t in (T.ENUM, T.SET):
        return c.size
    if t == T.BIT:
        return (c.bits + 7) // 8
    if t in (T.VARCHAR, T.VAR_STRING, T.STRING):
        return -2 if c.max_length > 255 else -1
    if t in (T.BLOB, T.GEOMETRY, T.JSON, T.TINY_BLOB, T.MEDIUM_BLOB, T.LONG_BLOB):
        return -(c.length_size or 2)
    if t == VECTOR:
        return -(c.length_size or 4)
    raise RowsError(f"column type {t} of {c.name or c.index} is not known")


def widths(table: TableDef) -> tuple[int, ...]:
    return tuple(value_width(c) for c in table.columns)


def count_rows(body: bytes, header: RowsHeader, widths_: tuple[int, ...]) -> int:
    """How many rows the event holds (an UPDATE row counts once: before and after)."""
    return row_counter(header, widths_)(body, header.rows_at)


# How the walk is fast in pure Python: a row image is a null bitmap and then the present
# non-null values, so for one table layout and one null bitmap the bytes to skip are fixed
# sums between the length prefixes of the variable-length values. For each bitmap met we
# generate (once) straight-line additions, one per variable-length value. The first
# INLINE_MASKS bitmaps of a layout (in practice the common ones: "no NULL", "the usual
# NULLs") are written into the loop over rows itself; the others are one dictionary
# look-up and one call of their own small function. Only integers from the table map go
# into the generated source. Functions per layout are bounded (a hostile file could show
# every bitmap): past MASKS_PER_LAYOUT, bitmaps are walked by the generic loop.
INLINE_MASKS = 2
MASKS_PER_LAYOUT = 256
MASKS_MAX = 20_000  # generated functions in all (a hostile file's many layouts times many bitmaps)
_LAYOUTS_MAX = 4096
_made = [0]  # generated functions alive (reset with the counters)
_counters: dict[tuple[tuple[int, ...], bytes, bytes | None, int], _RowCounter] = {}


def row_counter(header: RowsHeader, widths_: tuple[int, ...]) -> _RowCounter:
    """The counter of rows of events with this header's layout (cached)."""
    key = (widths_, header.present, header.present_after, header.columns)
    counter = _counters.get(key)
    if counter is None:
        before = _present(header.present, header.columns, widths_)
        after = _present(header.present_after, header.columns, widths_) if header.present_after else None
        counter = _RowCounter(before, after)
        if len(_counters) >= _LAYOUTS_MAX:  # bounded: a hostile file with endless layouts
            _counters.clear()
            _made[0] = 0
        _counters[key] = counter
    return counter


class _Skips(dict):
    """Null bitmap -> the function skipping one image with it, made when first met."""

    def __init__(self, present: tuple[int, ...], owner: _RowCounter) -> None:
        super().__init__()
        self.present = present
        self.first: list[int] = []  # the first bitmaps met, in order (the loop inlines them)
        self.owner = owner

    def __missing__(self, mask: int) -> Any:
        present = self.present
        if len(self) >= MASKS_PER_LAYOUT or _made[0] >= MASKS_MAX:
            return lambda b, at: _skip_values(b, at, present, mask)
        _made[0] += 1
        if len(self.first) < INLINE_MASKS:
            self.first.append(mask)
            self.owner.walk = None  # made again, with this bitmap inlined
        skip = self[mask] = _compile_skip(present, mask)
        return skip


def _skip_lines(present: tuple[int, ...], mask: int, indent: str, start: int) -> list[str] | None:
    """Statements advancing `at` past one image's values with null bitmap `mask`, `at` being
    `start` bytes before them (None: too many for generated code)."""
    lines, fixed = [], start
    for i, w in enumerate(present):
        if mask >> i & 1:
            continue  # NULL: no bytes
        if w > 0:
            fixed += w
            continue
        size = -w
        if size == 1:
            length = f"b[at + {fixed}]"
        elif size == 2:
            length = f"(b[at + {fixed}] | b[at + {fixed + 1}] << 8)"
        else:
            length = f"int.from_bytes(b[at + {fixed}:at + {fixed + size}], 'little')"
        lines.append(f"{indent}at += {fixed + size} + {length}")
        fixed = 0
    if len(lines) > 64:  # very wide tables: the generic loop, not a huge function
        return None
    return [*lines, f"{indent}at += {fixed}"]


def _compile_skip(present: tuple[int, ...], mask: int) -> Any:
    """`skip(body, at) -> at`: past the values of one image whose null bitmap is `mask`
    (`at` is just after the bitmap)."""
    lines = _skip_lines(present, mask, "    ", 0)
    if lines is None:
        return lambda b, at: _skip_values(b, at, present, mask)
    scope: dict[str, Any] = {}
    exec("def skip(b, at):\n" + "\n".join(lines) + "\n    return at\n", scope)  # integers only
    return scope["skip"]


class _RowCounter:
    """`count(body, rows_at) -> rows` for one layout of images: the loop over rows is
    generated for the images' bitmap sizes, with the first bitmaps met inlined (made again
    when one more is met, at most INLINE_MASKS times per image)."""

    def __init__(self, before: tuple[int, ...], after: tuple[int, ...] | None) -> None:
        self.images = [(before, _Skips(before, self))]
        if after is not None:
            self.images.append((after, _Skips(after, self)))
        self.empty = not before and not after
        self.walk: Any = None

    def _generate(self) -> None:
        lines = ["def walk(b, at, end):", "    n = 0", "    while at < end:"]
        scope: dict[str, Any] = {}
        for k, (present, skips) in enumerate(self.images):
            size = (len(present) + 7) // 8
            if size == 0:
                mask = "0"
            elif size == 1:
                mask = "b[at]"
            elif size == 2:
                mask = "(b[at] | b[at + 1] << 8)"
            else:
                mask = f"int.from_bytes(b[at:at + {size}], 'little')"
            scope[f"skips{k}"] = skips
            lines.append(f"        m = {mask}")
            branch = "if"
            for known in skips.first:
                inline = _skip_lines(present, known, "            ", size)
                if inline is None:
                    continue
                lines += [f"        {branch} m == {known}:", *inline]
                branch = "elif"
            indent = "        " if branch == "if" else "            "
            if branch == "elif":
                lines.append("        else:")
            lines.append(f"{indent}at = skips{k}[m](b, at + {size})")
        lines += ["        n += 1", "    return n, at"]
        exec("\n".join(lines) + "\n", scope)  # integers only
        self.walk = scope["walk"]

    def __call__(self, body: bytes, at: int) -> int:
        return self.count(body, at, len(body))

    def count(self, buf: bytes, at: int, end: int) -> int:
        """The rows between `at` and `end` of `buf` (a rows event's body, or the metadata
        pass's read buffer, whose event ends at `end`: a walk that runs past it stops at the
        first row past it and is an error all the same)."""
        if self.empty and at < end:  # a row of no bytes: it would never end
            raise RowsError("rows without any column present")
        walk = self.walk
        if walk is None:
            self._generate()
            walk = self.walk
        try:
            n, at = walk(buf, at, end)
        except IndexError:
            raise RowsError("the rows run past the end of the event") from None
        if at != end:
            raise RowsError("the rows run past the end of the event")
        return n


def _present(bitmap: bytes | None, columns: int, widths_: tuple[int, ...]) -> tuple[int, ...]:
    if bitmap is None or columns != len(widths_):
        raise RowsError(f"the rows event has {columns} columns, its table map {len(widths_)}")
    return tuple(widths_[i] for i in range(columns) if bitmap[i // 8] & (1 << (i % 8)))


def _skip_values(body: bytes, at: int, present: tuple[int, ...], mask: int) -> int:
    for i, w in enumerate(present):
        if mask >> i & 1:
            continue
        if w > 0:
            at += w
        elif w == -1:
            at += 1 + body[at]
        else:
            at += -w + int.from_bytes(body[at : at - w], "little")
    return at


# -- MySQL 8's PARTIAL_UPDATE_ROWS (binlog_row_value_options=PARTIAL_JSON) ------------------
#
# Each row is the before image, then the after image preceded by its value options
# (length-coded; bit 1: partial JSON) and, with that bit, a bitmap over the JSON columns
# present in the after image: a set bit means the column holds a diff (operations on paths of
# the document), not the document. `RowsDecoder._partial` applies each diff to the before
# image's document (jsonb.apply_json_diff); where it cannot (no document in the before image
# under binlog_row_image=MINIMAL, or a diff that does not fit), the column is left out of the
# after image, as under binlog_row_image=NOBLOB, the image says it is incomplete and the row's
# note says why.

_PARTIAL_JSON = 0x01


def _partial_prefix(body: bytes, at: int, table: TableDef, present_after: list[bool]) -> tuple[int, set[int]]:
    options, at = _lenenc(body, at)
    partial: set[int] = set()
    if options & _PARTIAL_JSON:
        json_columns = [i for i, c in enumerate(table.columns) if present_after[i] and c.type == T.JSON]
        size = (len(json_columns) + 7) // 8
        bits = body[at : at + size]
        if len(bits) < size:
            raise RowsError("a partial update's JSON bitmap runs past the end of its event")
        at += size
        partial = {column for k, column in enumerate(json_columns) if bits[k >> 3] & (1 << (k & 7))}
    return at, partial


def _bits(bitmap: bytes, n: int) -> list[bool]:
    return [bool(bitmap[i // 8] & (1 << (i % 8))) for i in range(n)]


def _skip_image(body: bytes, at: int, present: tuple[int, ...]) -> int:
    """Past one row image the slow, general way (partial updates only: they are rare)."""
    size = (len(present) + 7) // 8
    nulls = body[at : at + size]
    return _skip_values(body, at + size, present, int.from_bytes(nulls, "little"))


def count_partial_rows(body: bytes, header: RowsHeader, table: TableDef) -> int:
    """`count_rows` for a PARTIAL_UPDATE_ROWS event (it needs the column types)."""
    widths_ = widths(table)
    n = len(widths_)
    before = _present(header.present, header.columns, widths_)
    after = _present(header.present_after, header.columns, widths_)
    present_after = _bits(header.present_after or b"", n)
    at, end, rows = header.rows_at, len(body), 0
    while at < end:
        at = _skip_image(body, at, before)
        at, _ = _partial_prefix(body, at, table, present_after)
        at = _skip_image(body, at, after)
        rows += 1
    if at != end:
        raise RowsError("the rows run past the end of the event")
    return rows


# -- decoding (row images on demand) -------------------------------------------------------


def decode_rows(
    event: Event, fmt: Format, table: TableDef
) -> Iterator[tuple[list[Value] | None, list[Value] | None, tuple[bool, ...], tuple[bool, ...]]]:
    """Each row as (before, after, before_present, after_present): values by column index;
    a column absent from an image (binlog_row_image=MINIMAL/NOBLOB) is None there and False
    in its `present` flags. (`RowsDecoder(table).rows`: keep the decoder for many events.)"""
    return RowsDecoder(table).rows(event, fmt)


KeyRow = tuple[tuple[Value, ...] | None, tuple[Value, ...] | None, int, int]
Flags = tuple[bool, ...]


class RowsDecoder:
    """Decodes the rows events of one table map. Its layouts (the columns an image holds, with
    each column's decoder) are made once per columns-present bitmap met, so a decoder kept for
    many events of the table does the type dispatch once, not once per value. Bounded: a
    hostile file's endless bitmaps empty the layouts now and then."""

    def __init__(self, table: TableDef) -> None:
        self.table = table
        self._layouts: dict[tuple[bytes, int, bool], _Image] = {}

    def layout(self, header: RowsHeader) -> tuple[_Image, _Image]:
        """The layouts of the event's before and after images (one image: the same twice)."""
        first = self._layout(header.present, header.columns)
        if header.present_after is None:
            return first, first
        return first, self._layout(header.present_after, header.columns)

    def _layout(self, bitmap: bytes, columns: int, raw_json: bool = False) -> _Image:
        found = self._layouts.get((bitmap, columns, raw_json))
        if found is None:
            if columns != len(self.table.columns):
                raise RowsError(
                    f"the rows event has {columns} columns, its table map {len(self.table.columns)}"
                )
            present = tuple(bool(bitmap[i // 8] & (1 << (i % 8))) if i // 8 < len(bitmap) else False
                            for i in range(columns))  # fmt: skip
            if len(self._layouts) >= _LAYOUTS_MAX:
                self._layouts.clear()
            found = self._layouts[(bitmap, columns, raw_json)] = _Image(self.table, present, raw_json)
        return found

    def rows(
        self, event: Event, fmt: Format
    ) -> Iterator[tuple[list[Value] | None, list[Value] | None, Flags, Flags]]:
        """As `decode_rows`."""
        for before, after, in_before, in_after, _ in self.noted(event, fmt):
            yield before, after, in_before, in_after

    def noted(
        self, event: Event, fmt: Format
    ) -> Iterator[tuple[list[Value] | None, list[Value] | None, Flags, Flags, str]]:
        """As `rows`, each row with a note: why a column is missing from an image where the
        binlog holds something of it that could not be used (else empty)."""
        header = read_header(event, fmt)
        body = event.body
        first_image, second_image = self.layout(header)
        bits, bits_after = first_image.present, second_image.present
        at = header.rows_at
        if not any(bits) and not any(bits_after) and at < len(body):  # a row of no bytes: no end
            raise RowsError("rows without any column present")
        if event.type == PARTIAL_UPDATE_ROWS:
            yield from self._partial(event, header)
            return
        first_decode, second_decode = first_image.decode, second_image.decode
        try:
            while at < len(body):
                first, at = first_decode(body, at)
                if header.change == "update":
                    second, at = second_decode(body, at)
                    yield first, second, bits, bits_after, ""
                elif header.change == "delete":
                    yield first, None, bits, (), ""
                else:
                    yield None, first, (), bits, ""
        except (IndexError, struct.error):  # hostile bytes: a value runs past the end of the event
            raise RowsError(f"a row of the rows event at {event.position} runs past its end") from None

    def _partial(
        self, event: Event, header: RowsHeader
    ) -> Iterator[tuple[list[Value] | None, list[Value] | None, Flags, Flags, str]]:
        """The rows of a PARTIAL_UPDATE_ROWS event, their JSON diffs applied to the before
        image's documents (`jsonb.apply_json_diff`). A diff that cannot be applied (the before
        image lacks the document under binlog_row_image=MINIMAL, or it does not fit it) leaves
        its column out of the after image, and the note says why and what the diff was."""
        body, table = event.body, self.table
        first = self._layout(header.present, header.columns, raw_json=True)
        second = self._layout(header.present_after or header.present, header.columns, raw_json=True)
        json_columns = [i for i, c in enumerate(table.columns) if c.type == T.JSON]
        at = header.rows_at
        try:
            while at < len(body):
                before, at = first.decode(body, at)
                at, partial = _partial_prefix(body, at, table, list(second.present))
                after, at = second.decode(body, at)
                in_after = list(second.present)
                notes = []
                for i in json_columns:
                    document = before[i]
                    if first.present[i] and document is not None:
                        before[i] = _mysql_json(document)  # type: ignore[arg-type]  # a JSON column's bytes
                    if i in partial and after[i] is not None:  # (NULL after: no diff to read)
                        column = table.columns[i].name or f"@{i + 1}"
                        if not first.present[i]:
                            lacking = "the before image lacks the document (binlog_row_image=MINIMAL)"
                        else:
                            lacking = "the document was NULL before" if document is None else ""
                        after[i], note = _applied(document, after[i], column, lacking)  # type: ignore[arg-type]  # JSON bytes
                        if note:
                            in_after[i] = False
                            notes.append(note)
                    elif second.present[i] and after[i] is not None:
                        after[i] = _mysql_json(after[i])  # type: ignore[arg-type]  # a JSON column's bytes
                yield before, after, first.present, tuple(in_after), "; ".join(notes)[:2000]
        except (IndexError, struct.error):
            raise RowsError(f"a row of the rows event at {event.position} runs past its end") from None

    def keyed(self, event: Event, fmt: Format, key: tuple[int, ...]) -> KeyedRows | None:
        """The event's rows key first (`KeyedRows`), decoding only the `key` columns (indexes,
        in key order). None where this cannot be done: a PARTIAL_UPDATE_ROWS event (its rows
        carry diffs), a first image lacking a key column, an INSERT's or DELETE's image lacking
        one, or no key. An UPDATE's after image without the key columns (what
        binlog_row_image=MINIMAL writes when the key is not set) keeps the row's key."""
        if not key or event.type == PARTIAL_UPDATE_ROWS:
            return None
        header = read_header(event, fmt)
        first_image, second_image = self.layout(header)
        if not all(first_image.present[i] for i in key):
            return None
        if header.change != "update" and not all(second_image.present[i] for i in key):
            return None
        return KeyedRows(event, header, first_image, second_image, key)


class KeyedRows:
    """The rows of one rows event, key first: iterating gives each row as (key before, key
    after, where its before image starts, where its after image starts), an image the event has
    not being None and its start -1; `image(at, after)` then decodes a kept image whole, the
    same as `RowsDecoder.rows` gives it. A page that keeps few rows of a long history so decodes
    whole only the images it keeps. `complete`: every column is in both images."""

    def __init__(
        self, event: Event, header: RowsHeader, first: _Image, second: _Image, key: tuple[int, ...]
    ) -> None:
        self.event, self.header = event, header
        self.first_image, self.second_image, self.key = first, second, key
        self.complete = all(first.present) and all(second.present)
        # As images.RowImage's users read a MINIMAL after image: without all the key columns,
        # the key did not change.
        self.after_keyed = all(second.present[i] for i in key)

    def __iter__(self) -> Iterator[KeyRow]:
        event, header = self.event, self.header
        body, at, change = event.body, header.rows_at, header.change
        # The first image holds the key columns (RowsDecoder.keyed checked): each row moves `at` on.
        first_key, second_key = self.first_image.key_reader(self.key), self.second_image.key_reader(self.key)
        after_keyed = self.after_keyed
        try:
            while at < len(body):
                start = at
                found, at = first_key(body, at)
                if change == "update":
                    second_start = at
                    second, at = second_key(body, at)
                    yield found, second if after_keyed else found, start, second_start
                elif change == "delete":
                    yield found, None, start, -1
                else:
                    yield None, found, -1, start
        except (IndexError, struct.error):
            raise RowsError(f"a row of the rows event at {event.position} runs past its end") from None
        if at != len(body):
            raise RowsError(f"a row of the rows event at {event.position} runs past its end")

    def image(self, at: int, after: bool) -> tuple[list[Value], Flags]:
        """The values (by column index, None where absent) and the present flags of the image
        starting at `at`."""
        layout = self.second_image if after else self.first_image
        try:
            return layout.decode(self.event.body, at)[0], layout.present
        except (IndexError, struct.error):
            raise RowsError(f"a row of the rows event at {self.event.position} runs past its end") from None


# How decoding is fast enough for a table's whole history: the type of each column is looked
# up once per table map, not once per value. `column_decoder` gives each column a function of
# (body, offset) specialised to its type and metadata, and `_Image` holds them for one layout
# (the columns one image of a rows event holds); layouts are cached per table map and bitmap.
# The specialised functions give exactly what `_value` gives (tests compare the two on every
# column of the samples); rarer types go through `_value` itself.

Decoder = Callable[[bytes, int], tuple[Value, int]]
_STRUCTS = {
    (T.TINY, False): struct.Struct("<b"), (T.SHORT, False): struct.Struct("<h"),
    (T.SHORT, True): struct.Struct("<H"), (T.LONG, False): struct.Struct("<i"),
    (T.LONG, True): struct.Struct("<I"), (T.LONGLONG, False): struct.Struct("<q"),
    (T.LONGLONG, True): struct.Struct("<Q"), (T.FLOAT, False): struct.Struct("<f"),
    (T.FLOAT, True): struct.Struct("<f"), (T.DOUBLE, False): struct.Struct("<d"),
    (T.DOUBLE, True): struct.Struct("<d"),
}  # fmt: skip
_TEXT_TYPES = (T.VARCHAR, T.VAR_STRING, T.STRING, T.BLOB, T.TINY_BLOB, T.MEDIUM_BLOB, T.LONG_BLOB)
_UTF8 = (None, "utf8mb4", "utf8mb3", "utf8")


def column_decoder(c: ColumnDef) -> Decoder:
    """`decode(body, at) -> (value, end)` for one non-NULL value of the column."""
    t = c.type
    if t == T.TINY and c.unsigned:
        return _unsigned_tiny
    fixed = _STRUCTS.get((t, c.unsigned))
    if fixed is not None:
        return _fixed_decoder(fixed.unpack_from, fixed.size)
    if t == T.NEWDECIMAL:
        size, precision, scale = _decimal_size(c.precision, c.decimals), c.precision, c.decimals
        return lambda b, at: (_decimal(b[at : at + size], precision, scale), at + size)
    if t == T.DATETIME2:
        fsp = c.fsp
        return lambda b, at: _datetime2(b, at, fsp)
    if t in _TEXT_TYPES and t not in (T.ENUM, T.SET):
        width = value_width(c)
        if width < 0:
            return _text_decoder(c, -width)
    return lambda b, at: _value(b, at, c)


def _raw_decoder(c: ColumnDef) -> Decoder:
    """A length-prefixed value's bytes, undecoded (a JSON document or a partial update's diff)."""
    prefix, name = -value_width(c), c.name or c.index

    def decode(b: bytes, at: int) -> tuple[Value, int]:
        start = at + prefix
        end = start + int.from_bytes(b[at:start], "little")
        if end > len(b) or start > len(b):
            raise RowsError(f"a value of {name} runs past the end of its event")
        return b[start:end], end

    return decode


def _applied(document: Value, diff: bytes, column: str, lacking: str) -> tuple[Value, str]:
    """(the after document as text, "") or (None, why not): a JSON column's diff applied to its
    before document (`lacking` says why there is none to apply it to)."""
    try:
        operations = read_json_diff(diff, _decimal)
    except (JsonDiffError, RecursionError) as e:
        return None, f"{column}: a partial JSON update that cannot be read ({e})"
    what = describe_diff(operations)[:500]
    if lacking or not isinstance(document, bytes):
        return None, f"{column}: partial JSON update not applied, {lacking or 'no document'}: {what}"
    try:
        return json_dump(apply_json_diff(json_document(document, _decimal), operations)), ""
    except (JsonDiffError, ValueError, IndexError, struct.error, RecursionError) as e:
        return None, f"{column}: partial JSON update not applied ({e}): {what}"


def _unsigned_tiny(b: bytes, at: int) -> tuple[Value, int]:
    return b[at], at + 1


def _fixed_decoder(unpack: Callable[[bytes, int], tuple[Any, ...]], size: int) -> Decoder:
    def decode(b: bytes, at: int) -> tuple[Value, int]:
        return unpack(b, at)[0], at + size

    return decode


def _text_decoder(c: ColumnDef, prefix: int) -> Decoder:
    """Text and binary strings: a little-endian length of `prefix` bytes, then the bytes."""
    charset, name = c.charset, c.name or c.index
    utf8 = charset in _UTF8

    def decode(b: bytes, at: int) -> tuple[Value, int]:
        start = at + prefix
        length = b[at] if prefix == 1 else int.from_bytes(b[at:start], "little")
        end = start + length
        raw = b[start:end]
        if len(raw) < length or start > len(b):
            raise RowsError(f"a value of {name} runs past the end of its event")
        if utf8:
            try:
                return raw.decode("utf-8"), end
            except UnicodeDecodeError:
                return raw, end
        return decode_text(raw, charset), end

    return decode


class _Image:
    """The decoders of one layout: the columns one image of a rows event holds."""

    __slots__ = ("chosen", "columns", "keyed", "nulls", "plan", "present", "raw_json")

    def __init__(self, table: TableDef, present: tuple[bool, ...], raw_json: bool = False) -> None:
        self.present = present
        self.columns = len(table.columns)
        chosen = [c for c, here in zip(table.columns, present, strict=True) if here]
        self.chosen, self.raw_json = tuple(chosen), raw_json
        self.plan = tuple(
            (c.index, _raw_decoder(c) if raw_json and c.type == T.JSON else column_decoder(c), value_width(c))
            for c in chosen
        )
        self.nulls = (len(chosen) + 7) // 8
        self.keyed: dict[tuple[int, ...], Callable[[bytes, int], tuple[tuple[Value, ...], int]]] = {}

    def decode(self, b: bytes, at: int) -> tuple[list[Value], int]:
        values: list[Value] = [None] * self.columns
        size = self.nulls
        nulls = int.from_bytes(b[at : at + size], "little")
        at += size
        if at > len(b):
            raise RowsError("a row runs past the end of its event")
        for i, decode, _ in self.plan:
            if nulls & 1:
                nulls >>= 1
                continue
            nulls >>= 1
            values[i], at = decode(b, at)
        if at > len(b):
            raise RowsError("a row runs past the end of its event")
        return values, at

    def key_reader(self, key: tuple[int, ...]) -> Callable[[bytes, int], tuple[tuple[Value, ...], int]]:
        """`read(body, at) -> (key values in key order, end)`: the key columns decoded, the
        others skipped by their widths."""
        found = self.keyed.get(key)
        if found is None:
            found = self.keyed[key] = self._key_reader(key)
        return found

    def _key_reader(self, key: tuple[int, ...]) -> Callable[[bytes, int], tuple[tuple[Value, ...], int]]:
        """As the row counter does (`_RowCounter`), a function per null bitmap met, generated
        once: straight-line code that calls the key columns' decoders at offsets summed from
        the fixed widths and length prefixes between them. Bounded per layout and in all (past
        the bounds, the generic loop of `_key_values`)."""
        order = {column: k for k, column in enumerate(key)}
        plan = tuple((order.get(i, -1), decode, width) for i, decode, width in self.plan)
        size, count = self.nulls, len(key)
        made: dict[int, Callable[[bytes, int], tuple[tuple[Value, ...], int]]] = {}

        def make(mask: int) -> Callable[[bytes, int], tuple[tuple[Value, ...], int]]:
            if len(made) >= MASKS_PER_LAYOUT:
                return lambda b, at: _key_values(b, at, plan, mask, count)
            # Shared by every decoder of the same columns (a page makes its decoders afresh):
            # the process keeps generating none once its pages have met their layouts.
            shared = (self.chosen, self.raw_json, key, mask)
            found = _key_functions.get(shared)
            if found is None:
                if len(_key_functions) >= MASKS_MAX:  # bounded: a hostile file's endless layouts
                    _key_functions.clear()
                found = _key_functions[shared] = _compile_key(plan, mask, count)
            made[mask] = found
            return found

        def read(b: bytes, at: int) -> tuple[tuple[Value, ...], int]:
            nulls = int.from_bytes(b[at : at + size], "little")
            at += size
            if at > len(b):
                raise RowsError("a row runs past the end of its event")
            values, at = (made.get(nulls) or make(nulls))(b, at)
            if at > len(b):
                raise RowsError("a row runs past the end of its event")
            return values, at

        return read


_key_functions: dict[tuple[Any, ...], Callable[[bytes, int], tuple[tuple[Value, ...], int]]] = {}


def _key_values(
    b: bytes, at: int, plan: tuple[tuple[int, Decoder, int], ...], nulls: int, count: int
) -> tuple[tuple[Value, ...], int]:
    """The key columns' values of one image (`at` just after its null bitmap), the others
    skipped by their widths: the generic loop."""
    values: list[Value] = [None] * count
    for slot, decode, width in plan:
        if nulls & 1:
            nulls >>= 1
            continue
        nulls >>= 1
        if slot >= 0:
            values[slot], at = decode(b, at)
        elif width > 0:
            at += width
        elif width == -1:
            at += 1 + b[at]
        elif width == -2:
            at += 2 + (b[at] | b[at + 1] << 8)
        else:
            at += -width + int.from_bytes(b[at : at - width], "little")
    return tuple(values), at


def _compile_key(
    plan: tuple[tuple[int, Decoder, int], ...], mask: int, count: int
) -> Callable[[bytes, int], tuple[tuple[Value, ...], int]]:
    """`_key_values` for one null bitmap as generated straight-line code (only integers from
    the table map go into the source; the decoders are passed in its scope)."""
    lines, fixed, scope = [], 0, {}
    values = ["None"] * count
    for k, (slot, decode, width) in enumerate(plan):
        if mask >> k & 1:
            continue  # NULL: no bytes
        if slot >= 0:
            scope[f"d{k}"] = decode
            lines.append(f"    v{slot}, at = d{k}(b, at + {fixed})")
            values[slot], fixed = f"v{slot}", 0
        elif width > 0:
            fixed += width
        else:
            n = -width
            if n == 1:
                length = f"b[at + {fixed}]"
            elif n == 2:
                length = f"(b[at + {fixed}] | b[at + {fixed + 1}] << 8)"
            else:
                length = f"int.from_bytes(b[at + {fixed}:at + {fixed + n}], 'little')"
            lines.append(f"    at += {fixed + n} + {length}")
            fixed = 0
    if len(lines) > 64:  # very wide tables: the generic loop, not a huge function
        return lambda b, at: _key_values(b, at, plan, mask, count)
    result = "(" + "".join(v + ", " for v in values) + ")"
    source = "def read(b, at):\n" + "\n".join([*lines, f"    return {result}, at + {fixed}"]) + "\n"
    exec(source, scope)  # integers only
    return scope["read"]  # type: ignore[no-any-return]  # the function exec just defined


def _value(b: bytes, at: int, c: ColumnDef) -> tuple[Value, int]:
    t = c.type
    u = c.unsigned
    if t == T.TINY:
        return (b[at] if u else struct.unpack_from("<b", b, at)[0]), at + 1
    if t == T.SHORT:
        return struct.unpack_from("<H" if u else "<h", b, at)[0], at + 2
    if t == T.INT24:
        v = int.from_bytes(b[at : at + 3], "little", signed=not u)
        return v, at + 3
    if t == T.LONG:
        return struct.unpack_from("<I" if u else "<i", b, at)[0], at + 4
    if t == T.LONGLONG:
        return struct.unpack_from("<Q" if u else "<q", b, at)[0], at + 8
    if t == T.FLOAT:
        return struct.unpack_from("<f", b, at)[0], at + 4
    if t == T.DOUBLE:
        return struct.unpack_from("<d", b, at)[0], at + 8
    if t == T.YEAR:
        return (b[at] + 1900 if b[at] else 0), at + 1
    if t == T.NEWDECIMAL:
        size = _decimal_size(c.precision, c.decimals)
        return _decimal(b[at : at + size], c.precision, c.decimals), at + size
    if t in (T.DATE, T.NEWDATE):
        v = int.from_bytes(b[at : at + 3], "little")
        return f"{v >> 9:04d}-{(v >> 5) & 15:02d}-{v & 31:02d}", at + 3
    if t == T.DATETIME2:
        return _datetime2(b, at, c.fsp)
    if t == T.TIMESTAMP2:
        seconds = int.from_bytes(b[at : at + 4], "big")
        micro, end = _fraction(b, at + 4, c.fsp)
        return _epoch_text(seconds, micro), end
    if t == T.TIME2:
        return _time2(b, at, c.fsp)
    if t == T.DATETIME:  # pre-5.6 format: YYYYMMDDhhmmss as a number
        v = struct.unpack_from("<Q", b, at)[0]
        d, s = divmod(v, 1000000)
        day = f"{d // 10000:04d}-{d // 100 % 100:02d}-{d % 100:02d}"
        return f"{day} {s // 10000:02d}:{s // 100 % 100:02d}:{s % 100:02d}", at + 8
    if t == T.TIMESTAMP:
        return _epoch_text(struct.unpack_from("<I", b, at)[0], 0), at + 4
    if t == T.TIME:
        v = int.from_bytes(b[at : at + 3], "little", signed=True)
        sign = "-" if v < 0 else ""
        v = abs(v)
        return f"{sign}{v // 10000:02d}:{v // 100 % 100:02d}:{v % 100:02d}", at + 3
    if t == T.ENUM:
        index = int.from_bytes(b[at : at + c.size], "little")
        if c.enum_values:
            if index == 0:
                return "", at + c.size  # the empty string an invalid value became
            return (c.enum_values[index - 1] if index <= len(c.enum_values) else index), at + c.size
        return index, at + c.size
    if t == T.SET:
        mask = int.from_bytes(b[at : at + c.size], "little")
        if c.set_values:
            return ",".join(v for i, v in enumerate(c.set_values) if mask & (1 << i)), at + c.size
        return mask, at + c.size
    if t == T.BIT:
        size = (c.bits + 7) // 8
        return int.from_bytes(b[at : at + size], "big"), at + size
    width = value_width(c)
    if width >= 0:  # pragma: no cover - every fixed type is handled above
        raise RowsError(f"column type {t} not decoded")
    length = int.from_bytes(b[at : at - width], "little")
    start = at - width
    raw = b[start : start + length]
    if len(raw) < length:
        raise RowsError(f"a value of {c.name or c.index} runs past the end of its event")
    end = start + length
    if t == T.JSON:  # MySQL's binary JSON, as text (jsonb.py)
        return _mysql_json(raw), end
    if t == T.GEOMETRY:
        return bytes(raw), end
    if t == VECTOR:
        return _vector(raw, c.dimensions), end
    return decode_text(raw, c.charset), end


def _vector(raw: bytes, dimensions: int) -> list[float] | bytes:
    """A VECTOR: its float32 values (each exactly, as a Python float). The bytes where they are
    not such a vector: a length not a multiple of 4 or not the map's dimensionality, or a value
    that is not a finite number (MySQL stores none; JSON has no NaN)."""
    if len(raw) % 4 or (dimensions and len(raw) != 4 * dimensions):
        return bytes(raw)
    values = list(struct.unpack(f"<{len(raw) // 4}f", raw))
    if not all(math.isfinite(v) for v in values):
        return bytes(raw)
    return values


def _fraction(b: bytes, at: int, fsp: int) -> tuple[int, int]:
    size = (fsp + 1) // 2
    if not size:
        return 0, at
    v = int.from_bytes(b[at : at + size], "big")
    return v * (100 ** (3 - size)), at + size


def _datetime2(b: bytes, at: int, fsp: int) -> tuple[str, int]:
    packed = int.from_bytes(b[at : at + 5], "big") - 0x8000000000
    micro, end = _fraction(b, at + 5, fsp)
    ym, day = packed >> 22, (packed >> 17) & 31
    hms = packed & 0x1FFFF
    text = f"{ym // 13:04d}-{ym % 13:02d}-{day:02d} {hms >> 12:02d}:{(hms >> 6) & 63:02d}:{hms & 63:02d}"
    return text + (f".{micro:06d}" if micro else ""), end


def _time2(b: bytes, at: int, fsp: int) -> tuple[str, int]:
    """TIME2: the integer part and the fraction are stored as one signed big-endian number
    offset by 0x800000 << fraction bits; negative times are the two's complement."""
    size = (fsp + 1) // 2
    raw = int.from_bytes(b[at : at + 3 + size], "big")
    offset = 0x800000 << (8 * size)
    v = raw - offset
    sign = "-" if v < 0 else ""
    v = abs(v)
    frac = v & ((1 << (8 * size)) - 1) if size else 0
    whole = v >> (8 * size)
    micro = frac * (100 ** (3 - size)) if size else 0
    hours, minutes, seconds = whole >> 12, (whole >> 6) & 63, whole & 63
    text = f"{sign}{hours:02d}:{minutes:02d}:{seconds:02d}"
    return text + (f".{micro:06d}" if micro else ""), at + 3 + size


def _epoch_text(seconds: int, micro: int) -> str:
    """A TIMESTAMP, in UTC (the binlog stores seconds since the epoch; 0 is the zero date)."""
    if seconds == 0 and micro == 0:
        return "0000-00-00 00:00:00"
    days, rest = divmod(seconds, 86400)
    # Civil date from days since 1970-01-01 (no datetime: years past 9999 never occur here,
    # but a hostile value must not raise).
    from_epoch = days + 719468
    era = from_epoch // 146097
    doe = from_epoch - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    year = yoe + era * 400 + (month <= 2)
    text = f"{year:04d}-{month:02d}-{day:02d} {rest // 3600:02d}:{rest // 60 % 60:02d}:{rest % 60:02d}"
    return text + (f".{micro:06d}" if micro else "")


def _decimal(raw: bytes, precision: int, scale: int) -> Decimal:
    """MySQL's packed DECIMAL: groups of 9 digits in 4 bytes (fewer for the leftover
    digits), big-endian, sign in the top bit (inverted), negatives stored complemented."""
    if not raw:
        raise RowsError("empty DECIMAL")
    negative = not raw[0] & 0x80
    data = bytearray(raw)
    data[0] ^= 0x80
    if negative:
        data = bytearray(x ^ 0xFF for x in data)
    whole = precision - scale
    digits = []
    at = 0
    lead = _DIG2BYTES[whole % 9]
    if lead:
        digits.append(str(int.from_bytes(data[at : at + lead], "big")))
        at += lead
    for _ in range(whole // 9):
        digits.append(f"{int.from_bytes(data[at : at + 4], 'big'):09d}")
        at += 4
    int_part = "".join(digits).lstrip("0") or "0"
    frac = []
    for _ in range(scale // 9):
        frac.append(f"{int.from_bytes(data[at : at + 4], 'big'):09d}")
        at += 4
    tail = scale % 9
    if tail:
        frac.append(f"{int.from_bytes(data[at : at + _DIG2BYTES[tail]], 'big'):0{tail}d}")
    text = int_part + ("." + "".join(frac) if scale else "")
    return Decimal(("-" if negative else "") + text)


# MariaDB's latin1 is cp1252 with its five unassigned bytes mapped to the C1 controls of the
# same number (as ISO-8859-1 does): every byte is a character, round trip exact.
_CP1252_HOLES = (0x81, 0x8D, 0x8F, 0x90, 0x9D)
_LATIN1 = {i: bytes([i]).decode("cp1252") for i in range(0x80, 0xA0) if i not in _CP1252_HOLES}
_CODECS = {
    "utf8mb4": "utf-8", "utf8mb3": "utf-8", "utf8": "utf-8", "ascii": "ascii", "ucs2": "utf-16-be",
    "utf16": "utf-16-be", "utf16le": "utf-16-le", "utf32": "utf-32-be", "cp1250": "cp1250",
    "cp1251": "cp1251", "cp1256": "cp1256", "cp1257": "cp1257", "latin2": "iso8859-2",
    "latin5": "iso8859-9", "latin7": "iso8859-13", "greek": "iso8859-7", "hebrew": "iso8859-8",
    "koi8r": "koi8-r", "koi8u": "koi8-u", "sjis": "shift_jis", "cp932": "cp932", "ujis": "euc-jp",
    "eucjpms": "euc-jp", "gbk": "gbk", "gb2312": "gb2312", "gb18030": "gb18030", "big5": "big5",
    "euckr": "euc-kr", "tis620": "tis-620", "cp850": "cp850", "cp852": "cp852", "cp866": "cp866",
}  # fmt: skip


def decode_text(raw: bytes, charset: str | None) -> str | bytes:
    """Text in its column's charset; bytes when binary, unknown or not valid in it."""
    if charset == "binary":
        return bytes(raw)
    if charset == "latin1":
        return raw.decode("latin-1").translate(_LATIN1)
    codec = _CODECS.get(charset or "utf8mb4")
    if codec is None:
        return bytes(raw)
    try:
        return raw.decode(codec)
    except UnicodeDecodeError:
        return bytes(raw)


def encode_latin1(text: str) -> bytes:
    """The inverse of MariaDB latin1 decoding (tests and flashback checks)."""
    back = {v: k for k, v in _LATIN1.items()}
    return bytes(back.get(ch, ord(ch)) for ch in text)


def _mysql_json(raw: bytes) -> str | bytes:
    """MySQL's binary JSON as MySQL shows it (jsonb.py); bytes where it is not JSON."""
    try:
        return json_text(raw, _decimal)
    except (ValueError, IndexError, struct.error):  # hostile or unknown encoding: keep the bytes
        return bytes(raw)


BINARY_MARKER = "base64"


def json_value(value: Value) -> Any:
    """JSON-safe: numbers stay numbers, DECIMAL becomes its exact text, bytes become
    {"base64": ...} (the marker tells them from text)."""
    if isinstance(value, bytes):
        return {BINARY_MARKER: base64.b64encode(value).decode("ascii")}
    if isinstance(value, Decimal):
        return str(value)
    return value
