"""API tokens: made and revoked on the tokens page and by the command, stored hashed and shown
once, with an optional expiry; read-only SIEM tokens reach events and alerts only."""

from __future__ import annotations

import re
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone
from rest_framework.test import APIClient

from investigations.models import ApiToken, api_token_create, hash_token
from investigations.roles import SIEM_REFUSED
from investigations.trail import Action, AuditRecord

pytestmark = pytest.mark.django_db


def api(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def new_key(html: str) -> str:
    found = re.search(r'id="new-key" value="([^"]+)"', html)
    assert found, "the new key is not on the page"
    return found.group(1)


def test_a_token_made_on_the_page_is_shown_once_and_only_its_hash_is_kept(client, viewer) -> None:
    client.force_login(viewer)
    made = client.post("/tokens/", {"name": "my script"})
    assert made.status_code == 200 and made["Cache-Control"] == "no-store"
    key = new_key(made.content.decode())
    token = ApiToken.objects.get(user=viewer)
    assert (token.name, token.key_hash, token.prefix, token.siem) == (
        "my script",
        hash_token(key),
        key[:8],
        False,
    )
    assert key not in str(ApiToken.objects.values().get())  # nothing stored holds the key
    again = client.get("/tokens/").content.decode()
    assert key not in again and f"{key[:8]}…" in again and "my script" in again
    assert api(key).get("/api/v1/events/").status_code == 200  # with the viewer's role
    assert api(key).post("/api/v1/sources/", {}, format="json").status_code == 403
    created = AuditRecord.objects.get(action=Action.TOKEN_CREATE)
    assert created.username == "vic" and created.details["token"] == key[:8]


def test_a_revoked_token_is_refused_and_the_revocation_recorded(client, viewer) -> None:
    token, key = api_token_create(user=viewer, name="old")
    client.force_login(viewer)
    assert client.post(f"/tokens/{token.pk}/revoke/").status_code == 302
    token.refresh_from_db()
    assert token.revoked_at is not None
    assert api(key).get("/api/v1/events/").status_code == 401
    assert "revoked" in client.get("/tokens/").content.decode()
    assert AuditRecord.objects.get(action=Action.TOKEN_REVOKE).details == {
        "token": token.prefix, "name": "old", "owner": "vic"
    }  # fmt: skip
    client.post(f"/tokens/{token.pk}/revoke/")  # twice: nothing changes, nothing more recorded
    assert AuditRecord.objects.filter(action=Action.TOKEN_REVOKE).count() == 1


def test_only_admins_see_and_revoke_other_peoples_tokens(client, viewer, investigator, admin_user) -> None:
    theirs, key = api_token_create(user=investigator, name="ivy's splunk")
    client.force_login(viewer)
    assert "ivy's splunk" not in client.get("/tokens/").content.decode()
    assert client.post(f"/tokens/{theirs.pk}/revoke/").status_code == 404
    assert api(key).get("/api/v1/events/").status_code == 200
    client.force_login(admin_user)
    listed = client.get("/tokens/").content.decode()
    assert "ivy&#x27;s splunk" in listed and ">ivy<" in listed
    client.post(f"/tokens/{theirs.pk}/revoke/")
    assert api(key).get("/api/v1/events/").status_code == 401
    assert AuditRecord.objects.get(action=Action.TOKEN_REVOKE).details["owner"] == "ivy"


def test_an_expiry_date_ends_a_token_and_a_day_already_over_is_refused(client, viewer) -> None:
    client.force_login(viewer)
    yesterday = (timezone.localdate() - timedelta(days=1)).isoformat()
    refused = client.post("/tokens/", {"name": "x", "expires": yesterday})
    assert "That day is over" in refused.content.decode() and not ApiToken.objects.exists()
    tomorrow = (timezone.localdate() + timedelta(days=1)).isoformat()
    key = new_key(client.post("/tokens/", {"name": "x", "expires": tomorrow}).content.decode())
    token = ApiToken.objects.get()
    assert token.expires_at.date() == timezone.localdate() + timedelta(days=1)
    assert api(key).get("/api/v1/alerts/").status_code == 200
    ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert api(key).get("/api/v1/alerts/").status_code == 401
    assert "expired" in client.get("/tokens/").content.decode()


def test_a_siem_token_made_on_the_page_reads_events_and_alerts_and_nothing_else(client, admin_user) -> None:
    client.force_login(admin_user)
    key = new_key(client.post("/tokens/", {"name": "splunk", "siem": "on"}).content.decode())
    assert ApiToken.objects.get().siem
    siem = api(key)
    for url in ("/api/v1/events/", "/api/v1/alerts/", "/api/v1/events/export.ndjson"):
        assert siem.get(url).status_code == 200, url
    for url in ("/api/v1/sources/", "/api/schema/"):
        refused = siem.get(url)
        assert refused.status_code == 403 and refused.data["detail"] == SIEM_REFUSED, url
    assert "SIEM, read-only" in client.get("/tokens/").content.decode()


def test_the_command_makes_siem_tokens_with_an_expiry(django_user_model) -> None:
    out, err = StringIO(), StringIO()
    call_command(
        "create_api_token", "splunk", "--siem", "--expires", "90d", "--name", "prod", stdout=out, stderr=err
    )
    key = out.getvalue().strip()
    token = ApiToken.objects.get(key_hash=hash_token(key))
    assert token.siem and token.name == "prod" and "SIEM" in err.getvalue()
    assert abs(token.expires_at - (timezone.now() + timedelta(days=90))) < timedelta(minutes=1)
    call_command("create_api_token", "splunk", "--expires", "2031-01-31", stdout=out, stderr=err)
    assert ApiToken.objects.latest("id").expires_at.isoformat() == "2031-01-31T23:59:59.999999+00:00"
    assert AuditRecord.objects.filter(action=Action.TOKEN_CREATE, username="splunk").count() == 2
    with pytest.raises(Exception, match="give 90d"):
        call_command("create_api_token", "splunk", "--expires", "soon", stdout=out, stderr=err)
