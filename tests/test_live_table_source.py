"""A mysql-table source of the real MariaDB here, polled (ingest_source) while a client writes
rows into mysql.general_log: every statement ends up in the store exactly once. A source whose
database refuses the connection is unhealthy. Under the shared lock /tmp/auditweb-mariadb.lock;
skipped when MariaDB is not here."""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from collections.abc import Iterator

import pytest

from ingest.follow import ingest_source
from ingest.models import Event, IngestRun, Source
from ingest.sources import source_health

pymysql = pytest.importorskip("pymysql")
from tests.mariadb import hold_lock, root_or_skip  # noqa: E402 - after the skip

pytestmark = [pytest.mark.mariadb, pytest.mark.django_db(transaction=True)]

READER, READER_PASSWORD = "ls_reader", "ls-Reader-9"
WRITER, WRITER_PASSWORD = "ls_writer", "ls-Writer-9"
STATEMENTS = 400


@pytest.fixture(scope="module")
def logging_to_table() -> Iterator[None]:
    admin = root_or_skip()
    fd = hold_lock()
    with admin.cursor() as c:
        c.execute("SELECT @@global.log_output, @@global.general_log")
        log_output, general_log = c.fetchone()
    try:
        with admin.cursor() as c:
            c.execute("SET SESSION sql_log_off = ON")
            for user, password in ((READER, READER_PASSWORD), (WRITER, WRITER_PASSWORD)):
                c.execute("DROP USER IF EXISTS %s@'%%'", (user,))
                c.execute("CREATE USER %s@'%%' IDENTIFIED BY %s", (user, password))
            c.execute("GRANT SELECT ON mysql.general_log TO %s@'%%'", (READER,))
            c.execute("SET GLOBAL log_output = 'TABLE'")
            c.execute("SET GLOBAL general_log = ON")
        yield
    finally:
        with admin.cursor() as c:
            c.execute("SET SESSION sql_log_off = ON")
            c.execute("SET GLOBAL general_log = OFF")
            c.execute(f"SET GLOBAL log_output = '{log_output}'")
            c.execute(f"SET GLOBAL general_log = {int(general_log)}")
            for user in (READER, WRITER):
                c.execute("DROP USER IF EXISTS %s@'%%'", (user,))
        admin.close()
        os.close(fd)


BURSTS = 4


def write_statements(marker: str, done: threading.Event, polls: list[int]) -> None:
    """STATEMENTS statements in BURSTS bursts, each after one more poll has ended: rows are
    written while the source is polled, however slow the machine is."""
    conn = pymysql.connect(
        host="127.0.0.1", port=3306, user=WRITER, password=WRITER_PASSWORD, autocommit=True
    )
    try:
        with conn.cursor() as c:
            for n in range(STATEMENTS):
                burst = n * BURSTS // STATEMENTS
                deadline = time.monotonic() + 120
                while polls[0] < burst and time.monotonic() < deadline:
                    time.sleep(0.01)
                c.execute(f"SELECT {n} AS {marker}")
    finally:
        conn.close()
        done.set()


def test_rows_written_while_the_source_is_polled_are_stored_once(logging_to_table, settings) -> None:
    settings.INGEST_BATCH_SIZE = 25
    os.environ["AUDITWEB_SOURCE_LS_READER_PASSWORD"] = READER_PASSWORD
    source = Source.objects.create(
        name="live",
        kind=Source.Kind.MYSQL_TABLE,
        dsn=f"mysql://{READER}@127.0.0.1:3306",
        password_env="AUDITWEB_SOURCE_LS_READER_PASSWORD",
        server="live-src",
    )
    marker = f"m{os.getpid()}_{int(time.time())}"
    done = threading.Event()
    polls = [0]
    writer = threading.Thread(target=write_statements, args=(marker, done, polls))
    writer.start()
    while not done.is_set():
        ingest_source(source.pk)
        polls[0] += 1
    writer.join()
    time.sleep(2.5)  # past the puller's overlap window, then the last pull
    ingest_source(source.pk)
    ours = Event.objects.filter(server="live-src", sql__endswith=f"AS {marker}")
    assert Counter(ours.values_list("sql", flat=True)) == Counter(
        f"SELECT {n} AS {marker}" for n in range(STATEMENTS)
    )
    assert set(ours.values_list("user", flat=True)) == {WRITER}
    assert polls[0] >= BURSTS - 1
    assert IngestRun.objects.filter(source=source, status=IngestRun.Status.DONE).count() == polls[0] + 1
    assert source_health(Source.objects.get(pk=source.pk)).state == "alive"


def test_a_database_that_refuses_the_connection_makes_the_source_unhealthy(logging_to_table) -> None:
    os.environ["AUDITWEB_SOURCE_LS_WRONG_PASSWORD"] = "not-the-password"
    source = Source.objects.create(
        name="refused",
        kind=Source.Kind.MYSQL_TABLE,
        dsn=f"mysql://{READER}@127.0.0.1:3306",
        password_env="AUDITWEB_SOURCE_LS_WRONG_PASSWORD",
        server="live-src",
    )
    run = ingest_source(source.pk)
    assert run is not None and run.status == IngestRun.Status.FAILED
    health = source_health(Source.objects.get(pk=source.pk))
    assert health.state == "failed" and health.legacy == "unhealthy"
    assert "cannot connect" in health.reasons[0] and "Access denied" in health.reasons[0]
    assert "not-the-password" not in " ".join(health.reasons)
