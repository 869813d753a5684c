"""The mysql.general_log table readers: user_host, rows, general_log.CSV and INTO OUTFILE exports.

The fixtures in tests/fixtures/general_log_table/ were written by the real MariaDB
(regenerate.py beside them): the same 13 rows once as the CSV engine's file and once as
a tab-separated export. No Django, no database; one test (marked mariadb) has the real
server's CSV engine and INTO OUTFILE write every byte value and reads them back.
"""

from __future__ import annotations

import io
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from ingest.parsers import general_log_csv, general_log_tsv
from ingest.parsers.general_log_table import canonical_row, parse_user_host, row_hash, row_record
from ingest.parsers.records import PROBLEM_EXCERPT_BYTES, Item, LogRecord, Problem

from ..conftest import CORPUS_MISSING, SHARED

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "general_log_table"
CSV = FIXTURES / "mariadb-10.11.19-scenario.CSV"
TSV = FIXTURES / "mariadb-10.11.19-scenario.tsv"
CORPUS = SHARED / "corpus"


def csv(data: bytes) -> list[Item]:
    return list(general_log_csv.parse(io.BytesIO(data)))


def tsv(data: bytes) -> list[Item]:
    return list(general_log_tsv.parse(io.BytesIO(data)))


def who(r: LogRecord) -> tuple:
    return (r.occurred_at, r.connection_id, r.command, r.argument, r.user, r.host, r.ip, r.database, r.extra)


# -- user_host ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("root[root] @ localhost []", ("root", "root", "localhost", None)),
        ("[root] @ localhost []", ("root", None, "localhost", None)),  # Connect row: no account yet
        ("root[root] @  [127.0.0.1]", ("root", "root", None, "127.0.0.1")),  # no host name resolved
        ("u[u] @  [127.0.0.1]", ("u", "u", None, "127.0.0.1")),
        ("alice[alice] @ localhost [127.0.0.1]", ("alice", "alice", "localhost", "127.0.0.1")),
        ("[tl_alice] @  [127.0.0.1]", ("tl_alice", None, None, "127.0.0.1")),  # before login
        ("joe[anon] @ db1.example.com [10.0.0.5]", ("anon", "joe", "db1.example.com", "10.0.0.5")),
        ("[SQL_SLAVE] @  []", ("SQL_SLAVE", None, None, None)),
        ("x[we[ir]d] @ h [::1]", ("we[ir]d", "x", "h", "::1")),
        (b"b\xffd[b\xffd] @ h []", ("b\ufffdd", "b\ufffdd", "h", None)),
        ("not a user_host", (None, None, None, None)),
        ("", (None, None, None, None)),
    ],
)
def test_it_reads_user_host_variants(text: str | bytes, expected: tuple) -> None:
    assert parse_user_host(text) == expected


# -- one row -----------------------------------------------------------------------------


def test_it_builds_a_live_row_with_a_canonical_raw() -> None:
    when = datetime(2026, 11, 22, 12, 15, 50, 299448, tzinfo=UTC)
    arg = b"INSERT 'a\\b\tc\nd\re\x00f\xff'"
    r = row_record(when, b"tl_alice[tl_alice] @  [127.0.0.1]", 238, 1, b"Query", arg)
    assert r == LogRecord(
        line=0,
        offset=0,
        raw=b"2026-11-22 12:15:50.299448+00:00\ttl_alice[tl_alice] @  [127.0.0.1]\t238\t1\tQuery\t"
        b"INSERT 'a\\\\b\\tc\\nd\\re\\0f\xff'\n",
        occurred_at=when,
        connection_id=238,
        command="Query",
        argument=arg,
        user="tl_alice",
        host="127.0.0.1",
        ip="127.0.0.1",
        extra={"account": "tl_alice", "server_id": "1"},
    )
    # Stable: the same row gives the same bytes and hash; a twin a different hash.
    assert r.raw == canonical_row(when, "tl_alice[tl_alice] @  [127.0.0.1]", 238, 1, "Query", arg)
    assert row_hash(r.raw) == row_hash(r.raw) != row_hash(r.raw, 1)
    assert len(row_hash(r.raw)) == 16


