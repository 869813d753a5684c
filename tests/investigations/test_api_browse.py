"""The API's views of what the pages show: one event in its session, sessions, tables and a table's
history following renames, gaps. Each answers a viewer, refuses anonymous callers, and pages by
cursor."""

from __future__ import annotations

import base64
from urllib.parse import quote

import pytest
from rest_framework.test import APIClient

from ingest.models import Event, Gap, Session
from investigations.models import api_token_create
from investigations.query.tables import tables_seen_refresh
from investigations.roles import Role, set_role

from ..conftest import FIXTURES

pytestmark = pytest.mark.django_db

SCENARIO = FIXTURES / "genlog" / "mariadb-10.11.19-scenario.log"

LOG = (
    b"2026-01-05T08:00:00.000000Z\t    3 Connect\tbob@db1 on shop using TCP/IP\n"
    b"2026-01-05T08:30:00.000000Z\t    3 Query\tDELETE FROM orders_old WHERE id = 9\n"
    b"2026-01-05T09:00:00.000000Z\t    3 Query\tDELETE FROM orders WHERE id = 1\n"
    b"2026-01-05T09:05:00.000000Z\t    4 Connect\tcarol@10.0.0.7 on shop using TCP/IP\n"
    b"2026-01-05T09:06:00.000000Z\t    4 Query\tSELECT * FROM orders\n"
    b"2026-01-05T09:10:00.000000Z\t    3 Query\tRENAME TABLE orders TO orders_old\n"
    b"2026-01-05T09:20:00.000000Z\t    3 Query\tALTER TABLE orders_old RENAME TO orders_2025\n"
    b"2026-01-05T09:30:00.000000Z\t    3 Query\tDROP TABLE orders_2025\n"
    b"2026-01-05T09:40:00.000000Z\t    3 Query\tCREATE TABLE orders (id INT)\n"
    b"2026-01-05T09:41:00.000000Z\t    3 Query\tINSERT INTO orders VALUES ('\xff\xfe')\n"
)


@pytest.fixture
def viewer_client(django_user_model):
    user = django_user_model.objects.create_user("vera")
    set_role(user, Role.VIEWER)
    _, key = api_token_create(user=user)
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return c


@pytest.fixture
def story(ingest_bytes):
    ingest_bytes(LOG, server="db1")


def get(c, url: str, params: dict | None = None, status: int = 200) -> dict:
    response = c.get(url, params or {})
    assert response.status_code == status, response.content
    return response.json()


def event_with(sql: str) -> Event:
    return Event.objects.get(sql=sql)


URLS = ["/api/v1/sessions/", "/api/v1/tables/", "/api/v1/tables/shop.orders/history/", "/api/v1/gaps/"]


@pytest.mark.parametrize("url", URLS)
def test_a_viewer_may_read_them_and_anonymous_callers_may_not(client, viewer_client, story, url) -> None:
    assert client.get(url).status_code == 401
    get(viewer_client, url)


def test_a_login_without_a_role_is_refused(django_user_model, story) -> None:
    _, key = api_token_create(user=django_user_model.objects.create_user("nobody"))
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert c.get("/api/v1/sessions/").status_code == 403


def test_an_event_comes_with_its_session_and_the_statements_around_it(viewer_client, story) -> None:
    rename = event_with("RENAME TABLE orders TO orders_old")
    body = get(viewer_client, f"/api/v1/events/{rename.pk}/", {"context": 2})
    assert body["id"] == rename.pk and body["user"] == "bob" and body["destructive"] is True
    assert base64.b64decode(body["raw"]).endswith(b"RENAME TABLE orders TO orders_old\n")
    session = body["context"]["session"]
    assert (session["user"], session["host"], session["connection_id"], session["server"]) == (
        "bob",
        "db1",
        3,
        "db1",
    )
    assert session["started_at"] == "2026-01-05T08:00:00.000000Z"
    # Two statements of connection 3 either side, in log order; carol's connection 4 is not there.
    assert [e["sql"] for e in body["context"]["before"]] == [
        "DELETE FROM orders_old WHERE id = 9",
        "DELETE FROM orders WHERE id = 1",
    ]
    assert [e["sql"] for e in body["context"]["after"]] == [
        "ALTER TABLE orders_old RENAME TO orders_2025",
        "DROP TABLE orders_2025",
    ]


