"""The dashboard: what needs a look now, and every page behind a login."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from ingest.models import IngestRun, Source
from tests.investigations.logs import genlog

pytestmark = pytest.mark.django_db

PAGES = ["/", "/events/", "/events/1/", "/sessions/", "/sessions/1/", "/tables/", "/tables/shop.orders/"]


@pytest.mark.parametrize("url", PAGES)
def test_every_page_asks_for_a_login(client, url) -> None:
    response = client.get(url)
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_logging_in_lands_on_the_dashboard(client, investigator) -> None:
    login = {"username": "ivy", "password": "correct horse battery staple"}
    response = client.post("/accounts/login/", login)
    assert response["Location"] == "/"
    assert "<h1>Dashboard</h1>" in client.get("/").content.decode()


def test_the_navigation_leads_to_each_section_and_marks_the_current_one(investigator_client) -> None:
    html = investigator_client.get("/sessions/").content.decode()
    nav = html.split('<nav aria-label="Main">', 1)[1].split("</nav>", 1)[0]
    for label, url in [("Dashboard", "/"), ("Explorer", "/events/"), ("Tables", "/tables/"),
                       ("Sessions", "/sessions/"), ("Cases", "/cases/"),
                       ("Sources", "/sources/")]:  # fmt: skip
        assert f'href="{url}"' in nav and label in nav
    assert 'href="/sessions/" aria-current="page"' in nav


def test_an_empty_dashboard_says_what_to_do(investigator_client) -> None:
    html = investigator_client.get("/").content.decode()
    assert "No sources yet" in html and 'href="/sources/upload/"' in html


def test_it_counts_recent_destructive_and_anti_forensic_events(investigator_client, ingest_bytes) -> None:
    now = timezone.now().replace(microsecond=0)
    ingest_bytes(
        genlog(
            (now - timedelta(days=31), 7, "Connect", "eve@10.0.0.9 on shop using TCP/IP"),
            (now - timedelta(days=30), 7, "Query", "TRUNCATE TABLE ancient"),
            (now - timedelta(days=3), 7, "Query", "DELETE FROM invoices"),
            (now - timedelta(hours=2), 7, "Query", "DROP TABLE audit_trail"),
            (now - timedelta(hours=1), 7, "Query", "SET GLOBAL general_log = OFF"),
        )
    )
    html = investigator_client.get("/").content.decode()
    cards = re.findall(r'<span class="number">(\d+)</span>\s*<span class="what">([^<]+)</span>', html)
    assert cards == [
        ("1", "Destructive in the last 24 hours"),
        ("2", "Destructive in the last 7 days"),
        ("1", "Anti-forensic in the last 24 hours"),
        ("1", "Anti-forensic in the last 7 days"),
    ]
    assert "DROP TABLE" in html and "SET GLOBAL general_log = OFF" in html and "eve@10.0.0.9" in html
    assert "logging switched off" in html and "still open" in html  # the gap it left


def test_a_count_links_to_the_explorer_listing_those_events(investigator_client, ingest_bytes) -> None:
    now = timezone.now().replace(microsecond=0)
    ingest_bytes(genlog((now - timedelta(hours=2), 7, "Query", "DROP TABLE audit_trail")))
    html = investigator_client.get("/?tz=UTC").content.decode()
    link = re.search(r'<a class="card alarm" href="([^"]+)"', html).group(1).replace("&amp;", "&")
    listed = investigator_client.get(link).content.decode()
    assert "DROP TABLE audit_trail" in listed and "1 event matches." in listed


def test_it_lists_unhealthy_sources_with_why(investigator_client, tmp_path) -> None:
    Source.objects.create(name="db9 log", kind="file", path=str(tmp_path / "gone.log"), server="db9")
    quiet = tmp_path / "quiet.log"
    quiet.write_bytes(b"2026-01-05T09:00:00.000000Z\t    7 Query\tSELECT 1\n")
    two_hours_ago = timezone.now() - timedelta(hours=2)
    Source.objects.create(
        name="db8 log", path=str(quiet), server="db8", quiet_seconds=600,
        last_data_at=two_hours_ago, last_polled_at=timezone.now(),
    )  # fmt: skip
    Source.objects.create(name="db7 log", path=str(quiet), server="db7", last_polled_at=timezone.now())
    html = investigator_client.get("/").content.decode()
    assert "3 sources:" in html and "1 waiting" in html and "1 dead" in html and "1 failed" in html
    assert "db9 log" in html and "the file vanished" in html
    assert "db8 log" in html and "no data for 2.0 h, expected within 10 min" in html
    assert "db7 log" not in html  # no data yet, but not for longer than its quiet time: not listed


def test_running_ingests_show_progress_and_poll_while_they_run(investigator_client, tmp_path) -> None:
    source = Source.objects.create(name="upload", kind="upload", path=str(tmp_path / "x.log"), server="db1")
    IngestRun.objects.create(source=source, status="running", bytes_read=250, bytes_total=1000)
    html = investigator_client.get("/").content.decode()
    assert '<progress max="1000" value="250">25%</progress>' in html
    assert 'hx-get="/" hx-trigger="every 2s"' in html
    partial = investigator_client.get("/", HTTP_HX_REQUEST="true").content.decode()
    assert partial.lstrip().startswith('<div id="running"') and "<h1>" not in partial
    IngestRun.objects.update(status="done")
    idle = investigator_client.get("/", HTTP_HX_REQUEST="true").content.decode()
    assert "every 2s" not in idle  # nothing runs: the polling stops
