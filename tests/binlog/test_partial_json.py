"""Partial JSON updates (MySQL's binlog_row_value_options=PARTIAL_JSON) applied to the document.

The one public binlog with a PARTIAL_UPDATE_ROWS event found (json.binlog.000001, MySQL
8.0.22, tests/fixtures/binlog_mysql/PROVENANCE.md) was written under binlog_row_image=MINIMAL:
its before images hold only the key, so its diffs cannot be applied from the event alone, and
the row says so in its note. Its diffs are real MySQL bytes, though: spliced into the event with
the whole before image the previous UPDATE of the same file logged (what a server with
binlog_row_image=FULL writes before a diff), they give the after document, which the same
after image's generated column (`age INT AS (json_col->'$.age')`) confirms. The other
operations (INSERT and REMOVE, of members and array cells) are tested on diffs built from
MySQL's documented layout, since no public sample holds them.
"""

from __future__ import annotations

import contextlib
import struct
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from ingest.binlog.flashback import TableInfo, undo_row
from ingest.binlog.images import RowImage, event_images, table_map
from ingest.binlog.jsonb import (
    INSERT,
    REMOVE,
    REPLACE,
    JsonDiffError,
    apply_json_diff,
    json_document,
    json_dump,
    read_json_diff,
)
from ingest.binlog.payload import expanded
from ingest.binlog.reader import PARTIAL_UPDATE_ROWS, TABLE_MAP, UPDATE_ROWS_V2, Event, Format, read_events
from ingest.binlog.rows import RowsDecoder, _decimal, _partial_prefix, read_header
from ingest.binlog.tables import TableDef

SAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "binlog_mysql" / "json.binlog.000001"


def _events() -> tuple[Format, TableDef, list[Event]]:
    fmt, table, out = None, None, []
    with SAMPLE.open("rb") as f:
        for item in expanded(read_events(f)):
            if isinstance(item, Format):
                fmt = item
            elif isinstance(item, Event) and item.type == TABLE_MAP and fmt is not None:
                table = table_map(item, fmt)
            elif isinstance(item, Event) and item.type in (UPDATE_ROWS_V2, PARTIAL_UPDATE_ROWS):
                out.append(item)
    assert fmt is not None and table is not None
    return fmt, table, out


def test_a_diff_the_before_image_lacks_the_document_for_is_left_out_and_the_note_says_why() -> None:
    fmt, table, events = _events()
    partial = next(e for e in events if e.type == PARTIAL_UPDATE_ROWS)
    rows = list(event_images(partial, fmt, RowsDecoder(table), "update"))
    assert len(rows) == 6
    for row in rows:
        assert row.after is not None and "@2" not in row.after and not row.complete
        # What the diff was, from its own bytes; the generated column agrees with it.
        assert row.note == (
            "@2: partial JSON update not applied, the before image lacks the document"
            f" (binlog_row_image=MINIMAL): replace $.age {row.after['@4']}"
        )
        assert row.as_json()["note"] == row.note
        assert "binlog_row_image=MINIMAL" in undo_row(row, TableInfo(("@1",)))


def _spliced(fmt: Format, table: TableDef, update: Event, partial: Event) -> Event:
    """The partial event as binlog_row_image=FULL writes it: each row's before image whole
    (the after image the previous UPDATE logged for that row) and its after image with the key;
    the diffs, value options and the other values are the sample's own bytes."""
    decoder = RowsDecoder(table)
    keyed = decoder.keyed(update, fmt, (0,))
    assert keyed is not None
    starts = list(keyed)
    whole = {}
    for k, (_, new, _, after_at) in enumerate(starts):
        end = starts[k + 1][2] if k + 1 < len(starts) else len(update.body)
        assert new is not None
        whole[new[0]] = update.body[after_at:end]
    body, header = partial.body, read_header(partial, fmt)
    first = decoder._layout(header.present, header.columns, raw_json=True)
    assert header.present_after is not None
    second = decoder._layout(header.present_after, header.columns, raw_json=True)
    rows, at = [], header.rows_at
    while at < len(body):
        before, middle = first.decode(body, at)
        after_at, _ = _partial_prefix(body, middle, table, list(second.present))
        _, end = second.decode(body, after_at)
        key = struct.pack("<i", before[0])
        # Nulls (none) first, then the key, then the sample's after values.
        after = body[after_at : after_at + 1] + key + body[after_at + 1 : end]
        rows.append(whole[before[0]] + body[middle:after_at] + after)
        at = end
    bitmaps = header.rows_at - 2
    new_body = body[:bitmaps] + b"\x0f\x0f" + b"".join(rows)
    return partial._replace(body=new_body)


