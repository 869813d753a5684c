"""The explorer's export buttons: the API's exporter on the current search, as CSV or NDJSON."""

from __future__ import annotations

import csv
import io
import json
import re
from datetime import UTC, datetime
from html import unescape

import pytest

from ingest.models import Event
from investigations.reports.text import FORMULA_STARTS, csv_cell
from investigations.trail import Action, AuditRecord
from tests.investigations.logs import SCENARIO, genlog

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
# Cells a spreadsheet would run: the account, the database and the statement.
FORMULAS = genlog(
    (T0, 40, "Connect", "=HYPERLINK(x)@evil on -db using TCP/IP"),
    (T0, 40, "Query", "=1+1"),
    (T0, 40, "Query", "@SUM(A1)"),
    (T0, 40, "Query", "+cmd|' /C calc'!A0"),
    (T0, 40, "Query", "DELETE FROM orders WHERE note = '=2+2'"),
)


@pytest.fixture
def scenario(ingest_bytes):
    ingest_bytes(SCENARIO.read_bytes(), name="general.log", server="db1")
    ingest_bytes(FORMULAS, name="formulas.log", server="db2")


def body(response) -> bytes:
    assert response.status_code == 200, response.content
    return b"".join(response.streaming_content)


FILTERS = [
    "",
    "user=bob",
    "destructive=true&table=shop.orders",
    "statement_type=DELETE&server=db1",
    "q=orders",
]


@pytest.mark.parametrize("query", FILTERS)
def test_the_pages_ndjson_is_the_apis_for_the_same_filter(
    investigator_client, api_client, scenario, query
) -> None:
    # The page's own state (its sort, its page, its zone) does not change what is exported.
    page = body(investigator_client.get(f"/events/export.ndjson?{query}&sort=-server&tz=UTC"))
    api = body(api_client.get(f"/api/v1/events/export.ndjson?{query}"))
    assert page == api
    if not query:
        assert page.count(b"\n") == Event.objects.count()
    ecs = body(investigator_client.get(f"/events/export.ecs.ndjson?{query}"))
    assert ecs == body(api_client.get(f"/api/v1/events/export.ndjson?{query}&schema=ecs"))


@pytest.mark.parametrize("query", FILTERS)
def test_the_csv_holds_the_same_events_as_the_ndjson(
    investigator_client, api_client, scenario, query
) -> None:
    text = body(investigator_client.get(f"/events/export.csv?{query}")).decode("utf-8-sig")
    rows = list(csv.DictReader(io.StringIO(text)))
    lines = [
        json.loads(line)
        for line in body(api_client.get(f"/api/v1/events/export.ndjson?{query}")).splitlines()
    ]
    assert rows and [int(r["id"]) for r in rows] == [e["id"] for e in lines]
    for row, event in zip(rows, lines, strict=True):
        assert row["occurred_at"] == (event["occurred_at"] or "")
        assert row["server"] == csv_cell(event["server"])
        assert row["sql"] == csv_cell(event["sql"])
        assert row["tables"] == csv_cell(" ".join(event["tables"]))
        assert row["source_line"] == str(event["source"]["line"])
        assert row["destructive"] == ("yes" if event["destructive"] else "no")


def test_csv_cells_that_would_run_as_formulas_are_neutralised(investigator_client, scenario) -> None:
    text = body(investigator_client.get("/events/export.csv?server=db2")).decode("utf-8-sig")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [r["sql"] for r in rows] == [
        "'=HYPERLINK(x)@evil on -db using TCP/IP", "'=1+1", "'@SUM(A1)", "'+cmd|' /C calc'!A0",
        "DELETE FROM orders WHERE note = '=2+2'",
    ]  # fmt: skip
    assert {r["user"] for r in rows} == {"'=HYPERLINK(x)"}
    for row in rows:
        for name, value in row.items():
            assert not value.startswith(FORMULA_STARTS), (name, value)


def test_the_export_links_carry_the_current_filters(investigator_client, scenario) -> None:
    html = investigator_client.get("/events/?user=bob&destructive=true&sort=server").content.decode()
    links = dict(re.findall(r'<a href="/events/export\.([a-z.]+)\?([^"]*)" download', html))
    assert set(links) == {"csv", "ndjson", "ecs.ndjson"}
    for query in links.values():
        assert sorted(unescape(query).split("&")) == ["destructive=true", "user=bob"]


def test_a_viewer_may_export_and_it_is_recorded(client, viewer, scenario) -> None:
    client.force_login(viewer)
    assert body(client.get("/events/export.csv?user=bob")).startswith("\ufeffid,".encode())
    record = AuditRecord.objects.filter(action=Action.EXPORT).latest("id")
    assert record.username == "vic"
    assert record.details["where"] == "explorer" and record.details["filters"] == {"user": "bob"}
    assert record.details["schema"] == "csv"


def test_a_login_without_a_role_is_refused_and_a_visitor_sent_to_log_in(
    client, django_user_model, scenario
) -> None:
    for url in ("/events/export.csv", "/events/export.ndjson", "/events/export.ecs.ndjson"):
        assert client.get(url).status_code == 302
    client.force_login(django_user_model.objects.create_user("nobody", password="x"))
    for url in ("/events/export.csv", "/events/export.ndjson", "/events/export.ecs.ndjson"):
        assert client.get(url).status_code == 403


def test_a_wrong_filter_is_refused_not_exported(investigator_client, scenario) -> None:
    answer = investigator_client.get("/events/export.csv?since=yesterday")
    assert answer.status_code == 400
    assert "since" in answer.json()
