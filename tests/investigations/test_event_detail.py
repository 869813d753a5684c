"""An event's page (the statement for reading, every field, the raw bytes) and the timeline's arithmetic."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from ingest.models import Event
from investigations.query.timeline import bucket_width
from tests.investigations.logs import genlog
from tests.investigations.test_explorer import chart_of

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
QUERY = "SELECT o.id, c.name FROM orders o JOIN customers c ON c.id = o.customer_id WHERE o.total > 10"


def test_the_statement_is_reindented_for_reading_and_kept_exact_in_the_raw_bytes(
    investigator_client, ingest_bytes
) -> None:
    ingest_bytes(genlog((T0, 7, "Connect", "ann@10.0.0.1 on shop using TCP/IP"), (T0, 7, "Query", QUERY)))
    event = Event.objects.get(statement_type="SELECT")
    html = investigator_client.get(f"/events/{event.pk}/").content.decode()
    pretty = html.split('<pre class="sql">', 1)[1].split("</pre>", 1)[0]
    assert pretty.splitlines()[0] == "SELECT o.id," and "\nFROM orders o\n" in pretty
    assert QUERY.replace(">", "&gt;") in html.split('<pre class="raw"', 1)[1]  # the exact line, as logged


def test_the_event_page_shows_every_field_and_links_onwards(investigator_client, ingest_bytes) -> None:
    ingest_bytes(genlog((T0, 7, "Connect", "ann@10.0.0.1 on shop using TCP/IP"), (T0, 7, "Query", QUERY)))
    event = Event.objects.get(statement_type="SELECT")
    html = investigator_client.get(f"/events/{event.pk}/?tz=Europe/Berlin").content.decode()
    labels = re.findall(r"<dt>([^<]+)</dt>", html)
    assert labels == ["Time", "Server", "Who", "How AuditWeb knows who", "Session", "Client", "Database",
                      "Command", "Statement type", "Tables", "Destructive", "Flags", "Rows affected",
                      "Outcome", "Fingerprint", "Source", "Record", "Custody"]  # fmt: skip
    assert "2026-01-05 10:00:00.000000 CET" in html and "2026-01-05 09:00:00.000000 UTC" in html
    assert f'href="/sessions/{event.session_id}/"' in html
    assert 'href="/tables/shop.customers/"' in html and 'href="/tables/shop.orders/"' in html
    assert event.record_hash.hex() in html


def test_an_unknown_event_is_not_found(investigator_client) -> None:
    assert investigator_client.get("/events/999999/").status_code == 404


def test_bucket_widths_keep_a_chart_under_120_bars() -> None:
    assert bucket_width(timedelta(seconds=60)) == timedelta(seconds=1)
    assert bucket_width(timedelta(hours=1)) == timedelta(seconds=30)
    assert bucket_width(timedelta(days=1)) == timedelta(minutes=15)
    assert bucket_width(timedelta(days=30)) == timedelta(hours=6)
    assert bucket_width(timedelta(days=365)) == timedelta(days=7)
    for days in (1, 3, 30, 365, 3650, 36500):
        assert timedelta(days=days) / bucket_width(timedelta(days=days)) <= 120


def test_chart_bars_begin_at_the_viewers_midnight(investigator_client, ingest_bytes) -> None:
    berlin = ZoneInfo("Europe/Berlin")
    when = [datetime(2026, 1, d, h, tzinfo=berlin) for d in (5, 6, 7) for h in (0, 12, 23)]
    ingest_bytes(genlog(*((w.astimezone(UTC), 7, "Query", f"SELECT {i}") for i, w in enumerate(when))))
    html = investigator_client.get("/events/?since=2026-01-05T00:00&until=2026-01-08T00:00&tz=Europe/Berlin")
    chart = chart_of(html.content.decode())
    assert chart["from"][0] == "2026-01-05T00:00:00" and chart["until"][-1] == "2026-01-08T00:00:00"
    assert chart["width"] == "1 hour" and len(chart["labels"]) == 72
    counts = [sum(s["data"][i] for s in chart["series"]) for i in range(72)]
    assert [i for i, n in enumerate(counts) if n] == [0, 12, 23, 24, 36, 47, 48, 60, 71]
