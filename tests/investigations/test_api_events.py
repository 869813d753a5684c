"""GET /api/v1/events/: token auth, the contract's fields, every filter, cursor pages."""

from __future__ import annotations

import pytest

from ingest.models import Event

pytestmark = pytest.mark.django_db

LOG = (
    b"/usr/sbin/mysqld, Version: 8.0.36 (MySQL Community Server - GPL). started with:\n"
    b"Tcp port: 3306  Unix socket: /var/run/mysqld/mysqld.sock\n"
    b"Time                 Id Command    Argument\n"
    b"2026-01-05T09:00:00.100000Z\t    31 Connect\tcarol@10.0.0.7 on shop using TCP/IP\n"
    b"2026-01-05T09:00:01.200000Z\t    31 Query\tSELECT COUNT(*) FROM orders\n"
    b"2026-01-05T09:00:02.300000Z\t    32 Connect\tdave@app1.example on shop using TCP/IP\n"
    b"2026-01-05T09:00:03.400000Z\t    31 Query\tDELETE FROM orders WHERE created_at < '2025-01-01'\n"
    b"2026-01-05T09:00:04.500000Z\t    32 Query\tUPDATE shop.customers SET email = NULL\n"
    b"2026-01-05T09:00:05.000000Z\t    33 Query\tDROP TABLE billing.invoices\n"
    b"2026-02-01T00:00:00.000001Z\t    31 Quit\t\n"
)


@pytest.fixture
def events(ingest_bytes):
    ingest_bytes(LOG, server="s1")


def results(api_client, query: str = "") -> list[dict]:
    response = api_client.get("/api/v1/events/?" + query)
    assert response.status_code == 200, response.content
    return response.json()["results"]


def test_it_refuses_anonymous_callers(client, events) -> None:
    assert client.get("/api/v1/events/").status_code in (401, 403)


def test_it_refuses_a_wrong_token(client, events) -> None:
    response = client.get("/api/v1/events/", HTTP_AUTHORIZATION="Token not-a-token-we-gave-out")
    assert response.status_code == 401


def test_it_lists_every_event_with_the_contract_fields(api_client, events) -> None:
    rows = results(api_client)
    assert len(rows) == 8  # the start banner, 2 Connects, 4 statements, 1 Quit
    fields = set(
        [
            "id",
            "occurred_at",
            "server",
            "user",
            "host",
            "ip",
            "connection_id",
            "database",
            "command",
            "statement_type",
            "tables",
            "destructive",
            "flags",
            "sql",
            "rows_affected",
            "status",
            "source",
        ]
    )
    assert all(fields <= set(r) for r in rows)
    assert rows[0]["command"] == "Quit"  # newest first
    assert set(rows[0]["source"]) >= {"file", "line", "offset"}


def test_it_attributes_the_delete_to_the_connect_user(api_client, events) -> None:
    (row,) = results(api_client, "destructive=true&table=shop.orders")
    assert (row["user"], row["host"], row["ip"], row["connection_id"]) == (
        "carol",
        "10.0.0.7",
        "10.0.0.7",
        31,
    )
    assert row["occurred_at"] == "2026-01-05T09:00:03.400000Z"
    assert row["statement_type"] == "DELETE"
    assert row["database"] == "shop"
    assert row["sql"] == "DELETE FROM orders WHERE created_at < '2025-01-01'"
    assert row["source"]["line"] == 7
    assert row["source"]["offset"] == LOG.index(b"2026-01-05T09:00:03")


def test_it_marks_a_connection_that_began_before_the_log_unattributed(api_client, events) -> None:
    (row,) = results(api_client, "statement_type=DROP+TABLE")
    assert row["user"] is None and row["connection_id"] == 33
    assert "unattributed" in row["flags"]
    assert row["tables"] == ["billing.invoices"]


@pytest.mark.parametrize(
    ("query", "expected_sql_start"),
    [
        ("user=dave", ["UPDATE"]),
        ("host=10.0.0.7&destructive=true", ["DELETE"]),
        ("table=orders", ["DELETE", "SELECT"]),
        ("table=shop.customers", ["UPDATE"]),
        ("statement_type=UPDATE&statement_type=DELETE", ["UPDATE", "DELETE"]),
        ("database=shop&destructive=true", ["UPDATE", "DELETE"]),
        ("q=CREATED_AT", ["DELETE"]),
        ("since=2026-01-05T09:00:04Z&destructive=true", ["DROP", "UPDATE"]),
        ("until=2026-01-05T09:00:03.4Z&destructive=true", []),
        ("connection_id=31&destructive=true", ["DELETE"]),
        ("flag=no_where", ["UPDATE"]),
        ("server=elsewhere", []),
        ("destructive=false", ["SELECT"]),
    ],
)
def test_each_filter_narrows_the_events(api_client, events, query, expected_sql_start) -> None:
    rows = [r for r in results(api_client, query) if r["command"] == "Query"]
    assert [r["sql"].split()[0] for r in rows] == expected_sql_start


def test_it_rejects_a_malformed_time(api_client, events) -> None:
    response = api_client.get("/api/v1/events/?since=yesterday-ish")
    assert response.status_code == 400
    assert "since" in response.json()


def test_cursor_pages_cover_everything_once_even_while_rows_arrive(api_client, events, ingest_bytes) -> None:
    seen: list[int] = []
    url = "/api/v1/events/?page_size=3"
    first = api_client.get(url).json()
    seen += [r["id"] for r in first["results"]]
    # New rows (newer than everything) arrive between two pages: they must not shift the listing.
    ingest_bytes(b"2026-03-01T00:00:00.000000Z\t    40 Query\tSELECT 1\n", name="later.log", server="s1")
    url = first["next"]
    while url:
        page = api_client.get(url).json()
        seen += [r["id"] for r in page["results"]]
        url = page["next"]
    original = list(Event.objects.filter(occurred_at__lt="2026-03-01T00:00:00Z").values_list("id", flat=True))
    assert sorted(seen) == sorted(original)
    assert len(seen) == len(set(seen))


def test_it_rejects_a_forged_cursor(api_client, events) -> None:
    assert api_client.get("/api/v1/events/?cursor=bm90LWEtY3Vyc29y").status_code == 400


def test_the_openapi_schema_documents_the_filters(api_client) -> None:
    response = api_client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    body = response.content.decode()
    assert "/api/v1/events/" in body
    for name in ("statement_type", "destructive", "since", "until", "cursor", "table"):
        assert f"name: {name}" in body or f'"name": "{name}"' in body
