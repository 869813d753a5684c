"""The admin lists what was read, and lets no one change it."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("root", password="x" * 20))
    return client


def test_sources_and_what_was_read_are_listed_and_evidence_cannot_be_edited(
    admin_client, ingest_bytes
) -> None:
    run = ingest_bytes(b"\xff junk\n2026-01-05T09:00:00.000000Z\t    7 Query\tSET GLOBAL general_log = OFF\n")
    for page in ("source", "sourcefile", "ingestrun", "parseproblem", "gap"):
        response = admin_client.get(f"/admin/ingest/{page}/")
        assert response.status_code == 200, page
    assert "junk" in admin_client.get("/admin/ingest/parseproblem/").content.decode()
    assert admin_client.get("/admin/ingest/ingestrun/add/").status_code == 403
    assert admin_client.post(f"/admin/ingest/ingestrun/{run.pk}/delete/").status_code == 403
