"""The Sources pages and API: sources with their health, runs with progress and problems, uploads."""

from __future__ import annotations

import gzip
import hashlib
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

from ingest.follow import ingest_source
from ingest.models import Event, IngestRun, ParseProblem, Source, SourceFile
from ingest.sources import source_health
from tests.logwriter import GeneralLogWriter

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator_client(client, admin_user):
    client.force_login(admin_user)
    return client


def test_it_asks_for_a_login(client) -> None:
    for url in ("/sources/", "/sources/upload/", "/sources/new/"):
        assert client.get(url).status_code == 302, url


def test_an_operator_adds_a_file_source_and_sees_it_listed(operator_client, tmp_path: Path) -> None:
    data = {
        "name": "db1 general log",
        "kind": "file",
        "path": str(tmp_path / "general.log*"),
        "password_env": "",
        "format": "general-log",
        "server": "db1",
        "timezone": "Europe/Berlin",
        "interval_seconds": 10,
        "quiet_seconds": 600,
        "enabled": "on",
    }
    response = operator_client.post("/sources/new/", data)
    source = Source.objects.get(name="db1 general log")
    assert response.status_code == 302 and source.timezone == "Europe/Berlin"
    assert "db1 general log" in operator_client.get("/sources/").content.decode()


def test_an_investigator_may_look_but_not_add_sources(investigator_client) -> None:
    assert investigator_client.get("/sources/").status_code == 200
    assert investigator_client.post("/sources/new/", {"name": "x"}).status_code == 403
    assert not Source.objects.exists()


def test_it_refuses_a_password_in_the_dsn(operator_client) -> None:
    data = {"name": "t", "kind": "mysql-table", "dsn": "mysql://reader:s3cret@db1:3306", "format": "auto",
            "server": "db1", "timezone": "UTC", "interval_seconds": 5, "quiet_seconds": 60,
            "password_env": "AUDITWEB_SOURCE_DB1_PASSWORD"}  # fmt: skip
    response = operator_client.post("/sources/new/", data)
    assert response.status_code == 200 and "No password in the DSN" in response.content.decode()
    assert not Source.objects.exists()


def _pg_source(tmp_path: Path, **fields: object) -> dict[str, object]:
    return {"name": "pg1 stderr", "kind": "file", "path": str(tmp_path / "postgresql-*.log"),
            "password_env": "", "format": "auto", "server": "pg1", "timezone": "UTC",
            "interval_seconds": 10, "quiet_seconds": 600, **fields}  # fmt: skip


def test_a_postgresql_stderr_source_takes_its_servers_log_line_prefix(
    operator_client, tmp_path: Path
) -> None:
    prefix = "%m|%u|%d|%c|%p|%a| "
    response = operator_client.post("/sources/new/", _pg_source(tmp_path, log_line_prefix=prefix))
    source = Source.objects.get(name="pg1 stderr")
    assert response.status_code == 302
    # "auto" cannot tell a log in a prefix it does not know: the prefix makes it a stderr log.
    assert (source.log_line_prefix, source.format) == (prefix, "pgaudit-stderr")


def test_a_log_line_prefix_without_a_session_is_refused_naming_what_it_lacks(
    operator_client, tmp_path: Path
) -> None:
    response = operator_client.post("/sources/new/", _pg_source(tmp_path, log_line_prefix="%m [%p] %q%u@%d "))
    page = response.content.decode()
    assert response.status_code == 200 and "names no %c (session id)" in page
    response = operator_client.post(
        "/sources/new/", _pg_source(tmp_path, log_line_prefix="%m %c %u %d ", format="general-log")
    )
    assert "Only a pgaudit-stderr source is read through a log_line_prefix." in response.content.decode()
    assert not Source.objects.exists()


