"""An event's page shows its time once per zone, to the precision its log wrote it with."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from ingest.models import Event
from investigations.views.precision import time_digits
from tests.investigations.logs import SCENARIO, genlog

SAMPLES = [
    # (format given to the source, source kind, the record's first bytes, digits after the second)
    ("general-log", "file", b"2026-01-05T09:00:03.400000Z\t   31 Query\tDELETE FROM t\n", 6),
    ("general-log", "file", b"2026-01-05T09:00:03Z\t   31 Query\tDELETE FROM t\n", 0),
    ("general-log", "file", b"260105  9:00:03\t   31 Query\tDELETE FROM t\n", 0),
    ("general-log", "file", b"\t\t   31 Query\tDELETE FROM t\n", 0),  # same second as the line before
    ("auto", "file", b"2026-01-05T09:00:03.123Z\t   31 Query\tSELECT '12:00:00.5'\n", 3),
    ("auto", "file", b"\t\t   31 Query\tSELECT '12:00:00.123456'\n", 0),
    (
        "general-log-csv",
        "file",
        b'"2026-11-23 12:48:31.300835","[dave] @ localhost []",404,1,"Query","x"\n',
        6,
    ),
    (
        "general-log-tsv",
        "file",
        b"2026-11-23 12:48:31.300835\troot[root] @ localhost []\t5\t1\tQuery\tx\n",
        6,
    ),
    ("mariadb-audit", "file", b"20261122 11:15:05,vm,bob,127.0.0.1,170,712,QUERY,shop,'SELECT 1',0\n", 0),
    ("mariadb-audit", "file", b"20231207T13:14:28.481161+0100,vm,bob,10.0.0.1,1,2,QUERY,,'x',0\n", 6),
    (
        "mariadb-audit",
        "file",
        b"Jan  5 09:00:03 vm mysql-server_auditing: vm,bob,10.0.0.1,1,2,QUERY,,'x',0\n",
        0,
    ),
    (
        "json-audit",
        "file",
        b'{"msg-type":"activity","date":"1516567908029","thread-id":"3","query":"x"}\n',
        3,
    ),
    (
        "json-audit",
        "file",
        b'{"audit_record":{"name":"Query","timestamp":"2019-11-21T10:19:14Z","sqltext":"x"}}\n',
        0,
    ),
    ("json-audit", "file", b'{"timestamp":"2019-10-03 14:23:35","id":2,"class":"general"}\n', 0),
    (
        "xml-audit",
        "file",
        b'<AUDIT_RECORD NAME="Query" TIMESTAMP="2019-10-03T14:25:00 UTC" SQLTEXT="x"/>\n',
        0,
    ),
    ("xml-audit", "file", b"<AUDIT_RECORD>\n <TIMESTAMP>2019-10-03T14:25:00.25 UTC</TIMESTAMP>\n", 2),
    ("audit-csv", "file", b'"Query","12_2019-11-21T10:19:14","2019-11-21T10:19:14 UTC","1","root"\n', 0),
    ("auto", "mysql-table", b"anything: the table's event_time column has microseconds\n", 6),
    ("auto", "file", b"no log I know\n", None),
    ("json-audit", "file", b'{"query":"no time here"}\n', None),
]


@pytest.mark.parametrize(("fmt", "kind", "raw", "digits"), SAMPLES)
def test_the_records_own_timestamp_says_its_precision(fmt, kind, raw, digits) -> None:
    assert time_digits(raw, fmt, kind) == digits


def test_hostile_bytes_are_read_no_further_than_the_head() -> None:
    # A timestamp far into a huge record is not looked for (the head is bounded).
    raw = b'{"query":"' + b"9" * 100_000 + b'","timestamp":"2019-11-21T10:19:14.5Z"}\n'
    assert time_digits(raw, "json-audit") is None


def time_shown(client, event: Event, zone: str) -> str:
    html = client.get(f"/events/{event.pk}/?tz={zone}").content.decode()
    found = re.search(r'<dd id="event-time">(.*?)</dd>', html, re.S)
    assert found, "no time on the page"
    return re.sub(r"<[^>]+>", " ", found.group(1))


@pytest.mark.django_db
def test_a_log_of_seconds_shows_seconds_once_in_utc(investigator_client, ingest_bytes) -> None:
    ingest_bytes(SCENARIO.read_bytes(), server="db1")
    event = Event.objects.filter(occurred_at__isnull=False, statement_type="DELETE").order_by("id").first()
    clock = event.occurred_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")
    text = time_shown(investigator_client, event, "UTC")
    assert text.count(clock) == 1 and "UTC" in text and "(UTC)" not in text
    assert clock + "." not in text and "to the second" in text
    page = investigator_client.get(f"/events/{event.pk}/?tz=UTC").content.decode()
    shown = re.sub(r"<[^>]+>", " ", page)  # what a reader sees (attributes keep the instant)
    assert "how auditweb knows who" in shown.lower() and "Shown by" in shown
    assert ".000000" not in shown  # neither the time nor the login that attributes it


@pytest.mark.django_db
def test_a_log_of_microseconds_shows_them_in_the_zone_and_in_utc(investigator_client, ingest_bytes) -> None:
    when = datetime(2026, 1, 5, 9, 0, 3, 400001, tzinfo=UTC)
    ingest_bytes(genlog((when, 31, "Query", "DELETE FROM orders")), server="s1")
    event = Event.objects.get()
    text = time_shown(investigator_client, event, "Europe/Berlin")
    assert text.count("2026-01-05 10:00:03.400001 CET") == 1
    assert text.count("2026-01-05 09:00:03.400001 UTC") == 1
    assert "to the microsecond" in text and "Europe/Berlin" in text


@pytest.mark.django_db
def test_the_sessions_header_names_the_zone_after_an_htmx_filter(investigator_client, ingest_bytes) -> None:
    ingest_bytes(SCENARIO.read_bytes(), server="db1")
    swap = investigator_client.get("/sessions/?user=bob&tz=Europe/Berlin", HTTP_HX_REQUEST="true")
    html = swap.content.decode()
    assert "<h1>" not in html  # only the partial came
    assert "Logged in (Europe/Berlin)" in html and "()" not in html
    page = investigator_client.get("/sessions/?user=bob&tz=Europe/Berlin").content.decode()
    assert "Logged in (Europe/Berlin)" in page


@pytest.mark.django_db
def test_the_tables_list_names_the_zone_after_an_htmx_search(investigator_client, ingest_bytes) -> None:
    ingest_bytes(SCENARIO.read_bytes(), server="db1")
    html = investigator_client.get("/tables/?q=orders&tz=UTC", HTTP_HX_REQUEST="true").content.decode()
    assert "First seen (UTC)" in html