def test_it_reads_who_connected_from_a_connect_row() -> None:
    when = datetime(2026, 1, 2, 3, 4, 5)
    r = row_record(
        when, "[bob] @ app.example [10.1.2.3]", 7, 1, "Connect", b"bob@app.example on shop using TCP/IP"
    )
    assert (r.user, r.host, r.ip, r.database, r.extra) == (
        "bob",
        "app.example",
        "10.1.2.3",
        "shop",
        {"server_id": "1", "connection_type": "TCP/IP"},
    )


def test_it_keeps_an_unreadable_user_host_in_extra() -> None:
    r = row_record(None, "???", 1, 2, "Query", b"SELECT 1")
    assert (r.user, r.host, r.ip, r.extra) == (None, None, None, {"user_host": "???", "server_id": "2"})
    assert r.raw == b"-\t???\t1\t2\tQuery\tSELECT 1\n"


# -- general_log.CSV -----------------------------------------------------------------------


def test_it_reads_every_csv_escape() -> None:
    line = (
        b'"2024-01-01 10:00:00.123456","root[root] @ localhost []",5,1,"Query",'
        b"\"SELECT \\\"q\\\", '\\\\', 'a\tb', 'x\\ny\\rz', '\x00', '\xff\xfe', \\q\"\n"
    )
    assert csv(line) == [
        LogRecord(
            line=1,
            offset=0,
            raw=line,
            occurred_at=datetime(2024, 1, 1, 10, 0, 0, 123456),
            connection_id=5,
            command="Query",
            argument=b"SELECT \"q\", '\\', 'a\tb', 'x\ny\rz', '\x00', '\xff\xfe', \\q",
            user="root",
            host="localhost",
            extra={"account": "root", "server_id": "1"},
        )
    ]


def test_it_reports_bad_csv_lines_and_goes_on() -> None:
    good = b'"2024-01-01 10:00:01","u[u] @  [10.0.0.1]",6,1,"Quit",""\n'
    bad = [
        b'"2024-01-01 10:00:00","u[u] @ h []",x,1,"Query","SELECT 1"\n',  # thread id not a number
        b'"2024-01-01 10:00:00","u[u] @ h []",5,1,"Query","SELECT 1\n',  # unterminated quote
        b"\x00\xff garbage " * 1000 + b"\n",
    ]
    data = b"".join(bad) + b"\n" + good
    items = csv(data)
    assert [type(i).__name__ for i in items] == ["Problem", "Problem", "Problem", "LogRecord"]
    offsets = [0, len(bad[0]), len(bad[0]) + len(bad[1])]
    for problem, raw, offset, line in zip(items, bad, offsets, [1, 2, 3], strict=False):
        assert isinstance(problem, Problem)
        assert (problem.line, problem.offset, problem.raw) == (line, offset, raw[:PROBLEM_EXCERPT_BYTES])
        assert problem.reason.startswith("not a general_log.CSV row")
    last = items[3]
    assert isinstance(last, LogRecord)
    assert (last.line, last.offset, last.raw, last.command, last.argument) == (
        5,
        len(data) - len(good),
        good,
        "Quit",
        b"",
    )
    assert (last.occurred_at, last.host, last.ip) == (datetime(2024, 1, 1, 10, 0, 1), "10.0.0.1", "10.0.0.1")


def test_it_keeps_a_row_with_an_impossible_time() -> None:
    line = b'"2024-13-01 10:00:00.000000","u[u] @ h []",5,1,"Query","DROP TABLE t"\n'
    record, problem = csv(line)
    assert isinstance(record, LogRecord) and isinstance(problem, Problem)
    assert (record.occurred_at, record.argument, record.extra["invalid_time"]) == (
        None,
        b"DROP TABLE t",
        "2024-13-01 10:00:00.000000",
    )
    assert (problem.line, problem.offset) == (1, 0)
    assert problem.reason.startswith("invalid time '2024-13-01 10:00:00.000000'")


