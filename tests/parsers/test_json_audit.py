"""JSON audit logs (McAfee/Trellix, Percona, MySQL Enterprise, audit_log_filter): bytes in, records out."""

from __future__ import annotations

import json
import random
import tracemalloc
from datetime import UTC, datetime

import pytest

from ingest.parsers.json_audit import MAX_OBJECT_BYTES, parse_json_audit, recognise
from ingest.parsers.records import LogRecord, Problem

from ..conftest import SHARED

CORPUS = SHARED / "corpus"
needs_corpus = pytest.mark.skipif(
    not CORPUS.is_dir(), reason="../shared corpus not present (tests of third-party samples need it)"
)
JSON_FILES = [
    "mcafee-json/wazuh-ruleset-pr98_mcafee-audit_5.6.38_select.json",
    "percona-audit/ps-auditlog-remix_5.6-patched_JSON_hard-wrapped-lines.json.txt",
    "percona-audit/psmysql-docs_audit-log-filter_8.0_JSON.json",
    "percona-audit/psmysql-docs_audit-log-plugin_JSON_query_indented.json.txt",
    "mysql-enterprise-audit/filebeat_mysqlenterprise_mysql_audit_test.log",
    "mysql-enterprise-audit/mysql-docs-8.0_audit-log_JSON_event-connect.json",
    "mysql-enterprise-audit/mysql-docs-8.0_audit-log_JSON_event-disconnect.json",
    "mysql-enterprise-audit/mysql-docs-8.0_audit-log_JSON_event-query-with-stats.json",
    "mysql-enterprise-audit/mysql-docs-8.0_audit-log_JSON_event-query.json",
    "mysql-enterprise-audit/mysql-docs-8.0_audit-log_JSON_event-shutdown.json",
    "mysql-enterprise-audit/mysql-docs-8.0_audit-log_JSON_event-startup.json",
    "mysql-enterprise-audit/mysql-docs-8.0_audit-log_JSON_event-table-access.json",
    "mysql-enterprise-audit/mysql-docs-8.0_audit-log_JSON_sample-array.json",
]


def parse(data: bytes) -> list[LogRecord | Problem]:
    items = list(parse_json_audit(data.splitlines(keepends=True)))
    for item in items:
        if isinstance(item, LogRecord):
            assert data[item.offset : item.offset + len(item.raw)] == item.raw
    return items


def summary(items: list) -> list[tuple]:  # type: ignore[type-arg]
    return [
        ("PROBLEM", i.line, i.reason.split(":")[0])
        if isinstance(i, Problem)
        else (i.line, i.command, i.user, i.host, i.ip, i.connection_id, i.occurred_at, i.status, i.argument)
        for i in items
    ]


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)  # type: ignore[misc]


EXPECTED = {
    "mcafee-json/wazuh-ruleset-pr98_mcafee-audit_5.6.38_select.json": [
        (
            1,
            "Query",
            "root",
            "localhost",
            None,
            26,
            datetime(2018, 1, 21, 20, 51, 48, 29000, tzinfo=UTC),
            "ok",
            b"select @@version_comment limit 1",
        ),
    ],
    # A documentation sample hard-wrapped inside its strings: not JSON; kept as a problem.
    "percona-audit/ps-auditlog-remix_5.6-patched_JSON_hard-wrapped-lines.json.txt": [
        ("PROBLEM", 1, "not valid JSON"),  # a string runs past its line: the object is broken there
        ("PROBLEM", 2, "not a JSON object"),  # and the wrapped rest is no object either
    ],
    "percona-audit/psmysql-docs_audit-log-plugin_JSON_query_indented.json.txt": [
        (1, "Query", "root", "localhost", None, 2, utc(2021, 6, 30, 15, 7, 58), "ok", b"show databases"),
    ],
    "percona-audit/psmysql-docs_audit-log-filter_8.0_JSON.json": [
        (3, "audit", None, None, None, None, utc(2023, 3, 29, 11, 17, 3), None, b""),
        (9, "command_start", None, None, None, 1, utc(2023, 3, 29, 11, 17, 5), None, b""),
        (
            20,
            "Query log",
            "root",
            "localhost",
            None,
            11,
            utc(2023, 3, 29, 11, 17, 5),
            "ok",
            b"CREATE TABLE t1 (c1 INT)",
        ),
        (
            34,
            "query_start",
            None,
            None,
            None,
            11,
            utc(2023, 3, 29, 11, 17, 5),
            "ok",
            b"CREATE TABLE t1 (c1 INT)",
        ),
        (
            45,
            "query_status_end",
            None,
            None,
            None,
            11,
            utc(2023, 3, 29, 11, 17, 5),
            "ok",
            b"CREATE TABLE t1 (c1 INT)",
        ),
        (
            56,
            "Query",
            "root",
            "localhost",
            None,
            11,
            utc(2023, 3, 29, 11, 17, 5),
            "ok",
            b"CREATE TABLE t1 (c1 INT)",
        ),
        (70, "command_end", None, None, None, 1, utc(2023, 3, 29, 11, 17, 5), None, b""),
    ],
    "mysql-enterprise-audit/mysql-docs-8.0_audit-log_JSON_event-query.json": [
        (1, "Query", "root", "localhost", "::1", 5, utc(2019, 10, 3, 14, 23, 35), "ok", b"SHOW VARIABLES"),
    ],
    "mysql-enterprise-audit/mysql-docs-8.0_audit-log_JSON_event-table-access.json": [
        (1, "Table INSERT", "root", "localhost", "127.0.0.1", 5, utc(2019, 10, 3, 14, 23, 41), None, b"t1"),
    ],
    # The documentation elides attributes with "..." (connect) and a comma (with-stats).
    "mysql-enterprise-audit/mysql-docs-8.0_audit-log_JSON_event-connect.json": [
        ("PROBLEM", 1, "not valid JSON")
    ],
    # Curly quotes (“os") leave a string open at the end of line 7: the scanner starts afresh
    # on the next line; the inner objects it then finds are of no audit layout.
    "mysql-enterprise-audit/mysql-docs-8.0_audit-log_JSON_event-query-with-stats.json": [
        ("PROBLEM", 1, "not valid JSON"),
        ("PROBLEM", 8, "not a JSON object"),
        ("PROBLEM", 8, "a JSON object of no known audit layout"),
        ("PROBLEM", 12, "not a JSON object"),
        ("PROBLEM", 12, "a JSON object of no known audit layout"),
        ("PROBLEM", 16, "not a JSON object"),
    ],
    "mysql-enterprise-audit/mysql-docs-8.0_audit-log_JSON_sample-array.json": [
        ("PROBLEM", 2, "not valid JSON"),
        ("PROBLEM", 9, "not valid JSON"),
        ("PROBLEM", 16, "not a JSON object"),
        ("PROBLEM", 17, "not valid JSON"),
        ("PROBLEM", 24, "not a JSON object"),
    ],
}


