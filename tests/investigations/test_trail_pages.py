"""The audit trail's page and CSV export, for admins: filtered, paged, and safe to open in a
spreadsheet."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime, timedelta

import pytest

from investigations.trail import Action, AuditRecord, record
from investigations.views.trail import PAGE_SIZE

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client, admin_user):
    client.force_login(admin_user)
    return client


def rows_of(html: str) -> int:
    return html.split("<tbody>", 1)[1].split("</tbody>", 1)[0].count("<tr") if "<tbody>" in html else 0


def test_the_page_filters_by_user_action_and_time(admin_client, investigator, viewer) -> None:
    record(investigator, Action.EXPORT, filters={"table": "shop.orders"})
    record(viewer, Action.SEARCH, filters={"user": "bob"})
    record(viewer, Action.EVENT_VIEW, event=7)
    html = admin_client.get("/audit/").content.decode()
    assert rows_of(html) == 4  # and ada's own login
    assert "Exported events" in html and "filters.table=shop.orders" in html
    assert rows_of(admin_client.get("/audit/", {"user": "vic"}).content.decode()) == 2
    only = admin_client.get("/audit/", {"user": "vic", "action": "event_view"}).content.decode()
    assert rows_of(only) == 1 and "event=7" in only
    later = (datetime.now(UTC) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M")
    assert rows_of(admin_client.get("/audit/", {"since": later}).content.decode()) == 0
    assert rows_of(admin_client.get("/audit/", {"until": later}).content.decode()) == 4
    assert admin_client.get("/audit/", {"action": "not-an-action"}).status_code == 400


def test_the_page_goes_back_in_pages_without_losing_or_repeating_a_record(admin_client, viewer) -> None:
    for n in range(PAGE_SIZE + 5):
        record(viewer, Action.EVENT_VIEW, event=n)
    first = admin_client.get("/audit/", {"user": "vic"}).content.decode()
    assert rows_of(first) == PAGE_SIZE and "Older" in first
    older = first.split('href="/audit/?', 1)[1].split('"', 1)[0].replace("&amp;", "&")
    second = admin_client.get(f"/audit/?{older}").content.decode()
    assert rows_of(second) == 5 and "user=vic" in older
    assert [f">event={n}</span>" in second for n in (0, 4, 5)] == [True, True, False]


def test_the_export_is_every_record_oldest_first_and_no_cell_is_a_formula(
    admin_client, django_user_model
) -> None:
    hostile = django_user_model.objects.create_user("=HYPERLINK(1)")
    record(hostile, Action.SEARCH, filters={"q": "@SUM(A1)"})
    record(hostile, Action.LOGIN_FAILED)
    response = admin_client.get("/audit/export.csv", {"user": "=HYPERLINK(1)"})
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert rows[0] == [
        "id",
        "at",
        "username",
        "user_id",
        "action",
        "ip",
        "method",
        "path",
        "token",
        "details",
    ]
    assert [r[4] for r in rows[1:]] == ["search", "login_failed"]
    assert all(r[2] == "'=HYPERLINK(1)" for r in rows[1:])
    assert json.loads(rows[1][9]) == {"filters": {"q": "@SUM(A1)"}}  # inside JSON: not at a cell's start
    assert all(not cell.startswith(("=", "+", "-", "@")) for r in rows for cell in r)
    exported = AuditRecord.objects.filter(action=Action.AUDIT_EXPORT).get()
    assert exported.details == {"filters": {"user": "=HYPERLINK(1)"}}
