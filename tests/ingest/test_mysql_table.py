"""Live pulls of mysql.general_log from the real MariaDB on this machine.

Under the shared lock /tmp/auditweb-mariadb.lock, the module fixture turns on
log_output=TABLE, runs the scenario of tests/fixtures/general_log_table/regenerate.py
(tl_alice and tl_bob over TCP, a DELETE with and without WHERE), copies the CSV engine's
file and exports the table INTO OUTFILE, then puts every global setting back. The tests
pull with an account that may only SELECT mysql.general_log. Skipped when MariaDB is not
reachable. No Django, no PostgreSQL.
"""

from __future__ import annotations

import fcntl
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
from ingest.parsers.general_log_table import parse_general_log_csv, parse_general_log_tsv
from ingest.parsers.records import LogRecord

pytestmark = pytest.mark.mariadb

pymysql = pytest.importorskip("pymysql")

LOCK = "/tmp/auditweb-mariadb.lock"
REGENERATE = Path(__file__).resolve().parents[1] / "fixtures" / "general_log_table" / "regenerate.py"
READER = ("tl_reader", "Reader-tl-3")


def _scenario_module() -> Any:
    spec = importlib.util.spec_from_file_location("general_log_table_regenerate", REGENERATE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _lock(seconds: float = 600) -> int:
    fd = os.open(LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + seconds
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() > deadline:
                os.close(fd)
                pytest.skip(f"{LOCK} stayed held for {seconds:.0f} s (another run uses the server)")
            time.sleep(1)


def _reader() -> Any:
    return pymysql.connect(host="127.0.0.1", port=3306, user=READER[0], password=READER[1], autocommit=True)


def key(r: LogRecord, shift: timedelta = timedelta(0)) -> tuple:  # type: ignore[type-arg]
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
    try:
        probe = pymysql.connect(unix_socket="/run/mysqld/mysqld.sock", user="root", connect_timeout=3)
    except Exception as e:  # any failure to connect means "no server here"
        pytest.skip(f"MariaDB is not reachable on /run/mysqld/mysqld.sock: {e}")
    probe.close()
    scenario = _scenario_module()
    fd = _lock()
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
        fcntl.flock(fd, fcntl.LOCK_UN)
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
    assert all(r.occurred_at >= live.start for r in records)  # type: ignore[operator]
    assert records[0].database == "gltable2_shop" and records[0].ip == "127.0.0.1"
    conn.close()


def test_live_csv_and_tsv_give_the_same_events(live: Live) -> None:
    conn = _reader()
    pulled = [key(r) for r in Puller(conn, live.watermark()).records()]
    conn.close()
    naive_start = live.start.replace(tzinfo=None)
    from_csv = [key(r, live.shift) for r in parse_general_log_csv(io.BytesIO(live.csv))]
    from_tsv = [key(r) for r in parse_general_log_tsv(io.BytesIO(live.tsv))]
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
        with alice.cursor() as c:
            c.execute("DELETE FROM orders WHERE id = 4")
        alice.close()
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


def _ours_tuples(rows: list[tuple]) -> list[tuple]:  # type: ignore[type-arg]
    return [r for r in rows if r[0] in ("tl_alice", "tl_bob")]


def test_a_capped_watermark_keeps_the_newest_hashes_and_moves_since(live: Live) -> None:
    conn = _reader()
    puller = Puller(conn, live.watermark(), max_seen=3)
    records = list(puller.records())
    watermark = json.loads(json.dumps(puller.watermark))
    newest = records[-1].occurred_at
    assert newest is not None
    assert watermark["time"] == newest.isoformat()
    assert watermark["since"] == records[-3].occurred_at.isoformat()  # type: ignore[union-attr]
    assert watermark["seen"] == sorted(r.extra["row_hash"] for r in records[-3:])
    again = Puller(conn, watermark)
    assert list(again.records()) == []
    assert again.rows_read == 3  # only the rows from the moved `since` were read again
    conn.close()
