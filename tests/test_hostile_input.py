"""Hostile input cannot stop ingestion (issue 18): integers out of range, records too long
to hold, decompression bombs, pages of huge records. Each test ingests real bytes into the
real store and asserts on what was stored."""

from __future__ import annotations

import pytest

from ingest.models import Event, ParseProblem
from ingest.parsers import audit_csv
from ingest.parsers.records import LogRecord, Problem

pytestmark = pytest.mark.django_db

BIG = "123456789012345678901"  # 21 digits: above 2^63 - 1 (and above 2^64)
BIG20 = "18446744073709551615"  # 20 digits: 2^64 - 1, a BIGINT UNSIGNED thread id

# Four records per format, the second of which carries an integer a bigint cannot hold.
OUT_OF_RANGE = {
    "general-log": (
        "2024-05-01T10:00:00.000000Z\t    7 Query\tSELECT 1\n"
        f"2024-05-01T10:00:01.000000Z\t{BIG20} Query\tDELETE FROM shop.orders\n"
        "2024-05-01T10:00:02.000000Z\t    7 Query\tDROP TABLE shop.customers\n"
        "2024-05-01T10:00:03.000000Z\t    7 Quit\t\n"
    ),
    "mariadb-audit": (
        "20240501 10:00:00,db1,alice,10.0.0.7,42,1,QUERY,shop,'SELECT 1',0\n"
        f"20240501 10:00:01,db1,alice,10.0.0.7,{BIG20},2,QUERY,shop,'DELETE FROM orders',0\n"
        "20240501 10:00:02,db1,alice,10.0.0.7,42,3,QUERY,shop,'DROP TABLE customers',0\n"
        "20240501 10:00:03,db1,alice,10.0.0.7,42,0,DISCONNECT,shop,,0\n"
    ),
    "json-audit": (  # McAfee/Trellix: thread-id and rows above 2^63
        '{"msg-type":"activity","date":"1767603600000","thread-id":"12","user":"eve","cmd":"select",'
        '"query":"SELECT 1"}\n'
        f'{{"msg-type":"activity","date":"1767603601000","thread-id":"{BIG}","user":"eve","cmd":"delete",'
        '"query":"DELETE FROM orders"}\n'
        '{"msg-type":"activity","date":"1767603602000","thread-id":"12","user":"eve","cmd":"delete",'
        f'"query":"DELETE FROM customers","rows":"{BIG}"}}\n'
        '{"msg-type":"activity","date":"1767603603000","thread-id":"12","user":"eve","cmd":"select",'
        '"query":"SELECT 2"}\n'
    ),
    "xml-audit": (
        "<AUDIT>\n"
        '<AUDIT_RECORD NAME="Query" TIMESTAMP="2026-01-05T09:00:00 UTC" CONNECTION_ID="3" STATUS="0"'
        ' SQLTEXT="SELECT 1"/>\n'
        f'<AUDIT_RECORD NAME="Query" TIMESTAMP="2026-01-05T09:00:01 UTC" CONNECTION_ID="{BIG}" STATUS="0"'
        ' SQLTEXT="DELETE FROM orders"/>\n'
        '<AUDIT_RECORD NAME="Query" TIMESTAMP="2026-01-05T09:00:02 UTC" CONNECTION_ID="3" STATUS="0"'
        ' SQLTEXT="SELECT 2"/>\n'
        '<AUDIT_RECORD NAME="Quit" TIMESTAMP="2026-01-05T09:00:03 UTC" CONNECTION_ID="3" STATUS="0"/>\n'
        "</AUDIT>\n"
    ),
    "audit-csv": (  # Percona CSV: NAME, RECORD, TIMESTAMP, COMMAND_CLASS, CONNECTION_ID, STATUS, SQLTEXT, ...
        '"Query","1_2026","2026-01-05T09:00:00 UTC","select",7,0,"SELECT 1","bob","h","","10.0.0.8","shop"\n'
        f'"Query","2_2026","2026-01-05T09:00:01 UTC","delete",{BIG},0,"DELETE FROM orders","bob","h","",'
        '"10.0.0.8","shop"\n'
        '"Query","3_2026","2026-01-05T09:00:02 UTC","select",7,0,"SELECT 2","bob","h","","10.0.0.8","shop"\n'
        '"Quit","4_2026","2026-01-05T09:00:03 UTC",7,0,"bob","bob","","","h","10.0.0.8","shop"\n'
    ),
    "general-log-csv": (
        '"2026-11-22 12:15:50.297889","bob[bob] @  [127.0.0.1]",238,1,"Query","SELECT 1"\n'
        f'"2026-11-22 12:15:51.297889","bob[bob] @  [127.0.0.1]",{BIG20},1,"Query","DELETE FROM orders"\n'
        '"2026-11-22 12:15:52.297889","bob[bob] @  [127.0.0.1]",238,1,"Query","SELECT 2"\n'
        '"2026-11-22 12:15:53.297889","bob[bob] @  [127.0.0.1]",238,1,"Quit",""\n'
    ),
    "general-log-tsv": (
        "2026-11-22 12:15:50.297889\tbob[bob] @  [127.0.0.1]\t238\t1\tQuery\tSELECT 1\n"
        f"2026-11-22 12:15:51.297889\tbob[bob] @  [127.0.0.1]\t{BIG20}\t1\tQuery\tDELETE FROM orders\n"
        "2026-11-22 12:15:52.297889\tbob[bob] @  [127.0.0.1]\t238\t1\tQuery\tSELECT 2\n"
        "2026-11-22 12:15:53.297889\tbob[bob] @  [127.0.0.1]\t238\t1\tQuit\t\n"
    ),
}