def test_an_unknown_event_is_404_and_a_bad_context_400(viewer_client, story) -> None:
    get(viewer_client, "/api/v1/events/999999999/", status=404)
    get(viewer_client, f"/api/v1/events/{Event.objects.first().pk}/", {"context": "many"}, status=400)


def test_sessions_are_filtered_newest_first_with_their_counts(viewer_client, story) -> None:
    rows = get(viewer_client, "/api/v1/sessions/")["results"]
    assert [(r["user"], r["connection_id"]) for r in rows] == [("carol", 4), ("bob", 3)]
    bob = rows[1]
    assert (bob["statements"], bob["destructive"]) == (8, 5)
    assert [r["user"] for r in get(viewer_client, "/api/v1/sessions/", {"user": "bob"})["results"]] == ["bob"]
    assert [
        r["user"] for r in get(viewer_client, "/api/v1/sessions/", {"destructive": "false"})["results"]
    ] == ["carol"]
    since = {"since": "2026-01-05T09:00:00Z"}
    assert [r["user"] for r in get(viewer_client, "/api/v1/sessions/", since)["results"]] == ["carol"]
    assert get(viewer_client, "/api/v1/sessions/", {"server": "elsewhere"})["results"] == []


def test_sessions_page_by_cursor(viewer_client, story) -> None:
    first = get(viewer_client, "/api/v1/sessions/", {"page_size": 1})
    assert len(first["results"]) == 1 and first["next"]
    second = get(viewer_client, first["next"])
    assert [r["user"] for r in first["results"] + second["results"]] == ["carol", "bob"]
    assert second["next"] is None
    get(viewer_client, "/api/v1/sessions/", {"cursor": "not-ours"}, status=400)


def test_a_session_lists_its_events_in_log_order_a_page_at_a_time(viewer_client, story) -> None:
    bob = Session.objects.get(user="bob")
    body = get(viewer_client, f"/api/v1/sessions/{bob.pk}/", {"page_size": 5})
    assert body["key"] == bob.key and body["statements"] == 8
    events = body["events"]["results"]
    assert [e["command"] for e in events[:2]] == ["Connect", "Query"]
    rest = get(viewer_client, body["events"]["next"])["events"]
    assert rest["next"] is None
    sqls = [e["sql"] for e in events + rest["results"]]
    assert len(sqls) == 8 and sqls[-1] == "INSERT INTO orders VALUES ('\ufffd\ufffd')"
    assert all(e["user"] == "bob" for e in events)
    get(viewer_client, "/api/v1/sessions/999999999/", status=404)


def test_tables_are_listed_by_name_and_searched(viewer_client, story) -> None:
    tables_seen_refresh()
    names = [r["name"] for r in get(viewer_client, "/api/v1/tables/")["results"]]
    assert names == ["shop.orders", "shop.orders_2025", "shop.orders_old"]
    rows = get(viewer_client, "/api/v1/tables/", {"q": "2025"})["results"]
    assert [(r["name"], r["events"], r["destructive"]) for r in rows] == [("shop.orders_2025", 2, 2)]
    assert rows[0]["history"].endswith("/api/v1/tables/shop.orders_2025/history/")
    first = get(viewer_client, "/api/v1/tables/", {"page_size": 2})
    assert [r["name"] for r in first["results"]] == names[:2]
    assert [r["name"] for r in get(viewer_client, first["next"])["results"]] == names[2:]


