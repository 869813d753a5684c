"""Sorting the explorer and the API by a column: a parameter of the one filter, keyset pages that
stay complete and stable under every order, unknown orders refused."""

from __future__ import annotations

import re
from html import unescape
from urllib.parse import parse_qs, urlsplit

import pytest
from django.db.models import F

from ingest.models import Event
from investigations.query.filters import SORT_KEYS, filter_events
from investigations.query.pages import sorted_page
from tests.investigations.logs import SCENARIO
from tests.investigations.test_api_events import LOG

pytestmark = pytest.mark.django_db

# An old-format log whose first records came before any time was printed: their time is unknown.
UNTIMED = (
    b"\t\t    7 Connect\tzed@localhost on shop\n"
    b"\t\t    7 Query\tDELETE FROM t1\n"
    b"\t\t    7 Query\tSELECT 2\n"
    b"260105  9:00:00\t    7 Query\tUPDATE t2 SET a = 1\n"
)
SORTS = [f"{sign}{key}" for key in SORT_KEYS for sign in ("", "-")]


@pytest.fixture
def store(ingest_bytes):
    ingest_bytes(LOG, name="s1.log", server="s1")
    ingest_bytes(SCENARIO.read_bytes(), name="db1.log", server="db1")
    ingest_bytes(UNTIMED, name="s3.log", server="s3")
    assert Event.objects.filter(occurred_at__isnull=True).count() >= 2


def expected_ids(sort: str) -> list[int]:
    """Every event in the order `sort` names, by one ORDER BY (no pages)."""
    key = sort.lstrip("-")
    newest = F("occurred_at").desc(nulls_last=True)
    if key == "time":
        time = newest if sort.startswith("-") else F("occurred_at").asc(nulls_last=True)
        order = [time, "-id" if sort.startswith("-") else "id"]
        return list(Event.objects.order_by(*order).values_list("id", flat=True))
    ordered = Event.objects.annotate(k=SORT_KEYS[key]).order_by(
        "-k" if sort.startswith("-") else "k", newest, "-id"
    )
    return list(ordered.values_list("id", flat=True))


def api_pages(api_client, query: str, size: int = 7) -> list[int]:
    ids: list[int] = []
    url = f"/api/v1/events/?{query}&page_size={size}"
    for _ in range(200):
        answer = api_client.get(url)
        assert answer.status_code == 200, answer.content
        ids += [e["id"] for e in answer.json()["results"]]
        if not answer.json()["next"]:
            return ids
        url = answer.json()["next"]
    raise AssertionError("the pages never ended")


@pytest.mark.parametrize("sort", SORTS)
def test_each_sort_pages_through_every_event_once_in_its_order(api_client, store, sort) -> None:
    assert api_pages(api_client, f"sort={sort}") == expected_ids(sort)


def test_sorting_by_server_orders_the_servers_and_keeps_newest_first_within_one(api_client, store) -> None:
    events = {e.id: e for e in Event.objects.all()}
    shown = [events[i] for i in api_pages(api_client, "sort=server", size=5)]
    servers = [e.server for e in shown]
    assert servers == sorted(servers) and set(servers) == {"db1", "s1", "s3"}
    s1 = [e.occurred_at for e in shown if e.server == "s1"]
    assert s1 == sorted(s1, reverse=True)
    assert events[api_pages(api_client, "sort=-server")[0]].server == "s3"


def test_events_of_unknown_time_come_last_in_both_time_orders(api_client, store) -> None:
    for sort in ("time", "-time"):
        times = [Event.objects.get(pk=i).occurred_at for i in api_pages(api_client, f"sort={sort}", size=4)]
        known = [t for t in times if t is not None]
        assert times[len(known) :] == [None] * (len(times) - len(known))
        assert known == sorted(known, reverse=sort == "-time")


def test_pages_stay_stable_while_events_are_ingested_between_them(api_client, store, ingest_bytes) -> None:
    before = set(Event.objects.values_list("id", flat=True))
    first = api_client.get("/api/v1/events/?sort=user&page_size=10").json()
    ingest_bytes(LOG.replace(b"carol", b"aaron").replace(b"dave", b"abel"), name="later.log", server="s9")
    ids = [e["id"] for e in first["results"]]
    url = first["next"]
    while url:
        page = api_client.get(url).json()
        ids += [e["id"] for e in page["results"]]
        url = page["next"]
    assert len(ids) == len(set(ids))  # nothing twice
    assert before <= set(ids)  # nothing that was there is skipped


def test_an_unknown_sort_is_refused_by_the_api(api_client, store) -> None:
    answer = api_client.get("/api/v1/events/?sort=password")
    assert answer.status_code == 400
    assert "sort" in answer.json()


def test_a_cursor_of_another_order_is_refused(api_client, store) -> None:
    by_user = api_client.get("/api/v1/events/?sort=user&page_size=3").json()["next"]
    cursor = parse_qs(urlsplit(by_user).query)["cursor"][0]
    for sort in ("server", "-user", "-time"):
        answer = api_client.get(f"/api/v1/events/?sort={sort}&cursor={cursor}")
        assert answer.status_code == 400, sort
        assert "cursor" in answer.json()


def test_the_page_says_an_unknown_sort_is_wrong_and_lists_nothing(investigator_client, store) -> None:
    html = investigator_client.get("/events/?sort=password").content.decode()
    assert "Check the filter" in html and "sort:" in html
    assert 'id="event-table"' not in html


def test_the_explorer_sorts_by_a_header_and_offers_the_reverse(investigator_client, store) -> None:
    html = investigator_client.get("/events/?sort=server&user=bob").content.decode()
    table = html.split('id="event-table"', 1)[1].split("</table>", 1)[0]
    servers = re.findall(r'<td class="server">([^<]*)</td>', table)
    assert servers and servers == sorted(servers)
    header = re.search(r'<th scope="col" aria-sort="ascending"><a class="sort" href="\?([^"]*)"', table)
    assert header is not None and parse_qs(unescape(header.group(1))) == {
        "sort": ["-server"],
        "user": ["bob"],
    }
    assert '<input type="hidden" id="f-sort" name="sort" value="server">' in html  # the form keeps it


def test_htmx_swaps_carry_the_sort_to_the_form(investigator_client, store) -> None:
    html = investigator_client.get("/events/?sort=-type", HTTP_HX_REQUEST="true").content.decode()
    assert 'id="f-sort" name="sort" value="-type" hx-swap-oob="true"' in html


def test_the_next_page_of_a_sorted_explorer_follows_on(investigator_client, store) -> None:
    flt = filter_events({"sort": "table", "since": "2000-01-01T00:00"})
    assert flt.is_valid()
    first = sorted_page(flt.qs, flt.sort_order, None, 50)
    # (With a From: without one, a column's order is the day before the newest event, test_sort_window.)
    html = investigator_client.get("/events/?sort=table&since=2000-01-01T00:00").content.decode()
    link = re.search(r'<a href="\?([^"]*)"[^>]*>Next page →</a>', html)
    assert link is not None
    query = unescape(link.group(1))
    assert parse_qs(query)["cursor"] == [first.next_cursor]
    assert [e.id for e in first.items] == expected_ids("table")[:50]
