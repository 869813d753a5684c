"""Sorted pages chosen on the narrow event rows, the statements joined to the page only: the same
events in the same order as one ORDER BY over the view, ties and unknown accounts included; and a
column's order without a From sorting the day up to the newest matching event."""

from __future__ import annotations

import re
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
from django.db import connection
from django.db.models import F
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from ingest.models import Event
from investigations.query.filters import SORT_KEYS, filter_events
from investigations.query.pages import first_rows, sorted_page

pytestmark = pytest.mark.django_db

# A 5.x log prints its time only when it changes: every statement under one time ties on it.
# Connection 5 began before the log (its account is unknown: NULL), 6 and 7 log in; connection 6
# runs the same statement twice in the same second (same key, same time: only the id tells them
# apart); the last day is a day after the first.
TIES = (
    b"260105  9:00:00\t    5 Query\tDELETE FROM shop.orders\n"
    b"\t\t    5 Query\tSELECT 1\n"
    b"\t\t    6 Connect\tbob@localhost on shop\n"
    b"\t\t    6 Query\tUPDATE t1 SET a = 1\n"
    b"\t\t    6 Query\tUPDATE t1 SET a = 1\n"
    b"\t\t    7 Connect\tamy@localhost on crm\n"
    b"\t\t    7 Query\tDELETE FROM t2\n"
    b"260105  9:00:01\t    5 Query\tSELECT 2\n"
    b"\t\t    6 Query\tDROP TABLE t3\n"
    b"\t\t    7 Query\tSELECT 3\n"
    b"260106 10:00:00\t    6 Query\tDELETE FROM t1\n"
    b"\t\t    7 Quit\t\n"
    b"\t\t    5 Query\tSELECT 4\n"
)
SORTS = [f"{sign}{key}" for key in SORT_KEYS for sign in ("", "-")]
FILTERS = [{}, {"database": "shop"}, {"destructive": "true"}, {"user": "bob"}, {"table": "shop.orders"}]


@pytest.fixture
def ties(ingest_bytes):
    ingest_bytes(TIES, name="ties.log", server="db1")
    ingest_bytes(TIES.replace(b"bob", b"amy"), name="ties2.log", server="db2")
    events = list(Event.objects.all())
    assert any(e.user is None for e in events), "no event of an unknown account"
    first = timezone.make_aware(timezone.datetime(2026, 1, 5, 9), timezone.get_current_timezone())
    tied = [e for e in events if e.occurred_at == first and e.user == "bob"]
    assert len(tied) >= 3, "no tie on account and time"
    return events


def one_order_by(params: dict[str, str], sort: str) -> list[int]:
    """Every matching event in the order `sort` names, by one ORDER BY over the view."""
    qs = filter_events(params).qs
    key, newest = sort.lstrip("-"), F("occurred_at").desc(nulls_last=True)
    if key == "time":
        time = newest if sort.startswith("-") else F("occurred_at").asc(nulls_last=True)
        return list(qs.order_by(time, "-id" if sort.startswith("-") else "id").values_list("id", flat=True))
    qs = qs.annotate(k=SORT_KEYS[key]).order_by("-k" if sort.startswith("-") else "k", newest, "-id")
    return list(qs.values_list("id", flat=True))


@pytest.mark.parametrize("sort", SORTS)
def test_pages_of_two_give_the_events_of_one_order_by(ties, sort) -> None:
    for params in FILTERS:
        flt = filter_events({**params, "sort": sort})
        assert flt.is_valid(), flt.errors
        ids, cursor = [], None
        for _ in range(50):
            page = sorted_page(flt.qs, flt.sort_order, cursor, 2)
            ids += [e.id for e in page.items]
            if not (cursor := page.next_cursor):
                break
        assert ids == one_order_by(params, sort), params


