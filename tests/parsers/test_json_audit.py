"""JSON audit logs (McAfee/Trellix, Percona, MySQL Enterprise, audit_log_filter): bytes in, records out."""

from __future__ import annotations

import json
import random
import tracemalloc
from datetime import UTC, datetime

import pytest

from ingest.parsers import json_audit
from ingest.parsers.json_audit import MAX_OBJECT_BYTES, recognise
from ingest.parsers.records import PROBLEM_EXCERPT_BYTES, LogRecord, Problem

from ..conftest import CORPUS_MISSING, SHARED

CORPUS = SHARED / "corpus"
needs_corpus = pytest.mark.skipif(not CORPUS.is_dir(), reason=CORPUS_MISSING)
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
    items = list(json_audit.parse(data.splitlines(keepends=True)))
    for item in items:
        if isinstance(item, LogRecord):
            assert data[item.offset : item.offset + len(item.raw)] == item.raw
    return items


def summary(items: list) -> list[tuple]:
    return [
        ("PROBLEM", i.line, i.reason.split(":")[0])
        if isinstance(i, Problem)
        else (i.line, i.command, i.user, i.host, i.ip, i.connection_id, i.occurred_at, i.status, i.argument)
        for i in items
    ]


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)


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
    "mysql-enterprise-audit/mysql-docs-8.0_audit-log_JSON_event-disconnect.json": [
        (1, "Quit", "root", "localhost", "::1", 5, utc(2019, 10, 3, 14, 24, 45), None, b""),
    ],
    "mysql-enterprise-audit/mysql-docs-8.0_audit-log_JSON_event-startup.json": [
        (1, "startup", None, None, None, 0, utc(2019, 10, 3, 14, 21, 56), None, b""),
    ],
    "mysql-enterprise-audit/mysql-docs-8.0_audit-log_JSON_event-shutdown.json": [
        (1, "shutdown", None, None, None, 0, utc(2019, 10, 3, 14, 28, 20), None, b""),
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
    # A refused login reads as in every format; the code the log gives stays in extra.
    assert (refused.command, refused.user, refused.status) == ("Connect", "mallory", "denied")
    assert refused.extra["status"] == "1045"


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
        "Connect", "eve", "denied", utc(2026, 1, 5, 9, 0, 0),
    )  # fmt: skip
    assert mcafee.extra["status"] == "1045"
    assert "status" not in p.extra  # a failed statement keeps its code as its status


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
    items = list(json_audit.parse(iter(data.splitlines(keepends=True))))
    assert [type(i).__name__ for i in items] == ["Problem", "LogRecord"]
    assert "longer than" in items[0].reason


def test_random_bytes_never_raise() -> None:
    rng = random.Random(11)
    pieces = [b"{", b"}", b"[", b"]", b'"', b"\\", b",", b"\n", b'"class":1', b"\x00", b"\xff", b"x"]
    for _ in range(400):
        data = b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 50)))
        for item in json_audit.parse(data.splitlines(keepends=True)):
            assert isinstance(item, LogRecord | Problem)


def test_a_long_pretty_printed_array_is_read_in_bounded_memory() -> None:
    obj = json.dumps(
        {"timestamp": "2026-01-05 09:00:00", "id": 1, "class": "general", "event": "status",
         "connection_id": 7, "account": {"user": "app", "host": "web1"},
         "general_data": {"command": "Query", "query": "SELECT 1"}},
        indent=2,
    ).encode()  # fmt: skip
    count = 20_000

    def lines():
        yield b"[\n"
        for n in range(count):
            yield from (obj + (b",\n" if n < count - 1 else b"\n")).splitlines(keepends=True)
        yield b"]\n"

    tracemalloc.start()
    records = sum(1 for i in json_audit.parse(lines()) if isinstance(i, LogRecord))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert records == count
    assert peak < len(obj) * count / 10


def brief(item: LogRecord | Problem) -> str:
    """One record as a line of a table: line, command, user@host/ip, #connection, time, status, SQL."""
    if isinstance(item, Problem):
        return f"{item.line} PROBLEM {item.reason}"
    when = item.occurred_at.strftime("%H:%M:%S") if item.occurred_at else "-"
    who = f"{item.user}@{item.host}/{item.ip or '-'}"
    return (
        f"{item.line} {item.command} {who} #{item.connection_id} {when} {item.status} {item.argument[:40]!r}"
    )


