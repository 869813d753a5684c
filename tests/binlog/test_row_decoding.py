"""Decoding rows fast gives what decoding them plainly gives (issue 21, the table at T).

Each column's specialised decoder against the general one (`rows._value`) on every value of
every sample binlog (MariaDB scenes and the MySQL samples); rows read key first against the
same rows decoded whole; the table at T built key first against the same page built by
decoding every row; table maps decoded once per distinct map, the cache bounded.
"""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from ingest import binlog_join
from ingest.binlog import images, rows
from ingest.binlog.payload import expanded
from ingest.binlog.reader import (
    PARTIAL_UPDATE_ROWS,
    ROWS_CHANGE,
    TABLE_MAP,
    UPDATE_ROWS_V2,
    Event,
    Format,
    read_events,
)
from ingest.binlog.rows import RowsDecoder, _value, read_header
from ingest.binlog.tables import TableDef
from ingest.models import BinlogStatement

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SCENE = FIXTURES / "binlog_scene"
FILES = [
    *sorted(SCENE.glob("mariadb-*-mariadb-bin.*")),
    *sorted((FIXTURES / "attribution_scene").glob("mariadb-*-mariadb-bin.*")),
    *sorted(p for p in (FIXTURES / "binlog_mysql").iterdir() if p.suffix not in (".sql", ".md")),
]
TRUTH_FILE = SCENE / "truth.json"
TRUTH: dict[str, Any] = json.loads(TRUTH_FILE.read_text()) if TRUTH_FILE.exists() else {}


def _rows_events() -> list[tuple[Event, Format, TableDef]]:
    """Every rows event of the sample files, with its format and its table map."""
    out = []
    for path in FILES:
        maps: dict[int, TableDef] = {}
        fmt = None
        with path.open("rb") as f:
            for item in expanded(read_events(f)):
                if isinstance(item, Format):
                    fmt = item
                elif isinstance(item, Event) and item.type == TABLE_MAP and fmt is not None:
                    table = images.table_map(item, fmt)
                    maps[table.table_id] = table
                elif isinstance(item, Event) and item.type in ROWS_CHANGE and fmt is not None:
                    table_id = read_header(item, fmt).table_id
                    if table_id in maps:
                        out.append((item, fmt, maps[table_id]))
    return out


