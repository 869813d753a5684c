"""The OpenAPI 3 schema: valid without a warning, and every endpoint and parameter documented."""

from __future__ import annotations

import io

import pytest
import yaml
from django.core.management import call_command

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def schema() -> dict:
    out = io.StringIO()
    # --validate checks it against the OpenAPI 3 meta-schema; --fail-on-warn makes any
    # warning (an unresolvable type, two operations with one id...) an error.
    call_command("spectacular", "--validate", "--fail-on-warn", stdout=out)
    return yaml.safe_load(out.getvalue())


def operations(schema: dict) -> list[tuple[str, str, dict]]:
    return [(path, method, op) for path, ops in schema["paths"].items() for method, op in ops.items()]


def test_the_schema_validates_and_serves_the_contracts_paths(schema) -> None:
    assert schema["openapi"].startswith("3.")
    assert {
        "/api/v1/events/",
        "/api/v1/events/{event_id}/",
        "/api/v1/events/{event_id}/rows/",
        "/api/v1/events/{event_id}/flashback/",
        "/api/v1/events/export.ndjson",
        "/api/v1/alerts/",
        "/api/v1/sessions/",
        "/api/v1/sessions/{session_id}/",
        "/api/v1/tables/",
        "/api/v1/tables/{name}/history/",
        "/api/v1/gaps/",
        "/api/v1/sources/",
        "/api/v1/sources/{source_id}/ingest/",
        "/api/v1/ingest-runs/{run_id}/",
    } <= set(schema["paths"])


def test_every_operation_says_what_it_does(schema) -> None:
    undocumented = [
        f"{method.upper()} {path}"
        for path, method, op in operations(schema)
        if not op.get("summary") or not op.get("description")
    ]
    assert undocumented == []


def test_every_parameter_has_a_description_and_an_example(schema) -> None:
    bare = [
        f"{method.upper()} {path} {p['name']}"
        for path, method, op in operations(schema)
        for p in op.get("parameters", [])
        if not p.get("description") or not (p.get("examples") or "example" in p)
    ]
    assert bare == []


def test_every_event_filter_is_documented_on_the_event_endpoints(schema) -> None:
    from investigations.query.filters import EventFilter

    filters = set(EventFilter.base_filters)
    listed = {p["name"] for p in schema["paths"]["/api/v1/events/"]["get"]["parameters"]}
    assert filters <= listed
    # `sort` orders the paged list only: the export is oldest first, a table's history newest first.
    exported = {p["name"] for p in schema["paths"]["/api/v1/events/export.ndjson"]["get"]["parameters"]}
    assert filters - {"sort"} <= exported and "sort" not in exported
    history = {p["name"] for p in schema["paths"]["/api/v1/tables/{name}/history/"]["get"]["parameters"]}
    assert filters - {"table", "sort"} <= history


def test_token_authentication_is_described(schema) -> None:
    token = schema["components"]["securitySchemes"]["tokenAuth"]
    assert (token["type"], token["in"], token["name"]) == ("apiKey", "header", "Authorization")


def test_the_browsable_docs_are_served_from_auditweb_itself(client, django_user_model) -> None:
    from django.conf import settings

    from investigations.roles import Role, set_role

    assert client.get("/api/docs/").status_code in (401, 403)  # a login with a role, like the API
    viewer = django_user_model.objects.create_user("vic")
    set_role(viewer, Role.VIEWER)
    client.force_login(viewer)
    page = client.get("/api/docs/").content.decode()
    assert '<script src="/static/vendor/swagger-ui-bundle.js">' in page and "cdn" not in page.lower()
    script = client.get("/api/docs/", {"script": ""})
    assert script.status_code == 200 and b"/api/schema/" in script.content  # the UI reads the live schema
    for name in ("swagger-ui-bundle.js", "swagger-ui-standalone-preset.js", "swagger-ui.css"):
        assert (settings.BASE_DIR / "static" / "vendor" / name).stat().st_size > 10_000


def test_events_have_rows_changed_and_rows_come_with_their_link(schema) -> None:
    event = schema["components"]["schemas"]["Event"]
    assert event["properties"]["rows_changed"]["nullable"] is True
    rows = schema["paths"]["/api/v1/events/{event_id}/rows/"]["get"]
    assert {p["name"] for p in rows["parameters"]} >= {"event_id", "page_size", "offset"}
    body = schema["components"]["schemas"]["EventRows"]["properties"]
    assert {"rows", "next", "confidence", "evidence", "statements"} <= set(body)
    flashback = schema["paths"]["/api/v1/events/{event_id}/flashback/"]["get"]
    assert "text/plain" in flashback["responses"]["200"]["content"]
