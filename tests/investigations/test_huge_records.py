"""A record of any size is shown bounded and downloaded whole (issue 18, item 5): the event page
and the API show at most SHOWN_MAX_BYTES of its raw bytes and SQL, say how much there is, and
link a streamed download of all of it; a record that holds a secret is downloaded only by an
admin, with a reason the audit trail records."""

from __future__ import annotations

import base64

import pytest
from rest_framework.test import APIClient

from ingest.models import Event
from investigations.models import api_token_create
from investigations.trail import AuditRecord

pytestmark = pytest.mark.django_db

SHOWN = 64 * 1024
FILLER = 300_000
LOG = (
    b"2024-05-01T10:00:00.000000Z\t    7 Connect\talice@10.0.0.7 on shop using TCP/IP\n"
    b"2024-05-01T10:00:01.000000Z\t    7 Query\tDELETE FROM shop.orders WHERE note = '"
    + b"n"
    * FILLER
    + b"'\n"
    b"2024-05-01T10:00:02.000000Z\t    7 Query\tCREATE USER 'eve'@'%' IDENTIFIED BY 'hunter2-secret' "
    b"COMMENT '" + b"c" * FILLER + b"'\n"
    b"2024-05-01T10:00:03.000000Z\t    7 Quit\t\n"
)


@pytest.fixture
def huge(ingest_bytes) -> tuple[Event, Event]:
    """(a 300 KB DELETE, a 300 KB CREATE USER with a password: masked)."""
    run = ingest_bytes(LOG, name="huge.log", fmt="general-log")
    assert run.status == "done", run.error
    delete = Event.objects.get(ingest_run=run, statement_type="DELETE")
    create = Event.objects.get(ingest_run=run, statement_type="CREATE USER")
    assert len(delete.raw) > FILLER and "secret_masked" in create.flags and len(create.raw) > FILLER
    return delete, create


def client_of(user) -> APIClient:
    _, key = api_token_create(user=user)
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return c


def downloaded(response) -> bytes:
    assert response.status_code == 200, response.content[:300]
    assert response["Content-Type"] == "application/octet-stream"
    return b"".join(response.streaming_content)


def test_the_event_page_shows_a_bounded_part_and_links_the_whole(client, viewer, huge) -> None:
    delete, _ = huge
    client.force_login(viewer)
    page = client.get(f"/events/{delete.pk}/")
    assert page.status_code == 200
    body = page.content.decode()
    assert len(page.content) < 4 * SHOWN  # before: the 300 KB statement twice, and more
    assert f"Showing the first 65,536 of {len(delete.raw):,} bytes" in body
    assert f"Showing the first 65,536 of {len(delete.sql):,} characters of the statement" in body
    assert f'href="/events/{delete.pk}/raw/"' in body
    whole = downloaded(client.get(f"/events/{delete.pk}/raw/"))
    assert whole == bytes(delete.raw) and len(whole) > FILLER
    record = AuditRecord.objects.get(action="raw_download")
    assert record.details["event"] == delete.pk and record.details["bytes"] == len(whole)


def test_the_api_sends_a_bounded_part_and_a_download_url(viewer, huge) -> None:
    delete, create = huge
    api = client_of(viewer)
    answer = api.get(f"/api/v1/events/{delete.pk}/").json()
    assert base64.b64decode(answer["raw"]) == bytes(delete.raw)[:SHOWN]
    assert answer["raw_length"] == len(delete.raw)
    assert len(answer["sql"]) == SHOWN and answer["sql_length"] == len(delete.sql)
    assert answer["raw_download"] == f"http://testserver/api/v1/events/{delete.pk}/raw/"
    response = api.get(answer["raw_download"])
    assert downloaded(response) == bytes(delete.raw)
    assert response["X-Record-Hash"] == bytes(delete.record_hash).hex()
    listed = api.get("/api/v1/events/", {"server": "test"}).json()["results"]
    assert max(len(e["sql"]) for e in listed) == SHOWN  # the list too
    masked = api.get(f"/api/v1/events/{create.pk}/").json()
    assert masked["raw"] is None and len(base64.b64decode(masked["raw_masked"])) <= SHOWN


def test_a_masked_record_is_refused_to_all_but_an_admin_with_a_reason(
    client, viewer, investigator, admin_user, huge
) -> None:
    _, create = huge
    url = f"/events/{create.pk}/raw/"
    for user in (viewer, investigator):
        client.force_login(user)
        assert client.get(url).status_code == 403
        assert client.post(url, {"reason": "curious"}).status_code == 403
        assert client_of(user).get(f"/api{url.replace('/events', '/v1/events')}").status_code == 403
    client.force_login(admin_user)
    assert client.get(url).status_code == 403  # no reason given: no download
    assert client.post(url, {"reason": " "}).status_code == 403
    assert not AuditRecord.objects.filter(action__in=["raw_download", "raw_reveal"]).exists()
    whole = downloaded(client.post(url, {"reason": "incident 42: who made eve"}))
    assert whole == bytes(create.raw) and b"hunter2-secret" in whole
    record = AuditRecord.objects.get(action="raw_reveal")
    assert record.details["reason"] == "incident 42: who made eve" and record.details["withheld"]
    api = client_of(admin_user)
    api_url = f"/api/v1/events/{create.pk}/raw/"
    assert api.get(api_url).status_code == 403
    assert downloaded(api.post(api_url, {"reason": "case 7"}, format="json")) == bytes(create.raw)
    assert client.get("/events/999999999/raw/").status_code == 404
    assert api.get("/api/v1/events/999999999/raw/").status_code == 404


def test_a_large_reveal_is_shown_in_part_with_a_download_for_the_same_reason(
    client, admin_user, huge
) -> None:
    _, create = huge
    client.force_login(admin_user)
    page = client.post(f"/events/{create.pk}/reveal/", {"reason": "incident 42"})
    assert page.status_code == 200 and len(page.content) < 4 * SHOWN
    body = page.content.decode()
    assert f"Showing the first 65,536 of {len(create.raw):,} bytes" in body
    assert f'action="/events/{create.pk}/raw/"' in body and 'value="incident 42"' in body
    revealed = client_of(admin_user).post(
        f"/api/v1/events/{create.pk}/reveal/", {"reason": "incident 42"}, format="json"
    )
    answer = revealed.json()
    assert answer["raw_length"] == len(create.raw) and len(base64.b64decode(answer["raw"])) == SHOWN


def test_the_download_joins_its_pieces_to_the_exact_record(client, viewer, huge, monkeypatch) -> None:
    """Streamed in pieces (many here: 7 KiB each), the bytes are the record's, none lost or doubled
    at the seams."""
    from investigations import raw

    monkeypatch.setattr(raw, "DOWNLOAD_PIECE", 7 * 1024)
    delete, _ = huge
    client.force_login(viewer)
    response = client.get(f"/events/{delete.pk}/raw/")
    pieces = list(response.streaming_content)
    assert len(pieces) == -(-len(delete.raw) // (7 * 1024)) > 40
    assert b"".join(pieces) == bytes(delete.raw)
