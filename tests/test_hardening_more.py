"""Hardening (issue 18, item 12): no-store on what AuditWeb answers, a CSP on the API docs page too,
logins that last a working day, a self-service password change in the audit trail, and Celery
tasks with time limits and a memory ceiling."""

from __future__ import annotations

import pytest
from django.conf import settings

from investigations.trail import Action, AuditRecord

pytestmark = pytest.mark.django_db

OLD = "correct horse battery staple"  # the personas' password (tests/conftest.py)


@pytest.mark.parametrize("url", ["/", "/events/", "/api/docs/", "/api/schema/", "/sources/"])
def test_pages_and_api_answers_are_not_stored_by_caches(admin_client, url: str) -> None:
    response = admin_client.get(url)
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]


def test_api_answers_are_not_stored_by_caches(api_client) -> None:
    response = api_client.get("/api/v1/events/")
    assert response.status_code == 200 and "no-store" in response["Cache-Control"]


def test_the_api_docs_page_has_the_policy_without_inline_code(admin_client) -> None:
    response = admin_client.get("/api/docs/")
    csp = response["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "style-src 'self'" in csp
    html = response.content.decode()
    assert "<style" not in html and "<script>" not in html  # each script and style is a file


def test_a_login_lasts_eight_hours_by_default() -> None:
    assert settings.SESSION_COOKIE_AGE == 8 * 3600


def test_celery_tasks_have_time_limits_and_a_memory_ceiling() -> None:
    from auditweb.celery import app

    assert 0 < app.conf.task_soft_time_limit < app.conf.task_time_limit
    assert app.conf.worker_max_memory_per_child > 0


def test_a_user_changes_their_password_and_the_trail_records_it(client, viewer) -> None:
    client.force_login(viewer)
    page = client.get("/password/")
    assert page.status_code == 200 and "Change your password" in page.content.decode()
    new = "a much longer passphrase 42"
    wrong = client.post("/password/", {"old_password": "nope", "new_password1": new, "new_password2": new})
    assert wrong.status_code == 200
    viewer.refresh_from_db()
    assert viewer.check_password(OLD)
    done = client.post("/password/", {"old_password": OLD, "new_password1": new, "new_password2": new})
    assert done.status_code == 302
    viewer.refresh_from_db()
    assert viewer.check_password(new)
    assert client.get("/events/").status_code == 200  # still logged in here
    record = AuditRecord.objects.get(action=Action.PASSWORD_CHANGE)
    assert record.user_id == viewer.pk and OLD not in str(record.details) and new not in str(record.details)