# Every record of Filebeat's MySQL Enterprise test log (all on 2020-10-19, UTC), SQL cut at 40 bytes.
FILEBEAT = [
    "1 startup skip-grants user@None/- #0 19:21:33 None b''",
    "2 Connect root@localhost/- #13 19:25:51 ok b''",
    "3 Query root@localhost/- #13 19:25:51 ok b'select @@version_comment limit 1'",
    "4 Quit root@localhost/- #13 19:25:52 None b''",
    "5 Connect root@localhost/- #15 19:27:45 ok b''",
    "6 Query root@localhost/- #15 19:27:45 ok b'select @@version_comment limit 1'",
    "7 Query root@localhost/- #15 19:27:50 1064 b\"GRANT ALL PRIVILEGES ON *.* TO 'root'@'%\"",
    "8 Query root@localhost/- #15 19:28:04 1064 b\"GRANT ALL PRIVILEGES ON *.* TO 'root'@'%\"",
    "9 Query root@localhost/- #15 19:28:27 1064 b\"GRANT ALL PRIVILEGES ON *.* TO 'root'@'h\"",
    "10 Query root@localhost/- #15 19:28:54 1410 b\"GRANT ALL PRIVILEGES ON *.* TO 'root'@'%\"",
    "11 Query root@localhost/- #15 19:29:36 1396 b\"CREATE USER 'audit_test_user'@'localhost\"",
    "12 Query root@localhost/- #15 19:30:00 ok b\"CREATE USER 'audit_test_user2'@'hades.ho\"",
    "13 Query root@localhost/- #15 19:30:18 1410 b'GRANT ALL PRIVILEGES ON *.* TO \\xe2\\x80\\x98audit_'",
    '14 Query root@localhost/- #15 19:30:32 1410 b"GRANT ALL PRIVILEGES ON *.* TO \'audit_te"',
    '15 Query root@localhost/- #15 19:30:49 1410 b"GRANT ALL PRIVILEGES ON *.* TO \'audit_te"',
    '16 Query root@localhost/- #15 19:31:01 ok b"GRANT ALL PRIVILEGES ON *.* TO \'audit_te"',
    "17 Connect audit_test_user2@hades.home/192.168.2.5 #16 19:31:25 ok b''",
    "18 Query audit_test_user2@hades.home/192.168.2.5 #16 19:31:25 ok b'select @@version_comment limit 1'",
    "19 Query audit_test_user2@hades.home/192.168.2.5 #16 19:31:31 ok b'create database audit_test'",
    "20 Query audit_test_user2@hades.home/192.168.2.5 #16 19:31:40 ok b'SELECT DATABASE()'",
    "21 Init DB audit_test_user2@hades.home/192.168.2.5 #16 19:31:40 ok b''",
    "22 Query audit_test_user2@hades.home/192.168.2.5 #16 19:31:40 ok b'show databases'",
    "23 Query audit_test_user2@hades.home/192.168.2.5 #16 19:31:40 ok b'show tables'",
    "24 Query audit_test_user2@hades.home/192.168.2.5 #16 19:31:47 ok"
    " b'CREATE TABLE audit_test_table (firstname'",
    "25 Table INSERT audit_test_user2@hades.home/192.168.2.5 #16 19:31:57 None b'audit_test_table'",
    "26 Query audit_test_user2@hades.home/192.168.2.5 #16 19:31:57 ok"
    ' b"INSERT INTO audit_test_table values (\'Jo"',
    "27 Table READ audit_test_user2@hades.home/192.168.2.5 #16 19:32:05 None b'audit_test_table'",
    "28 Query audit_test_user2@hades.home/192.168.2.5 #16 19:32:05 ok b'select * from audit_test_table'",
    "29 Quit audit_test_user2@hades.home/192.168.2.5 #16 19:32:10 None b''",
    "30 Quit root@localhost/- #15 19:32:12 None b''",
    "31 shutdown None@None/- #0 19:32:16 None b''",
]


@needs_corpus
def test_the_filebeat_sample_gives_exactly_these_records() -> None:
    data = (CORPUS / "mysql-enterprise-audit/filebeat_mysqlenterprise_mysql_audit_test.log").read_bytes()
    items = parse(data)
    assert [brief(i) for i in items] == FILEBEAT
    assert {i.occurred_at.date() for i in items if isinstance(i, LogRecord) and i.occurred_at} == {
        datetime(2020, 10, 19).date()
    }
    tables = [(i.database, i.extra["query"]) for i in items if i.command.startswith("Table ")]
    assert tables == [
        ("audit_test", "INSERT INTO audit_test_table values ('John', 'Smith')"),
        ("audit_test", "select * from audit_test_table"),
    ]
    assert items[0].extra["mysql_version"] == "8.0.22-commercial"


def fed_in_chunks(data: bytes, rng: random.Random) -> list[LogRecord | Problem]:
    def chunks():
        at = 0
        while at < len(data):
            size = rng.randint(1, 40)
            yield data[at : at + size]
            at += size

    return list(json_audit.parse(chunks()))


