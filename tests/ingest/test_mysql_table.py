"""Live pulls of mysql.general_log from the real MariaDB on this machine.

Under the shared lock /tmp/auditweb-mariadb.lock, the module fixture turns on
log_output=TABLE, runs the scenario of tests/fixtures/general_log_table/regenerate.py
(tl_alice and tl_bob over TCP, a DELETE with and without WHERE), copies the CSV engine's
file and exports the table INTO OUTFILE, then puts every global setting back. The tests
pull with an account that may only SELECT mysql.general_log. Skipped when MariaDB is not
reachable. No Django, no PostgreSQL.
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from ingest.mysql_table import Puller
from ingest.parsers import general_log_csv, general_log_tsv
from ingest.parsers.records import LogRecord

pytestmark = pytest.mark.mariadb

pymysql = pytest.importorskip("pymysql")
from tests.mariadb import hold_lock, root_or_skip  # noqa: E402 - after the skip

REGENERATE = Path(__file__).resolve().parents[1] / "fixtures" / "general_log_table" / "regenerate.py"
READER = ("tl_reader", "Reader-tl-3")


def _scenario_module() -> Any:
    spec = importlib.util.spec_from_file_location("general_log_table_regenerate", REGENERATE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _reader() -> Any:
    return pymysql.connect(host="127.0.0.1", port=3306, user=READER[0], password=READER[1], autocommit=True)


def key(r: LogRecord, shift: timedelta = timedelta(0)) -> tuple:
    """What every way of reading the table must agree on; times as naive UTC."""
    when = r.occurred_at
    assert when is not None
    when = when.astimezone(UTC).replace(tzinfo=None) if when.tzinfo else when - shift
    return (r.user, r.host, when, r.connection_id, r.command, r.argument)


class Live:
    """What the fixture did: the time it started, and the files it exported."""

    def __init__(self, start: datetime, csv: bytes, tsv: bytes, shift: timedelta, scenario: Any) -> None:
        self.start, self.csv, self.tsv, self.shift, self.scenario = start, csv, tsv, shift, scenario

    def watermark(self) -> dict[str, Any]:
        return {"time": self.start.isoformat(), "since": self.start.isoformat(), "seen": []}


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    root_or_skip().close()
    scenario = _scenario_module()
    fd = hold_lock()
    conn = scenario.root()
    found = scenario.settings(conn)
    was_empty = scenario.table_rows(conn) == 0
    try:
        scenario.setup(conn)
        with conn.cursor() as c:
            c.execute("SET SESSION sql_log_off = ON")
            c.execute("DROP USER IF EXISTS %s@'%%'", (READER[0],))
            c.execute("CREATE USER %s@'%%' IDENTIFIED BY %s", READER)
            c.execute("GRANT SELECT ON mysql.general_log TO %s@'%%'", (READER[0],))
            c.execute("SELECT UTC_TIMESTAMP(6), TIMESTAMPDIFF(SECOND, UTC_TIMESTAMP(), NOW())")
            now, offset = c.fetchone()
        start = now.replace(tzinfo=UTC)
        scenario.run_scenario(conn)
        csv = scenario.CSV_FILE.read_bytes()
        export = Path(f"/tmp/gltable2-test-{os.getpid()}.tsv")
        with conn.cursor() as c:
            c.execute("SET SESSION time_zone = '+00:00'")
            c.execute(f"SELECT * FROM mysql.general_log INTO OUTFILE '{export}'")
        tsv = export.read_bytes()
        export.unlink()
        yield Live(start, csv, tsv, timedelta(seconds=offset), scenario)
    finally:
        scenario.restore(conn, found)
        with conn.cursor() as c:
            c.execute("SET SESSION sql_log_off = ON")
            c.execute("DROP USER IF EXISTS %s@'%%'", (READER[0],))
        if was_empty:
            scenario.truncate(conn)
        scenario.cleanup(conn)
        conn.close()
        os.close(fd)


def _ours(records: list[LogRecord]) -> list[LogRecord]:
    return [r for r in records if r.user in ("tl_alice", "tl_bob")]


def test_a_live_pull_gives_exactly_the_scenario_attributed(live: Live) -> None:
    conn = _reader()
    # Other clients of this shared server may have been logged in the window: only ours count.
    records = _ours(list(Puller(conn, live.watermark()).records()))
    summary = [(r.user, r.extra.get("account"), r.host, r.command, r.argument) for r in records]
    alice = ("tl_alice", "tl_alice", "127.0.0.1", "Query")
    bob = ("tl_bob", "tl_bob", "127.0.0.1", "Query")
    assert summary == [
        ("tl_alice", None, "127.0.0.1", "Connect", b"tl_alice@127.0.0.1 on gltable2_shop using TCP/IP"),
        (*alice, b"SET NAMES utf8mb4"),
        (*alice, b"SELECT id, note FROM orders WHERE id = 1"),
        (*alice, b"SELECT id,\n       note\nFROM orders\nWHERE id > 1"),
        (*alice, b"INSERT INTO orders VALUES (4, 'say \"hi\" \\\\ back\ttab\nnew\rcr\x00nul')"),
        (*alice, b"SELECT 1 /* \\xFF invalid utf-8 */"),
        ("tl_alice", "tl_alice", "127.0.0.1", "Quit", b""),
        ("tl_bob", None, "127.0.0.1", "Connect", b"tl_bob@127.0.0.1 on  using TCP/IP"),
        (*bob, b"SET NAMES utf8mb4"),
        (*bob, b"USE gltable2_shop"),
        (*bob, b"DELETE FROM orders WHERE id = 2"),
        (*bob, b"DELETE FROM orders"),
        ("tl_bob", "tl_bob", "127.0.0.1", "Quit", b""),
    ]
    assert len({r.connection_id for r in records}) == 2
    assert all(r.occurred_at is not None and r.occurred_at.tzinfo is UTC for r in records)
    assert all(r.occurred_at >= live.start for r in records)
    assert records[0].database == "gltable2_shop" and records[0].ip == "127.0.0.1"
    conn.close()


def test_live_csv_and_tsv_give_the_same_events(live: Live) -> None:
    conn = _reader()
    pulled = [key(r) for r in Puller(conn, live.watermark()).records()]
    conn.close()
    naive_start = live.start.replace(tzinfo=None)
    from_csv = [key(r, live.shift) for r in general_log_csv.parse(io.BytesIO(live.csv))]
    from_tsv = [key(r) for r in general_log_tsv.parse(io.BytesIO(live.tsv))]
    assert len([k for k in pulled if k[0] in ("tl_alice", "tl_bob")]) == 13
    assert [k for k in from_csv if k[2] >= naive_start] == pulled
    assert [k for k in from_tsv if k[2] >= naive_start] == pulled


def test_an_interrupted_pull_resumes_from_its_json_watermark(live: Live) -> None:
    conn = _reader()
    everything = [r.extra["row_hash"] for r in Puller(conn, live.watermark()).records()]
    assert len(everything) == len(set(everything)) >= 13
    got: list[str] = []
    watermark: dict[str, Any] = live.watermark()
    for stop_after in (4, 1, 5):  # three pulls stopped half-way (mid-chunk), then one to the end
        puller = Puller(conn, watermark, chunk=2)
        stream = puller.records()
        for n, record in enumerate(stream, 1):
            got.append(record.extra["row_hash"])
            if n == stop_after:
                break
        stream.close()
        watermark = json.loads(json.dumps(puller.watermark))
    assert len(got) == 10
    assert got == everything[:10]
    rest = Puller(conn, watermark)
    got += [r.extra["row_hash"] for r in rest.records()]
    assert got == everything  # every row once, in order
    again = Puller(conn, json.loads(json.dumps(rest.watermark)))
    assert list(again.records()) == []
    assert again.rows_read > 0  # it did re-read the overlap window, and skipped it all
    assert again.watermark["seen"] == rest.watermark["seen"]
    conn.close()


def _wait_for_quit(root: Any, thread: int, seconds: float = 10.0) -> None:
    """Until the connection's Quit row is in mysql.general_log (switching the log off before the
    server has written it would lose it); fails after `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with root.cursor() as c:
            c.execute(
                "SELECT COUNT(*) FROM mysql.general_log WHERE thread_id = %s AND command_type = 'Quit'",
                (thread,),
            )
            if c.fetchone()[0]:
                return
        time.sleep(0.05)
    raise AssertionError(f"no Quit of connection {thread} logged within {seconds} s")


def test_rows_logged_after_a_pull_come_in_the_next_one(live: Live) -> None:
    reader = _reader()
    first = Puller(reader, live.watermark())
    assert len(list(first.records())) == 13
    watermark = json.loads(json.dumps(first.watermark))
    # The module fixture holds the server lock and restores the settings found before it.
    scenario, root = live.scenario, live.scenario.root()
    found = scenario.settings(root)
    try:
        with root.cursor() as c:
            c.execute("SET GLOBAL log_output = 'TABLE'")
            c.execute("SET GLOBAL general_log = ON")
        alice = scenario.as_user("tl_alice", scenario.DB)
        thread = alice.thread_id()
        with alice.cursor() as c:
            c.execute("DELETE FROM orders WHERE id = 4")
        alice.close()
        _wait_for_quit(root, thread)  # the server logs the Quit after the client has gone
    finally:
        scenario.restore(root, found)
        root.close()
    second = [(r.user, r.command, r.argument) for r in Puller(reader, watermark).records()]
    reader.close()
    assert _ours_tuples(second) == [
        ("tl_alice", "Connect", b"tl_alice@127.0.0.1 on gltable2_shop using TCP/IP"),
        ("tl_alice", "Query", b"SET NAMES utf8mb4"),
        ("tl_alice", "Query", b"DELETE FROM orders WHERE id = 4"),
        ("tl_alice", "Quit", b""),
    ]


def _ours_tuples(rows: list[tuple]) -> list[tuple]:
    return [r for r in rows if r[0] in ("tl_alice", "tl_bob")]


def test_a_capped_watermark_keeps_the_newest_hashes_and_moves_since(live: Live) -> None:
    conn = _reader()
    puller = Puller(conn, live.watermark(), max_seen=3)
    records = list(puller.records())
    watermark = json.loads(json.dumps(puller.watermark))
    newest = records[-1].occurred_at
    assert newest is not None
    assert watermark["time"] == newest.isoformat()
    assert watermark["since"] == records[-3].occurred_at.isoformat()
    assert watermark["seen"] == sorted(r.extra["row_hash"] for r in records[-3:])
    again = Puller(conn, watermark)
    assert list(again.records()) == []
    assert again.rows_read == 3  # only the rows from the moved `since` were read again
    # `since` never moves back before the rows whose hashes it dropped.
    assert json.loads(json.dumps(again.watermark))["since"] == watermark["since"]
    assert list(Puller(conn, again.watermark).records()) == []
    conn.close()


# -- the watermark, on a scratch table of the same columns ----------------------------------------
#
# mysql.general_log takes its event_time from the clock, so equal times, identical twins and
# late rows cannot be made to order there. A table created LIKE it (the same CSV engine and
# columns, the argument a blob as in MySQL) in a scratch database takes rows with chosen
# times; the puller reads it through `table=` with an account that may only SELECT that
# table. No global server state changes.

SCRATCH = "gltable_wm"
SCRATCH_READER = ("tl_wm_reader", "Wm-reader-4")
T0 = datetime(2024, 3, 1, 9, 0, 0, tzinfo=UTC)


class Scratch:
    def __init__(self, root: Any) -> None:
        self.root = root

    def add(self, seconds: float, thread: int, argument: bytes, command: str = "Query") -> None:
        """One row, `seconds` after T0, written by u<thread>."""
        when = (T0 + timedelta(seconds=seconds)).replace(tzinfo=None)
        with self.root.cursor() as c:
            c.execute(
                f"INSERT INTO {SCRATCH}.general_log VALUES (%s, %s, %s, 1, %s, %s)",
                (when, f"u{thread}[u{thread}] @ app [10.0.0.{thread}]", thread, command, argument),
            )

    def reader(self) -> Any:
        return pymysql.connect(
            host="127.0.0.1", port=3306, user=SCRATCH_READER[0], password=SCRATCH_READER[1], autocommit=True
        )


@pytest.fixture(scope="module")
def scratch_server() -> Iterator[Any]:
    try:
        root = pymysql.connect(unix_socket="/run/mysqld/mysqld.sock", user="root", autocommit=True)
    except Exception as e:  # any failure to connect means "no server here"
        pytest.skip(f"MariaDB is not reachable on /run/mysqld/mysqld.sock: {e}")
    with root.cursor() as c:
        c.execute("SET SESSION sql_log_off = ON")
        c.execute("SET SESSION time_zone = '+00:00'")
        c.execute(f"DROP DATABASE IF EXISTS {SCRATCH}")
        c.execute(f"CREATE DATABASE {SCRATCH}")
        c.execute(f"CREATE TABLE {SCRATCH}.general_log LIKE mysql.general_log")
        # MySQL's argument column is a MEDIUMBLOB: any bytes (MariaDB's utf8mb3 text refuses 0xFF).
        c.execute(f"ALTER TABLE {SCRATCH}.general_log MODIFY argument MEDIUMBLOB NOT NULL")
        c.execute("DROP USER IF EXISTS %s@'%%'", (SCRATCH_READER[0],))
        c.execute("CREATE USER %s@'%%' IDENTIFIED BY %s", SCRATCH_READER)
        c.execute(f"GRANT SELECT ON {SCRATCH}.general_log TO %s@'%%'", (SCRATCH_READER[0],))
    try:
        yield root
    finally:
        with root.cursor() as c:
            c.execute(f"DROP DATABASE IF EXISTS {SCRATCH}")
            c.execute("DROP USER IF EXISTS %s@'%%'", (SCRATCH_READER[0],))
        root.close()


@pytest.fixture
def scratch(scratch_server: Any) -> Scratch:
    with scratch_server.cursor() as c:
        c.execute(f"TRUNCATE TABLE {SCRATCH}.general_log")
    return Scratch(scratch_server)


def _pull(conn: Any, watermark: Any, *, stop: int | None = None, **kw: Any) -> tuple[list[LogRecord], Any]:
    """Records of one pull (stopped after `stop` records), and its watermark through JSON."""
    puller = Puller(conn, watermark, table=f"{SCRATCH}.general_log", **kw)
    got: list[LogRecord] = []
    if stop == 0:  # stopped before its first record
        return got, json.loads(json.dumps(puller.watermark if watermark is None else watermark))
    stream = puller.records()
    for record in stream:
        got.append(record)
        if len(got) == stop:
            break
    stream.close()
    return got, json.loads(json.dumps(puller.watermark))


def _ids(records: list[LogRecord]) -> list[tuple]:
    return [(r.occurred_at, r.connection_id, r.argument, r.offset, r.extra["row_hash"]) for r in records]


def _same_times(s: Scratch) -> None:
    """Three rows at one time, identical twins with a third row at another, then later rows."""
    s.add(0, 1, b"DELETE FROM shop.orders WHERE id = 1")
    s.add(0, 2, b"DELETE FROM shop.orders WHERE id = 2")
    s.add(0, 3, b"SELECT 3")
    s.add(0.5, 4, b"UPDATE t SET a = 1")
    s.add(0.5, 4, b"UPDATE t SET a = 1")  # the same client, the same statement, the same microsecond
    s.add(0.5, 5, b"SELECT '\x00\xff'")
    s.add(1, 6, b"SELECT 6")
    s.add(9, 7, b"SELECT 7")  # beyond the overlap of everything before it


def test_rows_sharing_a_time_and_identical_twins_are_each_pulled_once(scratch: Scratch) -> None:
    _same_times(scratch)
    conn = scratch.reader()
    records, watermark = _pull(conn, None)
    assert [(r.connection_id, r.offset) for r in records] == [
        (1, 0), (2, 0), (3, 0), (4, 0), (4, 1), (5, 0), (6, 0), (7, 0)
    ]  # fmt: skip
    assert len({r.extra["row_hash"] for r in records}) == 8
    assert records[5].argument == b"SELECT '\x00\xff'"
    assert records[0].occurred_at == T0 and records[0].user == "u1" and records[0].ip == "10.0.0.1"
    assert watermark == {
        "time": (T0 + timedelta(seconds=9)).isoformat(),
        "since": (T0 + timedelta(seconds=7)).isoformat(),
        "seen": [records[7].extra["row_hash"]],
    }
    again, after = _pull(conn, watermark)
    assert (again, after) == ([], watermark)
    conn.close()


@pytest.mark.parametrize("chunk", [1, 3, 100])
def test_a_pull_stopped_anywhere_and_resumed_gives_every_row_once(scratch: Scratch, chunk: int) -> None:
    _same_times(scratch)
    conn = scratch.reader()
    everything, _ = _pull(conn, None)
    for first in range(len(everything) + 1):
        for second in (0, 1, 2):  # the resumed pull is stopped again, then a last one runs to the end
            got, watermark = _pull(conn, None, stop=first, chunk=chunk)
            more, watermark = _pull(conn, watermark, stop=second, chunk=chunk)
            rest, watermark = _pull(conn, watermark, chunk=chunk)
            # Every row once; rows sharing a time may come in another order from one query to the next.
            assert sorted(_ids(got + more + rest)) == sorted(_ids(everything)), (first, second)
            assert _pull(conn, watermark)[0] == []
    conn.close()


def test_rows_that_arrive_late_inside_the_overlap_come_in_the_next_pull(scratch: Scratch) -> None:
    scratch.add(0, 1, b"SELECT 1")
    scratch.add(5, 2, b"SELECT 2")
    conn = scratch.reader()
    first, watermark = _pull(conn, None, overlap=2.0)
    assert [r.connection_id for r in first] == [1, 2]
    assert watermark["since"] == (T0 + timedelta(seconds=3)).isoformat()
    # Committed after that pull, with times from before its newest row:
    scratch.add(5, 2, b"SELECT 2")  # a twin of the newest row
    scratch.add(5, 3, b"DELETE FROM shop.orders")  # another row at the newest time
    scratch.add(3.5, 4, b"DROP TABLE shop.orders")  # inside the overlap window
    scratch.add(3, 5, b"SELECT 'at since'")  # exactly at `since`: still read
    scratch.add(2.9, 6, b"SELECT 'too late'")  # before `since`: the documented limit
    second, watermark = _pull(conn, watermark, overlap=2.0)
    pulled = [(r.occurred_at, r.connection_id, r.offset, r.argument) for r in second]
    at = lambda seconds: T0 + timedelta(seconds=seconds)  # noqa: E731
    assert pulled[:2] == [(at(3), 5, 0, b"SELECT 'at since'"), (at(3.5), 4, 0, b"DROP TABLE shop.orders")]
    # Rows of one time come in no fixed order; the twin is the second "SELECT 2" of its time.
    assert sorted(pulled[2:]) == [(at(5), 2, 1, b"SELECT 2"), (at(5), 3, 0, b"DELETE FROM shop.orders")]
    assert all(r.connection_id != 6 for r in second)
    assert _pull(conn, watermark)[0] == []
    conn.close()


def test_a_row_arriving_while_a_pull_is_stopped_comes_when_it_resumes(scratch: Scratch) -> None:
    for n in range(6):
        scratch.add(n * 0.1, n, b"SELECT %d" % n)
    conn = scratch.reader()
    got, watermark = _pull(conn, None, stop=4, chunk=2)
    scratch.add(0.15, 9, b"DELETE FROM shop.orders")  # before the last row read, after `since`
    # Stopped again right after the late row: rows 2 and 3, read before, lie ahead of it.
    late, watermark = _pull(conn, watermark, stop=1)
    rest, watermark = _pull(conn, watermark)
    assert [r.connection_id for r in got] == [0, 1, 2, 3]
    assert [r.connection_id for r in late] == [9]
    assert [r.connection_id for r in rest] == [4, 5]
    assert _pull(conn, watermark)[0] == []
    conn.close()


def test_pull_returns_the_final_watermark(scratch: Scratch) -> None:
    from ingest.mysql_table import pull

    _same_times(scratch)
    conn = scratch.reader()

    def consume() -> Iterator[LogRecord]:
        watermark = yield from pull(conn, None, table=f"{SCRATCH}.general_log")
        holder.append(watermark)

    holder: list[Any] = []
    records = list(consume())
    assert len(records) == 8
    assert holder == [_pull(conn, None)[1]]
    assert json.loads(json.dumps(holder[0])) == holder[0]
    conn.close()


def test_it_refuses_a_table_name_it_would_have_to_quote() -> None:
    with pytest.raises(ValueError, match=r"not a db\.table name"):
        Puller(None, None, table="mysql.general_log; DROP TABLE x")
