"""The quiet tail, live: the real MariaDB writes its general log to a file of this test, a real
Celery worker with beat follows it in the default set-up (the source's default interval, beat's
default tick and settle time), and a writer runs bursts of statements, each ending with a DELETE,
then stops writing. Each DELETE must be searchable through the query layer within 5 s (p95 of
many samples; the figures are printed, and kept in docs/benchmarks.md), before and after a
rename-and-create rotation (logrotate's default, then FLUSH GENERAL LOGS) and a copytruncate
rotation; at the end every record of the files is stored exactly once.

Under the shared lock /tmp/auditweb-mariadb.lock; general_log, general_log_file and log_output
are put back as they were. Skipped when MariaDB is not here.

    ./dev test tests/test_live_tail.py -s    # prints the lag figures
"""

from __future__ import annotations

import math
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ingest.models import Event, IngestRun, Source
from investigations.query import filter_events
from tests.ingest.test_sources import events_of, straight_ingest
from tests.test_continuous import Workers, workers  # noqa: F401 - the fixture
from tests.test_live_server_audit import SOCKET, lock

pymysql = pytest.importorskip("pymysql")
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker, pytest.mark.mariadb]

SAMPLES_PER_PHASE = 8
BURST = 25  # statements before each sample's DELETE
LAG_P95_LIMIT = 5.0  # seconds: the requirement


@pytest.fixture
def mariadb_log() -> Iterator[tuple[Path, object]]:
    """A general log file that the real MariaDB writes for this test alone, and a root cursor."""
    try:
        admin = pymysql.connect(unix_socket=SOCKET, user="root", autocommit=True, connect_timeout=3)
    except Exception as e:  # any failure to connect means "no server here"
        pytest.skip(f"MariaDB is not reachable on {SOCKET}: {e}")
    fd = lock()
    c = admin.cursor()
    c.execute("SELECT @@global.general_log, @@global.general_log_file, @@global.log_output")
    was_on, was_file, was_output = c.fetchone()
    folder = Path(tempfile.mkdtemp(prefix="auditweb-tail-", dir="/tmp"))
    folder.chmod(0o777)  # the server writes here as its own user
    log = folder / "general.log"
    try:
        c.execute("DROP DATABASE IF EXISTS la_tail")
        c.execute("CREATE DATABASE la_tail")
        c.execute("CREATE TABLE la_tail.t (id INT PRIMARY KEY, v INT)")
        c.execute("SET GLOBAL general_log = OFF")
        c.execute("SET GLOBAL log_output = 'FILE'")
        c.execute("SET GLOBAL general_log_file = %s", (str(log),))
        c.execute("SET GLOBAL general_log = ON")
        yield log, c
    finally:
        c.execute("SET GLOBAL general_log = OFF")
        c.execute("SET GLOBAL general_log_file = %s", (was_file,))
        c.execute("SET GLOBAL log_output = %s", (was_output,))
        c.execute(f"SET GLOBAL general_log = {int(was_on)}")
        c.execute("DROP DATABASE IF EXISTS la_tail")
        admin.close()
        os.close(fd)  # the lock goes with it
        shutil.rmtree(folder, ignore_errors=True)


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def test_a_delete_before_the_log_goes_quiet_is_searchable_within_5_s_through_rotations(
    tmp_path: Path,
    mariadb_log: tuple[Path, object],
    workers: Workers,  # noqa: F811 - the fixture
) -> None:
    log, admin = mariadb_log
    Source.objects.create(  # the defaults: interval_seconds (60), no settings of its own
        name="live tail", kind=Source.Kind.FILE, path=str(log) + "*", server="live", format="general-log"
    )
    workers.start()  # beat's tick INGEST_POLL_SECONDS=1 (the default), INGEST_SETTLE_SECONDS default
    writer = pymysql.connect(unix_socket=SOCKET, user="root", database="la_tail", autocommit=True)
    cur = writer.cursor()
    markers: list[str] = []
    lags: dict[str, list[float]] = {"before rotation": [], "after rename": [], "after copytruncate": []}
    n = 0

    def sample(phase: str) -> None:
        nonlocal n
        for _ in range(BURST):
            n += 1
            markers.append(f"tail-{n:05d}")
            cur.execute(f"INSERT INTO t VALUES ({n}, 0) /* {markers[-1]} */")
        n += 1
        marker = f"tail-{n:05d}"
        markers.append(marker)
        sent = time.monotonic()
        cur.execute(f"DELETE FROM t WHERE id = {n - 1} /* {marker} */")
        # Then nothing more is written: the DELETE is the last record of the log.
        deadline = sent + 60
        while not filter_events({"q": marker, "server": "live"}).qs.exists():
            assert time.monotonic() < deadline, f"{marker} never came:\n{workers.logs()}"
            time.sleep(0.05)
        lags[phase].append(time.monotonic() - sent)

    for _ in range(SAMPLES_PER_PHASE):
        sample("before rotation")
    content = b""
    # logrotate's default (rename, create) and its postrotate: the server reopens the log.
    rotated = log.with_name("general.log.1")
    log.rename(rotated)
    admin.execute("FLUSH GENERAL LOGS")  # type: ignore[attr-defined]
    for _ in range(SAMPLES_PER_PHASE):
        sample("after rename")
    content += rotated.read_bytes()
    # copytruncate: the copy becomes .1 (the renamed one .2), and the server writes on at 0.
    rotated.rename(log.with_name("general.log.2"))
    shutil.copyfile(log, rotated)
    os.truncate(log, 0)
    content += rotated.read_bytes()
    for _ in range(SAMPLES_PER_PHASE):
        sample("after copytruncate")
    writer.close()
    admin.execute("SET GLOBAL general_log = OFF")  # type: ignore[attr-defined]
    content += log.read_bytes()

    every = [lag for phase in lags.values() for lag in phase]
    report = "; ".join(
        f"{phase}: p50 {statistics.median(v):.2f} s, max {max(v):.2f} s" for phase, v in lags.items()
    )
    p50, p95, worst = statistics.median(every), percentile(every, 95), max(every)
    print(f"\nquiet-tail lag over {len(every)} DELETEs: p50 {p50:.2f} s, p95 {p95:.2f} s, max {worst:.2f} s")
    print(report)

    # Nothing lost, nothing twice: every record of the files, and each statement written, once.
    expected = straight_ingest(tmp_path, content)
    deadline = time.monotonic() + 60
    while (mine := events_of("live")) != expected:
        assert time.monotonic() < deadline, (
            f"missing {expected - mine}, extra {mine - expected}\n{workers.logs()}"
        )
        time.sleep(0.5)
    found = Event.objects.filter(server="live", sql__contains="/* tail-").values_list("sql", flat=True)
    assert sorted(s.rsplit("/* ", 1)[1][:-3] for s in found) == markers
    assert not IngestRun.objects.filter(status=IngestRun.Status.FAILED).exists()

    assert p95 < LAG_P95_LIMIT, f"p95 {p95:.2f} s ({report})"
