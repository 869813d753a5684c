"""The metadata pass's fast paths give what the plain ones give (issue 21, speed).

The framing reads the file a chunk at a time: any chunk size must frame the same events. Row
counting runs generated code per null bitmap: its counts must equal the rows the decoder (a
separate, column-by-column path) finds in every rows event of the scene, including bitmaps
past the inlined ones and past the generated ones. And the rows pages are cached: an entry
is read back, and with the cache unreachable pages are still decoded.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.test import override_settings

from ingest.binlog import reader, rows
from ingest.binlog.metadata import scan
from ingest.binlog.reader import ROWS_CHANGE, TABLE_MAP, Event, Format, read_events
from ingest.binlog.rows import RowsError, count_rows, decode_rows, read_header, widths
from ingest.binlog.tables import decode_table_map

SCENE = Path(__file__).resolve().parents[1] / "fixtures" / "binlog_scene"
FILES = sorted(SCENE.glob("mariadb-*-mariadb-bin.*"))
# Both scenes' binlogs: more tables, layouts and NULLs for the row walk.
ALL_FILES = FILES + sorted((SCENE.parent / "attribution_scene").glob("mariadb-*-mariadb-bin.*"))
needs_files = pytest.mark.skipif(
    not FILES, reason="tests/fixtures/binlog_scene has no binlogs: run regenerate.py"
)


def _rows_events(path: Path) -> list[tuple[Event, Format, Any]]:
    """Every rows event of a file with its format and decoded table map."""
    out, maps, fmt = [], {}, None
    with path.open("rb") as f:
        for item in read_events(f):
            if isinstance(item, Format):
                fmt = item
            elif isinstance(item, Event) and item.type == TABLE_MAP:
                table = decode_table_map(item, fmt)
                maps[table.table_id] = table
            elif isinstance(item, Event) and item.type in ROWS_CHANGE:
                out.append((item, fmt, maps[read_header(item, fmt).table_id]))
    return out


@needs_files
@pytest.mark.parametrize("chunk", [1, 19, 23, 997, 1 << 20])
def test_any_read_size_frames_the_same_transactions(chunk: int, monkeypatch: Any) -> None:
    expected = [[repr(x) for x in scan(f.open("rb"), f.name)] for f in FILES]
    monkeypatch.setattr(reader, "CHUNK", chunk)
    assert [[repr(x) for x in scan(f.open("rb"), f.name)] for f in FILES] == expected


@needs_files
@pytest.mark.parametrize(
    ("inline", "generated", "total"),
    [(2, 256, 20_000), (0, 256, 20_000), (0, 0, 20_000), (1, 1, 20_000), (2, 256, 3)],
)
def test_counted_rows_are_the_decoded_rows_of_every_rows_event(
    inline: int, generated: int, total: int, monkeypatch: Any
) -> None:
    monkeypatch.setattr(rows, "INLINE_MASKS", inline)
    monkeypatch.setattr(rows, "MASKS_PER_LAYOUT", generated)
    monkeypatch.setattr(rows, "MASKS_MAX", total)  # few in all: the generic loop past them
    monkeypatch.setattr(rows, "_counters", {})  # counters made under these settings only
    monkeypatch.setattr(rows, "_made", [0])
    events = [e for f in ALL_FILES for e in _rows_events(f)]
    nulls = 0
    for event, fmt, table in events:
        decoded = list(decode_rows(event, fmt, table))
        assert count_rows(event.body, read_header(event, fmt), widths(table)) == len(decoded)
        nulls += sum(v is None for before, after, _, _ in decoded for v in (before or []) + (after or []))
    assert len(events) > 25 and nulls  # the scene has rows events enough, with NULLs among them


@needs_files
def test_a_rows_event_cut_or_padded_is_an_error_not_a_wrong_count() -> None:
    event, fmt, table = next(e for e in _rows_events(FILES[0]) if len(e[0].body) > 40)
    header = read_header(event, fmt)
    for body in (event.body[:-1], event.body[:-7], event.body + b"\x00"):
        with pytest.raises(RowsError):
            count_rows(body, header, widths(table))


@needs_files
def test_rows_without_any_column_present_end_in_an_error_never_a_hang() -> None:
    event, fmt, table = _rows_events(FILES[0])[0]
    header = read_header(event, fmt)
    blank = bytes(len(header.present))
    at = header.rows_at - len(header.present) * (2 if header.present_after is not None else 1)
    body = event.body[:at] + blank + (blank if header.present_after is not None else b"") + b"\x00" * 8
    with pytest.raises(RowsError):
        count_rows(body, read_header(Event(**{**_fields(event), "body": body}), fmt), widths(table))
    with pytest.raises(RowsError):
        list(decode_rows(Event(**{**_fields(event), "body": body}), fmt, table))


def _fields(event: Event) -> dict[str, Any]:
    return event._asdict()


# -- the rows cache -----------------------------------------------------------------------

TRUTH_FILE = SCENE / "truth.json"
TRUTH: dict[str, Any] = json.loads(TRUTH_FILE.read_text()) if TRUTH_FILE.exists() else {}


@pytest.fixture
def stored() -> Any:
    if not TRUTH:
        pytest.skip("tests/fixtures/binlog_scene has no truth.json: run regenerate.py")
    call_command("ingest", *(str(SCENE / n) for n in TRUTH["files"]["binlog"]), "--server", "cache-scene",
                 stdout=io.StringIO())  # fmt: skip
    from ingest.models import BinlogStatement

    return (
        BinlogStatement.objects.filter(transaction__server="cache-scene", rows__gte=2)
        .select_related("transaction__file__source_file")
        .order_by("id")
        .first()
    )


@pytest.mark.django_db
def test_a_page_of_rows_is_kept_and_read_back_from_the_cache(stored: Any) -> None:
    from django.core.cache import caches

    from investigations.query import binlog as q
    from investigations.query.rows_cache import CACHE, slice_key

    first = q.rows_page([stored], offset=0, limit=2).rows
    change = q._changes(stored)[0]
    schema = q.create_table_schema(stored.transaction.file.server, change.table)
    key = slice_key(stored.transaction.file.source_file, change, schema, 0, 2)
    try:
        assert json.loads(caches[CACHE].get(key)) == first
        marked = [{**first[0], "table": "from.the_cache"}, first[1]]
        caches[CACHE].set(key, json.dumps(marked))
        assert q.rows_page([stored], offset=0, limit=2).rows == marked
        # Another slice of the same rows is another entry: decoded from the file.
        assert q.rows_page([stored], offset=1, limit=1).rows == first[1:]
    finally:
        caches[CACHE].delete(key)


@pytest.mark.django_db
def test_with_the_cache_unreachable_rows_are_decoded_all_the_same(stored: Any) -> None:
    from django.conf import settings
    from django.core.cache import caches

    from investigations.query import binlog as q
    from investigations.query.rows_cache import CACHE

    expected = q.rows_page([stored], offset=0, limit=2).rows
    dead = {**settings.CACHES[CACHE], "LOCATION": "redis://127.0.0.1:9/0"}  # the discard port
    with override_settings(CACHES={**settings.CACHES, CACHE: dead}):  # caches are made again
        with pytest.raises(Exception):  # noqa: B017 (whatever redis-py raises: it is down)
            caches[CACHE].get("any")
        assert q.rows_page([stored], offset=0, limit=2).rows == expected
