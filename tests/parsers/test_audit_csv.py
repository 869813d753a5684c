"""Percona audit_log CSV: bytes in, records out."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from ingest.parsers import audit_csv
from ingest.parsers.audit_csv import recognise
from ingest.parsers.records import LogRecord, Problem

from ..conftest import CORPUS_MISSING, SHARED

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
    assert delete.argument == b'DELETE FROM orders WHERE note = "a,b"'
    assert (delete.user, delete.extra["account"], delete.connection_id) == ("bob", "bob", 7)
    assert (refused.user, refused.status) == ("mallory", "1045")
    assert isinstance(short, Problem) and "fields" in short.reason
    assert isinstance(garbage, Problem) and garbage.line == 5


def test_it_does_not_claim_other_formats() -> None:
    assert not recognise(b'"2024-01-01 10:00:00.123456","root[root] @ localhost []",5,1,"Query","select 1"\n')
    assert not recognise(b'{"audit_record":{"name":"Query"}}\n')
    assert not recognise(b"20261122 11:15:05,vm,bob,127.0.0.1,170,712,QUERY,shop,'DELETE FROM orders',0\n")