def test_it_positions_rows_from_a_start_offset() -> None:
    line = b'"2024-01-01 10:00:00","u[u] @ h []",5,1,"Query","SELECT 1"\r\n'
    (r,) = general_log_csv.parse([line], start_offset=1000, start_line=40)
    assert isinstance(r, LogRecord)
    assert (r.line, r.offset, r.argument, r.occurred_at) == (40, 1000, b"SELECT 1", datetime(2024, 1, 1, 10))


# -- INTO OUTFILE export ----------------------------------------------------------------------


def test_it_reads_every_tsv_escape() -> None:
    # What the server writes (backslash + the byte itself, \0 for NUL), and what LOAD DATA reads.
    row = (
        b"2024-01-01 10:00:00.5\tu[u] @ h [1.2.3.4]\t9\t3\tQuery\t"
        b"a\\\\b\\\tc\\\nd\re\\0f\xff \\t\\n\\r\\Z\\b\n"
    )
    items = tsv(row + row)
    assert len(items) == 2
    first = items[0]
    assert first == LogRecord(
        line=1,
        offset=0,
        raw=row,
        occurred_at=datetime(2024, 1, 1, 10, 0, 0, 500000),
        connection_id=9,
        command="Query",
        argument=b"a\\b\tc\nd\re\x00f\xff \t\n\r\x1a\b",
        user="u",
        host="h",
        ip="1.2.3.4",
        extra={"account": "u", "server_id": "3"},
    )
    assert (items[1].line, items[1].offset) == (3, len(row))  # the first row spans two lines


def test_a_carriage_return_before_the_line_end_is_the_arguments() -> None:
    # INTO OUTFILE writes \r unescaped: "\r\n" ends a row whose argument ends in "\r".
    (r,) = tsv(b"2024-01-01 10:00:00\tu[u] @ h []\t5\t1\tQuery\tSELECT 1\r\n")
    assert isinstance(r, LogRecord)
    assert (r.argument, r.raw) == (
        b"SELECT 1\r",
        b"2024-01-01 10:00:00\tu[u] @ h []\t5\t1\tQuery\tSELECT 1\r\n",
    )


def test_it_reads_null_values_in_an_export() -> None:
    (r,) = tsv(b"2024-01-01 10:00:00\t\\N\t1\t1\tQuery\t\\N\n")
    assert isinstance(r, LogRecord)
    assert (r.user, r.argument, r.extra) == (None, b"", {"server_id": "1", "null": "user_host,argument"})


def test_it_reports_bad_tsv_rows_and_goes_on() -> None:
    bad = [
        b"2024-01-01 10:00:00\tu[u] @ h []\t5\t1\tQuery\n",  # five fields
        b"2024-01-01 10:00:00\tu[u] @ h []\t5\t1\tQuery\ta\tb\n",  # seven
        b"yesterday\tu[u] @ h []\t5\t1\tQuery\tSELECT 1\n",
        b"2024-01-01 10:00:00\tu[u] @ h []\tfive\t1\tQuery\tSELECT 1\n",
    ]
    good = b"2024-01-01 10:00:01\tu[u] @ h []\t6\t1\tQuit\t\n"
    items = tsv(b"".join(bad) + good)
    assert [type(i).__name__ for i in items] == ["Problem"] * 4 + ["LogRecord"]
    offset = 0
    for n, (problem, raw) in enumerate(zip(items, bad, strict=False)):
        assert (problem.line, problem.offset, problem.raw) == (n + 1, offset, raw)
        offset += len(raw)
    assert (items[4].line, items[4].offset, items[4].command) == (5, offset, "Quit")


def test_it_ends_a_tsv_file_with_a_dangling_escaped_newline() -> None:
    (r,) = tsv(b"2024-01-01 10:00:00\tu[u] @ h []\t5\t1\tQuery\tSELECT 1\\\n")
    assert isinstance(r, LogRecord)
    assert r.argument == b"SELECT 1\n"


# -- the real server's files -----------------------------------------------------------------