def test_tables_stored_after_the_last_rebuild_are_listed_too(viewer_client, story, ingest_bytes) -> None:
    tables_seen_refresh()
    ingest_bytes(
        b"2026-01-06T08:00:00.000000Z\t    9 Query\tTRUNCATE TABLE crm.leads\n", name="b.log", server="db2"
    )
    names = [r["name"] for r in get(viewer_client, "/api/v1/tables/", {"after": "shop.orders"})["results"]]
    assert names == ["shop.orders_2025", "shop.orders_old"]  # continues after the name given
    assert "crm.leads" in [r["name"] for r in get(viewer_client, "/api/v1/tables/")["results"]]


def test_a_table_history_follows_its_renames(viewer_client, story) -> None:
    body = get(viewer_client, "/api/v1/tables/shop.orders/history/", {"destructive": "true"})
    assert [r["sql"] for r in body["results"]] == [
        "DROP TABLE orders_2025",
        "ALTER TABLE orders_old RENAME TO orders_2025",
        "RENAME TABLE orders TO orders_old",
        "DELETE FROM orders WHERE id = 1",
    ]  # newest first; not the DELETE on the orders_old that existed before the rename
    assert body["later_names"] == [
        {"name": "shop.orders_old", "since": "2026-01-05T09:10:00.000000Z"},
        {"name": "shop.orders_2025", "since": "2026-01-05T09:20:00.000000Z"},
    ]
    old = get(viewer_client, "/api/v1/tables/shop.orders_2025/history/")
    assert old["earlier_names"] == [{"name": "shop.orders_old", "since": "2026-01-05T09:20:00.000000Z"}]
    page = get(viewer_client, "/api/v1/tables/shop.orders/history/", {"page_size": 4, "user": "bob"})
    assert len(page["results"]) == 4 and page["next"]
    rest = get(viewer_client, page["next"])
    assert rest["next"] is None
    assert [r["sql"] for r in rest["results"]] == [
        "RENAME TABLE orders TO orders_old",
        "DELETE FROM orders WHERE id = 1",
    ]


def test_a_table_name_with_a_slash_is_one_path_segment_when_encoded(viewer_client, ingest_bytes) -> None:
    ingest_bytes(b"2026-01-05T08:00:00.000000Z\t    3 Query\tDROP TABLE `we/ird`.`t`\n")
    name = Event.objects.get().tables[0]
    body = get(viewer_client, "/api/v1/tables/" + quote(name, safe="") + "/history/")
    assert body["name"] == name and [r["statement_type"] for r in body["results"]] == ["DROP TABLE"]


def test_gaps_are_listed_newest_first_and_filtered_by_window_and_source(viewer_client, ingest_bytes) -> None:
    run = ingest_bytes(SCENARIO.read_bytes(), server="shop-db")
    rows = get(viewer_client, "/api/v1/gaps/")["results"]
    assert [(r["reason"], r["started_at"], r["ended_at"]) for r in rows] == [
        ("logging_off", "2026-11-22T08:48:24.000000Z", None),
        ("restart", "2026-11-22T08:48:20.000000Z", "2026-11-22T08:48:22.000000Z"),
    ]
    off = Gap.objects.get(reason="logging_off")
    assert rows[0]["source"] == {
        "id": run.source_id,
        "name": run.source.name,
        "file": off.source_file.path,
        "line": off.line,
        "offset": off.byte_offset,
    }

    def reasons(**params: object) -> list[str]:
        return [r["reason"] for r in get(viewer_client, "/api/v1/gaps/", params)["results"]]

    assert reasons(open="true") == ["logging_off"]
    assert reasons(since="2026-11-22T08:48:23Z") == ["logging_off"]  # the open one reaches the present
    assert reasons(until="2026-11-22T08:48:21Z") == ["restart"]
    assert reasons(server="shop-db", source=run.source_id) == ["logging_off", "restart"]
    assert reasons(source=run.source_id + 1) == []
    assert reasons(reason="restart") == ["restart"]
    get(viewer_client, "/api/v1/gaps/", {"reason": "bored"}, status=400)
    page = get(viewer_client, "/api/v1/gaps/", {"page_size": 1})
    assert [r["reason"] for r in get(viewer_client, page["next"])["results"]] == ["restart"]