@pytest.mark.parametrize("fmt", sorted(OUT_OF_RANGE))
def test_an_out_of_range_integer_is_a_problem_of_its_record_only(ingest_bytes, fmt: str) -> None:
    run = ingest_bytes(OUT_OF_RANGE[fmt].encode(), name=f"big-{fmt}.log", fmt=fmt)
    assert run.status == "done", run.error
    events = list(Event.objects.filter(ingest_run=run).order_by("line"))
    assert len(events) == 4  # none lost, before: "bigint out of range" and 0 of 4 stored
    problems = list(ParseProblem.objects.filter(run=run))
    assert problems and all("out of range for a 64-bit integer" in p.reason for p in problems)
    # The value is kept out of the bigint column (and in the record's extra).
    assert [e for e in events if e.connection_id is None or ("customers" in e.sql and not e.rows_affected)]
    assert any("DELETE" in e.sql for e in events)


def test_a_long_unterminated_string_head_is_read_once() -> None:
    """A statement over MAX_PARSE whose head ends inside a string on a lone backslash: every
    later quote used to start the string again (42 s at 64 KiB; the time is bench/hostile_bench.py's)."""
    from ingest.sql import classify
    from ingest.sql.lexer import normalize_key

    statement = "DELETE " + "\\'" * 40_000
    assert classify(statement).statement_type == "DELETE"
    assert normalize_key("SELECT 'abc\\") == "SELECT ?"  # the cut string is one literal to the end


def test_nested_executable_comments_do_not_overflow_the_stack() -> None:
    from ingest.sql import classify

    c = classify("DELETE FROM t " + "/*!" * 5000)  # before: RecursionError out of classify
    assert (c.statement_type, c.destructive) == ("DELETE", True)
    assert classify("/*!40101 SET @a=1 */").statement_type == "SET"  # one level still unwrapped