def test_the_source_page_shows_runs_with_progress_and_escaped_problems(
    investigator_client, tmp_path: Path
) -> None:
    log = tmp_path / "general.log"
    log.write_bytes(b"<script>alert(1)</script> not a record\n")
    GeneralLogWriter(log, banner=False).write(50)
    source = Source.objects.create(name="s", path=str(log), server="db1", format="general-log")
    run = ingest_source(source.pk)
    assert run is not None and run.problems == 1
    page = investigator_client.get(f"/sources/{source.pk}/").content.decode()
    assert f"/sources/runs/{run.pk}/" in page and "<progress" in page
    problems = investigator_client.get(f"/sources/runs/{run.pk}/").content.decode()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in problems and "<script>alert" not in problems


def test_htmx_polls_only_the_runs_while_one_is_running(investigator_client, tmp_path: Path) -> None:
    source = Source.objects.create(name="s", path=str(tmp_path / "x.log"), server="db1")
    IngestRun.objects.create(source=source, status=IngestRun.Status.RUNNING, bytes_read=25, bytes_total=100)
    partial = investigator_client.get(f"/sources/{source.pk}/", HTTP_HX_REQUEST="true").content.decode()
    assert partial.lstrip().startswith('<div id="runs"') and 'hx-trigger="every 2s"' in partial
    assert 'value="25"' in partial and "<h1>" not in partial
    IngestRun.objects.update(status=IngestRun.Status.DONE)
    partial = investigator_client.get(f"/sources/{source.pk}/", HTTP_HX_REQUEST="true").content.decode()
    assert "hx-trigger" not in partial  # polling stops with the last running ingest


def test_an_investigator_uploads_a_gzipped_log_through_the_form(
    investigator_client, tmp_path: Path, settings, django_capture_on_commit_callbacks
) -> None:
    settings.UPLOAD_DIR = tmp_path / "uploads"
    log = tmp_path / "made.log"
    GeneralLogWriter(log).write(400)
    body = gzip.compress(log.read_bytes())
    upload = SimpleUploadedFile("evidence.log.gz", body, content_type="application/gzip")
    with django_capture_on_commit_callbacks(execute=False) as queued:
        response = investigator_client.post(
            "/sources/upload/", {"file": upload, "server": "db9", "format": "auto", "timezone": "UTC"}
        )
    assert response.status_code == 302
    source = Source.objects.get(kind=Source.Kind.UPLOAD)
    stored = SourceFile.objects.get(source=source)
    assert stored.received_sha256 == hashlib.sha256(body).hexdigest()  # hashed as it streamed to disk
    assert Path(stored.path).read_bytes() == body
    assert len(queued) == 1  # the ingest goes to a worker once the upload is committed
    run = IngestRun.objects.get(source=source)
    assert run.status == IngestRun.Status.QUEUED
    ingest_source(source.pk, run_id=run.pk)  # what the worker does
    run.refresh_from_db()
    assert run.status == IngestRun.Status.DONE and run.bytes_read == len(log.read_bytes())
    stored.refresh_from_db()  # and the content, as it was read
    assert stored.sha256 == hashlib.sha256(log.read_bytes()).hexdigest()
    assert Event.objects.filter(server="db9").count() == 401  # the banner and every record: finished
    assert "100%" in investigator_client.get(response["Location"]).content.decode()


def test_a_silent_source_and_a_vanished_file_are_flagged_on_the_sources_page(
    investigator_client, tmp_path: Path
) -> None:
    quiet = tmp_path / "quiet.log"
    GeneralLogWriter(quiet).write(20)
    silent = Source.objects.create(name="silent", path=str(quiet), server="db1", quiet_seconds=60)
    ingest_source(silent.pk)
    assert source_health(Source.objects.get(pk=silent.pk)).state == "alive"
    Source.objects.filter(pk=silent.pk).update(last_data_at=timezone.now() - timedelta(minutes=5))
    gone = tmp_path / "gone.log"
    GeneralLogWriter(gone).write(20)
    vanished = Source.objects.create(name="vanished", path=str(gone), server="db2")
    ingest_source(vanished.pk)
    gone.unlink()
    page = investigator_client.get("/sources/").content.decode()
    assert "no data for 5 min, expected within 60 s" in page
    assert f"the file vanished: nothing matches {gone}" in page
    assert page.count('"health health-dead"') == 1 and page.count('"health health-failed"') == 1


