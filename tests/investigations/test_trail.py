"""AuditWeb's own audit trail: what users do is recorded, and nothing can rewrite it."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import DatabaseError, connection, transaction

from ingest.models import Event, Source
from investigations.models import ApiToken
from investigations.trail import Action, AuditRecord, record
from tests.investigations.logs import genlog

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
PASSWORD = "correct horse battery staple"  # the personas' (tests/conftest.py)


@pytest.fixture
def deleted(ingest_bytes) -> Event:
    ingest_bytes(
        genlog(
            (T0, 7, "Connect", "bob@10.0.0.9 on shop using TCP/IP"),
            (T0, 7, "Query", "DELETE FROM orders WHERE id > 100"),
            (T0, 7, "Query", "SELECT 1"),
        )
    )
    return Event.objects.get(statement_type="DELETE")


def log_in(client, username: str, password: str, ip: str):
    return client.post("/accounts/login/", {"username": username, "password": password}, REMOTE_ADDR=ip)


def last(action: str) -> AuditRecord:
    return AuditRecord.objects.filter(action=action).latest("id")


def test_a_record_can_be_neither_changed_nor_deleted(investigator) -> None:
    kept = record(investigator, Action.EXPORT, filters={"table": "shop.orders"})
    for attempt in (
        lambda: AuditRecord.objects.filter(pk=kept.pk).update(username="someone else"),
        lambda: AuditRecord.objects.filter(pk=kept.pk).delete(),
        lambda: AuditRecord.objects.all().delete(),
    ):
        with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
            attempt()
    with (
        pytest.raises(DatabaseError, match="append-only"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute("UPDATE investigations_auditrecord SET action = 'login' WHERE id = %s", [kept.pk])
    stored = AuditRecord.objects.get()
    assert (stored.username, stored.action, stored.details) == (
        "ivy",
        "export",
        {"filters": {"table": "shop.orders"}},
    )


def test_a_login_its_failure_and_the_logout_are_recorded_with_the_address(client, investigator) -> None:
    log_in(client, "ivy", "wrong", "192.0.2.7")
    failed = last(Action.LOGIN_FAILED)
    assert (failed.username, failed.user_id, failed.ip) == ("ivy", None, "192.0.2.7")
    log_in(client, "nobody-here", "x", "192.0.2.8")
    assert (last(Action.LOGIN_FAILED).username, last(Action.LOGIN_FAILED).ip) == ("nobody-here", "192.0.2.8")

    response = client.post(
        "/accounts/login/", {"username": "ivy", "password": PASSWORD}, REMOTE_ADDR="192.0.2.7"
    )
    assert response.status_code == 302
    login = last(Action.LOGIN)
    assert (login.username, login.user_id, login.ip) == ("ivy", investigator.pk, "192.0.2.7")
    client.post("/accounts/logout/")
    assert last(Action.LOGOUT).username == "ivy"


def test_the_nth_wrong_password_locks_the_name_out_even_with_the_right_one(
    client, investigator, settings
) -> None:
    limit = settings.AXES_FAILURE_LIMIT
    for _ in range(limit):
        refused = client.post(
            "/accounts/login/", {"username": "ivy", "password": "guess"}, REMOTE_ADDR="192.0.2.7"
        )
        assert refused.status_code in (200, 429)
    right = client.post(
        "/accounts/login/", {"username": "ivy", "password": PASSWORD}, REMOTE_ADDR="192.0.2.7"
    )
    assert right.status_code == 429 and "Too many failed logins" in right.content.decode()
    assert "_auth_user_id" not in client.session
    assert AuditRecord.objects.filter(action=Action.LOGIN_FAILED, username="ivy").count() == limit + 1
    assert AuditRecord.objects.filter(action=Action.LOCKED_OUT, username="ivy", ip="192.0.2.7").exists()
    assert not AuditRecord.objects.filter(action=Action.LOGIN).exists()
    # From another address the same name and password still work (a lockout is per name and address).
    other = client.post(
        "/accounts/login/", {"username": "ivy", "password": PASSWORD}, REMOTE_ADDR="198.51.100.1"
    )
    assert other.status_code == 302 and last(Action.LOGIN).ip == "198.51.100.1"


def test_a_search_in_the_explorer_records_its_filters_and_results(investigator_client, deleted) -> None:
    investigator_client.get(
        "/events/", {"table": "shop.orders", "destructive": "true", "since": "", "tz": "UTC"}
    )
    search = last(Action.SEARCH)
    assert search.username == "ivy" and search.details["where"] == "explorer"
    assert search.details["filters"] == {"table": "shop.orders", "destructive": "true", "tz": "UTC"}
    assert (search.details["shown"], search.details["count"]) == (1, 1)


def test_an_api_search_an_export_and_each_event_and_session_viewed_are_recorded(
    investigator_client, investigator, api_client, deleted
) -> None:
    api_client.get("/api/v1/events/", {"user": "bob"})
    search = last(Action.SEARCH)
    assert search.details == {
        "where": "api",
        "filters": {"user": "bob"},
        "shown": 3,
    }  # Connect, DELETE, SELECT
    assert search.token == ApiToken.objects.get(user=investigator).prefix
    b"".join(api_client.get("/api/v1/events/export.ndjson", {"destructive": "true"}).streaming_content)
    assert last(Action.EXPORT).details == {"filters": {"destructive": "true"}, "schema": "auditweb"}

    investigator_client.get(f"/events/{deleted.pk}/")
    assert last(Action.EVENT_VIEW).details == {"event": deleted.pk, "server": "test"}
    investigator_client.get(f"/sessions/{deleted.session_id}/")
    assert last(Action.SESSION_VIEW).details == {"session": deleted.session_id, "server": "test"}
    api_client.get(f"/api/v1/events/{deleted.pk}/")
    assert (
        last(Action.EVENT_VIEW).method == "GET"
        and last(Action.EVENT_VIEW).path == f"/api/v1/events/{deleted.pk}/"
    )


def test_source_changes_are_recorded_from_pages_and_api(
    client, admin_user, admin_api_client, tmp_path
) -> None:
    client.force_login(admin_user)
    data = {"name": "db1", "kind": "file", "path": str(tmp_path / "general.log"), "password_env": "",
            "format": "general-log", "server": "db1", "timezone": "UTC", "interval_seconds": 10,
            "quiet_seconds": 600, "enabled": "on"}  # fmt: skip
    client.post("/sources/new/", data)
    source = Source.objects.get(name="db1")
    created = last(Action.SOURCE_CREATE).details
    assert (created["source"], created["name"]) == (source.pk, "db1") and "path" in created["changed"]
    client.post(f"/sources/{source.pk}/edit/", data | {"interval_seconds": 60})
    assert last(Action.SOURCE_EDIT).details["changed"] == ["interval_seconds"]
    client.post(f"/sources/{source.pk}/ingest/")
    assert last(Action.SOURCE_INGEST).details["source"] == source.pk
    admin_api_client.patch(f"/api/v1/sources/{source.pk}/", {"enabled": False}, format="json")
    assert last(Action.SOURCE_EDIT).details["changed"] == ["enabled"] and last(Action.SOURCE_EDIT).token
    admin_api_client.post(f"/api/v1/sources/{source.pk}/ingest/")
    assert AuditRecord.objects.filter(action=Action.SOURCE_INGEST).count() == 2


def test_details_are_bounded_whatever_was_typed(investigator) -> None:
    stored = record(investigator, Action.SEARCH, filters={"q": "x" * 100_000, "many": list(range(1000))})
    assert len(stored.details["filters"]["q"]) == 1001 and len(stored.details["filters"]["many"]) == 100


def test_a_change_in_the_django_admin_is_recorded(client, django_user_model, tmp_path) -> None:
    root = django_user_model.objects.create_superuser("root", password="x" * 20)
    client.force_login(root)
    source = Source.objects.create(name="old db1", path=str(tmp_path / "x.log"), server="db1")
    response = client.post(f"/admin/ingest/source/{source.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302 and not Source.objects.exists()
    deleted = last(Action.SOURCE_DELETE)
    assert deleted.username == "root" and deleted.details["via"] == "django admin"
    assert (deleted.details["name"], str(deleted.details["object"])) == ("old db1", str(source.pk))
