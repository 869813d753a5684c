"""Percona audit_log CSV: bytes in, records out."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ingest.parsers import audit_csv
from ingest.parsers.audit_csv import MAX_RECORD_BYTES, recognise
from ingest.parsers.records import LogRecord, Problem

from ..conftest import CORPUS_MISSING, FIXTURES, SHARED

CORPUS = SHARED / "corpus" / "percona-audit"
needs_corpus = pytest.mark.skipif(not CORPUS.is_dir(), reason=CORPUS_MISSING)


def parse(data: bytes) -> list[LogRecord | Problem]:
    return list(audit_csv.parse(data.splitlines(keepends=True)))


@needs_corpus
def test_the_documentation_sample_is_one_query_record() -> None:
    data = (CORPUS / "psmysql-docs_audit-log-plugin_CSV_query_indented.csv.txt").read_bytes()
    assert recognise(data)
    [record] = parse(data)
    assert isinstance(record, LogRecord)
    assert (record.line, record.offset, record.command, record.connection_id, record.user, record.host) == (
        1, 4, "Query", 2, "root", "localhost",
    )  # fmt: skip
    assert record.occurred_at == datetime(2021, 6, 30, 16, 19, tzinfo=UTC)
    assert (record.argument, record.status, record.extra["command_class"]) == (
        b"select count(*) from one", "ok", "select",
    )  # fmt: skip
    assert data[record.offset : record.offset + len(record.raw)] == record.raw


@needs_corpus
def test_a_hand_wrapped_sample_is_three_problems_not_a_guess() -> None:
    data = (CORPUS / "ps-auditlog-remix_5.6-patched_CSV_hard-wrapped-lines.csv.txt").read_bytes()
    items = parse(data)
    assert [(type(i).__name__, i.line) for i in items] == [("Problem", 1), ("Problem", 2), ("Problem", 3)]


def test_connection_records_quotes_and_refusals() -> None:
    data = (
        b'"Connect","1_2026","2026-01-05T09:00:00 UTC",7,0,"bob","bob","","","db1","10.0.0.8","shop"\n'
        b'"Query","2_2026","2026-01-05T09:00:01 UTC","delete","7",0,'
        b'"DELETE FROM orders WHERE note = \\"a,b\\"",'
        b'"bob[bob] @ db1 [10.0.0.8]","db1","","10.0.0.8","shop"\n'
        b'"Connect","3_2026","2026-01-05T09:00:02 UTC",8,1045,"mallory","","","","evil","10.6.6.6",""\n'
        b'"Query","4_2026","2026-01-05T09:00:03 UTC","delete"\n'
        b"\xff\xfe garbage\n"
    )
    connect, delete, refused, short, garbage = parse(data)
    assert (connect.command, connect.user, connect.host, connect.ip, connect.database, connect.status) == (
        "Connect", "bob", "db1", "10.0.0.8", "shop", "ok",
    )  # fmt: skip
    # Written the 2014 patch's way (a backslash before the quote): read so, and said.
    assert delete.argument == b'DELETE FROM orders WHERE note = "a,b"'
    assert delete.extra["quoting"] == "backslash" and "quoting" not in connect.extra
    assert (delete.user, delete.extra["account"], delete.connection_id) == ("bob", "bob", 7)
    # A refused login reads `denied`, as in every format; its code stays in extra.
    assert (refused.user, refused.status, refused.extra["status"]) == ("mallory", "denied", "1045")
    assert isinstance(short, Problem) and "fields" in short.reason
    assert isinstance(garbage, Problem) and garbage.line == 5


def test_it_does_not_claim_other_formats() -> None:
    assert not recognise(b'"2024-01-01 10:00:00.123456","root[root] @ localhost []",5,1,"Query","select 1"\n')
    assert not recognise(b'{"audit_record":{"name":"Query"}}\n')
    assert not recognise(b"20261122 11:15:05,vm,bob,127.0.0.1,170,712,QUERY,shop,'DELETE FROM orders',0\n")


STATEMENT = b'"bob[bob] @ db1 [10.0.0.8]","db1","","10.0.0.8","shop"\n'
QUIT = b'"Quit","9_x","2026-01-05T09:00:09 UTC","7",0,"bob","bob","","","db1","10.0.0.8","shop"\n'


def query(n: int, sql: bytes, quote: bytes = b'""') -> bytes:
    """A statement record as the server writes it: SQLTEXT quoted, its quotes doubled (the 2014
    patch: `quote` \\"), nothing else escaped."""
    head = b'"Query","%d_x","2026-01-05T09:00:0%d UTC","insert","7",0,"' % (n, n)
    return head + sql.replace(b'"', quote) + b'",' + STATEMENT


def test_a_statement_over_lines_is_one_record_with_its_backslashes_as_written() -> None:
    sql = b"INSERT INTO t VALUES ('O\\'Brien \\\\ x\ty', \"q\")\r\n  -- \\\n, ('\"\"')"
    data = query(1, sql) + QUIT
    assert recognise(data)
    insert, quit_ = parse(data)
    assert (insert.line, insert.offset, insert.argument, insert.user) == (1, 0, sql, "bob")
    assert data[: len(insert.raw)] == insert.raw and insert.raw.endswith(b'"shop"')
    assert "quoting" not in insert.extra
    assert (quit_.line, quit_.offset, quit_.command) == (4, len(query(1, sql)), "Quit")


def test_a_statement_over_lines_written_with_backslash_quotes_is_read_so() -> None:
    sql = b"SELECT \"a\nb\", 'c\\d' FROM t"
    data = b"  " + query(1, sql, b'\\"').replace(b'"shop"\n', b'"shop" \n') + QUIT
    select, quit_ = parse(data)
    assert (select.line, select.offset, select.argument, select.extra["quoting"]) == (1, 2, sql, "backslash")
    assert data[2 : 2 + len(select.raw)] == select.raw
    assert quit_.line == 3


def test_a_record_left_open_ends_where_the_next_record_begins_or_the_input_ends() -> None:
    cut = b'"Query","1_x","2026-01-05T09:00:01 UTC","delete","7",0,"DELETE FROM orders\nWHERE id = ""3\n'
    data = cut + QUIT + cut
    first, quit_, last = parse(data)
    assert isinstance(first, Problem) and (first.line, first.offset) == (1, 0)
    assert "line 3 begins a record" in first.reason and first.raw == cut
    assert (quit_.line, quit_.offset) == (3, len(cut))
    assert isinstance(last, Problem) and (last.line, last.offset) == (4, len(cut) + len(QUIT))
    assert "ends inside a quoted value" in last.reason


def test_nothing_server_made_spans_lines_so_a_hand_wrapped_time_is_no_record() -> None:
    data = b'"Query","1_x","2026-01-05T09:00:01\nUTC","select","7",0,"SELECT 1",' + STATEMENT
    assert not recognise(data)
    assert [(type(i).__name__, i.line) for i in parse(data)] == [("Problem", 1), ("Problem", 2)]


def test_a_record_open_past_the_cap_is_one_problem_and_reading_goes_on_at_the_next_record(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(audit_csv, "MAX_RECORD_BYTES", 4096)
    opened = b'"Query","1_x","2026-01-05T09:00:01 UTC","delete","7",0,"DELETE\n'
    filler = b'x, ""y"" \\\n' * 2000  # a quote that never closes, then lines no record begins
    data = opened + filler + b"garbage\n" + QUIT
    problem, quit_ = parse(data)
    assert isinstance(problem, Problem) and (problem.line, problem.offset) == (1, 0)
    assert "still open after" in problem.reason and len(problem.raw) <= 2048
    assert (quit_.line, quit_.offset) == (2003, len(data) - len(QUIT))
    assert MAX_RECORD_BYTES == 16 << 20


def test_a_read_from_any_item_gives_the_same_items_after_it() -> None:
    """The tail reads again from the offset of the last item it had (a record still being
    written): each record is read on its own, so what follows is the same."""
    sample = (FIXTURES / "audit-csv" / "mariadb-10.11.19-percona.csv").read_bytes()
    broken = b'"Query","1_x","2026-01-05T09:00:01 UTC","delete","7",0,"DELETE\n'
    backslash = query(2, b'SELECT "a\nb"', b'\\"')
    data = sample + broken + backslash + b"not a record\n" + sample
    items = parse(data)
    assert any(i.argument.count(b"\n") >= 3 for i in items if isinstance(i, LogRecord))
    assert sum(isinstance(i, Problem) for i in items) == 2
    for k, item in enumerate(items):
        start = data.rfind(b"\n", 0, item.offset) + 1  # a read starts at a line
        lines = data[start:].splitlines(keepends=True)
        again = list(audit_csv.parse(lines, start_offset=start, start_line=item.line))
        assert again == items[k:], k


ONE_LINE = (
    b'"Query","5_x","2026-01-05T09:00:05 UTC","select","7",0,"SELECT ""a"", \'b\\\\\' FROM t",' + STATEMENT
)
PIECES = [b'"', b'""', b"\\", b'\\"', b",", b"\n", b"\r", b" ", b"\t", b"\x00", b"\xff", b"x", b"\xc3\xa9"]


@settings(
    max_examples=400, derandomize=True, deadline=None, database=None, suppress_health_check=list(HealthCheck)
)
@given(st.lists(st.tuples(st.integers(0, len(ONE_LINE)), st.sampled_from(PIECES)), max_size=6))
def test_the_csv_modules_one_line_reading_is_the_doubled_reading(edits: list[tuple[int, bytes]]) -> None:
    """Most records are read by the csv module on their one line (in C); wherever it reads one,
    the reading that follows records over lines finds the same values."""
    line = bytearray(ONE_LINE)
    for at, piece in edits:
        line[at:at] = piece
    line = bytes(line)
    values = audit_csv._OneLine().split(line)
    if values is None:
        return
    reading = audit_csv._Reading(backslash=False)
    reading.feed(line)
    assert reading.state == audit_csv._DONE
    assert [f.decode("utf-8") for f in reading.fields] == values
