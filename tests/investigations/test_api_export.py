"""The NDJSON export: every event of a filter, one JSON object a line, plain or in ECS names."""

from __future__ import annotations

import json

import pytest

from ingest.models import Event

from ..conftest import FIXTURES

SCENARIO = FIXTURES / "genlog" / "mariadb-10.11.19-scenario.log"

pytestmark = pytest.mark.django_db(transaction=True)


def export(api_client, **params: str) -> list[dict]:  # type: ignore[no-untyped-def]
    response = api_client.get("/api/v1/events/export.ndjson", params)
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/x-ndjson"
    body = b"".join(response.streaming_content)
    assert body.endswith(b"\n")
    return [json.loads(line) for line in body.splitlines()]


def test_it_exports_every_event_of_the_filter_oldest_first(api_client, ingest_bytes) -> None:  # type: ignore[no-untyped-def]
    ingest_bytes(SCENARIO.read_bytes(), server="shop-db")
    rows = export(api_client)
    assert [r["id"] for r in rows] == list(
        Event.objects.order_by("occurred_at", "id").values_list("id", flat=True)
    )
    assert len(rows) > 50
    page = api_client.get("/api/v1/events/", {"table": "shop.orders", "destructive": "true"}).json()[
        "results"
    ]
    orders = export(api_client, table="shop.orders", destructive="true")
    assert orders == page[::-1]  # the same events with the same fields as the API, oldest first


def test_ecs_names_the_fields_as_elastic_expects(api_client, ingest_bytes) -> None:  # type: ignore[no-untyped-def]
    ingest_bytes(SCENARIO.read_bytes(), server="shop-db")
    rows = export(api_client, table="shop.orders", destructive="true", schema="ecs")
    delete = next(r for r in rows if r["message"] == "DELETE FROM orders")
    assert delete["@timestamp"].endswith("Z")
    assert delete["event"]["action"] == "DELETE" and delete["event"]["type"] == ["change"]
    assert delete["event"]["category"] == ["database"]
    assert delete["user"] == {"name": "bob"}
    assert delete["client"]["ip"] == "127.0.0.1"
    assert delete["service"] == {"type": "mysql", "name": "shop-db"}
    assert delete["tags"] == ["no_where"]
    assert delete["auditweb"]["tables"] == ["shop.orders"] and delete["auditweb"]["connection_id"] == 5
    assert delete["log"]["file"]["path"].endswith("general.log")
    assert isinstance(delete["log"]["offset"], int)


def test_an_unknown_schema_or_filter_is_refused(api_client) -> None:  # type: ignore[no-untyped-def]
    assert api_client.get("/api/v1/events/export.ndjson", {"schema": "splunk"}).status_code == 400
    assert api_client.get("/api/v1/events/export.ndjson", {"since": "yesterday"}).status_code == 400


def test_the_export_needs_a_token(client) -> None:  # type: ignore[no-untyped-def]
    assert client.get("/api/v1/events/export.ndjson").status_code in (401, 403)
