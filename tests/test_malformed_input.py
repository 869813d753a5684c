"""Malformed records in every format become stored parse problems (file, line, offset, reason,
excerpt); the good records around them are still ingested. Through `manage.py ingest`."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from ingest.models import Event, ParseProblem
from ingest.tail import is_log

pytestmark = pytest.mark.django_db(transaction=True)

BIG = 50 << 20  # a 50 MB line
GARBAGE = b"\x00\x9f\xff binary garbage \xc3\x28\n"

# format: (a good record, whose SQL is "DELETE FROM shop.orders"; the malformed records, each
# one line; the head and tail of the file)
CASES = {
    "json-audit": (
        b'{"class":"general","event":"status","connection_id":7,"timestamp":"2026-01-05 09:00:01",'
        b'"account":{"user":"bob","host":"db1"},"general_data":{"command":"Query",'
        b'"query":"DELETE FROM shop.orders","status":0}}\n',
        [
            b'{"class":"general","event":"status","connection_id":7,"general_data":{"query":"trunc\n',
            GARBAGE,
            b'{"msg-type":"activity","query":"' + b"x" * BIG + b'"}\n',
            b'{"some":"other layout"}\n',
        ],
        b"",
        b"",
    ),
    "xml-audit": (
        b'<AUDIT_RECORD NAME="Query" TIMESTAMP="2026-01-05T09:00:01 UTC" CONNECTION_ID="7" STATUS="0"'
        b' USER="bob[bob] @ db1 []" SQLTEXT="DELETE FROM shop.orders"/>\n',
        [
            GARBAGE,
            b'<AUDIT_RECORD NAME="Query" SQLTEXT="' + b"x" * BIG + b'" "/>\n',  # not well-formed
            b'<AUDIT_RECORD NAME="Query" SQLTEXT="\xff\xfe invalid utf-8" BROKEN=/>\n',
        ],
        b'<?xml version="1.0" encoding="utf-8"?>\n<AUDIT>\n',
        b"</AUDIT>\n",
    ),
    "audit-csv": (
        b'"Query","1_x","2026-01-05T09:00:01 UTC","delete","7",0,"DELETE FROM shop.orders",'
        b'"bob[bob] @ db1 []","db1","","",""\n',
        [GARBAGE, b'"Query","' + b"x" * BIG + b"\n", b'"Query","2_x","2026-01-05T09:00:02 UTC"\n'],
        b"",
        b"",
    ),
    "mariadb-audit": (
        b"20260105 09:00:01,vm,bob,db1,7,1,QUERY,shop,'DELETE FROM shop.orders',0\n",
        [GARBAGE, b"x" * BIG + b"\n", b"20261305 09:00:01,vm,bob,db1,7,1,QUERY,shop,'bad month',0\n"],
        b"",
        b"",
    ),
    "general-log": (
        b"2026-01-05T09:00:01.000000Z\t    7 Query\tDELETE FROM shop.orders\n",
        [b"2026-13-05T09:00:01.000000Z\t    7 Query\tSELECT 'impossible month'\n"],
        GARBAGE + b"x" * BIG + b"\n",  # a copy that begins mid-record: no record before it to continue
        b"",
    ),
}


@pytest.mark.parametrize("fmt", sorted(CASES))
def test_malformed_records_are_stored_as_problems_and_the_rest_ingests(tmp_path, fmt) -> None:
    good, bad, head, tail = CASES[fmt]
    data = head + good + b"".join(bad) + good.replace(b"09:00:01", b"09:00:09") + tail
    path = tmp_path / f"damaged-{fmt}.log"
    path.write_bytes(data)
    out = io.StringIO()
    call_command("ingest", str(path), "--format", fmt, "--server", "s", stdout=out)

    # Both good records are there, whatever lay between them.
    deletes = Event.objects.filter(sql="DELETE FROM shop.orders")
    assert deletes.count() == 2
    assert all(e.destructive for e in deletes)
    # Each malformed one is a problem, at its own line and offset, with a reason and a bounded excerpt.
    problems = list(ParseProblem.objects.order_by("offset"))
    assert problems, out.getvalue()
    # A file that does not begin like a log (here the general log copied from mid-record) shows
    # no bytes of its problems: it could be any file (tests/ingest/test_log_roots.py).
    shown = is_log(data[:1024])
    for p in problems:
        assert p.source_file.path == str(path)
        assert p.reason
        if shown:
            assert 0 < len(bytes(p.excerpt)) <= 2048
            assert data[p.offset : p.offset + 16] == bytes(p.excerpt)[:16]
        else:
            assert bytes(p.excerpt) == b"" and p.reason.startswith("its bytes are not shown")
        assert p.line == data[: p.offset].count(b"\n") + 1
    assert f", {len(problems)} problems," in out.getvalue()