@needs_corpus
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus_samples_give_exactly_these_records(name: str) -> None:
    data = (CORPUS / name).read_bytes()
    assert recognise(data[:1024])
    assert summary(parse(data)) == EXPECTED[name]


@needs_corpus
def test_every_json_sample_parses_and_is_recognised() -> None:
    for name in JSON_FILES:
        data = (CORPUS / name).read_bytes()
        assert recognise(data[:1024]), name
        assert parse(data), name


@needs_corpus
def test_the_filebeat_sample_gives_who_did_what_for_every_line() -> None:
    # Filebeat's MySQL Enterprise module test log: one object a line, 31 lines, no expected
    # output beside it in the corpus; each line must become one record with its own fields.
    data = (CORPUS / "mysql-enterprise-audit/filebeat_mysqlenterprise_mysql_audit_test.log").read_bytes()
    items = parse(data)
    assert len(items) == 31 and all(isinstance(i, LogRecord) for i in items)
    for item, line in zip(items, data.splitlines(), strict=True):
        obj = json.loads(line.rstrip(b","))
        assert item.connection_id == obj["connection_id"]
        assert item.occurred_at == datetime.fromisoformat(obj["timestamp"]).replace(tzinfo=UTC)
        query = (obj.get("general_data") or {}).get("query")
        if query and obj["class"] == "general":
            assert item.argument == query.encode()
            assert item.status == (
                "ok" if obj["general_data"]["status"] == 0 else str(obj["general_data"]["status"])
            )
    refused = [i for i in items if i.status not in (None, "ok")]
    assert [i.status for i in refused] == ["1064", "1064", "1064", "1410", "1396", "1410", "1410", "1410"]
    connects = [(i.user, i.host, i.ip) for i in items if i.command == "Connect"]
    assert connects == [("root", "localhost", None), ("root", "localhost", None),
                        ("audit_test_user2", "hades.home", "192.168.2.5")]  # fmt: skip


@needs_corpus
def test_other_formats_of_the_corpus_are_not_taken_for_json() -> None:
    for path in CORPUS.rglob("*"):
        if path.is_file() and str(path.relative_to(CORPUS)) not in JSON_FILES and path.suffix != ".md":
            assert not recognise(path.read_bytes()[:1024]), path.name


def test_a_pretty_printed_array_is_read_object_by_object_with_positions() -> None:
    objects = [
        {"timestamp": "2026-01-05 09:00:00", "id": 1, "class": "connection", "event": "connect",
         "connection_id": 7, "account": {"user": "bob", "host": "db1"},
         "login": {"user": "bob", "os": "", "ip": "10.0.0.8", "proxy": ""},
         "connection_data": {"connection_type": "tcp/ip", "status": 0, "db": "shop"}},
        {"timestamp": "2026-01-05 09:00:01", "id": 2, "class": "general", "event": "status",
         "connection_id": 7, "account": {"user": "bob", "host": "db1"},
         "login": {"user": "bob", "os": "", "ip": "10.0.0.8", "proxy": ""},
         "general_data": {"command": "Query", "sql_command": "delete",
                          "query": "DELETE FROM orders WHERE note = '}{\\\" ]'", "status": 0}},
        {"timestamp": "2026-01-05 09:00:02", "id": 3, "class": "connection", "event": "connect",
         "connection_id": 8, "account": {"user": "mallory", "host": "x"},
         "login": {"user": "mallory", "os": "", "ip": "10.6.6.6", "proxy": ""},
         "connection_data": {"connection_type": "tcp/ip", "status": 1045}},
    ]  # fmt: skip
    data = ("[\n" + ",\n".join(json.dumps(o, indent=2) for o in objects) + "\n]\n").encode()
    connect, delete, refused = parse(data)
    assert (connect.command, connect.user, connect.ip, connect.database, connect.status) == (
        "Connect", "bob", "10.0.0.8", "shop", "ok",
    )  # fmt: skip
    assert delete.argument == b"DELETE FROM orders WHERE note = '}{\\\" ]'"
    assert delete.line == data[: delete.offset].count(b"\n") + 1
    assert (refused.command, refused.user, refused.status) == ("Connect", "mallory", "1045")


