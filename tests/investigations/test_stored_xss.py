"""Everything a log says is hostile text: each page shows it escaped, as text, and runs none of it."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from ingest.models import Event
from tests.investigations.logs import genlog
from tests.investigations.test_explorer import T0

pytestmark = pytest.mark.django_db

SCRIPT = "<script>alert('stored')</script>"
IMG = "<img src=x onerror=alert(1)>"
HX = '" hx-get="/api/v1/events/" hx-trigger="load'
SVG_TABLE = "<svg onload=alert(3)>"
HOSTILE = genlog(
    (T0, 66, "Connect", f"{IMG}@evil.example on shop using TCP/IP"),
    (T0, 66, "Query", f"DELETE FROM orders WHERE note = '{SCRIPT}' OR x = '{HX}' OR y = '{IMG}'"),
    (T0, 66, "Query", 'SELECT \'<b hx-post="/sources/new/" hx-trigger="load">\''),
    (T0, 66, "Query", f"DROP TABLE `{SVG_TABLE}`"),
)
# What must never reach a page as markup (escaped, each is harmless text).
MARKUP = [SCRIPT, IMG, "<svg onload", 'hx-get="/api/v1/events/"', 'hx-post="/sources/new/"',
          'hx-trigger="load"']  # fmt: skip


def pages(client) -> dict[str, str]:
    delete = Event.objects.get(statement_type="DELETE")
    table = Event.objects.get(statement_type="DROP TABLE").tables[0]
    urls = {
        "dashboard": "/",
        "explorer": "/events/",
        "explorer, htmx": "/events/?destructive=true",
        "explorer, text search": "/events/?q=script",
        "event": f"/events/{delete.pk}/",
        "session": f"/sessions/{delete.session_id}/",
        "sessions": "/sessions/",
        "tables": "/tables/",
        "table": "/tables/shop.orders/",
        "hostile table": reverse("table-detail", args=[table]),
        "digest": "/digest/",
        "digest, destructive": "/digest/?destructive=true&sort=destructive",
    }
    out = {}
    for name, url in urls.items():
        headers = {"HTTP_HX_REQUEST": "true"} if "htmx" in name else {}
        response = client.get(url, **headers)
        assert response.status_code == 200, (name, url)
        out[name] = response.content.decode()
    return out


def test_every_page_shows_the_log_as_text_and_none_of_it_as_markup(investigator_client, ingest_bytes) -> None:
    ingest_bytes(HOSTILE)
    for name, html in pages(investigator_client).items():
        for markup in MARKUP:
            assert markup not in html, (name, markup)
    shown = pages(investigator_client)
    assert "&lt;script&gt;alert(&#x27;stored&#x27;)&lt;/script&gt;" in shown["explorer"]
    assert "&lt;img src=x onerror=alert(1)&gt;" in shown["event"]  # the account, as text
    assert "hx-get=&quot;/api/v1/events/&quot;" in shown["session"]
    svg = "&lt;svg onload=alert(3)&gt;"
    assert svg in shown["tables"] and svg in shown["hostile table"]
    assert "&lt;img src=x onerror=alert(1)&gt;" in shown["digest"]  # an account of a fingerprint


def test_the_chart_data_is_json_that_cannot_close_its_script_element(
    investigator_client, ingest_bytes
) -> None:
    ingest_bytes(HOSTILE)
    html = investigator_client.get("/events/?q=script").content.decode()
    found = re.search(r'<script id="timeline-data" type="application/json">(.*?)</script>', html, re.S)
    data = found.group(1)
    assert "<" not in data and ">" not in data


def test_raw_bytes_that_are_not_text_are_shown_as_marked_escapes(investigator_client, ingest_bytes) -> None:
    line = b"2026-01-05T09:00:00.000000Z\t   66 Query\tSELECT 'caf\xe9', '\x1b[31m', 'a\x00b'\r\n"
    ingest_bytes(line)
    event = Event.objects.get()
    html = investigator_client.get(f"/events/{event.pk}/").content.decode()
    raw = html.split('<pre class="raw"', 1)[1].split("</pre>", 1)[0]
    assert '<span class="byte" title="byte 0xe9">\\xe9</span>' in raw  # not UTF-8
    assert '<span class="byte" title="byte 0x1b">\\x1b</span>[31m' in raw  # a terminal escape, defused
    assert '<span class="byte" title="byte 0x00">\\x00</span>' in raw
    assert '<span class="byte" title="byte 0x0d">\\x0d</span>' in raw  # the carriage return the log had
    assert "SELECT &#x27;caf" in raw