def test_the_samples_real_diffs_applied_to_whole_before_images_give_the_after_documents() -> None:
    fmt, table, events = _events()
    update = next(e for e in events if e.type == UPDATE_ROWS_V2)
    partial = next(e for e in events if e.type == PARTIAL_UPDATE_ROWS)
    rows = list(event_images(_spliced(fmt, table, update, partial), fmt, RowsDecoder(table), "update"))
    assert len(rows) == 6
    for row in rows:
        assert row.complete and not row.note and row.before and row.after
        assert row.after["@1"] == row.before["@1"] and row.after["@4"] == row.before["@4"] + 1
        old, new = f'"age": {row.before["@4"]}', f'"age": {row.after["@4"]}'
        assert old in row.before["@2"] and row.after["@2"] == row.before["@2"].replace(old, new)
        # The flashback of the row puts the whole document back.
        assert f"`@2` = '{row.before['@2']}'" in undo_row(row, TableInfo(("@1",)))


# -- the operations, on diffs built from the documented layout ---------------------------------


def _diff(*operations: tuple[int, str, bytes]) -> bytes:
    """Operations in MySQL's binary diff layout: operation, path (length-coded), and for
    REPLACE and INSERT the value (length-coded) in binary JSON."""
    out = b""
    for operation, path, value in operations:
        out += bytes([operation, len(path)]) + path.encode()
        if operation != REMOVE:
            out += bytes([len(value)]) + value
    return out


def _int16(n: int) -> bytes:
    return b"\x05" + struct.pack("<h", n)


def _string(text: str) -> bytes:
    data = text.encode()
    return b"\x0c" + bytes([len(data)]) + data


TRUE = b"\x04\x01"


def _applied(document: Any, diff: bytes) -> str:
    return json_dump(apply_json_diff(document, read_json_diff(diff, _decimal)))


def test_each_operation_changes_the_document_as_mysql_does() -> None:
    doc = {"a": 1, "tags": ["x", "y"], "nested": {"k": "v"}}
    fresh = lambda: {"a": 1, "tags": ["x", "y"], "nested": {"k": "v"}}  # noqa: E731
    assert (
        _applied(fresh(), _diff((REPLACE, "$.a", _int16(-7))))
        == '{"a": -7, "tags": ["x", "y"], "nested": {"k": "v"}}'
    )
    # A new member goes where MySQL keeps it: by key length, then bytes.
    assert _applied(fresh(), _diff((INSERT, "$.b", TRUE))) == (
        '{"a": 1, "b": true, "tags": ["x", "y"], "nested": {"k": "v"}}'
    )
    assert _applied(fresh(), _diff((INSERT, "$.tags[1]", _string("new")))) == (
        '{"a": 1, "tags": ["x", "new", "y"], "nested": {"k": "v"}}'
    )
    assert _applied(fresh(), _diff((INSERT, "$.tags[9]", _string("end")))) == (
        '{"a": 1, "tags": ["x", "y", "end"], "nested": {"k": "v"}}'
    )
    assert _applied(fresh(), _diff((REMOVE, "$.tags[0]", b""), (REMOVE, "$.nested", b""))) == (
        '{"a": 1, "tags": ["y"]}'
    )
    assert _applied(
        fresh(), _diff((REPLACE, '$."nested".k', _string("w")), (REPLACE, "$.tags[last]", TRUE))
    ) == ('{"a": 1, "tags": ["x", true], "nested": {"k": "w"}}')
    assert _applied(fresh(), _diff((REPLACE, "$", _string("whole")))) == '"whole"'
    assert doc == fresh()  # the operations worked on their own copies


