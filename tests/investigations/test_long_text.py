"""Text a person gives a case is bounded (issue 18, item 9): a 2 MB description, pin note or note
is refused with 400 by the API and by the pages, instead of being stored and printed into
reports that then ran past the worker's timeout."""

from __future__ import annotations

import pytest

from investigations.cases import case_create
from investigations.models import MAX_CASE_TEXT, Case, CaseNote

pytestmark = pytest.mark.django_db

HUGE = "x" * 2_000_000


def test_the_api_refuses_a_huge_description_and_note(api_client, investigator) -> None:
    refused = api_client.post("/api/v1/cases/", {"title": "t", "description": HUGE}, format="json")
    assert refused.status_code == 400 and "description" in refused.json()
    case = case_create(user=investigator, title="ok")
    patched = api_client.patch(f"/api/v1/cases/{case.pk}/", {"description": HUGE}, format="json")
    assert patched.status_code == 400
    note = api_client.post(f"/api/v1/cases/{case.pk}/notes/", {"text": HUGE}, format="json")
    assert note.status_code == 400 and not CaseNote.objects.exists()
    pin = api_client.post(f"/api/v1/cases/{case.pk}/evidence/", {"event": 1, "note": HUGE}, format="json")
    assert pin.status_code == 400
    taken = api_client.post(
        "/api/v1/cases/", {"title": "t", "description": "y" * MAX_CASE_TEXT}, format="json"
    )
    assert taken.status_code == 201


def test_the_case_page_refuses_a_huge_description(investigator_client) -> None:
    response = investigator_client.post("/cases/new/", {"title": "t", "description": HUGE})
    assert response.status_code in (200, 400) and not Case.objects.filter(title="t").exists()
