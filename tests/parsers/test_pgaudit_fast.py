"""The pgAudit path's fast paths (issue 23) read what the slow ones read: the parser's split of
AUDIT messages, the plain shape of a statement, the verdicts and fingerprints kept by it."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ingest.dialects import postgres as rules
from ingest.dialects.postgres import masked_shape, plain_shape, shape
from ingest.parsers import pgaudit, pgaudit_csv
from ingest.parsers.pgaudit import _split_entry, parse_entry
from ingest.parsers.records import LogRecord, csv_records
from ingest.postgres import _judged, clear_cache
from ingest.sql import fingerprint

# AUDIT messages are built of these: field separators, quotes, line ends and ordinary text.
_PIECES = st.sampled_from(
    [",", '"', '""', "\n", "\r", "SESSION", "OBJECT", "1", "2", "WRITE", "UPDATE", "TABLE", "shop.orders",
     "<not logged>", "<none>", "a b", "'x'", "\x00", "é", " "]
)  # fmt: skip


def _by_csv(body: str) -> list[str] | None:
    try:
        return next(csv.reader((body,), strict=True))
    except (csv.Error, StopIteration):
        return None


@settings(max_examples=3000, deadline=None)
@given(st.lists(_PIECES, max_size=30).map("".join))
def test_it_splits_every_message_as_the_csv_module_or_leaves_it_to_it(body: str) -> None:
    fields = _split_entry(body)
    if fields is not None:
        assert fields == _by_csv(body)
    assert _split_entry("AUDIT: " + body, 7) == fields  # (as parse_entry reads it: in place)


@settings(max_examples=500, deadline=None)
@given(
    st.lists(st.sampled_from(["UPDATE t SET a = 1", ",", '"', "\n", "x"]), max_size=8).map("".join),
    st.sampled_from(["<not logged>", "<none>", '"1,2"', "a"]),
    st.sampled_from(["", ",3", ",x"]),
)
def test_it_reads_a_quoted_statement_like_the_csv_module(statement: str, parameter: str, rows: str) -> None:
    quoted = '"' + statement.replace('"', '""') + '"'
    body = f"SESSION,4,1,WRITE,UPDATE,TABLE,shop.orders,{quoted},{parameter}{rows}"
    fields = _split_entry(body)
    assert fields is not None or '"' in parameter
    assert (fields or _by_csv(body)) == _by_csv(body)
    entry = parse_entry("AUDIT: " + body)
    assert entry is not None
    assert entry.statement == statement
    assert entry.object_name == "shop.orders"


def test_it_splits_the_usual_entries_without_the_csv_module() -> None:
    plain = "SESSION,9,1,WRITE,UPDATE,,,UPDATE pgbench_accounts SET abalance = 0 WHERE aid = 1;,<not logged>"
    quoted = 'SESSION,12,1,WRITE,INSERT,,,"INSERT INTO h (tid, bid) VALUES (16, 2);",<not logged>'
    assert _split_entry(plain) == _by_csv(plain)
    assert _split_entry(quoted) == _by_csv(quoted)
    entry = parse_entry("AUDIT: " + quoted)
    assert entry is not None
    assert (entry.statement_id, entry.command, entry.statement, entry.parameter) == (
        12,
        "INSERT",
        "INSERT INTO h (tid, bid) VALUES (16, 2);",
        None,
    )


# Statement texts of the kinds a log holds, plain or not: numbers, strings, names, comments.
_SQL_PIECES = st.sampled_from(
    ["UPDATE", " ", "  ", "\n", "\t", "t", "t1", "shop.orders", "=", "1", "42", "1.5", "2e3", ".5", "0x1F",
     "'a'", "'b c'", "''", "'", "E'x'", "e'y'", '"Name"', "$$z$$", "$1", "--c\n", "/*d*/", "#", "\\",
     ",", "(", ")", ";", "-", "é", "\u00a0", "\x1c", "NULL", "IN", "VALUES"]
)  # fmt: skip


@settings(max_examples=3000, deadline=None)
@given(st.lists(_SQL_PIECES, max_size=25).map("".join))
def test_the_plain_shape_is_the_shape(sql: str) -> None:
    plain = plain_shape(sql)
    if plain is not None:
        assert plain == masked_shape(sql)
    assert shape(sql) == masked_shape(sql)


# Literals that can stand in each other's place in a plain text.
_LITERALS = st.sampled_from(["1", "42", "3.25", "7e2", "'x'", "'a b'", "'it is'", "' '", "'9'"])


@settings(max_examples=1500, deadline=None)
@given(
    st.lists(st.sampled_from(["UPDATE t SET a =", " WHERE b IN (", ",", ") AND c =", " ", "\n", "NULL"]),
             min_size=1, max_size=8),
    st.lists(_LITERALS, min_size=8, max_size=8),
    st.lists(_LITERALS, min_size=8, max_size=8),
)  # fmt: skip
def test_statements_of_one_plain_shape_share_verdict_and_fingerprint(
    parts: list[str], one: list[str], other: list[str]
) -> None:
    first = "".join(p + " " + v for p, v in zip(parts, one, strict=False))
    second = "".join(p + " " + v for p, v in zip(parts, other, strict=False))
    if plain_shape(first) is None or plain_shape(first) != plain_shape(second):
        return
    assert fingerprint(first) == fingerprint(second)
    extra = {"commands": '[[1, "WRITE", "UPDATE", "TABLE", "t", null]]'}
    clear_cache()
    _judged(first, extra)
    judged = _judged(second, extra)
    # What the rules' own cache (by shape, since before issue 23) answers in the same order.
    rules.clear_cache()
    rules.classify(first, ("UPDATE",))
    assert judged[0] == rules.classify(second, ("UPDATE",))
    assert judged[2] == fingerprint(second)


def test_it_classifies_a_statement_from_the_cache_as_afresh() -> None:
    clear_cache()
    extra = {"commands": '[[1, "WRITE", "UPDATE", "", "", null]]'}
    sql = "UPDATE pgbench_tellers SET tbalance = tbalance + -158 WHERE tid = 7;"
    afresh = _judged(sql, extra)
    again = _judged(sql.replace("158", "9").replace("7;", "12;"), extra)
    clear_cache()
    assert afresh == again == _judged(sql.replace("158", "9").replace("7;", "12;"), extra)
    verdict, tables, fingerprint_ = afresh
    assert (verdict.statement_type, verdict.destructive, tables) == ("UPDATE", True, ("pgbench_tellers",))
    assert fingerprint_ == "update pgbench_tellers set tbalance = tbalance + -? where tid = ?"


def test_a_one_shot_read_keeps_few_interrupted_records_however_long_the_log(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The resumable parser (what `manage.py ingest` reads with) notes the records whose lines
    others interrupt for its resume points; a read that asks for none until its end must not
    keep every one (memory flat in the log's size), and yields what parse() yields."""
    scene = Path(__file__).resolve().parents[1] / "fixtures" / "pgaudit_scene"
    path = next(p for p in sorted(scene.iterdir()) if p.name.endswith("-1.csv"))
    lines = path.read_bytes().splitlines(keepends=True)
    sub1 = next(n for n, line in enumerate(lines) if b"AUDIT: SESSION,9,1,WRITE,INSERT" in line)
    login = next(n for n, line in enumerate(lines) if b"connection authorized: user=bob" in line)
    lines.insert(sub1 + 1, lines.pop(login))  # bob's login inside alice's statement (interleaved)
    copies = 120
    data = b"".join(lines) * copies
    monkeypatch.setattr(pgaudit, "_REACH_KEPT", 8)  # (1024 in use: a smaller log shows it here)
    resumer = pgaudit_csv.resumable()
    fed = list(resumer.feed(io.BytesIO(data)))
    items = fed + list(resumer.finish())
    assert len(resumer.assembler.reach) <= 16 < copies
    assert [(i.offset, i.raw) for i in items] == [
        (i.offset, i.raw) for i in pgaudit_csv.parse(io.BytesIO(data))
    ]
    interrupted = [i for i in items if isinstance(i, LogRecord) and "parts" in i.extra]
    assert len(interrupted) == copies


