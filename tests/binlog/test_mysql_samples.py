"""MySQL 5.7, 8.0 and 9.x binary logs written by real servers (tests/fixtures/binlog_mysql, see
its PROVENANCE.md): every row our reader decodes, checked against facts established apart from
our code.

- `mariadb-binlog --verbose` reads the same files here (MySQL 5.7 and 8.0 files whose rows have
  no JSON column and whose transactions are not compressed): every row of every rows event,
  column by column, must be what it prints.
- Where it cannot (JSON columns, TRANSACTION_PAYLOAD), the facts the sample's own repository
  asserts in its tests (blackbeam/rust_mysql_common src/binlog/mod.rs,
  osheroff/mysql-binlog-connector-java BinaryLogFileReaderIntegrationTest.java); and for
  compressed transactions, the uncompressed events written back into a plain binlog file by
  this test (zstandard directly) and read by `mariadb-binlog`.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
import struct
import subprocess
import zlib
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import zstandard
from pymysqlreplication.constants import FIELD_TYPE as T

from ingest.binlog import reader as r
from ingest.binlog.flashback import flashback_sql, table_info
from ingest.binlog.images import RowImage, row_images, table_of
from ingest.binlog.join import LoggedStatement, join, row_statements
from ingest.binlog.metadata import Transaction, scan
from ingest.binlog.metadata import _mysql_tagged_gtid as _tagged
from ingest.binlog.reader import BinlogProblem, read_events
from ingest.binlog.tables import ColumnDef, TableDef

SAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "binlog_mysql"
MARIADB_BINLOG = shutil.which("mariadb-binlog") or shutil.which("mysqlbinlog")
needs_mariadb_binlog = pytest.mark.skipif(
    MARIADB_BINLOG is None, reason="mariadb-binlog is not installed (apt-get install mariadb-client)"
)

# Files mariadb-binlog decodes whole (it stops at MySQL's JSON columns and compressed payloads).
READABLE = [
    "mysql-bin.checksum-crc32",  # MySQL 5.7.21, CRC32, 60 transactions
    "mysql-bin.checksum-none",  # MySQL 5.7.20, no checksums
    "mysql-enum-string-set.000001",  # MySQL 8.0.28, GTIDs, FULL metadata, ENUM/SET/TEXT
    "mysql_type_bit.000001",  # MySQL 8.0.26, BIT
    "time_issue.000001",  # MySQL 8.0.40, a negative TIME of more than 24 hours
    "minimal_row_metadata.000001",  # MySQL 8.0.40, binlog_row_image=MINIMAL, row metadata MINIMAL
    "binlog-invisible-columns.000001",  # MySQL 8.0.26, invisible columns
    "01-basic-crud.binlog",  # MySQL 8.0.46, FULL metadata, ROWS_QUERY, GTIDs
    "02-multi-statement-txn.binlog",  # MySQL 8.0.46, DECIMAL, two UPDATEs in one transaction
]


def _scan(name: str) -> list[Any]:
    with (SAMPLES / name).open("rb") as f:
        return list(scan(f, name))


def _transactions(name: str) -> list[Transaction]:
    return [x for x in _scan(name) if isinstance(x, Transaction)]


def _rows(name: str) -> list[tuple[TableDef, RowImage]]:
    """Every row of the file, in order, with the table map it was decoded by."""
    out = []
    with (SAMPLES / name).open("rb") as f:
        for tx in _transactions(name):
            for statement in tx.statements:
                for change in statement.changes:
                    table = table_of(f, change)
                    out.extend((table, row) for row in row_images(f, change))
    return out


# -- mariadb-binlog's reading ---------------------------------------------------------------

_STATEMENT = re.compile(r"^### (INSERT INTO|UPDATE|DELETE FROM) `([^`]*)`\.`([^`]*)`$")
_VALUE = re.compile(r"^###   @(\d+)=(.*)$")
_CHANGE = {"INSERT INTO": "insert", "UPDATE": "update", "DELETE FROM": "delete"}


def _reference(path: Path) -> list[dict[str, Any]]:
    """The rows `mariadb-binlog --verbose` prints: table, change, before and after images as
    {column number: printed value}."""
    assert MARIADB_BINLOG is not None
    done = subprocess.run(
        [MARIADB_BINLOG, "--verbose", "--base64-output=decode-rows", str(path)],
        capture_output=True,
        timeout=60,
        check=True,
    )
    rows: list[dict[str, Any]] = []
    image: dict[int, bytes] = {}
    for line in done.stdout.split(b"\n"):
        text = line.decode("utf-8", "surrogateescape")
        if m := _STATEMENT.match(text):
            rows.append({"table": f"{m[2]}.{m[3]}", "change": _CHANGE[m[1]], "before": None, "after": None})
        elif text == "### WHERE":
            image = rows[-1]["before"] = {}
        elif text == "### SET":
            image = rows[-1]["after"] = {}
        elif m := _VALUE.match(text):
            image[int(m[1])] = m[2].encode("utf-8", "surrogateescape")
    return rows


def _unquote(printed: bytes) -> bytes:
    """A quoted value as mariadb-binlog prints it ('...' with \\xNN, \\\\ and \\' escapes)."""
    assert printed[:1] == b"'" and printed[-1:] == b"'", printed
    body, out, i = printed[1:-1], bytearray(), 0
    while i < len(body):
        if body[i : i + 2] == b"\\x":
            out.append(int(body[i + 2 : i + 4], 16))
            i += 4
        elif body[i : i + 1] == b"\\":
            out += body[i + 1 : i + 2]
            i += 2
        else:
            out.append(body[i])
            i += 1
    return bytes(out)


def _same(printed: bytes, value: Any, column: ColumnDef) -> bool:
    """Does our value say what mariadb-binlog printed for the column?"""
    text = printed.decode("utf-8", "surrogateescape")
    if text == "NULL":
        return value is None
    if column.type == T.BIT:  # b'0101'
        return int(text[2:-1], 2) == value
    if column.type == T.ENUM:  # the index of the value in the definition
        return (column.enum_values.index(value) + 1 if column.enum_values else value) == int(text)
    if column.type == T.SET:  # the bits of the members, b'...'
        members = set(value.split(",")) if value else set()
        mask = sum(1 << i for i, v in enumerate(column.set_values) if v in members)
        return mask == int(text[2:-1], 2)
    if column.type in (T.TIMESTAMP, T.TIMESTAMP2):  # seconds since the epoch (UTC)
        seconds = Decimal(text)
        when = datetime.fromtimestamp(int(seconds), UTC).strftime("%Y-%m-%d %H:%M:%S")
        fraction = seconds - int(seconds)
        return value == when + (f".{int(fraction * 10**6):06d}" if fraction else "")
    if text.startswith("'"):
        raw = _unquote(printed)
        if isinstance(value, bytes):
            return raw == value
        return raw == value.encode("latin-1" if column.charset == "latin1" else "utf-8")
    if column.type in (T.FLOAT, T.DOUBLE):
        return abs(float(text) - value) <= 1e-6 * max(1.0, abs(value))
    if column.type == T.NEWDECIMAL:
        return Decimal(text) == value
    signed, _, unsigned = text.partition(" (")  # "-1 (255)": the signed reading, then unsigned
    return value == (int(unsigned.rstrip(")")) if column.unsigned and unsigned else int(signed))


@needs_mariadb_binlog
@pytest.mark.parametrize("name", READABLE)
def test_every_row_is_what_mariadb_binlog_reads(name: str) -> None:
    expected = _reference(SAMPLES / name)
    ours = _rows(name)
    assert expected, f"mariadb-binlog printed no rows for {name}"
    assert len(ours) == len(expected)
    for n, ((table, row), want) in enumerate(zip(ours, expected, strict=True)):
        assert (row.table, row.change) == (want["table"], want["change"]), f"row {n}"
        for image, printed in ((row.before, want["before"]), (row.after, want["after"])):
            assert (image is None) == (printed is None), f"row {n}"
            if image is None:
                continue
            names = [c.name or f"@{c.index + 1}" for c in table.columns]
            # Columns missing from the image (MINIMAL) are missing from mariadb-binlog's too.
            assert sorted(printed) == [i + 1 for i, name_ in enumerate(names) if name_ in image], f"row {n}"
            for number, shown in printed.items():
                column = table.columns[number - 1]
                value = image[names[number - 1]]
                assert _same(shown, value, column), f"row {n} @{number}: {shown!r} != {value!r}"


@needs_mariadb_binlog
@pytest.mark.parametrize("name", READABLE)
def test_each_transaction_has_the_thread_of_its_begin(name: str) -> None:
    """MySQL's Query BEGIN carries the thread (connection) id: the join's strongest evidence."""
    assert MARIADB_BINLOG is not None
    out = subprocess.run([MARIADB_BINLOG, str(SAMPLES / name)], capture_output=True, timeout=60, check=True)
    begins = []
    for event in out.stdout.decode("utf-8", "replace").split("\n# at "):  # one event each
        found = re.search(r"\tQuery\tthread_id=(\d+)\t", event)
        if found and any(line.strip() == "BEGIN" for line in event.splitlines()):
            begins.append(int(found[1]))
    ours = [t.thread_id for t in _transactions(name) if t.statements and t.statements[0].kind == "rows"]
    assert begins and ours == begins


# -- facts the samples' own repositories assert ----------------------------------------------


@pytest.mark.parametrize(
    ("name", "events"),
    [("mysql-bin.checksum-crc32", 303), ("mysql-bin.checksum-none", 191), ("mysql-bin.compressed", 5)],
)
def test_it_reads_as_many_events_as_the_connector_does(name: str, events: int) -> None:
    # BinaryLogFileReaderIntegrationTest: readAll(reader, 303 / 191 / 5)
    with (SAMPLES / name).open("rb") as f:
        items = list(read_events(f))
    assert not [x for x in items if isinstance(x, BinlogProblem)]
    assert sum(isinstance(x, r.Event) for x in items) == events


def test_an_unknown_ignorable_event_is_told_with_its_position() -> None:
    # mysql-bin.aurora-padding, as SHOW BINLOG EVENTS lists it in the connector's test: Format_desc
    # at 4, Previous_gtids at 185, Anonymous_Gtid at 216, Aurora_padding at 281, Query BEGIN at 1209.
    with (SAMPLES / "mysql-bin.aurora-padding").open("rb") as f:
        positions = [(x.position, x.type) for x in read_events(f) if isinstance(x, r.Event)]
    assert positions == [(4, 15), (185, 35), (216, 34), (281, 100), (1209, 2)]
    problems = [x for x in _scan("mysql-bin.aurora-padding") if isinstance(x, BinlogProblem)]
    assert (
        problems[0].position == 281 and "type 100" in problems[0].reason and "ignorable" in problems[0].reason
    )
    assert "ends inside a transaction" in problems[-1].reason  # the file stops after BEGIN


def test_enum_set_and_text_columns_are_the_values_rust_mysql_common_asserts() -> None:
    digits = "0123456789" * 10
    long = ("0123456789" * 12 + "012345678") * 2 + "0123456789" * 4  # 298 characters
    rows = [row for _, row in _rows("mysql-enum-string-set.000001")]
    first = {"f1": digits, "f2": long, "f3": "var1", "f4": "one,three", "f5": "0123456789"}
    second = {"f1": "field1", "f2": "field_2", "f3": "variant2", "f4": "two,four"}
    assert [r_.change for r_ in rows] == ["insert", "update", "delete"]
    assert rows[0].after is not None and rows[1].after is not None and rows[2].before is not None
    assert {k: rows[0].after[k] for k in first} == first
    assert rows[1].before == rows[0].after
    assert {k: rows[1].after[k] for k in second} == second and rows[1].after["f5"] == long
    assert rows[2].before == rows[1].after


def test_bit_columns_and_the_unsigned_int_of_minimal_metadata() -> None:
    ((_, bit),) = _rows("mysql_type_bit.000001")
    assert bit.after == {"a": 0b100, "b": "foo", "c": 0b100000}
    ((table, minimal),) = _rows("minimal_row_metadata.000001")
    assert minimal.after is not None and minimal.after["@5"] == 3230202323  # rust: column 4 (from 0)
    assert table.columns[2].charset == "utf8mb4" and not minimal.complete  # rust: utf8mb4_0900_ai_ci


def test_a_negative_time_over_a_day() -> None:
    ((_, row),) = _rows("time_issue.000001")
    assert row.after == {"@1": "-507:48:27"}  # rust: Time(negative, 21 days, 3 h, 48 min, 27 s)


# -- MySQL 8 features mariadb-binlog cannot read -----------------------------------------------


def _rebuilt(name: str) -> bytes:
    """The file with each TRANSACTION_PAYLOAD replaced by the events it holds (decompressed here
    with zstandard, framed with checksums and positions as a server would): a plain binlog."""
    data = (SAMPLES / name).read_bytes()
    out = bytearray(data[:4])

    def put(header: bytes, body: bytes) -> None:
        ts, kind, server, _size, _next, flags = r.HEADER.unpack(header)
        size = 19 + len(body) + 4
        head = r.HEADER.pack(ts, kind, server, size, len(out) + size, flags)
        out.extend(head + body + zlib.crc32(body, zlib.crc32(head)).to_bytes(4, "little"))

    at = 4
    while at < len(data):
        header = data[at : at + 19]
        size = struct.unpack_from("<I", header, 9)[0]
        body = data[at + 19 : at + size - 4]  # these samples have CRC32 checksums
        if header[4] == r.TRANSACTION_PAYLOAD:
            frame = body[body.index(b"\x28\xb5\x2f\xfd") :]  # the zstd frame after the field header
            inner = zstandard.ZstdDecompressor().stream_reader(frame).read()
            i = 0
            while i < len(inner):
                n = struct.unpack_from("<I", inner, i + 9)[0]
                put(inner[i : i + 19], inner[i + 19 : i + n])
                i += n
        elif header[4] == 15:
            out.extend(data[at : at + size])
        else:
            put(header, body)
        at += size
    return bytes(out)


@needs_mariadb_binlog
@pytest.mark.parametrize("name", ["transaction_compression.000001", "mysql-bin.compressed"])
def test_compressed_transactions_hold_the_rows_mariadb_binlog_reads_once_uncompressed(
    name: str, tmp_path: Path
) -> None:
    plain = tmp_path / name
    plain.write_bytes(_rebuilt(name))
    expected = _reference(plain)
    ours = _rows(name)
    assert expected and len(ours) == len(expected)
    for (table, row), want in zip(ours, expected, strict=True):
        assert (row.table, row.change) == (want["table"], want["change"])
        for image, printed in ((row.before, want["before"]), (row.after, want["after"])):
            assert (image is None) == (printed is None)
            for number, shown in (printed or {}).items():
                column = table.columns[number - 1]
                assert image is not None and _same(shown, image[f"@{number}"], column)
    assert not [x for x in _scan(name) if isinstance(x, BinlogProblem) and "compress" in x.reason]


def test_a_compressed_transaction_is_begin_table_map_rows_and_xid() -> None:
    # rust_mysql_common: the payload of transaction_compression.000001 reads QUERY_EVENT,
    # TABLE_MAP_EVENT, WRITE_ROWS_EVENT, XID_EVENT and nothing more.
    from ingest.binlog.payload import events

    with (SAMPLES / "transaction_compression.000001").open("rb") as f:
        payload = next(
            x for x in read_events(f) if isinstance(x, r.Event) and x.type == r.TRANSACTION_PAYLOAD
        )
    assert [e.type for e in events(payload)] == [r.QUERY, r.TABLE_MAP, r.WRITE_ROWS_V2, r.XID]
    (tx,) = _transactions("transaction_compression.000001")
    assert tx.ended_by == "xid" and tx.rows == 1 and tx.end == payload.position + payload.size


def test_a_partial_json_update_keeps_its_before_image_and_leaves_the_diff_out() -> None:
    """json.binlog.000001 (MySQL 8.0.22, binlog_row_value_options=PARTIAL_JSON): the table is
    t(id INT PRIMARY KEY, json_col JSON, name VARCHAR AS (json_col->>'$.name'), age INT AS
    (json_col->'$.age')) with six rows; the last UPDATE is a PARTIAL_UPDATE_ROWS event."""
    rows = _rows("json.binlog.000001")
    inserts = [row for _, row in rows if row.change == "insert"]
    names = {"Joe", "Sue", "Pete"}
    assert len(inserts) == 6 and {row.after["@3"] for row in inserts if row.after} == names
    for row in inserts:  # the generated columns agree with the JSON document, read by our decoder
        assert row.after is not None
        assert (
            f'"name": "{row.after["@3"]}"' in row.after["@2"]
            and f'"age": {row.after["@4"]}' in row.after["@2"]
        )
    partial = [row for _, row in rows if row.change == "update"][-6:]
    assert all(row.after is not None and "@2" not in row.after and not row.complete for row in partial)
    assert [row.before for row in partial] == [{"@1": n} for n in range(1, 7)]  # MINIMAL: the key
    assert not [x for x in _scan("json.binlog.000001") if isinstance(x, BinlogProblem)]


def test_a_tagged_gtid_is_read_as_rust_mysql_common_asserts() -> None:
    # gtid_tagged_log_event_from_binlog: sid 55778904-0299-11f1-b1b8-4ef0c4956feb, tag "mytag", gno 3
    items = _scan("binlog_transaction_with_GTID_TAG.000001")  # MySQL 9.6.0
    (tx,) = [x for x in items if isinstance(x, Transaction)]
    assert tx.gtid == "55778904-0299-11f1-b1b8-4ef0c4956feb:mytag:3"
    assert tx.ended_by == "xid" and tx.rows == 1 and tx.start == 245
    assert not [x for x in items if isinstance(x, BinlogProblem)]


def test_a_tagged_gtid_cut_anywhere_is_a_problem_never_an_exception() -> None:
    data = (SAMPLES / "binlog_transaction_with_GTID_TAG.000001").read_bytes()
    header = data[245:264]
    body = data[264 : 245 + struct.unpack_from("<I", header, 9)[0] - 4]
    for cut in range(len(body)):
        event = r.Event(245, 0, r.MYSQL_GTID_TAGGED, 1, 19 + cut, 0, 0, body[:cut])
        try:
            gtid = _tagged(event)
        except (ValueError, IndexError):
            continue  # the metadata pass turns these into a problem at the event's position
        assert gtid.startswith("55778904-")


def test_every_cut_of_a_compressed_sample_is_a_problem_never_an_exception() -> None:
    data = (SAMPLES / "mysql-bin.compressed").read_bytes()
    ends = {x.position + x.size for x in read_events(io.BytesIO(data)) if isinstance(x, r.Event)}
    for cut in range(5, len(data)):
        items = list(scan(io.BytesIO(data[:cut]), "f"))
        # a cut between events is a file that ends there, unless a transaction is open
        assert any(isinstance(x, BinlogProblem) for x in items) or cut in ends, cut
    for at in range(4, len(data), 7):  # a flipped byte: the checksum catches it
        copy = bytearray(data)
        copy[at] ^= 0x5A
        assert any(isinstance(x, BinlogProblem) for x in scan(io.BytesIO(bytes(copy)), "f")), at


def _with_body(data: bytes, position: int, body: bytes) -> bytes:
    """`data` with the event at `position` given `body`, its size and CRC32 made right."""
    header = bytearray(data[position : position + 19])
    old = struct.unpack_from("<I", header, 9)[0]
    struct.pack_into("<I", header, 9, 19 + len(body) + 4)
    crc = zlib.crc32(body, zlib.crc32(bytes(header))).to_bytes(4, "little")
    return data[:position] + bytes(header) + body + crc + data[position + old :]


def test_a_hostile_payload_with_a_right_checksum_is_a_problem_never_an_exception() -> None:
    """Every byte of the payload event's body changed (its checksum made right again), and the
    body cut at every length: the scan never raises, and says where when it cannot read it."""
    data = (SAMPLES / "transaction_compression.000001").read_bytes()
    at = 274  # the TRANSACTION_PAYLOAD event
    body = data[at + 19 : at + struct.unpack_from("<I", data, at + 9)[0] - 4]
    for i in range(len(body)):
        for changed in (body[:i] + bytes([body[i] ^ 0x5A]) + body[i + 1 :], body[:i]):
            items = list(scan(io.BytesIO(_with_body(data, at, changed)), "f"))
            problems = [x for x in items if isinstance(x, BinlogProblem)]
            txs = [x for x in items if isinstance(x, Transaction)]
            assert problems or (txs and txs[0].ended_by == "xid"), i
            # positions name the file's bytes: the payload event, never an address inside it
            assert all(p.position >= 0 for p in problems) and all(t.start >= 0 and t.end >= 0 for t in txs)


# -- what must be shown: the join by thread id and the flashback -----------------------------


def test_the_thread_of_a_mysql_begin_decides_between_identical_statements() -> None:
    """Two connections sent the same DELETE in the same second; the binlog (real MySQL 8.0.28
    bytes) says thread 9 ran the delete, so the link is to connection 9's statement."""
    txs = _transactions("mysql-enum-string-set.000001")
    rows = row_statements(txs)
    delete = rows[-1]
    logged = [LoggedStatement(c, delete.time, c, "DELETE FROM t", 1, None) for c in (8, 9)]
    link = join(logged, [delete])[0]
    assert (link.statement, link.confidence) == (9, "thread_id")  # type: ignore[union-attr]


def test_flashback_of_a_mysql_8_statement_puts_the_before_images_back() -> None:
    """Applied to MariaDB here: the statements undone newest first bring back each earlier state."""
    from tests.mariadb import root_or_skip

    rows = _rows("mysql-enum-string-set.000001")
    table = rows[0][0]
    statements = [s for t in _transactions("mysql-enum-string-set.000001") for s in t.statements]
    create = next(s.text for s in statements if s.text and s.text.startswith("CREATE TABLE"))
    conn = root_or_skip()
    db = "auditweb_mysql8_flashback"
    with conn.cursor() as c:
        c.execute(f"DROP DATABASE IF EXISTS {db}")
        c.execute(f"CREATE DATABASE {db} CHARACTER SET utf8mb4")
        c.execute(f"USE {db}")
        c.execute(create)
        try:
            info = {table.name: table_info(table)}
            state: list[Any] = []  # the table after each statement, newest undone first
            for _, row in reversed(rows):
                sql = flashback_sql([("", [row])], info).replace("`mysql`.`t`", f"`{db}`.`t`")
                for statement in sql.split(";\n"):
                    if any(line.strip() and not line.startswith("--") for line in statement.splitlines()):
                        c.execute(statement)
                c.execute("SELECT f1, f2, f3, f4, f5 FROM t")
                state.append(c.fetchall())
            images = [row.before or {} for _, row in rows]
            want = [
                (tuple(images[2][k] for k in ("f1", "f2", "f3", "f4", "f5")),),  # the delete undone
                (tuple(images[1][k] for k in ("f1", "f2", "f3", "f4", "f5")),),  # the update undone
                (),  # the insert undone
            ]
            assert [tuple(s) for s in state] == want
        finally:
            c.execute(f"DROP DATABASE IF EXISTS {db}")


# -- a MySQL 8.0.46 scene: the statements that made the binlogs are known -------------------
#
# avaitla/mysqlbinlog2parquet replayed each `NN-*.sql` on MySQL 8.0 (binlog_row_metadata=FULL,
# binlog_rows_query_log_events=ON, GTIDs) and kept the binlog: the SQL is the truth. Replaying
# its first k statements on the MariaDB here gives the table before statement k+1; undoing the
# binlog's row statements newest first must walk back through exactly those states.

SCENES = ["01-basic-crud", "02-multi-statement-txn", "03-mixed-types"]


def _scene_sql(scene: str) -> list[str]:
    text = (SAMPLES / f"{scene}.sql").read_text()
    lines = [line for line in text.splitlines() if not line.startswith("--")]
    return [s_.strip() for s_ in "\n".join(lines).split(";\n") if s_.strip().rstrip(";")]


def _statement(sql: str) -> str:
    return sql.rstrip(";").strip()


@pytest.mark.parametrize("scene", SCENES)
def test_each_row_statement_carries_the_text_the_client_sent(scene: str) -> None:
    sent = [_statement(s_) for s_ in _scene_sql(scene)]
    dml = [s_ for s_ in sent if s_.split()[0].upper() in ("INSERT", "UPDATE", "DELETE")]
    txs = _transactions(f"{scene}.binlog")
    texts = [s_.text for t in txs for s_ in t.statements if s_.kind == "rows"]
    assert texts == dml  # ROWS_QUERY: the statement as sent, in order
    assert {t.thread_id for t in txs if t.ended_by == "xid"} != {None}


def _snapshot(cursor: Any, tables: list[str]) -> dict[str, list[tuple[Any, ...]] | None]:
    out: dict[str, list[tuple[Any, ...]] | None] = {}
    for table in tables:
        if not cursor.execute("SHOW TABLES LIKE %s", (table,)):
            out[table] = None  # not created yet
            continue
        cursor.execute(f"SELECT * FROM `{table}` ORDER BY 1")
        out[table] = [
            tuple(json.loads(v) if isinstance(v, str) and v[:1] in "[{" else v for v in row)
            for row in cursor.fetchall()
        ]
    return out


@pytest.mark.parametrize("scene", SCENES)
def test_flashback_walks_a_mysql_8_scene_back_through_every_state(scene: str) -> None:
    from tests.mariadb import root_or_skip

    statements = _scene_sql(scene)
    tables = [re.search(r"EXISTS (\w+)", s_)[1] for s_ in statements if s_.startswith("CREATE TABLE")]  # type: ignore[index]
    txs = _transactions(f"{scene}.binlog")
    moment = txs[0].statements[0].time  # CURRENT_TIMESTAMP as the server had it
    conn = root_or_skip()
    db = f"auditweb_mysql8_{scene.replace('-', '_')}"
    with conn.cursor() as c:
        c.execute("SET time_zone = '+00:00', sql_mode = 'STRICT_ALL_TABLES'")
        c.execute(f"SET timestamp = {moment}")

        def replay(k: int) -> dict[str, list[tuple[Any, ...]] | None]:
            c.execute(f"DROP DATABASE IF EXISTS {db}")
            c.execute(f"CREATE DATABASE {db} CHARACTER SET utf8mb4")
            c.execute(f"USE {db}")
            for sql in statements[:k]:
                c.execute(sql)
            state = _snapshot(c, tables)
            c.execute("ROLLBACK")
            return state

        try:
            states = [replay(k) for k in range(len(statements) + 1)]
            sent = [_statement(s_) for s_ in statements]
            replay(len(statements))  # the final state, to be walked back
            c.execute(f"USE {db}")
            undone = 0
            with (SAMPLES / f"{scene}.binlog").open("rb") as f:
                for tx in reversed(txs):
                    for statement in reversed([s_ for s_ in tx.statements if s_.changes]):
                        rows, info = [], {}
                        for change in statement.changes:
                            table = table_of(f, change)
                            info[table.name] = table_info(table)
                            rows.extend(row_images(f, change))
                        sql = flashback_sql([("", rows)], info).replace("`binlogtest`.", f"`{db}`.")
                        for part in sql.split(";\n"):
                            if any(line.strip() and not line.startswith("--") for line in part.splitlines()):
                                c.execute(part)
                        before = sent.index(_statement(statement.text or ""))
                        assert _snapshot(c, tables) == states[before], statement.text
                        undone += 1
            assert undone == sum(1 for s_ in sent if s_.split()[0].upper() in ("INSERT", "UPDATE", "DELETE"))
        finally:
            c.execute(f"DROP DATABASE IF EXISTS {db}")


ALL_SAMPLES = sorted(p.name for p in SAMPLES.iterdir() if p.suffix not in (".md", ".sql"))
_READ = {
    r.QUERY, r.XID, r.TABLE_MAP, r.ROWS_QUERY, r.MYSQL_GTID, r.ANONYMOUS_GTID, r.MYSQL_GTID_TAGGED,
    r.TRANSACTION_PAYLOAD, r.ROTATE, r.STOP, r.XA_PREPARE, *r.ROWS_CHANGE,
}  # fmt: skip


@pytest.mark.parametrize("name", ALL_SAMPLES)
def test_every_event_type_of_a_sample_is_read_or_told(name: str) -> None:
    """Each event, inside compressed transactions too, is of a type the pass reads, passes over
    on purpose (changes no rows), or names in a problem at its position."""
    from ingest.binlog.metadata import _NOTHING_FOR_ROWS
    from ingest.binlog.payload import expanded

    with (SAMPLES / name).open("rb") as f:
        events = [x for x in expanded(read_events(f)) if isinstance(x, r.Event)]
    problems = [x for x in _scan(name) if isinstance(x, BinlogProblem)]
    for event in events:
        if event.type in _READ or event.type in _NOTHING_FOR_ROWS:
            continue
        told = [p for p in problems if p.position == event.position and f"type {event.type}" in p.reason]
        first = next(e for e in events if e.type == event.type)  # told once per file
        assert told or first is not event, f"type {event.type} at {event.position}"
    assert len(events) > 3


def test_json_values_of_mysql_s_own_types_are_shown_as_mysql_shows_them() -> None:
    """json-opaque.binlog (MySQL 9.0.1): one JSON document per INSERT holding a value of a MySQL
    type (CAST(... AS JSON)). rust_mysql_common asserts {"a": "base64:type15:VQ=="},
    {"b": "2012-03-18"}, {"c": "2012-03-18 11:30:45.000000"}, {"c": "87:31:46.654321"},
    {"d": "123.456"}, {"e": "9.00"}, {"e": [0, 1, true, false]}, {"e": null}; its DECIMALs are
    strings there, numbers with the same digits in MySQL's JSON text and here."""
    shown = [json.loads(row.after["a"]) for _, row in _rows("json-opaque.binlog") if row.after]
    assert shown == [
        {"a": "base64:type15:VQ=="},
        {"b": "2012-03-18"},
        {"c": "2012-03-18 11:30:45.000000"},
        {"c": "87:31:46.654321"},
        {"d": 123.456},
        {"e": 9.0},
        {"e": [0, 1, True, False]},
        {"e": None},
    ]
    texts = [row.after["a"] for _, row in _rows("json-opaque.binlog") if row.after]
    assert texts[4] == '{"d": 123.456}' and texts[5] == '{"e": 9.00}'  # the exact digits


def test_hostile_json_bytes_raise_value_error_never_anything_else() -> None:
    from ingest.binlog.jsonb import json_text
    from ingest.binlog.rows import _decimal

    documents = [
        bytes.fromhex("000100160000000b0001000f0c00630b08f1fb09ee770500000000"),  # a TIME opaque
        b"\x00\x02\x00\x1a\x00\x12\x00\x01\x00\x13\x00\x01\x00\x05\x01\x00\x04\x01\x00ab",
        b"\x02" + b"\x01\x00\xff\xff" + b"\x02\x00\x00",  # an array larger than its value
        b"\x02\x01\x00\x07\x00" + b"\x02\x04\x00" + b"\x02" * 300,  # nesting past the bound
    ]
    for raw in documents:
        for cut in range(len(raw) + 1):
            for flip in range(min(len(raw), 40)):
                data = bytearray(raw[:cut])
                if flip < len(data):
                    data[flip] ^= 0xA5
                with contextlib.suppress(ValueError):  # the decoder's one way to refuse
                    json_text(bytes(data), _decimal)


@pytest.mark.parametrize("name", ["json.binlog.000001", "mysql-bin.compressed", "01-basic-crud.binlog"])
def test_a_page_further_on_is_the_same_rows_as_reading_from_the_start(name: str) -> None:
    with (SAMPLES / name).open("rb") as f:
        for tx in _transactions(name):
            for statement in tx.statements:
                for change in statement.changes:
                    whole = list(row_images(f, change))
                    for skip in range(len(whole) + 1):
                        assert list(row_images(f, change, skip=skip)) == whole[skip:]


def test_an_address_into_a_damaged_payload_is_a_binlog_error() -> None:
    """Row images read later from a file that changed since ingest: an error the page can show."""
    from ingest.binlog.payload import inner_address, read_event, split_address

    assert split_address(inner_address(274, 71)) == (274, 71)
    data = (SAMPLES / "transaction_compression.000001").read_bytes()
    at = 274
    body = data[at + 19 : at + struct.unpack_from("<I", data, at + 9)[0] - 4]
    for cut in range(len(body)):
        damaged = io.BytesIO(_with_body(data, at, body[:cut]))
        fmt = r.read_format(damaged)
        for offset in (0, 71, 116, 152, 5):
            try:
                event = read_event(damaged, inner_address(at, offset), fmt)
            except r.BinlogError:
                continue
            assert event.position == inner_address(at, offset)
