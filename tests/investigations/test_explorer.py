"""The explorer: one filter form, results with a count and a timeline, state in the URL."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from html import unescape
from urllib.parse import parse_qs, urlsplit
from zoneinfo import ZoneInfo

import pytest

from ingest.models import Event
from investigations.views import explorer
from tests.investigations.logs import SCENARIO, genlog

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)  # winter: Europe/Berlin is UTC+1


@pytest.fixture
def scenario(ingest_bytes):
    """The bundled MariaDB scenario: bob deletes from shop.orders after a restart."""
    return ingest_bytes(SCENARIO.read_bytes(), name="general.log", server="db1")


def chart_of(html: str) -> dict:
    found = re.search(r'<script id="timeline-data" type="application/json">(.*?)</script>', html, re.S)
    assert found, "no chart data in the page"
    return json.loads(found.group(1))


def rows_of(html: str) -> list[str]:
    """The statements of the results table, in order (none when there is no table)."""
    if '<table class="events" id="event-table">' not in html:
        return []
    body = html.split('<table class="events" id="event-table">', 1)[1]
    cells = re.findall(r'<td class="sql">(.*?)</td>', body, re.S)
    return [unescape(re.sub(r"<[^>]+>", "", s)) for s in cells]


def test_filtering_down_to_the_culprit_of_the_scenario(investigator_client, scenario) -> None:
    html = investigator_client.get("/events/?table=shop.orders&destructive=true&user=bob").content.decode()
    assert rows_of(html) == ["DELETE FROM orders", "DELETE FROM orders WHERE id = 3"]
    assert "2 events match." in html
    assert "bob@127.0.0.1" in html


def test_each_filter_of_the_form_narrows_the_results(investigator_client, scenario) -> None:
    def statements(query: str) -> list[str]:
        return rows_of(investigator_client.get("/events/?" + query).content.decode())

    assert statements("statement_type=DROP+TABLE") == ["DROP TABLE scratch"]
    assert statements("statement_type=TRUNCATE&statement_type=DROP+TABLE") == [
        "TRUNCATE TABLE orders_archive",
        "DROP TABLE scratch",
    ]
    assert statements("flag=anti_forensic") == ["SET GLOBAL general_log = OFF"]
    assert statements("q=orders_archive&database=shop&destructive=true") == [
        "TRUNCATE TABLE orders_archive",
        "UPDATE customers SET email = NULL WHERE id = 2; DELETE FROM orders_archive",
    ]
    bob = Event.objects.filter(user="bob", statement_type="DROP TABLE").get()
    query = f"connection_id={bob.connection_id}&server=db1&host=127.0.0.1&statement_type=DROP+TABLE"
    assert statements(query) == ["DROP TABLE scratch"]
    assert statements("user=nobody") == []


def test_it_says_how_to_widen_a_filter_that_matches_nothing(investigator_client, scenario) -> None:
    html = investigator_client.get("/events/?user=nobody").content.decode()
    assert "No event matches this filter" in html and "0 events match." in html


def test_it_shows_a_filter_error_instead_of_results(investigator_client, scenario) -> None:
    html = investigator_client.get("/events/?connection_id=abc&since=yesterday").content.decode()
    assert 'class="error" role="alert"' in html and "connection_id" in html and "since" in html
    assert '<table class="events">' not in html


def test_a_cursor_it_never_gave_out_is_explained(investigator_client, scenario) -> None:
    html = investigator_client.get("/events/?cursor=garbage").content.decode()
    assert "This cursor is not one AuditWeb gave out." in html


def test_it_says_more_than_n_rather_than_counting_everything(
    investigator_client, scenario, monkeypatch
) -> None:
    monkeypatch.setattr(explorer, "COUNT_LIMIT", 10)
    html = investigator_client.get("/events/").content.decode()
    assert "More than 10 events match." in html


def test_the_chart_counts_what_the_filter_matches_per_type_with_destructive_apart(
    investigator_client, scenario
) -> None:
    query = "table=shop.orders&since=2026-11-22T08:48:00&until=2026-11-22T08:49:00&tz=UTC"
    html = investigator_client.get("/events/?" + query).content.decode()
    chart = chart_of(html)
    matched = Event.objects.filter(
        tables__contains=["shop.orders"],
        occurred_at__gte=datetime(2026, 11, 22, 8, 48, tzinfo=UTC),
        occurred_at__lt=datetime(2026, 11, 22, 8, 49, tzinfo=UTC),
    )
    assert sum(sum(s["data"]) for s in chart["series"]) == matched.count()
    deletes = next(s for s in chart["series"] if s["label"] == "DELETE" and s["destructive"])
    assert sum(deletes["data"]) == matched.filter(statement_type="DELETE", destructive=True).count() == 2
    assert len(chart["labels"]) == len(chart["from"]) == len(chart["until"]) == 60  # one-second bars
    assert chart["from"][0] == "2026-11-22T08:48:00" and chart["until"][-1] == "2026-11-22T08:49:00"
    assert f"{matched.count()} events match." in html


def test_the_chart_shades_the_gap_where_nothing_was_recorded(investigator_client, scenario) -> None:
    html = investigator_client.get("/events/?server=db1").content.decode()
    chart = chart_of(html)
    assert chart["gaps"] and chart["gaps_full_height"]  # one server's chart: its gaps are total
    assert "server restart" in html and "still open" in html  # the restart, and logging switched off
    everywhere = chart_of(investigator_client.get("/events/").content.decode())
    assert everywhere["gaps"] and not everywhere["gaps_full_height"]


def test_htmx_gets_the_results_and_the_chart_in_one_partial(investigator_client, scenario) -> None:
    response = investigator_client.get("/events/?user=bob", HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert 'id="filters"' not in body and "<html" not in body  # (the saved-search bar has its own form)
    assert 'id="timeline-data"' in body and "DELETE FROM orders" in body
    assert "HX-Request" in response["Vary"]


def test_htmx_restoring_history_gets_the_whole_page(investigator_client, scenario) -> None:
    body = investigator_client.get(
        "/events/?user=bob", HTTP_HX_REQUEST="true", HTTP_HX_HISTORY_RESTORE_REQUEST="true"
    ).content.decode()
    assert "<form" in body and "<html" in body


def test_a_quick_range_becomes_absolute_times_in_the_url(investigator_client, scenario) -> None:
    response = investigator_client.get("/events/?range=24h&user=bob&tz=Europe/Berlin")
    assert response.status_code == 302
    query = parse_qs(urlsplit(response["Location"]).query)
    since = datetime.fromisoformat(query["since"][0])
    until = datetime.fromisoformat(query["until"][0])
    assert "range" not in query and query["user"] == ["bob"] and query["tz"] == ["Europe/Berlin"]
    assert until - since == timedelta(days=1)
    now_in_berlin = datetime.now(UTC).astimezone(ZoneInfo("Europe/Berlin"))
    assert abs(until - now_in_berlin.replace(tzinfo=None)) < timedelta(minutes=2)


def test_htmx_asking_a_quick_range_is_told_the_absolute_url_and_gets_the_times(
    investigator_client, scenario
) -> None:
    response = investigator_client.get("/events/?range=1h&tz=UTC", HTTP_HX_REQUEST="true")
    pushed = response["HX-Push-Url"]
    assert pushed.startswith("/events/?") and "since=" in pushed and "range" not in pushed
    body = response.content.decode()
    since = parse_qs(urlsplit(pushed).query)["since"][0]
    assert 'id="time-fields" class="field-group" hx-swap-oob="true"' in body
    assert f'value="{since}"' in body
    assert "No event matches this filter" in body  # the scenario is older than an hour


def test_times_are_shown_in_the_zone_the_link_names_with_utc_on_hover(
    investigator_client, ingest_bytes
) -> None:
    ingest_bytes(genlog((T0, 7, "Connect", "ann@db on shop using TCP/IP"), (T0, 7, "Query", "DELETE FROM t")))
    html = investigator_client.get("/events/?tz=Europe/Berlin").content.decode()
    shown = '<time datetime="2026-01-05T09:00:00.000000Z" title="2026-01-05 09:00:00.000000 UTC">'
    assert shown + "2026-01-05 10:00:00</time>" in html
    assert "Time (Europe/Berlin)" in html


def test_the_viewers_zone_comes_from_the_browser_cookie(investigator_client, ingest_bytes) -> None:
    ingest_bytes(genlog((T0, 7, "Query", "DELETE FROM t")))
    investigator_client.cookies["tz"] = "America/New_York"
    html = investigator_client.get("/events/").content.decode()
    assert ">2026-01-05 04:00:00</time>" in html and 'name="tz" value="America/New_York"' in html
    investigator_client.cookies["tz"] = "../../etc/passwd"  # not a zone: the server's is used
    assert ">2026-01-05 09:00:00</time>" in investigator_client.get("/events/").content.decode()


def test_from_and_until_mean_times_in_the_links_zone(investigator_client, ingest_bytes) -> None:
    later = T0 + timedelta(hours=1)
    ingest_bytes(genlog((T0, 7, "Query", "SELECT 'at nine UTC'"), (later, 7, "Query", "SELECT 'at ten UTC'")))
    # 10:00-10:30 in Berlin is 09:00-09:30 UTC.
    html = investigator_client.get("/events/?since=2026-01-05T10:00&until=2026-01-05T10:30&tz=Europe/Berlin")
    assert rows_of(html.content.decode()) == ["SELECT 'at nine UTC'"]


def test_the_zone_links_keep_the_same_instants(investigator_client, ingest_bytes) -> None:
    ingest_bytes(genlog((T0, 7, "Query", "SELECT 1")))
    html = investigator_client.get("/events/?since=2026-01-05T10:00:00&tz=Europe/Berlin").content.decode()
    link = re.search(r'href="\?([^"]*tz=UTC[^"]*)"', html).group(1).replace("&amp;", "&")
    assert parse_qs(link)["since"] == ["2026-01-05T09:00:00"]


def test_long_statements_are_shortened_with_the_whole_text_on_expand(
    investigator_client, ingest_bytes
) -> None:
    long_sql = "SELECT " + ", ".join(f"column_{i}" for i in range(80)) + " FROM wide"
    ingest_bytes(genlog((T0, 7, "Query", long_sql)))
    html = investigator_client.get("/events/").content.decode()
    summary = re.search(r"<details><summary><code>(.*?)</code></summary><pre>(.*?)</pre>", html, re.S)
    assert summary.group(1).endswith("…") and len(summary.group(1)) <= 160
    assert summary.group(2) == long_sql


def test_rows_link_to_the_session_and_the_tables(investigator_client, scenario) -> None:
    event = Event.objects.get(user="bob", sql="DROP TABLE scratch")
    html = investigator_client.get("/events/?statement_type=DROP+TABLE").content.decode()
    assert f'href="/sessions/{event.session_id}/"' in html
    assert 'href="/tables/shop.scratch/"' in html
    assert '<tr class="destructive">' in html and "(destructive)" in html


def test_the_statement_types_offered_include_what_a_link_asked_for(investigator_client, scenario) -> None:
    html = investigator_client.get("/events/?statement_type=SHOW").content.decode()
    assert 'value="SHOW" checked' in html
    assert 'value="DELETE">' in html  # offered, not ticked


def test_without_a_from_the_chart_shows_the_last_day_and_offers_more(
    investigator_client, ingest_bytes
) -> None:
    ingest_bytes(genlog(*((T0 + timedelta(days=d), 7, "Query", f"SELECT {d}") for d in range(10))))
    html = investigator_client.get("/events/?tz=UTC").content.decode()
    chart = chart_of(html)
    assert chart["from"][0] == "2026-01-13T09:00:00" and chart["until"][-1] == "2026-01-14T09:15:00"
    assert sum(sum(s["data"]) for s in chart["series"]) == 1  # the newest event's day
    assert "10 events match." in html  # the count is of everything
    links = dict(re.findall(r'<a href="\?([^"]+)">(7 days|30 days|all)</a>', html))
    assert sorted(links.values()) == ["7 days", "all"]  # 30 days reaches before the first event
    everything = next(q for q, label in links.items() if label == "all").replace("&amp;", "&")
    chart = chart_of(investigator_client.get("/events/?" + everything).content.decode())
    assert sum(sum(s["data"]) for s in chart["series"]) == 10