def test_first_rows_are_the_rows_one_query_gives_whole(ties) -> None:
    newest = F("occurred_at").desc(nulls_last=True)
    qs = Event.objects.annotate(k=SORT_KEYS["user"]).order_by("k", newest, "-id")
    for n in range(1, len(ties) + 2):
        rows = first_rows(qs.select_related("session"), n)
        assert [(e.id, e.sql, e.k, e.session.key) for e in rows] == [
            (e.id, e.sql, e.k, e.session.key) for e in qs.select_related("session")[:n]
        ]


def _plan(sql: str) -> str:
    with connection.cursor() as cur:
        cur.execute(f"EXPLAIN {sql}")
        return "\n".join(row[0] for row in cur.fetchall())


def test_the_page_is_chosen_without_joining_the_statements(ties) -> None:
    for params, joined in (({"sort": "user"}, False), ({"sort": "user", "database": "shop"}, True)):
        flt = filter_events(params)
        with CaptureQueriesContext(connection) as queries:
            page = sorted_page(flt.qs, flt.sort_order, None, 3)
        assert page.items and page.items[0].sql  # the page's events come whole
        choose, read = queries.captured_queries[0]["sql"], queries.captured_queries[1]["sql"]
        assert ("ingest_statement" in _plan(choose)) is joined, params  # only a filter on it needs it
        assert "ingest_statement" in _plan(read)


def test_a_column_sort_without_a_from_sorts_the_day_up_to_the_newest_event(investigator_client, ties) -> None:
    answer = investigator_client.get("/events/?sort=user&server=db1")
    assert answer.status_code == 302
    query = parse_qs(urlsplit(answer["Location"]).query)
    newest = max(e.occurred_at for e in ties if e.server == "db1" and e.occurred_at)
    since = timezone.localtime(newest - timedelta(days=1) + timedelta(microseconds=1)).replace(microsecond=0)
    assert query["since"] == [since.strftime("%Y-%m-%dT%H:%M:%S")]
    assert query["sort"] == ["user"] and query["server"] == ["db1"]
    html = investigator_client.get(answer["Location"]).content.decode()
    assert "Sorted within this time range" in html
    shown = [int(i) for i in re.findall(r'href="/events/(\d+)/"', html)]
    params = {"sort": "user", "server": "db1", "since": query["since"][0]}
    expected = one_order_by(params, "user")
    assert expected and list(dict.fromkeys(shown)) == expected
    assert len(expected) < len([e for e in ties if e.server == "db1"])  # the first day is left out


def test_htmx_is_answered_at_once_with_the_day_pushed(investigator_client, ties) -> None:
    answer = investigator_client.get("/events/?sort=-host", HTTP_HX_REQUEST="true")
    assert answer.status_code == 200
    assert "since=" in answer["HX-Push-Url"] and "sort=-host" in answer["HX-Push-Url"]
    assert 'hx-swap-oob="true"' in answer.content.decode()


@pytest.mark.parametrize(
    "query",
    [
        "sort=user&since=2026-01-05T00:00",  # a From given: that range
        "sort=time",  # time orders walk the time index
        "sort=-time",
        "sort=&server=db1",  # the form's field for newest first (the default order)
        "server=db1",
        "sort=user&server=db1&until=2026-01-05T10:00",  # every matching event within a day anyway
    ],
)
def test_no_day_is_put_in_when_the_sort_needs_none(investigator_client, ties, query) -> None:
    assert investigator_client.get(f"/events/?{query}").status_code == 200


def test_a_next_page_keeps_its_range_and_the_api_sorts_all(investigator_client, api_client, ties) -> None:
    flt = filter_events({"sort": "user"})
    cursor = sorted_page(flt.qs, flt.sort_order, None, 2).next_cursor
    assert investigator_client.get(f"/events/?sort=user&cursor={cursor}").status_code == 200
    answer = api_client.get("/api/v1/events/?sort=user&page_size=100").json()
    assert [e["id"] for e in answer["results"]] == one_order_by({}, "user")