def test_a_source_silent_after_logging_was_switched_off_links_to_the_statement(tmp_path: Path) -> None:
    log = tmp_path / "general.log"
    writer = GeneralLogWriter(log)
    writer.write(30)
    with log.open("ab") as f:
        f.write(writer._stamp() + b"\t  100 Query\tSET GLOBAL general_log = 'OFF'\n")
        f.write(writer._stamp() + b"\t  100 Quit\t\n")
    source = Source.objects.create(name="s", path=str(log), server="db1", quiet_seconds=60)
    ingest_source(source.pk)
    Source.objects.filter(pk=source.pk).update(last_data_at=timezone.now() - timedelta(hours=2))
    health = source_health(Source.objects.get(pk=source.pk))
    assert health.state == "dead" and health.legacy == "unhealthy"
    assert "logging was switched off" in health.reason and health.reasons == [health.reason]
    switched_off = Event.objects.get(pk=health.logging_off_event)
    assert "general_log = 'OFF'" in switched_off.sql


def test_the_api_creates_lists_and_starts_a_run_of_a_source(
    admin_api_client, tmp_path: Path, django_capture_on_commit_callbacks
) -> None:
    log = tmp_path / "general.log"
    GeneralLogWriter(log).write(100)
    created = admin_api_client.post(
        "/api/v1/sources/",
        {"name": "db1", "kind": "file", "path": str(log), "format": "general-log", "server": "db1",
         "timezone": "UTC", "interval_seconds": 30, "quiet_seconds": 3600, "enabled": True},
        format="json",
    )  # fmt: skip
    assert created.status_code == 201, created.content
    source_id = created.json()["id"]
    listed = admin_api_client.get("/api/v1/sources/").json()
    assert [s["name"] for s in listed] == ["db1"] and listed[0]["health"]["state"] == "waiting"
    with django_capture_on_commit_callbacks(execute=False) as queued:
        started = admin_api_client.post(f"/api/v1/sources/{source_id}/ingest/")
    assert started.status_code == 202 and started.json()["status"] == "queued" and len(queued) == 1
    ingest_source(source_id, run_id=started.json()["id"])
    run = admin_api_client.get(f"/api/v1/ingest-runs/{started.json()['id']}/").json()
    assert run["status"] == "done" and run["bytes_read"] > 0 and run["bytes_total"] == log.stat().st_size
    assert run["events_stored"] == 100 and run["problems"] == 0


def test_the_api_never_shows_a_password_and_refuses_one(admin_api_client) -> None:
    base = {"name": "t", "kind": "mysql-table", "format": "auto", "server": "db1", "timezone": "UTC",
            "interval_seconds": 5, "quiet_seconds": 60, "enabled": True,
            "password_env": "AUDITWEB_SOURCE_PW"}  # fmt: skip
    refused = admin_api_client.post(
        "/api/v1/sources/", base | {"dsn": "mysql://r:pw@db1:3306"}, format="json"
    )
    assert refused.status_code == 400 and "dsn" in refused.json()
    Source.objects.create(name="old", kind="mysql-table", dsn="mysql://r:leaked@db1:3306", server="db1")
    assert "leaked" not in admin_api_client.get("/api/v1/sources/").content.decode()


def test_problems_are_listed_with_line_offset_and_reason(tmp_path: Path) -> None:
    log = tmp_path / "general.log"
    log.write_bytes(b"garbage first line\n")
    GeneralLogWriter(log, banner=False).write(3)
    source = Source.objects.create(name="s", path=str(log), server="db1", format="general-log")
    ingest_source(source.pk)
    problem = ParseProblem.objects.get()
    assert (problem.line, problem.offset) == (1, 0) and problem.excerpt_text.startswith("garbage")
