"""No password from the logs leaves AuditWeb: real MariaDB logs in which accounts are made and
changed with passwords every way (tests/fixtures/secrets/regenerate.py: the general log file, the
mysql.general_log table's CSV file and server_audit, written at once), ingested, then read back
through every page, API answer, export, alert and report, as each role. The statements are still
found by their type and account, and an admin can reveal one record's raw bytes, with a reason
the audit trail records.
"""

from __future__ import annotations

import base64
import html
import io
import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.urls import reverse
from rest_framework.test import APIClient

from ingest.models import Event, IngestRun, ParseProblem, Session
from ingest.sql.secrets import mask_secrets
from investigations.cases import case_create, evidence_pin
from investigations.models import api_token_create
from investigations.trail import AuditRecord

from .conftest import FIXTURES

pytestmark = pytest.mark.django_db(transaction=True)

HERE = FIXTURES / "secrets"
TRUTH = json.loads((HERE / "truth.json").read_text())
VERSION = TRUTH["version"]
LOGS = {  # server label: (file, format)
    "sec-file": (HERE / f"mariadb-{VERSION}-general.log", "general-log"),
    "sec-table": (HERE / f"mariadb-{VERSION}-general_log.CSV", "general-log-csv"),
    "sec-audit": (HERE / f"mariadb-{VERSION}-server_audit.log", "mariadb-audit"),
}
# Every secret of the scene has "S3cr3t" in it, but the password hashes, and the hex and bit
# literals (whose text is encoded).
MARK = "s3cr3t"
SECRETS = sorted({s for st in TRUTH["statements"] for s in st["secrets"]} | {MARK.encode().hex()})


def leaks(text: str) -> list[str]:
    """The secrets `text` shows (case-insensitive: hex may be written either way)."""
    low = text.lower()
    return [s for s in [MARK, *SECRETS] if s.lower() in low]


def texts_of_json(value: Any, key: str = "") -> Iterator[str]:
    """Every string of a JSON answer, base64 fields decoded (raw bytes are sent that way)."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from texts_of_json(v, k)
    elif isinstance(value, list):
        for v in value:
            yield from texts_of_json(v, key)
    elif isinstance(value, str):
        yield value
        if key.startswith("raw") and key != "raw_download":  # (that one is a URL)
            yield base64.b64decode(value).decode("utf-8", "replace")


def shown(response: Any) -> str:
    """What a response shows, in every form a reader could decode it to."""
    assert response.status_code == 200, (response.status_code, response.request["PATH_INFO"])
    if response.streaming:
        body = b"".join(response.streaming_content).decode("utf-8", "replace")
    else:
        body = response.content.decode("utf-8", "replace")
    parts = [body, html.unescape(body)]
    kind = response.get("Content-Type", "")
    if ("json" in kind and not body.startswith("{")) or "ndjson" in kind:
        for line in body.splitlines():
            parts.extend(texts_of_json(json.loads(line)))
    elif "json" in kind:
        parts.extend(texts_of_json(json.loads(body)))
    return "\n".join(parts)


def ingest_scene() -> None:
    for server, (path, fmt) in LOGS.items():
        out = io.StringIO()
        call_command(
            "ingest", str(path), "--server", server, "--format", fmt, "--timezone", "UTC", stdout=out
        )


@pytest.fixture
def scene() -> None:
    ingest_scene()


def persona(django_user_model: Any, name: str, role: str) -> Any:
    from investigations.roles import Role, set_role

    user = django_user_model.objects.create_user(name, password="correct horse battery staple")
    set_role(user, Role[role.upper()])
    return user


def api_for(user: Any) -> APIClient:
    _, key = api_token_create(user=user)
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return c


def pages(client: Any, role: str) -> Iterator[tuple[str, str]]:
    """(URL, what it shows) of every page that shows the scene's statements."""
    urls = [reverse("dashboard"), reverse("sessions"), reverse("tables")]
    for server in LOGS:
        urls.append(reverse("events") + f"?server={server}")
        urls.append(reverse("events") + f"?server={server}&flag=secret_masked")
    urls += [reverse("event-detail", args=[pk]) for pk in Event.objects.values_list("pk", flat=True)]
    urls += [reverse("session-detail", args=[pk]) for pk in Session.objects.values_list("pk", flat=True)]
    urls += [reverse("table-detail", args=["secretshop.*"]), reverse("table-detail", args=["*.*"])]
    urls += [reverse("run-detail", args=[pk]) for pk in IngestRun.objects.values_list("pk", flat=True)]
    if role == "admin":
        urls.append(reverse("audit"))
    for url in urls:
        yield url, shown(client.get(url))


