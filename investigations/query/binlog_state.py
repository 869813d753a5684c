"""A table as it was at a moment T, rebuilt from the binary log's row images.

For each row (by primary key; by every column where the table has none) that any binlog change
of the table touched, its state at T is the after image of its last change at or before T, else
the before image of its first change after T: absent when that first change is an INSERT, or
when the last change at or before T is a DELETE. An UPDATE that changes the key (always, for a
table without one) is the old row's delete and the new row's insert. Rows no binlog change
touched are not known from the binlog at all.

Bounded: the changes are decoded in commit order, one at a time, from the binlog files; only the
rows of the page asked for are kept. Rows are paged in key order, and a page keeps at most its
size plus one rows: a row whose key is beyond the page's largest once the page is full can never
come back into it (the largest only shrinks), so what it was is not needed. Memory is one page;
time is every row change of the table, up to MAX_DECODED (beyond, the page says it stopped).
"""

from __future__ import annotations

import base64
import binascii
import bisect
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any, BinaryIO

from ingest.binlog.flashback import table_info
from ingest.binlog.images import RowImage, event_images, named_table, table_map
from ingest.binlog.payload import read_event
from ingest.binlog.reader import BinlogError, Event, Format, read_format
from ingest.binlog.rows import KeyedRows, RowsDecoder, RowsError, Value, json_value
from ingest.binlog.schema import TableSchema
from ingest.binlog.tables import TableDef, TableMapError
from ingest.binlog_store import open_binlog
from ingest.models import BinlogChange, BinlogFile, BinlogStatement
from investigations.query.binlog import create_table_schema

STATE_PAGE = 100  # rows a page of the table at T shows
# Row changes decoded for one page (about 3.5 CPU s here: docs/benchmarks.md); beyond, it says it stopped.
MAX_DECODED = 1_000_000
CHANGE_ORDER = (
    "statement__transaction__commit_time",
    "statement__transaction__file_name",
    "statement__transaction__start",
    "statement__index",
    "id",
)

SortKey = tuple[tuple[int, Any], ...]


class BadStateCursor(ValueError):
    """A page cursor AuditWeb did not give out."""


def _part(value: Value) -> tuple[int, Any]:
    """One key column as something every other value of the column compares with."""
    if value is None:
        return (-1, 0)
    if isinstance(value, bool):
        return (0, Decimal(int(value)))
    if isinstance(value, int):  # ints and Decimals compare, hash and print alike: no conversion
        return (0, value)
    if isinstance(value, Decimal):
        return (0, value)
    if isinstance(value, float):
        return (0, Decimal(repr(value))) if value == value else (3, "nan")
    if isinstance(value, bytes):
        return (2, value)
    return (1, value) if isinstance(value, str) else (3, str(value))


