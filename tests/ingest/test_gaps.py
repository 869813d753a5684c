"""Gaps: where the log shows that nothing was recorded (logging switched off, a restart, the clock
going back), stored with their start and end."""

from __future__ import annotations

import io
from datetime import UTC, datetime

import pytest
from django.core.management import call_command

from ingest.models import Gap

from ..conftest import FIXTURES

pytestmark = pytest.mark.django_db(transaction=True)
SCENARIO = FIXTURES / "genlog" / "mariadb-10.11.19-scenario.log"


def ingest(*paths: object) -> None:
    call_command("ingest", *map(str, paths), "--server", "s", "--timezone", "UTC", stdout=io.StringIO())


def gaps() -> list[tuple[object, ...]]:
    return list(Gap.objects.order_by("byte_offset").values_list("reason", "started_at", "ended_at", "line"))


def t(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)


def test_the_real_restart_and_the_final_switch_off_are_gaps() -> None:
    ingest(SCENARIO)
    lines = SCENARIO.read_bytes().split(b"\n")
    off_line = next(n for n, line in enumerate(lines, 1) if line.endswith(b"SET GLOBAL general_log = OFF"))
    restart = next(n for n, line in enumerate(lines, 1) if b"started with:" in line and n > 1)
    assert gaps() == [
        # The restart: from the last record before the banner to the first after it. A banner is
        # also written when the log is reopened; here the ids after it started over.
        ("restart", t(2026, 11, 22, 8, 48, 20), t(2026, 11, 22, 8, 48, 22), restart),
        # root switched the log off last; nothing was recorded after it: open.
        ("logging_off", t(2026, 11, 22, 8, 48, 24), None, off_line),
    ]
    ingest(SCENARIO)  # again: nothing new
    assert len(gaps()) == 2


def test_switched_off_and_on_again_is_one_gap_and_the_clock_going_back_another(tmp_path) -> None:
    path = tmp_path / "general.log"
    path.write_bytes(
        b"2026-01-05T09:00:00.000000Z\t    7 Query\tSET GLOBAL general_log = 'OFF'\n"
        b"/usr/sbin/mysqld, Version: 8.0.36 (MySQL Community Server - GPL). started with:\n"
        b"Tcp port: 3306  Unix socket: /var/run/mysqld/mysqld.sock\n"
        b"Time                 Id Command    Argument\n"
        b"2026-01-05T11:30:00.000000Z\t    7 Query\tDELETE FROM orders\n"
        b"2026-01-05T11:00:00.000000Z\t    7 Query\tSELECT 1\n"
    )
    ingest(path)
    assert gaps() == [
        ("logging_off", t(2026, 1, 5, 9, 0), t(2026, 1, 5, 11, 30), 1),
        # Nothing after the banner tells a reopening from a restart (this layout prints every
        # time; no new login): this gap says so.
        ("log_opened", t(2026, 1, 5, 9, 0), t(2026, 1, 5, 11, 30), 2),
        ("time_backwards", t(2026, 1, 5, 11, 30), t(2026, 1, 5, 11, 0), 6),
    ]
    assert "general_log = 'OFF'" in Gap.objects.get(reason="logging_off").detail
    opened = Gap.objects.get(reason="log_opened").detail
    assert opened.endswith("do not say which. Before it, connection 7 switched logging off at line 1")


def test_a_gap_between_two_files_of_one_ingest(tmp_path) -> None:
    first, second = tmp_path / "audit.log.1", tmp_path / "audit.log"
    first.write_bytes(
        b"20260105 09:00:00,db1,bob,h,900,1,CONNECT,shop,,0\n"
        b"20260105 09:00:01,db1,bob,h,900,2,QUERY,shop,'SELECT 1',0\n"
    )
    second.write_bytes(b"20260105 10:00:00,db1,eve,h,4,1,CONNECT,shop,,0\n")  # ids started over
    ingest(first, second)
    assert gaps() == [("restart", t(2026, 1, 5, 9, 0, 1), t(2026, 1, 5, 10, 0), 1)]