def api_answers(api: APIClient) -> Iterator[tuple[str, str]]:
    urls = ["/api/v1/alerts/", "/api/v1/sessions/", "/api/v1/tables/"]
    for server in LOGS:
        urls += [
            f"/api/v1/events/?server={server}&page_size=200",
            f"/api/v1/events/export.ndjson?server={server}",
            f"/api/v1/events/export.ndjson?server={server}&schema=ecs",
        ]
    urls += [f"/api/v1/events/{pk}/" for pk in Event.objects.values_list("pk", flat=True)]
    urls += [f"/api/v1/sessions/{pk}/" for pk in Session.objects.values_list("pk", flat=True)]
    urls += ["/api/v1/tables/secretshop.*/history/", "/api/v1/tables/*.*/history/"]
    for url in urls:
        yield url, shown(api.get(url))


@pytest.mark.parametrize("role", ["viewer", "investigator", "admin"])
def test_no_password_is_in_any_page_or_api_answer_for_any_role(
    scene, client, django_user_model, role
) -> None:
    user = persona(django_user_model, f"sec-{role}", role)
    client.force_login(user)
    api = api_for(user)
    seen = 0
    for url, text in [*pages(client, role), *api_answers(api)]:
        assert leaks(text) == [], url
        seen += 1
    assert seen > 2 * Event.objects.count()  # every event (page and API), session and listing


def test_the_raw_bytes_of_a_masked_record_are_withheld_and_labelled(scene, viewer) -> None:
    api = api_for(viewer)
    event = Event.objects.filter(
        server="sec-file", sql="CREATE USER 'sec_alice'@'%' IDENTIFIED BY *****"
    ).first()
    assert b"Alice-S3cr3t-01" in bytes(event.raw)  # kept exactly as read, for custody
    body = api.get(f"/api/v1/events/{event.pk}/").json()
    assert body["raw"] is None and body["raw_withheld"] is True
    masked = base64.b64decode(body["raw_masked"])
    assert masked.startswith(bytes(event.raw).split(b" BY ")[0]) and b"withheld" in masked
    c = APIClient()
    c.force_login(viewer)
    page = c.get(reverse("event-detail", args=[event.pk])).content.decode()
    assert "Raw log bytes, masked" in page and "reveal-reason" not in page  # no form for a viewer
    # A record without a secret keeps its raw bytes whole.
    plain = Event.objects.get(server="sec-file", sql="DEALLOCATE PREPARE s")
    body = api.get(f"/api/v1/events/{plain.pk}/").json()
    assert base64.b64decode(body["raw"]) == bytes(plain.raw) and body["raw_withheld"] is False


def test_every_statement_is_still_found_by_its_type_and_account(scene, api_client) -> None:
    for st in TRUTH["statements"]:
        for server in LOGS:
            sql = st["sql"]
            if server == "sec-audit" and sql == "EXECUTE s":
                continue  # server_audit logs the statement an EXECUTE ran instead (found as such)
            if server == "sec-audit" and ";" in sql:
                sql = sql.split(";", 1)[1].strip()  # server_audit logs each statement of the string
            kind = st["statement_type"] if sql == st["sql"] else "ALTER USER"
            params = {"server": server, "statement_type": kind, "user": st["user"], "page_size": 200}
            found = api_client.get("/api/v1/events/", params).json()["results"]
            assert mask_secrets(sql) in [e["sql"] for e in found], (server, st["sql"])
            if st["secrets"]:
                event = next(e for e in found if e["sql"] == mask_secrets(sql))
                if server != "sec-audit":  # server_audit masked some itself: nothing left for us
                    assert "secret_masked" in event["flags"]
                if kind in ("CREATE USER", "ALTER USER", "SET PASSWORD", "GRANT"):
                    assert "privilege_change" in event["flags"]


def test_the_privilege_changes_still_raise_alerts(scene, api_client) -> None:
    alerts = api_client.get("/api/v1/alerts/", {"page_size": 500}).json()["results"]
    kinds = {(a["server"], a["event"]["statement_type"]) for a in alerts if a.get("event")}
    for server in LOGS:
        assert {(server, "CREATE USER"), (server, "ALTER USER"), (server, "SET PASSWORD")} <= kinds


needs_pdftotext = pytest.mark.skipif(shutil.which("pdftotext") is None, reason="pdftotext is not installed")


