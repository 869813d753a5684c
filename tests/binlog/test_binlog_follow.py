"""Binary logs followed as a source and pulled as a replica (issue 21, part 1), against a private
MariaDB with log_bin that the tests start, write to, rotate, flush, purge and restart.

The truth is the server's own: SHOW BINLOG EVENTS names every transaction's XID event and its
end position in each file, and the rows written are counted here; every transaction must be
stored exactly once, however the polls fall, and polling again must store nothing.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ingest.binlog.reader import HEADER_LEN
from ingest.follow import ingest_source
from ingest.models import BinlogTransaction, IngestRun, ParseProblem, Source

MARIADBD = Path("/usr/sbin/mariadbd")
pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    if not MARIADBD.exists():
        pytest.skip("no /usr/sbin/mariadbd: these tests start a private MariaDB with log_bin")
    if os.geteuid() != 0:
        pytest.skip("the private MariaDB runs as root (--user=root)")
    from tests.fixtures.attribution_scene.regenerate import PrivateServer

    base = Path(tempfile.mkdtemp(prefix="auditweb-binlog-follow-"))
    s = PrivateServer(base)
    try:
        s.install()
        s.write_options(general_log=False, logging=True)
        with s.cnf.open("a") as f:
            f.write("log_slave_updates = OFF\nbinlog_checksum = CRC32\n")
        s.start()
        _sql(
            s,
            "CREATE DATABASE shop",
            "CREATE TABLE shop.t (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(2000))",
        )
        yield s
    finally:
        s.stop()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(autouse=True)
def _server_logs_are_log_roots(server: Any, settings: Any) -> None:
    """Binlog file sources read only inside AUDITWEB_LOG_ROOTS: the private server's folder is one."""
    settings.LOG_ROOTS = [*settings.LOG_ROOTS, server.base.resolve()]


def _sql(server: Any, *statements: str) -> list[Any]:
    conn = server.root()
    try:
        with conn.cursor() as c:
            out = []
            for statement in statements:
                c.execute(statement)
                out.append(c.fetchall())
            return out
    finally:
        conn.close()


def _insert(server: Any, n: int, *, size: int = 20) -> None:
    _sql(server, *[f"INSERT INTO shop.t (v) VALUES (REPEAT('x', {size}))" for _ in range(n)])


def _server_xids(server: Any) -> set[tuple[str, int]]:
    """(file, end position) of every XID event in the server's binlogs: its transactions."""
    files = [row[0] for row in _sql(server, "SHOW BINARY LOGS")[0]]
    out = set()
    for name in files:
        for row in _sql(server, f"SHOW BINLOG EVENTS IN '{name}'")[0]:
            if row[2] == "Xid":
                out.add((name, int(row[4])))
    return out


def _stored(server_label: str) -> list[tuple[str, int]]:
    return list(
        BinlogTransaction.objects.filter(server=server_label, ended_by="xid").values_list("file_name", "end")
    )


def _poll(source: Source) -> IngestRun | None:
    return ingest_source(source.pk)


def test_followed_binlog_files_store_every_transaction_once(server: Any) -> None:
    source = Source.objects.create(
        name="binlogs", path=str(server.binlogs / "mariadb-bin.*"), format="binlog", server="db1"
    )
    _insert(server, 5)
    _poll(source)
    assert set(_stored("db1")) >= _server_xids(server)

    # More, then FLUSH BINARY LOGS, more in the new file; rotation by size; a restart.
    _insert(server, 7)
    _sql(server, "FLUSH BINARY LOGS")
    _insert(server, 3)
    run = _poll(source)
    assert run is not None and run.status == IngestRun.Status.DONE, run and run.error
    _sql(server, "SET GLOBAL max_binlog_size = 4096")
    _insert(server, 60, size=150)
    server.stop()
    server.start()
    _insert(server, 4)
    _poll(source)
    stored = _stored("db1")
    truth = _server_xids(server)
    assert len(stored) == len(set(stored)), "a transaction was stored twice"
    assert set(stored) == truth
    rows = sum(BinlogTransaction.objects.filter(server="db1").values_list("rows", flat=True))
    assert rows == _sql(server, "SELECT COUNT(*) FROM shop.t")[0][0][0]
    # The index file and MariaDB's .state are not binlogs; nothing was a problem.
    assert not ParseProblem.objects.filter(source_file__source=source).exists()
    source.refresh_from_db()
    assert source.last_error == ""

    # Polled again: nothing new, nothing stored twice.
    before = BinlogTransaction.objects.count()
    _poll(source)
    assert BinlogTransaction.objects.count() == before

    # Purged after they were read: fine. Purged before a poll saw them: a stated gap.
    newest = _sql(server, "SHOW MASTER STATUS")[0][0][0]
    _sql(server, f"PURGE BINARY LOGS TO '{newest}'")
    _poll(source)
    assert not ParseProblem.objects.filter(source_file__source=source).exists()
    _insert(server, 2)
    _sql(server, "FLUSH BINARY LOGS")
    _insert(server, 2)
    _sql(server, "FLUSH BINARY LOGS")
    _insert(server, 1)
    unseen = [row[0] for row in _sql(server, "SHOW BINARY LOGS")[0]]
    _sql(server, f"PURGE BINARY LOGS TO '{unseen[-1]}'")
    _poll(source)
    problems = list(ParseProblem.objects.filter(source_file__source=source).values_list("reason", flat=True))
    assert any("were never read" in p or "removed" in p for p in problems), problems
    assert set(_stored("db1")) >= _server_xids(server)


