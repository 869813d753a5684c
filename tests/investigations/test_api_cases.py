"""The case API: open a case, pin events, write notes, ask for reports and fetch them, with the
same rules as the pages (investigator role; only the case's investigators change it)."""

from __future__ import annotations

import hashlib
import json

import pytest
from rest_framework.test import APIClient

from ingest.models import Event
from investigations.models import Case, Report, api_token_create
from investigations.roles import Role, set_role
from tests.investigations.cases_data import CULPRIT_SQL, story

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def report_dir(tmp_path, settings):
    settings.REPORT_DIR = tmp_path / "reports"


@pytest.fixture
def culprit(ingest_bytes):
    ingest_bytes(story(), server="db1")
    return Event.objects.get(sql=CULPRIT_SQL)


def token_client(django_user_model, name: str, role: Role) -> APIClient:
    user = django_user_model.objects.create_user(name)
    set_role(user, role)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=user)[1]}")
    return client


def test_a_case_is_opened_pinned_noted_and_reported_over_the_api(
    api_client, culprit, investigator, django_capture_on_commit_callbacks, celery_eager
):
    made = api_client.post(
        "/api/v1/cases/", {"title": "Wiped orders", "description": "overnight"}, format="json"
    )
    assert made.status_code == 201
    case_id = made.json()["id"]
    assert made.json()["investigators"] == ["ivy"] and made.json()["status"] == "open"

    pinned = api_client.post(
        f"/api/v1/cases/{case_id}/evidence/", {"event": culprit.pk, "note": "=cmd"}, format="json"
    )
    assert pinned.status_code == 201
    body = pinned.json()
    assert body["event"]["sql"] == CULPRIT_SQL and body["note"] == "=cmd" and body["integrity"] == "as pinned"
    assert body["pinned_record_hash"] == bytes(culprit.record_hash).hex() and body["number"] == 1
    again = api_client.post(f"/api/v1/cases/{case_id}/evidence/", {"event": culprit.pk}, format="json")
    assert again.status_code == 409
    assert (
        api_client.post(f"/api/v1/cases/{case_id}/evidence/", {"event": 999999}, format="json").status_code
        == 400
    )

    note = api_client.post(f"/api/v1/cases/{case_id}/notes/", {"text": "bob did it"}, format="json")
    assert note.status_code == 201 and note.json()["author"] == "ivy"
    assert [n["text"] for n in api_client.get(f"/api/v1/cases/{case_id}/notes/").json()] == ["bob did it"]

    listed = api_client.get(f"/api/v1/cases/{case_id}/evidence/").json()
    assert listed["count"] == 1 and listed["next"] is None
    assert listed["results"][0]["event"]["id"] == culprit.pk

    with django_capture_on_commit_callbacks(execute=True):  # the commit sends the task (run eagerly)
        asked = api_client.post(f"/api/v1/cases/{case_id}/reports/", {"format": "json"}, format="json")
    assert asked.status_code == 202
    report = asked.json()
    assert report["status"] == "queued" and report["sha256"] == "" and report["download"] is None
    status = api_client.get(f"/api/v1/reports/{report['id']}/").json()
    assert status["status"] == "done" and len(status["sha256"]) == 64
    assert status["download"].endswith(f"/api/v1/reports/{report['id']}/download/")
    download = api_client.get(status["download"])
    body = b"".join(download.streaming_content)
    assert hashlib.sha256(body).hexdigest() == status["sha256"] == Report.objects.get().sha256
    assert json.loads(body)["evidence"][0]["event_id"] == culprit.pk

    assert api_client.delete(f"/api/v1/cases/{case_id}/evidence/{culprit.pk}/").status_code == 204
    assert not Case.objects.get(pk=case_id).evidence.exists()
    closed = api_client.patch(f"/api/v1/cases/{case_id}/", {"status": "closed"}, format="json")
    assert closed.json()["status"] == "closed" and closed.json()["closed_at"] is not None
    late = api_client.post(f"/api/v1/cases/{case_id}/evidence/", {"event": culprit.pk}, format="json")
    assert late.status_code == 409


def test_a_report_is_answered_at_once_queued_with_its_progress(api_client, culprit):
    case_id = api_client.post("/api/v1/cases/", {"title": "Big"}, format="json").json()["id"]
    api_client.post(f"/api/v1/cases/{case_id}/evidence/", {"event": culprit.pk}, format="json")
    asked = api_client.post(f"/api/v1/cases/{case_id}/reports/", {"format": "pdf"}, format="json")
    report = asked.json()
    assert asked.status_code == 202 and report["status"] == "queued" and report["download"] is None
    assert (report["progress"], report["total"]) == (0, 1)
    assert api_client.get(f"/api/v1/reports/{report['id']}/download/").status_code == 404


def test_other_investigators_read_but_do_not_change_a_case(api_client, culprit, django_user_model):
    case_id = api_client.post("/api/v1/cases/", {"title": "Ivy's"}, format="json").json()["id"]
    olga = token_client(django_user_model, "olga", Role.INVESTIGATOR)
    assert olga.get(f"/api/v1/cases/{case_id}/").status_code == 200
    assert (
        olga.post(f"/api/v1/cases/{case_id}/evidence/", {"event": culprit.pk}, format="json").status_code
        == 403
    )
    assert olga.post(f"/api/v1/cases/{case_id}/notes/", {"text": "x"}, format="json").status_code == 403
    assert olga.patch(f"/api/v1/cases/{case_id}/", {"title": "mine"}, format="json").status_code == 403
    viewer = token_client(django_user_model, "vic", Role.VIEWER)
    assert viewer.get("/api/v1/cases/").status_code == 403
    assert APIClient().get("/api/v1/cases/").status_code == 401
    admin = token_client(django_user_model, "root", Role.ADMIN)
    assert admin.patch(f"/api/v1/cases/{case_id}/", {"title": "Reviewed"}, format="json").status_code == 200
    assert Case.objects.get(pk=case_id).title == "Reviewed"