@needs_pdftotext
def test_no_password_is_in_a_case_report(report_written, scene, investigator, tmp_path, settings) -> None:
    settings.REPORT_DIR = tmp_path / "reports"
    case = case_create(user=investigator, title="Who changed the passwords?")
    masked = Event.objects.filter(flags__contains=["secret_masked"]).order_by("occurred_at", "id")
    for event in masked:
        evidence_pin(case=case, event=event, user=investigator)
    assert masked.count() > 60
    for fmt in ("csv", "json", "pdf"):
        report = report_written(case, fmt, investigator)
        report.refresh_from_db()
        path = Path(report.path)
        text = path.read_bytes().decode("utf-8", "replace")
        if fmt == "pdf":
            text = subprocess.run(
                ["pdftotext", str(path), "-"], capture_output=True, check=True
            ).stdout.decode()
        if fmt == "json":
            text += "\n".join(texts_of_json(json.loads(text)))
        assert leaks(text) == [], fmt
        assert "IDENTIFIED BY *****" in text.replace("\n", " ") or fmt == "pdf"


def test_an_admin_reveals_one_record_with_a_reason_the_audit_trail_keeps(scene, client, admin_user) -> None:
    event = Event.objects.get(server="sec-table", sql="CHANGE MASTER 'sec_src' TO MASTER_HOST='192.0.2.1',"
                              " MASTER_USER='repl', MASTER_PASSWORD=*****")  # fmt: skip
    client.force_login(admin_user)
    url = reverse("event-reveal", args=[event.pk])
    page = client.get(reverse("event-detail", args=[event.pk])).content.decode()
    assert "reveal-reason" in page and "Repl-S3cr3t-11" not in page
    refused = client.post(url, {"reason": "  "})
    assert refused.status_code == 400 and "Repl-S3cr3t-11" not in refused.content.decode()
    assert not AuditRecord.objects.filter(action="raw_reveal").exists()
    answer = client.post(url, {"reason": "ticket 4711: which replication password was set"})
    assert answer.status_code == 200 and answer["Cache-Control"] == "no-store"
    assert "Repl-S3cr3t-11" in html.unescape(answer.content.decode())
    (record,) = AuditRecord.objects.filter(action="raw_reveal")
    assert record.username == admin_user.username
    assert record.details["event"] == event.pk
    assert record.details["reason"] == "ticket 4711: which replication password was set"
    # Through the API too, one event at a time, recorded.
    api = api_for(admin_user)
    body = api.post(f"/api/v1/events/{event.pk}/reveal/", {"reason": "the same ticket"}, format="json").json()
    assert base64.b64decode(body["raw"]) == bytes(event.raw)
    assert AuditRecord.objects.filter(action="raw_reveal").count() == 2
    assert api.post(f"/api/v1/events/{event.pk}/reveal/", {}, format="json").status_code == 400


@pytest.mark.parametrize("role", ["viewer", "investigator"])
def test_only_an_admin_may_reveal(scene, client, django_user_model, role) -> None:
    user = persona(django_user_model, f"sec-{role}", role)
    event = Event.objects.filter(flags__contains=["secret_masked"]).first()
    client.force_login(user)
    answer = client.post(reverse("event-reveal", args=[event.pk]), {"reason": "curious"})
    assert answer.status_code == 403 and "S3cr3t" not in answer.content.decode()
    api = api_for(user)
    answer = api.post(f"/api/v1/events/{event.pk}/reveal/", {"reason": "curious"}, format="json")
    assert answer.status_code == 403
    assert not AuditRecord.objects.filter(action="raw_reveal").exists()


def test_a_problem_excerpt_is_cut_before_the_password(client, viewer, tmp_path) -> None:
    """A copy of the real general log that begins in the middle of a CREATE USER line: that
    partial line is a problem, and its excerpt must not show the password."""
    data = LOGS["sec-file"][0].read_bytes()
    start = data.index(b"USER 'sec_alice'@'%' IDENTIFIED BY 'Alice-S3cr3t-01'")
    path = tmp_path / "cut-general.log"
    path.write_bytes(data[start:])
    out = io.StringIO()
    call_command("ingest", str(path), "--server", "sec-cut", "--format", "general-log", stdout=out)
    problem = ParseProblem.objects.get(line=1)
    assert b"IDENTIFIED" in bytes(problem.excerpt) and b"Alice-S3cr3t" not in bytes(problem.excerpt)
    client.force_login(viewer)
    page = client.get(reverse("run-detail", args=[problem.run_id]))
    assert leaks(shown(page)) == []


def test_masked_events_keep_their_custody(scene) -> None:
    """The raw bytes were stored as read: every event's bytes are found at its offset again."""
    out = io.StringIO()
    call_command("verify_evidence", "--all-events", "--strict", stdout=out)  # raises on any difference
    assert Event.objects.filter(flags__contains=["secret_masked"]).count() > 60
