"""The events page and the event detail page, as a browser without JavaScript sees them."""

from __future__ import annotations

import re

import pytest

from ingest.models import Event

pytestmark = pytest.mark.django_db

HOSTILE = (
    b"2026-01-05T09:00:00.000000Z\t    7 Connect\t"
    b"<img src=x onerror=alert(1)>@evil.example on shop using TCP/IP\n"
    b"2026-01-05T09:00:01.000000Z\t    7 Query\t"
    b"DELETE FROM orders WHERE note = '<script>alert(\"x\")</script>'\n"
    b"2026-01-05T09:00:02.000000Z\t    7 Query\tSELECT * FROM customers\n"
)


def test_it_sends_anonymous_visitors_to_the_login_page(client) -> None:
    response = client.get("/events/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_the_login_page_logs_an_investigator_in(client, investigator) -> None:
    response = client.post(
        "/accounts/login/", {"username": "ivy", "password": "correct horse battery staple"}
    )
    assert response.status_code == 302
    assert client.get("/").status_code == 200


def test_it_says_what_to_do_when_there_are_no_events(investigator_client) -> None:
    assert b"No events yet" in investigator_client.get("/events/").content


def test_it_escapes_everything_the_log_said(investigator_client, ingest_bytes) -> None:
    ingest_bytes(HOSTILE)
    page = investigator_client.get("/events/").content.decode()
    assert "<script>" not in page and "<img src=x" not in page
    assert "&lt;script&gt;" in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    event = Event.objects.get(statement_type="DELETE")
    detail = investigator_client.get(f"/events/{event.pk}/").content.decode()
    assert "<script>" not in detail and "&lt;script&gt;" in detail


def test_destructive_only_shows_just_the_delete(investigator_client, ingest_bytes) -> None:
    ingest_bytes(HOSTILE)
    page = investigator_client.get("/events/?destructive=true").content.decode()
    assert "DELETE FROM orders" in page
    assert "SELECT * FROM customers" not in page


def test_htmx_gets_only_the_results_partial(investigator_client, ingest_bytes) -> None:
    ingest_bytes(HOSTILE)
    response = investigator_client.get("/events/?table=customers", HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert "SELECT * FROM customers" in body and "DELETE FROM orders" not in body
    assert 'id="filters"' not in body and "<html" not in body  # (the saved-search bar has its own form)
    assert "HX-Request" in response["Vary"]


def test_it_pages_older_events_with_a_cursor(investigator_client, ingest_bytes) -> None:
    lines = b"".join(
        b"2026-01-05T10:%02d:%02d.000000Z\t    8 Query\tSELECT %d\n" % (i // 60, i % 60, i)
        for i in range(120)
    )
    ingest_bytes(lines)
    first = investigator_client.get("/events/").content.decode()
    assert "SELECT 119" in first and "SELECT 69" not in first
    start = first.index('href="?cursor=') + len('href="?')
    query = first[start : first.index('"', start)].replace("&amp;", "&")
    second = investigator_client.get("/events/?" + query).content.decode()
    assert "SELECT 69" in second and "SELECT 119" not in second


def test_pages_carry_a_content_security_policy_without_inline_script(investigator_client) -> None:
    csp = investigator_client.get("/events/")["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp


def test_the_event_page_shows_the_raw_bytes_and_where_they_came_from(
    investigator_client, ingest_bytes
) -> None:
    ingest_bytes(HOSTILE, name="mysql-general.log")
    event = Event.objects.get(statement_type="DELETE")
    page = investigator_client.get(f"/events/{event.pk}/").content.decode()
    assert "mysql-general.log</span>, line 2, byte offset" in page
    assert "2026-01-05T09:00:01.000000Z" in page  # the raw line, timestamp and all


def test_the_event_page_shows_its_neighbours_in_the_session_and_links_to_all_of_it(
    investigator_client, ingest_bytes
) -> None:
    lines = [b"2026-01-05T10:00:00.000000Z\t    9 Connect\tdora@db1 on shop using TCP/IP\n"]
    lines += [b"2026-01-05T10:00:%02d.000000Z\t    9 Query\tSELECT %d\n" % (i, i) for i in range(1, 40)]
    lines += [b"2026-01-05T10:00:40.000000Z\t    9 Query\tDELETE FROM orders\n"]
    lines += [b"2026-01-05T10:00:%02d.000000Z\t    9 Query\tSELECT %d\n" % (i, i) for i in range(41, 60)]
    lines += [b"2026-01-05T10:00:59.000000Z\t   10 Query\tSELECT 'other connection'\n"]
    ingest_bytes(b"".join(lines))
    event = Event.objects.get(statement_type="DELETE")
    html = investigator_client.get(f"/events/{event.pk}/").content.decode()
    shown = re.findall(r"<code>SELECT (\d+)</code>", html)
    assert shown == [str(i) for i in [*range(30, 40), *range(41, 51)]]  # 10 before, 10 after, in order
    assert "other connection" not in html

    link = re.search(r'href="(/events/\?session=[^"]+)"', html).group(1).replace("&amp;", "&")
    listed = investigator_client.get(link).content.decode()
    assert "SELECT 59" in listed
    assert "other connection" not in listed
    assert 'type="hidden" name="session"' in listed