def _plain_image(body: bytes, at: int, table: TableDef, present: tuple[bool, ...]) -> tuple[list, int]:
    """One image decoded column by column through `_value` (the general decoder)."""
    count = sum(present)
    nulls = int.from_bytes(body[at : at + (count + 7) // 8], "little")
    at += (count + 7) // 8
    values: list = []
    k = 0
    for c, here in zip(table.columns, present, strict=True):
        if not here:
            values.append(None)
            continue
        null = nulls >> k & 1
        k += 1
        if null:
            values.append(None)
            continue
        value, at = _value(body, at, c)
        values.append(value)
    return values, at


def test_every_value_of_the_samples_decodes_as_the_general_decoder_decodes_it() -> None:
    events = [e for e in _rows_events() if e[0].type != PARTIAL_UPDATE_ROWS]
    types: set[int] = set()
    values = 0
    for event, fmt, table in events:
        header = read_header(event, fmt)
        first, second = RowsDecoder(table).layout(header)
        at = header.rows_at
        for before, after, _, _ in RowsDecoder(table).rows(event, fmt):
            plain, at = _plain_image(event.body, at, table, first.present)
            assert plain == (before if before is not None else after)
            if before is not None and after is not None:
                plain, at = _plain_image(event.body, at, table, second.present)
                assert plain == after
            values += len(plain)
            types |= {c.type for c in table.columns}
        assert at == len(event.body)
    assert len(events) > 100 and values > 1000
    assert {1, 3, 8, 15, 246, 252, 254, 18, 245} <= types  # TINY, LONG, LONGLONG, VARCHAR, DECIMAL, BLOB, ...


@pytest.mark.parametrize("generated", [256, 1, 0])  # key readers generated per bitmap, or the loop
def test_rows_read_key_first_have_the_keys_and_images_of_the_rows_decoded_whole(
    generated: int, monkeypatch: Any
) -> None:
    monkeypatch.setattr(rows, "MASKS_PER_LAYOUT", generated)
    checked = 0
    for event, fmt, table in _rows_events():
        if not table.primary_key:
            continue
        decoder = RowsDecoder(table)
        keyed = decoder.keyed(event, fmt, table.primary_key)
        whole = list(decoder.rows(event, fmt))
        if keyed is None:  # a partial JSON update (its diffs): decoded whole
            assert event.type == PARTIAL_UPDATE_ROWS
            continue
        for (old, new, before_at, after_at), (before, after, in_before, in_after) in zip(
            keyed, whole, strict=True
        ):
            for key, start, image, present, is_after in (
                (old, before_at, before, in_before, False),
                (new, after_at, after, in_after, True),
            ):
                if image is None:
                    assert key is None and start == -1
                    continue
                if before is not None and not all(present[i] for i in table.primary_key):
                    assert key == old  # a MINIMAL after image without the key: the key stays
                else:
                    assert key == tuple(image[i] for i in table.primary_key)
                assert keyed.image(start, is_after) == (image, present)
            checked += 1
    assert checked > 40


def test_a_minimal_update_whose_after_image_lacks_the_key_keeps_the_key_read_first() -> None:
    """json.binlog.000001's last UPDATE (binlog_row_image=MINIMAL) as an ordinary UPDATE_ROWS
    event: its before images (the key) and its after images' other columns (the generated
    `name` and `age`, without the JSON diff), the sample's own bytes."""
    path = FIXTURES / "binlog_mysql" / "json.binlog.000001"
    event, fmt, table = next(e for e in _rows_events() if e[0].type == PARTIAL_UPDATE_ROWS)
    assert path.exists()  # t(id INT PRIMARY KEY, json_col JSON, name ... AS, age ... AS): the key is @1
    decoder = RowsDecoder(table)
    header = read_header(event, fmt)
    assert header.present == b"\x01" and header.present_after == b"\x0e"  # key; json, name, age
    first = decoder._layout(header.present, 4, raw_json=True)
    second = decoder._layout(header.present_after, 4, raw_json=True)
    body, at, rows_out = event.body, header.rows_at, []
    while at < len(body):
        _, middle = first.decode(body, at)
        after_at, _ = rows._partial_prefix(body, middle, table, list(second.present))
        values, end = second.decode(body, after_at)
        name_at = after_at + 1 + 4 + len(values[1])  # past the null bitmap and the JSON diff
        rows_out.append(body[at:middle] + b"\x00" + body[name_at:end])
        at = end
    plain = event._replace(
        type=UPDATE_ROWS_V2, body=body[: header.rows_at - 1] + b"\x0c" + b"".join(rows_out)
    )
    keyed = decoder.keyed(plain, fmt, (0,))
    assert keyed is not None and not keyed.complete
    whole = list(decoder.rows(plain, fmt))
    assert len(whole) == 6
    for (old, new, _, after_at), (before, after, _, in_after) in zip(keyed, whole, strict=True):
        assert before is not None and after is not None
        assert old == new == (before[0],)  # the after image has no key: the row keeps its own
        assert keyed.image(after_at, True) == (after, in_after) and after[2] in ("Joe", "Sue", "Pete")


def test_a_table_map_is_decoded_once_and_the_cache_stays_bounded(monkeypatch: Any) -> None:
    calls: list[int] = []
    real = images.decode_table_map

    def counted(event: Event, fmt: Format) -> TableDef:
        calls.append(event.position)
        return real(event, fmt)

    monkeypatch.setattr(images, "decode_table_map", counted)
    monkeypatch.setattr(images, "_maps", {})
    monkeypatch.setattr(images, "_maps_bytes", [0])
    monkeypatch.setattr(images, "MAPS_MAX", 2)
    maps: list[tuple[Event, Format]] = []
    for path in FILES[:3]:  # the scene's three files
        with path.open("rb") as f:
            fmt = None
            for item in read_events(f):
                if isinstance(item, Format):
                    fmt = item
                elif isinstance(item, Event) and item.type == TABLE_MAP and fmt is not None:
                    maps.append((item, fmt))
    distinct = {m.body for m, _ in maps}
    assert len(maps) > len(distinct) > 2  # the same map again before every statement, and several
    first = [images.table_map(m, fmt) for m, fmt in maps[:2]]
    assert [images.table_map(m, fmt) for m, fmt in maps[:2]] == first
    assert len(calls) == len({m.body for m, _ in maps[:2]})  # once per distinct map
    for m, fmt in maps:
        images.table_map(m, fmt)
        assert len(images._maps) <= 2


# -- the table at T, key first or whole ---------------------------------------------------------


@pytest.fixture
def scene() -> None:
    if not TRUTH:
        pytest.skip("tests/fixtures/binlog_scene has no truth.json: run regenerate.py")
    call_command("ingest", *(str(SCENE / n) for n in TRUTH["files"]["binlog"]), "--server", "keyed",
                 stdout=io.StringIO())  # fmt: skip


def _pages(table: str, at: Any, size: int, server: str = "keyed") -> list[tuple]:
    from investigations.query.binlog_state import shown_image, table_at

    out, cursor = [], None
    while True:
        page = table_at(server, table, at, cursor=cursor, size=size)
        assert not page.error
        rows = [(r.key, shown_image(r.image), r.ref, r.complete) for r in page.rows]
        out.append((rows, page.decoded, page.incomplete_images, page.key_columns, page.columns, page.files))
        if not page.next_cursor:
            return out
        cursor = page.next_cursor


@pytest.mark.django_db
@pytest.mark.parametrize("table", ["crime.orders", "crime.files", "crime.ledger"])
def test_the_table_at_t_read_key_first_is_the_page_every_row_decoded_whole_gives(
    scene: None, table: str, monkeypatch: Any
) -> None:
    times = sorted(
        BinlogStatement.objects.filter(transaction__server="keyed").values_list(
            "transaction__commit_time", flat=True
        )
    )
    moments = [times[0], times[len(times) // 2], times[-1]]
    for size in (1, 3, 100):
        fast = [_pages(table, at, size) for at in moments]
        with monkeypatch.context() as m:
            m.setattr(RowsDecoder, "keyed", lambda self, event, fmt, key: None)  # every row whole
            whole = [_pages(table, at, size) for at in moments]
        assert fast == whole
        assert any(rows for pages in fast for rows, *_ in pages)


@pytest.mark.django_db
def test_binlogs_whose_statements_fill_several_join_windows_are_joined_to_the_last(
    monkeypatch: Any,
) -> None:
    """The join cuts its windows every WINDOW_STATEMENTS statements: the window that ends the
    list is joined too (it once looked past the list's end)."""
    if not TRUTH:
        pytest.skip("tests/fixtures/binlog_scene has no truth.json: run regenerate.py")
    monkeypatch.setattr(binlog_join, "WINDOW_STATEMENTS", 2)
    monkeypatch.setattr(binlog_join, "WINDOW_SPAN", timedelta(0))  # a window of each second
    call_command("ingest", *(str(SCENE / n) for n in TRUTH["files"]["binlog"]), "--server", "windows",
                 stdout=io.StringIO())  # fmt: skip
    statements = BinlogStatement.objects.filter(transaction__server="windows")
    assert statements.count() > 4
    assert not statements.filter(confidence="").exists()  # every one looked at by the join


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("sample", "key_known"),
    # The first two carry no key in their table maps (binlog_row_metadata=MINIMAL) and none is
    # found in a CREATE TABLE: their rows are identified by every column, decoded whole.
    [("json.binlog.000001", False), ("minimal_row_metadata.000001", False), ("01-basic-crud.binlog", True)],
)
def test_the_table_at_t_of_mysql_samples_read_key_first_is_the_page_decoded_whole(
    sample: str, key_known: bool, monkeypatch: Any
) -> None:
    from ingest.models import BinlogChange

    call_command(
        "ingest", str(FIXTURES / "binlog_mysql" / sample), "--server", "keyed-mysql", stdout=io.StringIO()
    )
    changes = BinlogChange.objects.filter(statement__transaction__server="keyed-mysql")
    tables = sorted(set(changes.values_list("table", flat=True)))
    times = sorted(set(changes.values_list("statement__transaction__commit_time", flat=True)))
    assert tables and times
    compared, used = 0, []
    real = RowsDecoder.keyed

    def counted(self: RowsDecoder, event: Event, fmt: Format, key: tuple[int, ...]) -> Any:
        found = real(self, event, fmt, key)
        used.append(found is not None)
        return found

    for table in tables:
        for at in times:
            with monkeypatch.context() as m:
                m.setattr(RowsDecoder, "keyed", counted)
                fast = _pages(table, at, 2, server="keyed-mysql")
            with monkeypatch.context() as m:
                m.setattr(RowsDecoder, "keyed", lambda self, event, fmt, key: None)
                assert _pages(table, at, 2, server="keyed-mysql") == fast
            compared += sum(len(rows) for rows, *_ in fast)
    assert compared and any(used) == key_known  # where a key is known, it is read first


def test_decoders_of_the_same_columns_share_their_generated_key_readers(monkeypatch: Any) -> None:
    """A page makes its decoders afresh: the key readers generated for a layout are kept for
    the process (bounded), so a long-running worker keeps generating none for pages it has met."""
    monkeypatch.setattr(rows, "_key_functions", {})
    events = [e for e in _rows_events() if e[2].primary_key and e[0].type != PARTIAL_UPDATE_ROWS][:30]

    def read_all() -> list:
        out = []
        for event, fmt, table in events:
            keyed = RowsDecoder(table).keyed(event, fmt, table.primary_key)
            out.append(list(keyed) if keyed is not None else None)
        return out

    first = read_all()
    made = len(rows._key_functions)
    assert made and read_all() == first and len(rows._key_functions) == made
    monkeypatch.setattr(rows, "MASKS_MAX", 1)  # the bound: emptied when full, never refused
    monkeypatch.setattr(rows, "_key_functions", {})
    assert read_all() == first and len(rows._key_functions) <= 1


@pytest.mark.django_db
def test_a_join_window_of_busy_seconds_owns_several_unless_its_reads_pass_the_bound(monkeypatch: Any) -> None:
    """Issue 21: a window cut at each busy second read two seconds each side too (every
    statement joined about five times); a window now owns WINDOW_SPAN seconds, unless what it
    reads with its padding reaches WINDOW_MOST."""
    t0 = datetime(2026, 11, 25, 7, 35, 2, tzinfo=UTC)
    times = [t0 + timedelta(seconds=s) for s in (0, 0, 0, 1, 1, 1, 2, 2, 2, 5, 5, 5)]
    windows: list[tuple[datetime, datetime]] = []

    def seen(server: str, lo: datetime, hi: datetime, boots: Any, server_id: Any) -> set[int]:
        windows.append((lo, hi))
        return {n for n, t in enumerate(times) if lo <= t <= hi}

    monkeypatch.setattr(binlog_join, "_join_window", seen)
    monkeypatch.setattr(binlog_join, "WINDOW_STATEMENTS", 2)
    pad = binlog_join.PAD
    assert binlog_join._padding(times, 3, 6) == 6  # the seconds 0 and 2 around second 1
    assert binlog_join._join_times("nowhere", times) == len(times)
    # Each second has enough statements, but not 4 s: one window owns them all.
    assert windows == [(t0 - pad, times[-1] + pad)]
    windows.clear()
    monkeypatch.setattr(binlog_join, "WINDOW_MOST", 9)  # second 0: 3 of its own, 6 within 2 s after
    assert binlog_join._join_times("nowhere", times) == len(times)
    assert windows[0] == (t0 - pad, t0 + pad)  # cut after its first second
    assert len(windows) > 1