def test_a_transaction_cut_at_the_end_comes_with_the_next_poll(server: Any, tmp_path: Path) -> None:
    """A file copied while a transaction was being written (the server writes a transaction's
    events one after another): the cut transaction is stored once, when the rest has come."""
    _sql(server, "FLUSH BINARY LOGS")
    _sql(
        server,
        "BEGIN",
        *[f"INSERT INTO shop.t (v) VALUES (REPEAT('y', {300 + i}))" for i in range(40)],
        "COMMIT",
    )
    name = _sql(server, "SHOW MASTER STATUS")[0][0][0]
    data = (server.binlogs / name).read_bytes()
    copy = tmp_path / name
    copy.write_bytes(data[: len(data) // 2])
    source = Source.objects.create(
        name="cut", path=str(tmp_path / "mariadb-bin.*"), format="binlog", server="cut"
    )
    _poll(source)
    assert not BinlogTransaction.objects.filter(server="cut", rows=40).exists()
    assert not ParseProblem.objects.filter(source_file__source=source).exists(), "the live end is no problem"
    copy.write_bytes(data)
    _poll(source)
    _poll(source)
    assert BinlogTransaction.objects.filter(server="cut", rows=40).count() == 1

    # A symbolic link among the files that leads outside the log roots: refused, and said.
    outside = Path(tempfile.mkdtemp(prefix="auditweb-outside-"))
    try:
        (outside / "secret").write_bytes(data)
        (tmp_path / "mariadb-bin.999999").symlink_to(outside / "secret")
        _poll(source)
        source.refresh_from_db()
        assert "outside the log roots" in source.last_error
        assert not BinlogTransaction.objects.filter(server="cut", file_name="mariadb-bin.999999").exists()
    finally:
        shutil.rmtree(outside)


def _masked(data: bytes) -> bytes:
    """A binlog with its format description's in-use flag cleared (the server clears it in place)."""
    out = bytearray(data)
    if len(out) > 4 + HEADER_LEN:
        out[4 + 17] &= 0xFE
    return bytes(out)


def test_replica_pull_spools_the_servers_files_and_stores_them_once(
    server: Any, settings: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.BINLOG_SPOOL_DIR = tmp_path / "spool"
    _sql(
        server,
        "CREATE USER IF NOT EXISTS 'repl'@'127.0.0.1' IDENTIFIED BY 'Repl-pw-1'",
        "GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO 'repl'@'127.0.0.1'",
        "CREATE USER IF NOT EXISTS 'nogrant'@'127.0.0.1' IDENTIFIED BY 'Nogrant-pw-1'",
    )
    monkeypatch.setenv("AUDITWEB_SOURCE_REPL_PASSWORD", "Repl-pw-1")
    dsn = f"mysql://repl@127.0.0.1:{server.port}"
    source = Source.objects.create(
        name="replica", kind=Source.Kind.BINLOG_REPLICA, dsn=dsn, server="db2",
        password_env="AUDITWEB_SOURCE_REPL_PASSWORD",
    )  # fmt: skip
    run = _poll(source)
    assert run is not None and run.status == IngestRun.Status.DONE, run.error
    _insert(server, 6)
    _poll(source)
    _sql(server, "FLUSH BINARY LOGS")
    _insert(server, 3)
    _poll(source)
    server.stop()
    server.start()
    _insert(server, 2)
    _poll(source)
    _poll(source)  # nothing new: nothing stored twice
    source.refresh_from_db()
    assert source.last_error == ""

    stored = _stored("db2")
    assert len(stored) == len(set(stored)), "a transaction was stored twice"
    assert set(stored) == _server_xids(server)
    # No reset was taken for one (the first file after a restart, resumed inside, comes with
    # its creation time cleared), and nothing was a problem.
    assert not list((tmp_path / "spool").glob("source-*/g000002"))
    assert not ParseProblem.objects.filter(source_file__source=source).exists()
    # The spool holds the server's files byte for byte.
    spooled = {p.name: p for p in (tmp_path / "spool").glob("source-*/g*/mariadb-bin.*")}
    on_server = [row[0] for row in _sql(server, "SHOW BINARY LOGS")[0]]
    assert on_server and set(on_server) <= set(spooled)
    for name in on_server:
        mine, theirs = _masked(spooled[name].read_bytes()), _masked((server.binlogs / name).read_bytes())
        assert theirs.startswith(mine) and len(mine) > 4, name
        if name != on_server[-1]:
            assert mine == theirs, f"{name} differs from the server's"

    # Rows are decoded on demand from the spool, as from copied files.
    from ingest.models import BinlogStatement
    from investigations.query.binlog import rows_page

    statements = list(
        BinlogStatement.objects.filter(transaction__server="db2")
        .select_related("transaction__file__source_file")
        .order_by("transaction__file__source_file__path", "transaction__start")
    )
    page = rows_page(statements, offset=0, limit=10_000)
    assert page.total == sum(s.rows for s in statements) == len(page.rows) > 0
    assert all(
        str(s.transaction.file.source_file.path).startswith(str(tmp_path / "spool")) for s in statements
    )
    assert {(r["table"], r["change"]) for r in page.rows} == {("shop.t", "insert")}
    assert all(set(r["after"]["v"]) <= set("xyz") for r in page.rows)

    # A wrong password, and an account without the grant: a clear error on the source.
    monkeypatch.setenv("AUDITWEB_SOURCE_REPL_PASSWORD", "wrong")
    run = _poll(source)
    source.refresh_from_db()
    assert run is not None and run.status == IngestRun.Status.FAILED
    assert "cannot connect" in source.last_error and "Access denied" in source.last_error
    monkeypatch.setenv("AUDITWEB_SOURCE_NOGRANT_PASSWORD", "Nogrant-pw-1")
    bare = Source.objects.create(
        name="no grant", kind=Source.Kind.BINLOG_REPLICA, dsn=f"mysql://nogrant@127.0.0.1:{server.port}",
        password_env="AUDITWEB_SOURCE_NOGRANT_PASSWORD", server="db3",
    )  # fmt: skip
    run = _poll(bare)
    bare.refresh_from_db()
    assert run is not None and run.status == IngestRun.Status.FAILED
    assert "pulling the binary log" in bare.last_error and "denied" in bare.last_error.lower(), (
        bare.last_error
    )


def test_polls_while_the_server_writes_big_transactions(server: Any) -> None:
    """Polls that fall anywhere in a stream of big transactions and rotations by size: each
    transaction stored once, whatever the poll saw of it."""
    import threading

    source = Source.objects.create(
        name="busy", path=str(server.binlogs / "mariadb-bin.[0-9]*"), format="binlog", server="busy"
    )
    _sql(server, "SET GLOBAL max_binlog_size = 65536")
    _poll(source)

    def write() -> None:
        for i in range(25):
            _sql(
                server,
                "BEGIN",
                "INSERT INTO shop.t (v) SELECT REPEAT('z', 100 + seq % 300)"
                f" FROM shop.seq_1_to_{200 + 20 * i}",
                "COMMIT",
            )

    writer = threading.Thread(target=write)
    writer.start()
    polls = 0
    while writer.is_alive() or polls < 3:
        _poll(source)
        polls += 1
    writer.join()
    _poll(source)
    _sql(server, "SET GLOBAL max_binlog_size = 1073741824")
    stored = _stored("busy")
    assert len(stored) == len(set(stored)), "a transaction was stored twice"
    truth = _server_xids(server)
    # Everything the server still has is stored (files purged earlier in the module are not listed).
    assert set(stored) == truth
    big = BinlogTransaction.objects.filter(server="busy", rows__gte=200)
    assert sorted(big.values_list("rows", flat=True)) == [200 + 20 * i for i in range(25)]
    assert not ParseProblem.objects.filter(source_file__source=source).exists()


def test_reset_master_is_a_new_sequence_for_files_and_for_the_replica(
    server: Any, settings: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.BINLOG_SPOOL_DIR = tmp_path / "spool"
    _sql(
        server,
        "CREATE USER IF NOT EXISTS 'repl'@'127.0.0.1' IDENTIFIED BY 'Repl-pw-1'",
        "GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO 'repl'@'127.0.0.1'",
    )
    monkeypatch.setenv("AUDITWEB_SOURCE_REPL_PASSWORD", "Repl-pw-1")
    files = Source.objects.create(
        name="files", path=str(server.binlogs / "mariadb-bin.[0-9]*"), format="binlog", server="rf"
    )
    replica = Source.objects.create(
        name="pulled", kind=Source.Kind.BINLOG_REPLICA, dsn=f"mysql://repl@127.0.0.1:{server.port}",
        password_env="AUDITWEB_SOURCE_REPL_PASSWORD", server="rr",
    )  # fmt: skip
    _insert(server, 3)
    _poll(files)
    _poll(replica)
    _insert(server, 2)  # written, then reset before any poll saw it
    _sql(server, "RESET MASTER")
    _insert(server, 4)
    _poll(files)
    _poll(replica)
    _poll(files)
    _poll(replica)
    truth = _server_xids(server)
    assert {name for name, _ in truth} == {"mariadb-bin.000001"}
    for source, label in ((files, "rf"), (replica, "rr")):
        source.refresh_from_db()
        assert source.last_error == "", source.last_error
        stored = _stored(label)
        assert len(stored) == len(set(stored)), f"{label}: a transaction was stored twice"
        assert {s for s in stored if s[0] == "mariadb-bin.000001"} >= truth
        # The new mariadb-bin.000001 is another file than any earlier one.
        assert BinlogTransaction.objects.filter(server=label, file_name="mariadb-bin.000001").count() >= 4
        # What was written between the last poll and the reset is lost: said so, on the source's files.
        reasons = " ".join(
            ParseProblem.objects.filter(source_file__source=source).values_list("reason", flat=True)
        )
        assert "RESET MASTER" in reasons, (label, reasons)
    assert (tmp_path / "spool" / f"source-{replica.pk}" / "g000002" / "mariadb-bin.000001").exists()


def test_pull_binlog_command(
    server: Any, settings: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    from django.core.management import call_command
    from django.core.management.base import CommandError

    settings.BINLOG_SPOOL_DIR = tmp_path / "spool"
    _sql(
        server,
        "CREATE USER IF NOT EXISTS 'repl'@'127.0.0.1' IDENTIFIED BY 'Repl-pw-1'",
        "GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO 'repl'@'127.0.0.1'",
    )
    monkeypatch.setenv("AUDITWEB_SOURCE_REPLICATION_PASSWORD", "Repl-pw-1")
    _insert(server, 2)
    out = io.StringIO()
    dsn = f"mysql://repl@127.0.0.1:{server.port}"
    call_command("pull_binlog", "--dsn", dsn, "--server", "cmd", stdout=out)
    assert "transactions new" in out.getvalue()
    assert set(_stored("cmd")) == _server_xids(server)
    out = io.StringIO()
    call_command("pull_binlog", "--dsn", dsn, "--server", "cmd", stdout=out)
    assert " 0 transactions new" in out.getvalue()
    monkeypatch.setenv("AUDITWEB_SOURCE_REPLICATION_PASSWORD", "wrong")
    with pytest.raises(CommandError, match="Access denied"):
        call_command("pull_binlog", "--dsn", dsn, "--server", "cmd", stdout=io.StringIO())


def test_an_event_above_the_limit_is_the_sources_error(
    server: Any, settings: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.BINLOG_SPOOL_DIR = tmp_path / "spool"
    settings.BINLOG_MAX_EVENT_BYTES = 1000
    _sql(
        server,
        "CREATE USER IF NOT EXISTS 'repl'@'127.0.0.1' IDENTIFIED BY 'Repl-pw-1'",
        "GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO 'repl'@'127.0.0.1'",
    )
    monkeypatch.setenv("AUDITWEB_SOURCE_REPL_PASSWORD", "Repl-pw-1")
    _insert(server, 1, size=1500)
    source = Source.objects.create(
        name="limited", kind=Source.Kind.BINLOG_REPLICA, dsn=f"mysql://repl@127.0.0.1:{server.port}",
        password_env="AUDITWEB_SOURCE_REPL_PASSWORD", server="lim",
    )  # fmt: skip
    run = _poll(source)
    source.refresh_from_db()
    assert run is not None and run.status == IngestRun.Status.FAILED
    assert "BINLOG_MAX_EVENT_BYTES" in source.last_error