def encode_cursor(key: SortKey) -> str:
    parts = [[tag, v.hex() if isinstance(v, bytes) else str(v)] for tag, v in key]
    return base64.urlsafe_b64encode(json.dumps(parts).encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> SortKey:
    if len(cursor) > 20_000:  # a link from a page: a key of at most a few columns
        raise BadStateCursor("This page link is not one AuditWeb gave out: start again from the first page.")
    try:
        parts = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        if not isinstance(parts, list) or len(parts) > 1000:
            raise ValueError("not a cursor")
        out: list[tuple[int, Any]] = []
        for tag, text in parts:
            if not isinstance(tag, int) or not isinstance(text, str):
                raise ValueError("not a cursor")
            if tag == -1:
                out.append((-1, 0))
            elif tag == 0:
                out.append((0, Decimal(text)))
            elif tag == 2:
                out.append((2, bytes.fromhex(text)))
            elif tag in (1, 3):
                out.append((tag, text))
            else:
                raise ValueError("not a cursor")
        return tuple(out)
    except (binascii.Error, ValueError, TypeError, InvalidOperation, RecursionError, UnicodeDecodeError) as e:
        raise BadStateCursor(
            "This page link is not one AuditWeb gave out: start again from the first page."
        ) from e


@dataclass(frozen=True)
class ChangeRef:
    """The row change that decided a row's state: its statement and when it committed."""

    statement_id: int
    change: str  # insert, update, delete
    committed_at: datetime


@dataclass
class RowState:
    key: SortKey
    last: tuple[dict[str, Value] | None, ChangeRef, bool] | None = None  # at or before T
    first_after: tuple[dict[str, Value] | None, ChangeRef, bool] | None = None  # after T

    @property
    def decided_by_last(self) -> bool:
        return self.last is not None

    @property
    def image(self) -> dict[str, Value] | None:
        """The row at T, or None: not in the table then."""
        chosen = self.last or self.first_after
        assert chosen is not None
        return chosen[0]

    @property
    def complete(self) -> bool:
        chosen = self.last or self.first_after
        assert chosen is not None
        return chosen[2]

    @property
    def ref(self) -> ChangeRef:
        chosen = self.last or self.first_after
        assert chosen is not None
        return chosen[1]


@dataclass
class StatePage:
    rows: list[RowState]
    next_cursor: str | None
    decoded: int  # row changes read for this page
    stopped: bool  # MAX_DECODED reached: rows beyond what was read are not known
    incomplete_images: int  # images lacking columns (binlog_row_image MINIMAL or NOBLOB)
    files: list[str]  # the binlog files the changes came from
    key_columns: list[str]
    error: str | None = None
    columns: list[str] = field(default_factory=list)


def _split(row: RowImage, key_of: _KeyOf) -> Iterator[tuple[SortKey, str, dict | None, dict | None]]:
    """(key, change, image before, image after) for each row identity the change touches."""
    if row.change == "update" and row.before is not None and row.after is not None:
        old = key_of(row.before)
        # Under binlog_row_image=MINIMAL an after image holds only the columns set: without the
        # key columns, the key did not change.
        new = key_of(row.after) if row.complete or key_of.holds_key(row.after) else old
        if old == new:
            yield old, "update", row.before, row.after
            return
        yield old, "update", row.before, None  # the old key is gone
        yield new, "update", None, row.after  # the new one appears
        return
    image = row.before if row.change == "delete" else row.after
    if image is not None:
        yield key_of(image), row.change, row.before, row.after


class _Page:
    """The rows of one page, kept as the changes stream by (see the module's docstring)."""

    def __init__(self, after: SortKey | None, size: int) -> None:
        self.after, self.size = after, size
        self.keys: list[SortKey] = []  # sorted
        self.rows: dict[SortKey, RowState] = {}

    def get(self, key: SortKey) -> RowState | None:
        if self.after is not None and key <= self.after:
            return None
        found = self.rows.get(key)
        if found is not None:
            return found
        if len(self.keys) > self.size:
            if key >= self.keys[-1]:
                return None
            del self.rows[self.keys.pop()]
        bisect.insort(self.keys, key)
        self.rows[key] = RowState(key)
        return self.rows[key]


def table_at(
    server: str, table: str, at: datetime, *, cursor: str | None = None, size: int = STATE_PAGE
) -> StatePage:
    """One page (in key order, after `cursor`) of the rows the binlog changed in `table` on
    `server`, as they were at `at`.

    1. The table's changes stream in commit order as plain tuples (no model instances: a table
       can have millions of small ones).
    2. For each rows event, only the key columns of each row are decoded (`RowsDecoder.keyed`); the
       page says whether it keeps that key, and only then is the image it needs decoded whole.
       Most rows of a long history are never on the page, so most values are never decoded.
    3. Events whose rows cannot be read key first (a partial JSON update, a first image lacking a
       key column, a table without a known key) are decoded whole, as `images.row_images` does.
    """
    after = decode_cursor(cursor) if cursor else None
    page = _Page(after, size)
    changes = (
        BinlogChange.objects.filter(table=table, statement__transaction__server=server)
        .order_by(*CHANGE_ORDER)
        .values_list(
            "statement_id", "change", "table_map_position", "positions",
            "statement__transaction__commit_time", "statement__transaction__file_id",
            "statement__transaction__file__name", "statement__transaction__file__source_file__path",
        )
    )  # fmt: skip
    schema = create_table_schema(server, table)
    walk = _Walk(page, at)
    files: list[str] = []
    stopped = False
    error = None
    opened: tuple[int, BinaryIO, Format] | None = None
    maps: dict[bytes, _Map] = {}
    try:
        for statement_id, kind, map_position, positions, committed, file_id, name, path in changes.iterator(
            chunk_size=2000
        ):
            if opened is None or opened[0] != file_id:
                if opened is not None:
                    opened[1].close()
                stream = open_binlog(path)
                opened = (file_id, stream, read_format(stream))
                files.append(name)
            _, stream, fmt = opened
            # Each transaction writes its own table map, mostly the same bytes: named once per
            # distinct body (and decoded once per process: images.table_map).
            map_event = read_event(stream, map_position, fmt)
            mapped = maps.get(map_event.body)
            if mapped is None:
                if len(maps) >= 1_000:  # bounded: a table's maps differ only when it is altered
                    maps.clear()
                mapped = maps[map_event.body] = _Map(named_table(table_map(map_event, fmt), schema), schema)
            walk.columns = walk.columns or mapped.columns
            walk.key_columns = mapped.key_of.key_columns
            ref = ChangeRef(statement_id, kind, committed)
            for position in positions:
                event = read_event(stream, position, fmt)
                if event.type not in ROWS_EVENTS:
                    raise BinlogError(f"no rows event at {position}")
                if not walk.event(event, fmt, mapped, ref, committed <= at):
                    stopped = True
                    break
            if stopped:
                break
    except (OSError, BinlogError, RowsError, TableMapError) as e:
        error = f"A binlog file cannot be read: {e}"
    finally:
        if opened is not None:
            opened[1].close()
    shown = [page.rows[k] for k in page.keys[:size]]
    more = len(page.keys) > size
    return StatePage(
        rows=shown,
        next_cursor=encode_cursor(shown[-1].key) if more and shown else None,
        decoded=walk.decoded,
        stopped=stopped,
        incomplete_images=walk.incomplete,
        files=files,
        key_columns=walk.key_columns,
        error=error,
        columns=walk.columns,
    )


ROWS_EVENTS = frozenset((23, 24, 25, 30, 31, 32, 39))


class _Map:
    """What a page needs of one table map: the table named, its columns, and its key."""

    def __init__(self, named: TableDef, schema: TableSchema | None) -> None:
        self.decoder = RowsDecoder(named)
        self.names = [c.name or f"@{c.index + 1}" for c in named.columns]
        self.columns = list(self.names)
        self.key_of = _KeyOf(list(table_info(named, schema).primary_key))
        # Key first only where the images' dicts hold the key under the key's names.
        unique = len(set(self.names)) == len(self.names)
        self.key = tuple(named.primary_key) if unique and self.key_of.key_columns else ()


def _image(keyed: KeyedRows, names: list[str], at: int, after: bool) -> dict[str, Value] | None:
    """A kept row's image whole, as `images.row_images` gives it (None: the event has none)."""
    if at < 0:
        return None
    values, present = keyed.image(at, after)
    return {n: v for n, v, here in zip(names, values, present, strict=True) if here}


class _Walk:
    """The row changes of a page, event by event, into the page (see `table_at`)."""

    def __init__(self, page: _Page, at: datetime) -> None:
        self.page, self.at = page, at
        self.decoded = self.incomplete = 0
        self.columns: list[str] = []
        self.key_columns: list[str] = []

    def event(self, event: Event, fmt: Format, mapped: _Map, ref: ChangeRef, before_t: bool) -> bool:
        """Take in the rows of one rows event; False once MAX_DECODED rows are read."""
        keyed = mapped.decoder.keyed(event, fmt, mapped.key)
        if keyed is None:
            return self._whole(event, fmt, mapped, ref, before_t)
        complete, page, kind = keyed.complete, self.page, ref.change
        for old, new, before_at, after_at in keyed:
            self.decoded += 1
            self.incomplete += not complete
            # As `_split` does with whole images.
            if kind == "update" and old is not None and new is not None:
                old_key = tuple(map(_part, old))
                new_key = old_key if old == new else tuple(map(_part, new))  # mostly the same key
                if old_key == new_key:
                    parts = [(old_key, before_at, after_at)]
                else:  # the old key is gone, the new one appears
                    parts = [(old_key, before_at, -1), (new_key, -1, after_at)]
            else:
                one = old if kind == "delete" else new
                parts = [] if one is None else [(tuple(map(_part, one)), before_at, after_at)]
            for key, b_at, a_at in parts:
                state = page.get(key)
                if state is None:
                    continue
                if before_t:
                    state.last = (_image(keyed, mapped.names, a_at, True), ref, complete)
                elif state.first_after is None:
                    state.first_after = (_image(keyed, mapped.names, b_at, False), ref, complete)
            if self.decoded >= MAX_DECODED:
                return False
        return True

    def _whole(self, event: Event, fmt: Format, mapped: _Map, ref: ChangeRef, before_t: bool) -> bool:
        """The rows of an event decoded whole (as `images.row_images` gives them)."""
        for row in event_images(event, fmt, mapped.decoder, ref.change):
            self.decoded += 1
            self.incomplete += not row.complete
            for key, kind, before, after_image in _split(row, mapped.key_of):
                state = self.page.get(key)
                if state is None:
                    continue
                kref = ChangeRef(ref.statement_id, kind, ref.committed_at)
                if before_t:
                    state.last = (after_image, kref, row.complete)
                elif state.first_after is None:
                    state.first_after = (before, kref, row.complete)
            if self.decoded >= MAX_DECODED:
                return False
        return True


class _KeyOf:
    """A row's identity: its primary key's values, or every column's where there is no key (or
    the image lacks a key column)."""

    def __init__(self, key_columns: list[str]) -> None:
        self.key_columns = key_columns

    def holds_key(self, image: dict[str, Value]) -> bool:
        return bool(self.key_columns) and all(k in image for k in self.key_columns)

    def __call__(self, image: dict[str, Value]) -> SortKey:
        if self.holds_key(image):
            return tuple(_part(image[k]) for k in self.key_columns)
        return tuple(_part(v) for v in image.values())


def shown_image(image: dict[str, Value] | None) -> dict[str, Any] | None:
    """The image with JSON-safe values (as the API gives them)."""
    return None if image is None else {k: json_value(v) for k, v in image.items()}


# mariadb-bin.000001: a base name and a sequence number (what the server counts up).
BINLOG_NUMBERED = re.compile(r"(?P<base>.{1,200})\.(?P<number>[0-9]{1,9})")


def binlog_gaps(server: str) -> list[str]:
    """Binlog files of the server missing between the first and the last stored (by number)."""
    numbers: dict[str, set[int]] = {}
    for name in BinlogFile.objects.filter(server=server).values_list("name", flat=True):
        m = BINLOG_NUMBERED.fullmatch(name)
        if m:
            numbers.setdefault(m["base"], set()).add(int(m["number"]))
    missing = []
    for base, seen in sorted(numbers.items()):
        width = 6
        for n in range(min(seen), max(seen) + 1):
            if n not in seen:
                missing.append(f"{base}.{n:0{width}d}")
            if len(missing) >= 50:
                return missing
    return missing


def servers_of(table: str) -> list[str]:
    """The servers whose binlogs changed rows of the table."""
    return sorted(
        set(
            BinlogChange.objects.filter(table=table)
            .values_list("statement__transaction__server", flat=True)
            .distinct()
        )
    )


def statements_by_id(ids: set[int]) -> dict[int, BinlogStatement]:
    found = BinlogStatement.objects.filter(pk__in=ids).select_related("transaction")
    return {s.pk: s for s in found}