@pytest.mark.parametrize(
    ("diff", "why"),
    [
        (_diff((REPLACE, "$.missing", TRUE)), "which the document has not"),
        (_diff((REMOVE, "$.tags[5]", b"")), "past the end"),
        (_diff((REPLACE, "$.*", TRUE)), "wildcard"),
        (_diff((REPLACE, "$.a.b", TRUE)), "does not lead into"),
        (_diff((INSERT, "$", TRUE)), "whole document"),
        (bytes([7, 1]) + b"$", "unknown JSON diff operation"),
        (_diff((REPLACE, "$.a", TRUE))[:-1], "runs past"),
    ],
)
def test_a_diff_that_does_not_fit_the_document_is_refused_with_its_reason(diff: bytes, why: str) -> None:
    with pytest.raises(JsonDiffError, match=why):
        apply_json_diff({"a": 1, "tags": ["x"]}, read_json_diff(diff, _decimal))


def test_a_document_read_as_values_prints_as_the_text_decoder_prints_it() -> None:
    """The document the diff is applied to is read by the same decoder as the text: with no
    operation, the after document is the before one to the byte (DECIMAL and all)."""
    fmt, table, events = _events()
    update = next(e for e in events if e.type == UPDATE_ROWS_V2)
    decoder = RowsDecoder(table)
    raw = decoder._layout(read_header(update, fmt).present, 4, raw_json=True)
    values, _ = raw.decode(update.body, read_header(update, fmt).rows_at)
    text = next(iter(decoder.rows(update, fmt)))[0]
    assert text is not None and json_dump(json_document(values[1], _decimal)) == text[1]
    assert json_dump({"d": Decimal("1.50"), "n": None, "f": 0.5}) == '{"d": 1.50, "n": null, "f": 0.5}'


def test_a_row_image_without_a_note_has_no_note_in_the_api() -> None:
    row = RowImage("db.t", "delete", {"id": 1}, None, True)
    assert "note" not in row.as_json()


@pytest.mark.django_db
def test_the_statement_page_says_why_a_partial_update_row_is_incomplete(investigator_client: Any) -> None:
    import io

    from django.core.management import call_command

    from ingest.models import BinlogChange

    call_command("ingest", str(SAMPLE), "--server", "partial", stdout=io.StringIO())
    change = BinlogChange.objects.filter(statement__transaction__server="partial", change="update").last()
    assert change is not None and change.rows == 6
    page = investigator_client.get(f"/binlog/statements/{change.statement_id}/").content.decode()
    notes = page.count("Incomplete: @2: partial JSON update not applied, the before image lacks the document")
    assert notes == 6 and "replace $.age 26" in page


def test_damaged_partial_update_rows_end_in_a_rows_error_or_a_note_never_another_error() -> None:
    from ingest.binlog.rows import RowsError

    fmt, table, events = _events()
    spliced = _spliced(fmt, table, next(e for e in events if e.type == UPDATE_ROWS_V2), events[-1])
    header_end = read_header(spliced, fmt).rows_at
    body = spliced.body
    for at in range(header_end, len(body)):
        for change in (0xFF, 0x01, 0x80):
            data = bytearray(body)
            data[at] ^= change
            with contextlib.suppress(RowsError):
                for row in event_images(
                    spliced._replace(body=bytes(data)), fmt, RowsDecoder(table), "update"
                ):
                    assert row.after is not None and ("@2" in row.after or row.note)  # never silent
        with contextlib.suppress(RowsError):
            list(event_images(spliced._replace(body=body[:at]), fmt, RowsDecoder(table), "update"))