def test_csv_and_tsv_of_the_same_table_give_the_same_records() -> None:
    from_csv, from_tsv = csv(CSV.read_bytes()), tsv(TSV.read_bytes())
    assert all(isinstance(r, LogRecord) for r in from_csv + from_tsv)
    assert [who(r) for r in from_csv] == [who(r) for r in from_tsv]
    # Raw bytes tile each file.
    assert b"".join(r.raw for r in from_csv) == CSV.read_bytes()
    assert b"".join(r.raw for r in from_tsv) == TSV.read_bytes()


def test_it_attributes_the_scenario_rows() -> None:
    records = csv(CSV.read_bytes())
    summary = [
        (r.connection_id, r.command, r.user, r.extra.get("account"), r.host, r.database) for r in records
    ]
    alice = (238, "tl_alice", "tl_alice", "127.0.0.1")
    bob = (239, "tl_bob", "tl_bob", "127.0.0.1")
    q = lambda who, cmd="Query": (who[0], cmd, who[1], who[2], who[3], None)  # noqa: E731
    assert summary == [
        (238, "Connect", "tl_alice", None, "127.0.0.1", "gltable2_shop"),
        *[q(alice)] * 5,
        q(alice, "Quit"),
        (239, "Connect", "tl_bob", None, "127.0.0.1", None),
        *[q(bob)] * 4,
        q(bob, "Quit"),
    ]
    assert [r.argument for r in records[1:6]] == [
        b"SET NAMES utf8mb4",
        b"SELECT id, note FROM orders WHERE id = 1",
        b"SELECT id,\n       note\nFROM orders\nWHERE id > 1",
        b"INSERT INTO orders VALUES (4, 'say \"hi\" \\\\ back\ttab\nnew\rcr\x00nul')",
        b"SELECT 1 /* \\xFF invalid utf-8 */",  # MariaDB's utf8mb3 column rewrote the 0xFF byte
    ]
    assert [r.argument for r in records[10:12]] == [b"DELETE FROM orders WHERE id = 2", b"DELETE FROM orders"]
    assert records[0].occurred_at == datetime(2026, 11, 22, 12, 15, 50, 297889)


# -- recognisers --------------------------------------------------------------------------------


def test_the_recognisers_know_their_own_files_only() -> None:
    csv_head, tsv_head = CSV.read_bytes()[:1024], TSV.read_bytes()[:1024]
    assert general_log_csv.recognise(csv_head) and not general_log_tsv.recognise(csv_head)
    assert general_log_tsv.recognise(tsv_head) and not general_log_csv.recognise(tsv_head)
    others = [*(REPO / "tests" / "fixtures" / "genlog").glob("*.log")]
    others += [*(REPO / "tests" / "fixtures" / "server_audit").glob("*.log")]
    if CORPUS.is_dir():
        others += [p for p in CORPUS.rglob("*") if p.is_file() and "general-log-table" not in str(p)]
    assert len(others) >= 3
    for path in others:
        head = path.read_bytes()[:1024]
        assert not general_log_csv.recognise(head), path
        assert not general_log_tsv.recognise(head), path


# -- corpus ---------------------------------------------------------------------------------------


def _vertical_rows(data: bytes) -> list[dict[str, bytes]]:
    """The rows of a `SELECT ... \\G` listing: `column: value` lines under `*** N. row ***`."""
    rows: list[dict[str, bytes]] = []
    for line in data.splitlines():
        if line.startswith(b"*****") and line.rstrip().endswith(b"row ***************************"):
            rows.append({})
        elif rows and b": " in line:
            name, value = line.split(b": ", 1)
            rows[-1][name.strip().decode()] = value
    return rows