@pytest.mark.parametrize(
    "body", [",,,,,,\n,", "SESSION,1\r,1,WRITE,UPDATE,TABLE,t,UPDATE t SET a = 1,<none>"]
)
def test_a_line_end_in_the_first_fields_is_left_to_the_csv_module(body: str) -> None:
    # (Found by the property test above: the str split read a line end in one of the first seven
    # fields as text, where the csv module refuses it.)
    assert _split_entry(body) is None
    assert _by_csv(body) is None
    assert parse_entry("AUDIT: " + body) is None


@pytest.mark.parametrize(
    "sql",
    ["UPDATE t1 SET a = 1 WHERE b = -2.5e3", "x1e5 1a a.1 .5 1.2.3 ١٢ t_1 1_000 7 (8,9)", "1", "a1 1"],
)
def test_the_plain_number_pattern_takes_the_numbers_the_shape_takes(sql: str) -> None:
    # (The pattern begins with the digit and looks behind over it: words, names and qualified
    # parts keep their digits, as in masked_shape.)
    assert plain_shape(sql) == masked_shape(sql)


def test_a_csvlog_time_is_read_in_utc_and_a_millisecond_that_comes_back_is_one_datetime() -> None:
    text = "2026-11-25 13:35:39.294 UTC"
    other = "2026-11-25 13:35:39.295 UTC"
    first, zone = pgaudit.parse_time(text)
    assert zone is None and first is not None
    assert first == datetime(2026, 11, 25, 13, 35, 39, 294000, tzinfo=UTC)
    assert first.tzinfo is UTC
    pgaudit.parse_time(other)  # (another session's line between the two)
    assert pgaudit.parse_time(text)[0] is first
    # A text whose first 23 characters name an offset is read by the pattern, as before.
    assert pgaudit.parse_time("2026-11-25 13:35+01:00. UTC") == (None, None)


def test_csv_records_of_one_line_are_those_of_the_general_case() -> None:
    lines = [b'a,"b",c\n', b'd,"e\n', b'f",g\n', b"h\n", b"x" * 40 + b"\n", b'i,"j""k"\n', b"l"]
    assert list(csv_records(lines, 10, 3, 32)) == [
        (10, 3, b'a,"b",c\n', False),
        (18, 4, b'd,"e\nf",g\n', False),
        (28, 6, b"h\n", False),
        (30, 7, b"x" * 40 + b"\n", True),
        (71, 8, b'i,"j""k"\n', False),
        (80, 9, b"l", False),
    ]