def test_a_huge_line_in_a_small_gz_is_cut_and_the_rest_goes_on(tmp_path, settings) -> None:
    """A 128 MiB statement in a small .gz (the issue's was 1 GiB in 1 MB: 6.9 GiB in the parsing
    process and 0 events stored); with a 1 MiB cap, the event keeps 1 MiB and the file goes on."""
    import gzip
    import hashlib

    from ingest.pipeline import ingest_file, source_for_path

    settings.INGEST_MAX_LINE_BYTES = 1 << 20
    settings.INGEST_PARALLEL = False  # the cut is the same in one process; this keeps it quick
    head = b"2024-05-01T10:00:01.000000Z\t    7 Query\tDELETE FROM shop.orders WHERE note = '"
    filler = b"x" * (1 << 20)
    tail = b"'\n"
    after = b"2024-05-01T10:00:02.000000Z\t    7 Query\tDROP TABLE shop.customers\n"
    path = tmp_path / "bomb.log.gz"
    digest = hashlib.sha256(head)
    with gzip.open(path, "wb", compresslevel=9) as gz:
        gz.write(head)
        for _ in range(128):  # 128 MiB of the same byte: about 128 KB compressed
            gz.write(filler)
            digest.update(filler)
        gz.write(tail + after)
    digest.update(tail)
    assert path.stat().st_size < 2 * 1024 * 1024
    length = len(head) + 128 * len(filler) + len(tail)
    source = source_for_path(path, server="bomb", fmt="general-log", tz="UTC")
    run = ingest_file(path, source=source, fmt="general-log")
    assert run.status == "done", run.error
    delete, drop = Event.objects.filter(ingest_run=run).order_by("byte_offset")
    assert drop.statement_type == "DROP TABLE" and drop.byte_offset == length  # the file went on
    assert delete.statement_type == "DELETE" and delete.byte_offset == 0
    assert bytes(delete.raw).startswith(head) and len(delete.raw) < 1 << 20  # a prefix, bounded
    assert "cut" in delete.flags and delete.sql.startswith("DELETE FROM shop.orders WHERE note = 'xxx")
    (problem,) = ParseProblem.objects.filter(run=run)
    assert problem.offset == 0 and f"holds {length} bytes (sha256 {digest.hexdigest()})" in problem.reason


def test_a_forbidden_character_reference_is_a_problem_not_a_crash() -> None:
    """Found by tests/test_fuzz.py: `&#0;` in an attribute raised ValueError out of the parser."""
    from ingest.parsers import xml_audit
    from ingest.parsers.records import LogRecord, Problem

    lines = [
        b"<AUDIT>\n",
        b'<AUDIT_RECORD NAME="Query" CONNECTION_ID="3" SQLTEXT="a&#0;b"/>\n',
        b'<AUDIT_RECORD NAME="Query" CONNECTION_ID="3" SQLTEXT="DELETE FROM t"/>\n',
        b"</AUDIT>\n",
    ]
    items = list(xml_audit.parse(lines))
    assert [type(i) for i in items] == [Problem, LogRecord]
    assert items[1].argument == b"DELETE FROM t"


def test_percona_csv_records_over_many_lines_are_read_in_one_pass() -> None:
    """A statement over 100,000 lines is one record, and a quote that never closes over as many
    is one problem that ends where the next record begins: each line is read once by each
    reading (doubled quotes, backslash quotes), so this takes as long as its 4 MB (read again
    from the record's start at every line, it would take hours)."""
    head = b'"Query","1_x","2026-01-05T09:00:01 UTC","delete",7,0,"'
    tail = b'","bob[bob] @ h [10.0.0.8]","h","","10.0.0.8","shop"\n'
    quit_ = b'"Quit","3_x","2026-01-05T09:00:03 UTC",7,0,"bob","bob","","","h","10.0.0.8","shop"\n'
    sql = b"DELETE FROM t WHERE a IN (\n" + b"  \"x\\\", 'y'\n" * 100_000 + b")"
    never = head.replace(b"1_x", b"2_x") + b"DELETE FROM t WHERE a = '\n" + b"  x\\ y, z\n" * 100_000
    data = head + sql.replace(b'"', b'""') + tail + never + quit_
    items = list(audit_csv.parse(data.splitlines(keepends=True)))
    assert [type(i) for i in items] == [LogRecord, Problem, LogRecord]
    delete, problem, last = items
    assert delete.argument == sql and "quoting" not in delete.extra
    assert (problem.line, problem.offset) == (100_003, len(head + sql.replace(b'"', b'""') + tail))
    assert "begins a record" in problem.reason and len(problem.raw) <= 2048
    assert (last.command, last.line, last.offset) == ("Quit", 200_004, len(data) - len(quit_))