def test_percona_accounts_are_split_and_mcafee_failed_logins_are_refused_connects() -> None:
    data = (
        b'{"audit_record":{"name":"Query","record":"1_2026","timestamp":"2026-01-05T09:00:00 UTC",'
        b'"command_class":"delete","connection_id":"9","status":1142,"sqltext":"DELETE FROM t",'
        b'"user":"app[bob] @ web1 [10.0.0.2]","host":"web1","os_user":"","ip":"10.0.0.2","db":"shop"}}\n'
        b'{"msg-type":"activity","date":"1767603600000","thread-id":"12","user":"eve","priv_user":"",'
        b'"host":"h","ip":"10.9.9.9","cmd":"Failed Login","status":"1045"}\n'
    )
    percona, mcafee = parse(data)
    p = percona
    assert (p.user, p.extra["account"], p.host, p.ip, p.status, p.database) == (
        "bob", "app", "web1", "10.0.0.2", "1142", "shop",
    )  # fmt: skip
    assert (mcafee.command, mcafee.user, mcafee.status, mcafee.occurred_at) == (
        "Connect", "eve", "1045", utc(2026, 1, 5, 9, 0, 0),
    )  # fmt: skip


def test_hostile_input_gives_records_or_problems_never_exceptions() -> None:
    good = b'{"msg-type":"activity","date":"1","thread-id":"1","cmd":"select","query":"SELECT 1"}\n'
    data = (
        b"garbage before\n"
        + good
        + b'{"msg-type":"activity","query":"\xff\xfe\x00 bad"}\n'  # invalid UTF-8 and NUL
        + b"[" * 10_000
        + b"\n"  # deep nesting outside any object
        + b'{"class":"general","deep":'
        + b"[" * 10_000
        + b"]" * 10_000
        + b"}\n"
        + b'{"msg-type":"activity","query":"'
        + b"x" * (5 << 20)
        + b'"}\n'  # a 5 MB statement
        + good
        + b'{"class":"general","event":"status","general_data":{"query":"unfinished'
    )
    items = parse(data)
    kinds = [
        ("P", i.reason.split(":")[0]) if isinstance(i, Problem) else ("R", len(i.argument)) for i in items
    ]
    assert kinds == [
        ("P", "not a JSON object"),
        ("R", 8),
        ("P", "not valid JSON"),
        ("P", "JSON nested too deeply to read"),
        ("R", 5 << 20),
        ("R", 8),
        ("P", "unfinished JSON object at the end"),
    ]


def test_an_object_over_the_size_bound_is_skipped_to_its_end() -> None:
    chunk = b'"' + b"y" * (MAX_OBJECT_BYTES // 32) + b'",\n'
    data = b'{"class":"general","pad":[\n' + chunk * 40 + b'""]}\n{"class":"general","event":"status"}\n'
    items = list(parse_json_audit(iter(data.splitlines(keepends=True))))
    assert [type(i).__name__ for i in items] == ["Problem", "LogRecord"]
    assert "longer than" in items[0].reason


def test_random_bytes_never_raise() -> None:
    rng = random.Random(11)
    pieces = [b"{", b"}", b"[", b"]", b'"', b"\\", b",", b"\n", b'"class":1', b"\x00", b"\xff", b"x"]
    for _ in range(400):
        data = b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 50)))
        for item in parse_json_audit(data.splitlines(keepends=True)):
            assert isinstance(item, LogRecord | Problem)


def test_a_long_pretty_printed_array_is_read_in_bounded_memory() -> None:
    obj = json.dumps(
        {"timestamp": "2026-01-05 09:00:00", "id": 1, "class": "general", "event": "status",
         "connection_id": 7, "account": {"user": "app", "host": "web1"},
         "general_data": {"command": "Query", "query": "SELECT 1"}},
        indent=2,
    ).encode()  # fmt: skip
    count = 20_000

    def lines():  # type: ignore[no-untyped-def]
        yield b"[\n"
        for n in range(count):
            yield from (obj + (b",\n" if n < count - 1 else b"\n")).splitlines(keepends=True)
        yield b"]\n"

    tracemalloc.start()
    records = sum(1 for i in parse_json_audit(lines()) if isinstance(i, LogRecord))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert records == count
    assert peak < len(obj) * count / 10