def test_chunks_cut_anywhere_give_the_same_items_as_lines() -> None:
    # A reader may hand over pieces of lines (a bounded read) or several lines at once:
    # escapes, strings and nesting carry over, and lines and offsets stay exact.
    objects = [
        {"msg-type": "activity", "date": "1767603600000", "thread-id": "3", "user": "bob", "cmd": "delete",
         "query": 'DELETE FROM t WHERE a = "\\\\" OR b = "}{" -- \\"', "rows": "2", "status": "0"},
        {"audit_record": {"name": "Query", "timestamp": "2026-01-05T09:00:00 UTC", "connection_id": "9",
                          "status": 0, "sqltext": "UPDATE t SET v = '\\\\\\\\\\\"'",
                          "user": "a[a] @ h [1.2.3.4]"}},
    ]  # fmt: skip
    one_a_line = b"".join(json.dumps(o).encode() + b"\n" for o in objects) * 3
    array = b"[\n" + b",\n".join(json.dumps(o, indent=2).encode() for o in objects * 3) + b"\n]\n"
    # (Cut inside a string, then outside one; a line that opens mid-way with stray `{` is
    # recognised as a whole line only: see the garbage test, fed line by line.)
    broken = one_a_line + b'{"msg-type":"activity","query":"cut\n{"audit_record":{"db":\n' + one_a_line
    broken += b'{"class":"gen'
    rng = random.Random(5)
    for data in (one_a_line, array, broken):
        by_line = parse(data)
        for _ in range(20):
            assert fed_in_chunks(data, rng) == by_line
    assert sum(isinstance(i, LogRecord) for i in parse(broken)) == 12


def test_an_object_cut_short_outside_a_string_does_not_swallow_the_next_ones() -> None:
    good = b'{"msg-type":"activity","date":"1","thread-id":"1","cmd":"delete","query":"DELETE FROM t"}\n'
    one_a_line = good + b'{"msg-type":"activity","objects":[{"db":"shop",\n' + good + good
    assert summary(parse(one_a_line))[1] == ("PROBLEM", 2, "unfinished JSON object")
    assert [i.line for i in parse(one_a_line) if isinstance(i, LogRecord)] == [1, 3, 4]

    record = {"timestamp": "2026-01-05 09:00:00", "class": "general", "event": "status", "connection_id": 4,
              "general_data": {"command": "Query", "query": "DROP TABLE orders", "status": 0}}  # fmt: skip
    pretty = json.dumps(record, indent=2).encode()
    cut = pretty[: pretty.index(b'"general_data"')]  # ends after a comma, outside any string
    array = b"[\n" + pretty + b",\n" + cut + b"\n" + pretty + b",\n" + pretty + b"\n]\n"
    items = parse(array)
    assert [type(i).__name__ for i in items] == ["LogRecord", "Problem", "LogRecord", "LogRecord"]
    assert items[1].line == 2 + pretty.count(b"\n") + 1
    assert items[1].reason.startswith("unfinished JSON object: another one begins at line")
    assert all(i.argument == b"DROP TABLE orders" for i in items if isinstance(i, LogRecord))


def test_garbage_with_braces_between_objects_is_a_problem_and_the_rest_is_read() -> None:
    good = b'{"audit_record":{"name":"Quit","timestamp":"2026-01-05T09:00:00 UTC","connection_id":"5"}}\n'
    data = good + b"\x00\xff}} binary ]] {{ junk\n" + good + b"\xde\xad\xbe\xef\n" + good
    items = parse(data)
    assert [("P", i.line) if isinstance(i, Problem) else ("R", i.line, i.command) for i in items] == [
        ("R", 1, "Quit"),
        ("P", 2),  # the bytes before `{{`
        ("P", 2),  # and the object `{{` opens, unfinished when line 3 is a whole record
        ("R", 3, "Quit"),
        ("P", 4),
        ("R", 5, "Quit"),
    ]


def test_a_one_line_object_over_the_size_bound_is_a_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    import ingest.parsers.json_audit as json_audit

    monkeypatch.setattr(json_audit, "MAX_OBJECT_BYTES", 1000)
    big = b'{"msg-type":"activity","query":"' + b"x" * 5000 + b'"}\n'
    small = b'{"msg-type":"activity","query":"SELECT 1"}\n'
    items = parse(small + big + small)
    assert [type(i).__name__ for i in items] == ["LogRecord", "Problem", "LogRecord"]
    assert (items[1].line, items[1].offset, items[1].raw) == (2, len(small), big[:PROBLEM_EXCERPT_BYTES])
    assert "longer than 1000 bytes" in items[1].reason