def test_the_rows_of_the_documented_select_read_as_records() -> None:
    path = CORPUS / "general-log-table" / "mariadb-docs_mysql.general_log-table_SELECT-vertical.txt"
    if not path.exists():
        pytest.skip(CORPUS_MISSING)
    # A \\G listing is no file format we ingest: its values go through row_record as a
    # live row's would, and every field of the result is compared.
    rows = _vertical_rows(path.read_bytes())
    records = [
        row_record(
            datetime.fromisoformat(row["event_time"].decode()),
            row["user_host"],
            int(row["thread_id"]),
            int(row["server_id"]),
            row["command_type"],
            row["argument"],
        )
        for row in rows
    ]
    expected = [
        (datetime(2014, 11, 11, 8, 40, 4, 117177), b"SELECT * FROM test.s"),
        (datetime(2014, 11, 11, 8, 40, 10, 501131), b"SELECT * FROM mysql.general_log"),
    ]
    assert records == [
        LogRecord(
            line=0,
            offset=0,
            raw=canonical_row(when, "root[root] @ localhost []", 74, 1, "Query", argument),
            occurred_at=when,
            connection_id=74,
            command="Query",
            argument=argument,
            user="root",
            host="localhost",
            ip=None,
            extra={"account": "root", "server_id": "1"},
        )
        for when, argument in expected
    ]
    assert (
        records[0].raw
        == b"2014-11-11 08:40:04.117177\troot[root] @ localhost []\t74\t1\tQuery\tSELECT * FROM test.s\n"
    )


# -- the real server's escaping, byte by byte ------------------------------------------------------

ENGINE_DB = "gltable_bytes"
# Every byte value, and the sequences an escaping reader could get wrong.
VALUES = [bytes(range(256)), b"\\", b"\\\\", b'"', b"\\n", b"end\\", b"", b'\\q\\"\\r', b"\\N", b"\t\n\r"]


@pytest.mark.mariadb
def test_what_the_csv_engine_and_into_outfile_write_reads_back_byte_for_byte(tmp_path: Path) -> None:
    pymysql = pytest.importorskip("pymysql")
    try:
        root = pymysql.connect(unix_socket="/run/mysqld/mysqld.sock", user="root", autocommit=True)
    except Exception as e:  # any failure to connect means "no server here"
        pytest.skip(f"MariaDB is not reachable on /run/mysqld/mysqld.sock: {e}")
    datadir_file = Path(f"/var/lib/mysql/{ENGINE_DB}/general_log.CSV")
    export = Path(f"/tmp/{ENGINE_DB}-{os.getpid()}.tsv")
    try:
        with root.cursor() as c:
            c.execute("SET SESSION sql_log_off = ON")
            c.execute("SET SESSION time_zone = '+00:00'")
            c.execute(f"DROP DATABASE IF EXISTS {ENGINE_DB}")
            c.execute(f"CREATE DATABASE {ENGINE_DB}")
            # The log table's columns and engine; the argument a blob (as in MySQL) to take any byte.
            c.execute(f"CREATE TABLE {ENGINE_DB}.general_log LIKE mysql.general_log")
            c.execute(f"ALTER TABLE {ENGINE_DB}.general_log MODIFY argument MEDIUMBLOB NOT NULL")
            for n, value in enumerate(VALUES):
                c.execute(
                    f"INSERT INTO {ENGINE_DB}.general_log VALUES (%s, 'u[u] @ h []', %s, 1, 'Query', %s)",
                    (datetime(2024, 1, 1, 0, 0, n, 500), n, value),
                )
            c.execute(f"FLUSH TABLES {ENGINE_DB}.general_log")
            c.execute(f"SELECT * FROM {ENGINE_DB}.general_log INTO OUTFILE '{export}'")
        try:
            engine_file = datadir_file.read_bytes()
        except OSError as e:
            pytest.skip(f"cannot read the server's datadir: {e}")
        exported = export.read_bytes()
    finally:
        export.unlink(missing_ok=True)
        with root.cursor() as c:
            c.execute(f"DROP DATABASE IF EXISTS {ENGINE_DB}")
        root.close()
    from_csv, from_tsv = csv(engine_file), tsv(exported)
    for records, data in ((from_csv, engine_file), (from_tsv, exported)):
        assert all(isinstance(r, LogRecord) for r in records)
        assert [(r.connection_id, r.argument) for r in records] == list(enumerate(VALUES))
        assert [r.occurred_at for r in records] == [
            datetime(2024, 1, 1, 0, 0, n, 500) for n in range(len(VALUES))
        ]
        assert b"".join(r.raw for r in records) == data
