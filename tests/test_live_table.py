"""The live mysql.general_log table of the real MariaDB here, pulled with `manage.py pull_general_log`
by an account that may only read that table, and asked over the API who deleted the rows.

Under the shared lock /tmp/auditweb-mariadb.lock the module fixture switches on
log_output=TABLE, runs known statements as known users, switches logging back to how it
found it, and leaves the rows in the table for the pulls. Skipped when MariaDB is not here.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator

import pytest
from django.core.management import call_command

from ingest.models import Event, Source
from ingest.mysql_table import connect
from ingest.pipeline import ingest_table, table_source

pymysql = pytest.importorskip("pymysql")
from tests.mariadb import hold_lock, root_or_skip  # noqa: E402 - after the skip

pytestmark = [pytest.mark.mariadb, pytest.mark.django_db(transaction=True)]

READER, READER_PASSWORD = "lt_reader", "lt-Reader-7"
DSN = f"mysql://{READER}@127.0.0.1:3306"


def run_as(user: str, password: str, statements: list[str], *, rollback: bool = False) -> int:
    """Run the statements in one transaction (PyMySQL turns autocommit off), then COMMIT or ROLLBACK."""
    conn = pymysql.connect(host="127.0.0.1", port=3306, user=user, password=password, database="lt_shop")
    try:
        with conn.cursor() as c:
            for sql in statements:
                c.execute(sql)
            conn.rollback() if rollback else conn.commit()
            c.execute("SELECT CONNECTION_ID()")
            return int(c.fetchone()[0])
    finally:
        conn.close()


@pytest.fixture(scope="module")
def scenario() -> Iterator[dict[str, int]]:
    admin = root_or_skip()
    fd = hold_lock()
    with admin.cursor() as c:
        c.execute("SELECT @@global.log_output, @@global.general_log")
        log_output, general_log = c.fetchone()
    try:
        with admin.cursor() as c:
            c.execute("SET SESSION sql_log_off = ON")
            c.execute("DROP DATABASE IF EXISTS lt_shop")
            c.execute("CREATE DATABASE lt_shop")
            c.execute("CREATE TABLE lt_shop.orders (id INT PRIMARY KEY, total DECIMAL(8,2))")
            c.execute("INSERT INTO lt_shop.orders VALUES (1, 10), (2, 20), (3, 30)")
            for user, password in (
                ("lt_bob", "lt-Bob-7"),
                ("lt_alice", "lt-Alice-7"),
                (READER, READER_PASSWORD),
            ):
                c.execute("DROP USER IF EXISTS %s@'%%'", (user,))
                c.execute("CREATE USER %s@'%%' IDENTIFIED BY %s", (user, password))
            c.execute("GRANT SELECT, DELETE ON lt_shop.* TO 'lt_bob'@'%', 'lt_alice'@'%'")
            c.execute("GRANT SELECT ON mysql.general_log TO %s@'%%'", (READER,))
            c.execute("SET GLOBAL log_output = 'TABLE'")
            c.execute("SET GLOBAL general_log = ON")
        ids = {
            "alice": run_as("lt_alice", "lt-Alice-7", ["SELECT * FROM orders", "SELECT 1"]),
            "bob": run_as("lt_bob", "lt-Bob-7", ["SELECT * FROM orders", "DELETE FROM orders WHERE id = 3"]),
            "bob_undone": run_as("lt_bob", "lt-Bob-7", ["DELETE FROM orders WHERE id = 1"], rollback=True),
        }
        with admin.cursor() as c:
            c.execute("SET GLOBAL general_log = OFF")
        yield ids
    finally:
        with admin.cursor() as c:
            c.execute("SET SESSION sql_log_off = ON")
            c.execute("SET GLOBAL general_log = OFF")
            c.execute(f"SET GLOBAL log_output = '{log_output}'")
            c.execute(f"SET GLOBAL general_log = {int(general_log)}")
            c.execute("DROP DATABASE IF EXISTS lt_shop")
            for user in ("lt_bob", "lt_alice", READER):
                c.execute("DROP USER IF EXISTS %s@'%%'", (user,))
        admin.close()
        os.close(fd)


def pull() -> str:
    out = io.StringIO()
    os.environ["AUDITWEB_MYSQL_PASSWORD"] = READER_PASSWORD
    call_command("pull_general_log", "--dsn", DSN, "--server", "live-db", stdout=out)
    return out.getvalue()


def test_the_pull_names_who_deleted_and_a_second_pull_adds_nothing(scenario, api_client) -> None:
    summary = pull()
    assert "events stored" in summary
    # The table keeps the rows of earlier runs too: this run's connections tell ours apart.
    query = {"table": "lt_shop.orders", "destructive": "true", "connection_id": scenario["bob"]}
    rows = api_client.get("/api/v1/events/", query).json()["results"]
    assert [(r["user"], r["host"], r["connection_id"], r["sql"], r["server"]) for r in rows] == [
        ("lt_bob", "127.0.0.1", scenario["bob"], "DELETE FROM orders WHERE id = 3", "live-db"),
    ]
    assert "unattributed" not in rows[0]["flags"] and "rolled_back" not in rows[0]["flags"]
    # The DELETE bob took back with ROLLBACK is there, flagged.
    query = {"destructive": "true", "connection_id": scenario["bob_undone"]}
    undone = api_client.get("/api/v1/events/", query).json()["results"]
    assert [(r["user"], r["sql"], "rolled_back" in r["flags"]) for r in undone] == [
        ("lt_bob", "DELETE FROM orders WHERE id = 1", True)
    ]
    assert rows[0]["database"] == "lt_shop"
    # Besides what the client set up (SET NAMES, autocommit, COMMIT), exactly what alice ran.
    assert set(Event.objects.filter(connection_id=scenario["alice"]).values_list("user", flat=True)) == {
        "lt_alice"
    }
    alice = Event.objects.filter(connection_id=scenario["alice"], statement_type="SELECT")
    alice = alice.values_list("sql", flat=True)
    assert sorted(alice) == ["SELECT * FROM orders", "SELECT 1", "SELECT CONNECTION_ID()"]
    # The source keeps no password, and the checkpoint is where the next pull starts.
    source = Source.objects.get(kind=Source.Kind.MYSQL_TABLE)
    assert source.dsn == DSN and READER_PASSWORD not in str(source.checkpoint)
    count = Event.objects.count()
    assert "0 events stored" in pull()
    assert Event.objects.count() == count


def test_a_pull_killed_half_way_resumes_without_loss_or_repeats(scenario, settings) -> None:
    settings.INGEST_BATCH_SIZE = 3
    source = table_source(dsn=DSN, server="live-db")

    class Killed(Exception):
        pass

    def die_after_first_batch(run) -> None:
        raise Killed

    conn = connect(DSN, READER_PASSWORD)
    with pytest.raises(Killed):
        ingest_table(source, conn, progress=die_after_first_batch)
    assert Event.objects.count() == 3  # the first batch and its checkpoint were committed together
    first = Source.objects.get(pk=source.pk).checkpoint["watermark"]
    source.refresh_from_db()
    assert source.checkpoint["watermark"] == first
    ingest_table(source, conn)
    conn.close()

    ours = [scenario["bob"], scenario["alice"]]
    events = Event.objects.filter(connection_id__in=ours, statement_type__in=["SELECT", "DELETE"])
    assert sorted(events.values_list("user", "sql")) == [
        ("lt_alice", "SELECT * FROM orders"),
        ("lt_alice", "SELECT 1"),
        ("lt_alice", "SELECT CONNECTION_ID()"),
        ("lt_bob", "DELETE FROM orders WHERE id = 3"),
        ("lt_bob", "SELECT * FROM orders"),
        ("lt_bob", "SELECT CONNECTION_ID()"),
    ]
    hashes = [bytes(h) for h in Event.objects.values_list("record_hash", flat=True)]
    assert len(hashes) == len(set(hashes))
